"""Adapters chosen by name, for settings and the command line.

>>> build_backend("recording").name
'recording'
>>> sorted(ADAPTERS)
['recording', 'reference', 'rest']
"""

from __future__ import annotations

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


__all__ = ["ADAPTERS", "build_backend"]
