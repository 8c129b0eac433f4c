"""Adapters chosen by name, for settings and the command line.

>>> build_backend("recording").name
'recording'
>>> sorted(ADAPTERS)
['recording', 'reference', 'rest']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from regimetune.models import ConfigError
from regimetune.push.base import Backend
from regimetune.push.recording import RecordingBackend
from regimetune.push.rest import ReferenceBackend, RestBackend

ADAPTERS: dict[str, type[Any]] = {
    "reference": ReferenceBackend,
    "rest": RestBackend,
    "recording": RecordingBackend,
}


def build_backend(kind: str, *args: Any, **options: Any) -> Backend:
    """``build_backend("reference", "http://127.0.0.1:8081", token=...)``; the arguments are
    those of the adapter's constructor. Unknown kinds and options raise ``ConfigError``."""
    try:
        cls = ADAPTERS[kind]
    except KeyError:
        raise ConfigError(f"unknown backend adapter {kind!r}; choose from {sorted(ADAPTERS)}") from None
    try:
        backend: Backend = cls(*args, **options)
    except TypeError as exc:
        raise ConfigError(f"backend adapter {kind!r}: {exc}") from exc
    return backend


def backend_for(
    kind: str,
    url: str | None,
    *,
    token: str | None = None,
    timeout: float = 5.0,
    method: str = "PUT",
    payload: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Backend | None:
    """The adapter a service's push settings name (``"none"``: None, backends pull). Every
    option is passed to the adapter that takes it; one set for an adapter that ignores it
    (a payload mapping for the reference backend) is a ``ConfigError``, not silently dropped.

    >>> backend_for("reference", "http://127.0.0.1:8081").url
    'http://127.0.0.1:8081/v1/policy'
    >>> backend_for("none", None) is None
    True
    """
    if kind == "none":
        return None
    if not url:
        raise ConfigError(f"push adapter {kind!r} needs a URL")
    options: dict[str, Any] = {"token": token, "timeout": timeout}
    rest_only = {"method": method != "PUT", "payload": payload is not None, "headers": bool(headers)}
    if kind == "rest":
        options |= {"method": method, "payload": payload, "headers": headers}
    elif any(rest_only.values()):
        given = ", ".join(name for name, set_ in rest_only.items() if set_)
        raise ConfigError(f"push adapter {kind!r} takes no {given} (only the rest adapter does)")
    return build_backend(kind, url, **options)


__all__ = ["ADAPTERS", "backend_for", "build_backend"]
