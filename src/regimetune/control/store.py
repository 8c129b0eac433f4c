"""What the application layer needs of persistence, as protocols: the control package writes
no SQL; the service's store (:class:`regimetune.api.store.SqlStore`) implements them.

Every call is one transaction, and what a read returns does not change with later writes
(the models' frozen types, read-only arrays).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from regimetune.models import (
    Decision,
    Policy,
    PolicyVersion,
    PushOutcome,
    RegimetuneError,
    TuningRun,
    WindowStats,
)

ENGINE_CHECKPOINT = "engine"
"""The name of the online detector's checkpoint, which :meth:`Store.commit_window` saves."""


class StoreUnavailable(RegimetuneError):
    """The store cannot write (or read) now: a full or read-only disk, an I/O error, a
    database server that is away. Nothing was changed; the same call may succeed later. The
    service answers it 503 with ``Retry-After``."""

    code = "store_unavailable"


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """A durable ingest batch: its sequence number and its columns (read-only arrays)."""

    seq: int
    kind: str
    window_start: float
    columns: dict[str, np.ndarray]


class JobStore(Protocol):
    """What the tuning-jobs runner keeps: the runs, and where the store lives (each store's
    uploads and checkpoints get their own directory); and what it reads: the regimes'
    policies, where a job's search starts and what it must beat."""

    @property
    def location(self) -> str:
        """The store's address without credentials (e.g. its database URL)."""
        ...

    def save_job(self, run: TuningRun) -> None: ...

    def job(self, job_id: str) -> TuningRun:
        """The run of ``job_id`` (:class:`~regimetune.models.NotFoundError` if unknown)."""
        ...

    def jobs(self, *, limit: int = 100) -> list[TuningRun]:
        """Newest first."""
        ...

    def regime_policies(self) -> dict[int, Policy]:
        """The newest policy of every regime."""
        ...


class Store(JobStore, Protocol):
    """Everything the application layer keeps: ingest batches and the windowing snapshot,
    the detector's checkpoint and the closed windows, per-regime policies, the decision log
    with the policy versions (and their outbox entries), tuning jobs and a little state."""

    # -- ingest batches and the windowing snapshot ---------------------------------------------
    def append_batch(
        self,
        *,
        kind: str,
        window_start: float,
        columns: dict[str, np.ndarray],
        client_key: str | None = None,
        digest: str | None = None,
    ) -> int:
        """Persist a batch; returns its sequence number once committed."""
        ...

    def batch_by_key(self, client_key: str) -> tuple[int, int, str | None] | None:
        """(sequence number, rows, digest) of the batch sent with ``client_key``, if any."""
        ...

    def batches_after(self, seq: int) -> Iterator[StoredBatch]:
        """Batches with a sequence number above ``seq``, in order."""
        ...

    def prune_batches(self, *, through_seq: int, received_before: float) -> int:
        """Delete the batches up to ``through_seq`` received before ``received_before``
        (never the newest); returns how many went."""
        ...

    def save_snapshot(
        self, name: str, seq: int, meta: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> None: ...

    def load_snapshot(self, name: str) -> tuple[int, dict[str, Any], dict[str, np.ndarray]] | None:
        """(the last batch it covers, metadata, arrays) of snapshot ``name``, if any."""
        ...

    # -- the detector and the windows ----------------------------------------------------------
    def save_checkpoint(self, name: str, state: dict[str, Any], processed: int) -> None: ...

    def load_checkpoint(self, name: str) -> tuple[dict[str, Any] | None, int]:
        """The state saved under ``name`` and the last window it covers (-1 with none)."""
        ...

    def commit_window(
        self,
        w: WindowStats,
        regime_id: int | None,
        *,
        regime_kind: str = "",
        checkpoint: dict[str, Any] | None = None,
        decision: Decision | None = None,
        policy: Policy | None = None,
        make_version: bool = False,
        enqueue: bool = False,
    ) -> tuple[Decision | None, PolicyVersion | None]:
        """A closed window with its regime (and its kind: ``level``, ``transition`` or ``""``
        where the detector does not say), the detector's checkpoint (as
        :data:`ENGINE_CHECKPOINT`) and any decision (with a new policy version, enqueued for
        the push worker) in one transaction."""
        ...

    def count_windows(self) -> int: ...

    # -- policies, versions and the decision log -----------------------------------------------
    def regime_policy(self, regime_id: int) -> Policy | None: ...

    def put_regime_policy(self, policy: Policy) -> Policy: ...

    def record_decision(
        self, decision: Decision, policy: Policy | None, *, make_version: bool, enqueue: bool
    ) -> tuple[Decision, PolicyVersion | None]:
        """Log a decision and, with ``make_version``, a new policy version (enqueued for the
        push worker when ``enqueue``) in one transaction."""
        ...

    def first_version(self, policy: Policy, *, enqueue: bool) -> PolicyVersion | None:
        """``policy`` as version 1 unless a version exists; returns the version made."""
        ...

    def raise_version_floor(self, version: int) -> None:
        """Every new version number is above ``version`` from now on (a backend holds it)."""
        ...

    def version(self, version: int) -> PolicyVersion:
        """Policy version ``version`` (:class:`~regimetune.models.NotFoundError` if unknown)."""
        ...

    def count_versions_since(self, since: float) -> int: ...

    def latest_version(self) -> PolicyVersion | None: ...

    def in_force_version(self) -> PolicyVersion | None:
        """The newest version the backend did not refuse (delivered or not)."""
        ...

    def set_outcome(self, version: int, outcome: PushOutcome, detail: str = "") -> None:
        """What became of the push of ``version``, on the decision that made it."""
        ...

    # -- a little state ------------------------------------------------------------------------
    def get_kv(self, key: str, default: Any = None) -> Any: ...

    def set_kv(self, key: str, value: Any) -> None: ...


__all__ = ["ENGINE_CHECKPOINT", "JobStore", "Store", "StoreUnavailable", "StoredBatch"]
