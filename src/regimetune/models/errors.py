"""The project's exceptions: one root, and leaves that also inherit the matching built-in.

::

    RegimetuneError
    ├── ConfigError (ValueError)            bad settings or command-line options
    ├── InputError (ValueError)             bad user input that is not a trace
    │   └── TraceFormatError                a malformed trace record (names file and line)
    ├── BoundsError (ValueError)            a knob outside its hard bounds
    ├── InfeasibleError (ValueError)        a request that cannot be satisfied (e.g. data does not fit)
    ├── NotFoundError (LookupError)         an unknown regime, job, server...
    ├── ConflictError (ValueError)          a write that contradicts stored state
    ├── BackendError (ConnectionError)      a rescaling backend that cannot be reached or refused
    ├── SourceError (ConnectionError)       a telemetry source (Prometheus, NATS) that cannot be reached
    └── TuningError (RuntimeError)          an optimisation session that cannot go on

Foreign exceptions are translated at the edges with ``raise ... from exc``. Every error
pickles intact (type, message and attributes such as a trace error's file and line), so it
crosses a process pool or a Dask cluster as itself rather than breaking the pool.
"""

from __future__ import annotations

from typing import Any


def _rebuild(cls: type[RegimetuneError], args: tuple[Any, ...], state: dict[str, Any]) -> RegimetuneError:
    """Unpickle an error without calling its ``__init__`` (whose signature may differ from
    ``args``, as ``TraceFormatError``'s keyword-only ``source`` does)."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class RegimetuneError(Exception):
    """Root of every error this project raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # the default (``cls(*self.args)``) fails for any subclass with its own __init__
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class ConfigError(ValueError, RegimetuneError):
    """Invalid configuration or command-line options."""


class InputError(ValueError, RegimetuneError):
    """Invalid user input."""


class TraceFormatError(InputError):
    """A malformed trace record. ``source`` names the file, ``line`` the 1-based line
    (text formats) or ``offset`` the byte offset (binary formats)."""

    def __init__(
        self, message: str, *, source: str, line: int | None = None, offset: int | None = None
    ) -> None:
        self.source = source
        self.line = line
        self.offset = offset
        where = source
        if line is not None:
            where = f"{source}:{line}"
        elif offset is not None:
            where = f"{source}@{offset}"
        super().__init__(f"{where}: {message}")
        self.reason = message


class BoundsError(ValueError, RegimetuneError):
    """A value outside its allowed bounds."""


class InfeasibleError(ValueError, RegimetuneError):
    """A request that cannot be satisfied, refused before anything changed."""


class NotFoundError(LookupError, RegimetuneError):
    """An unknown entity."""


class ConflictError(ValueError, RegimetuneError):
    """A write that contradicts what is already stored."""


class BackendError(ConnectionError, RegimetuneError):
    """A rescaling backend that could not be reached or refused a push."""


class SourceError(ConnectionError, RegimetuneError):
    """A telemetry source (a daemon's /metrics, Prometheus, NATS) that could not be reached."""


class TuningError(RuntimeError, RegimetuneError):
    """An optimisation session that cannot go on."""
