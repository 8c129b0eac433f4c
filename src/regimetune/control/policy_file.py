"""Offline to online: the service starting from a policy file that ``regimetune tune`` wrote.

The file holds a safe default, per-regime policies and the detector state that named those
regimes. The service starts its detector from that state, so an offline regime id and an
online one name the same regime, unless the store's detector already learnt otherwise: then
``detector_from`` says which wins (``refuse`` to start, the ``policy-file`` or the ``store``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Literal

from regimetune.control.policies import check_bounds
from regimetune.control.settings import BoundsSettings
from regimetune.control.store import ENGINE_CHECKPOINT, Store
from regimetune.models import ConfigError, PolicyFile

log = logging.getLogger(__name__)

_ORIGIN = "engine.detector_origin"  # fingerprint of the file's detector state the store's started from


def load_policy_file(path: str, bounds: BoundsSettings) -> PolicyFile:
    """The policy file at ``path``, every policy in it within the hard bounds."""
    try:
        with open(path, "rb") as f:
            pf = PolicyFile.model_validate_json(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read policy file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ConfigError(f"policy file {path} is not a valid PolicyFile: {exc}") from exc
    for p in (*pf.regimes.values(), pf.default):
        check_bounds(p, bounds)
    return pf


def detector_start(
    pf: PolicyFile,
    stored: dict[str, Any] | None,
    *,
    store: Store,
    path: str,
    detector_from: Literal["refuse", "policy-file", "store"],
    committed_window: int,
) -> dict[str, Any] | None:
    """The state the detector starts from, given policy file ``pf`` (read from ``path``)
    and the store's checkpoint ``stored``; stores the file's per-regime policies unless the
    store's detector wins (then they would name other regimes)."""
    if pf.detector_state is None:
        _store_policies(pf, store, overwrite=False)
        return stored
    origin = _fingerprint(pf.detector_state)
    same = store.get_kv(_ORIGIN) == origin
    if stored is not None and not same:
        if detector_from == "refuse":
            raise ConfigError(
                f"the detector state in policy file {path} is not the one the "
                "store's detector started from, so their regime ids may name different regimes; "
                "choose which wins: --detector-from policy-file (detection restarts from the file) "
                "or --detector-from store (the file's per-regime policies are not loaded)"
            )
        if detector_from == "store":
            log.warning(
                "the store's detector wins over the policy file's: its per-regime policies are ignored"
            )
            return stored
        # the file wins: its state is the checkpoint from now on
        store.save_checkpoint(ENGINE_CHECKPOINT, {"detector": pf.detector_state}, committed_window)
    if not same:
        store.set_kv(_ORIGIN, origin)
    _store_policies(pf, store, overwrite=stored is not None and not same)
    return stored if same and stored is not None else pf.detector_state


def _store_policies(pf: PolicyFile, store: Store, *, overwrite: bool) -> None:
    for rid, p in pf.regimes.items():
        if overwrite or store.regime_policy(rid) is None:
            store.put_regime_policy(p.model_copy(update={"regime_id": rid, "source": "tuned"}))


def _fingerprint(state: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:16]


__all__ = ["detector_start", "load_policy_file"]
