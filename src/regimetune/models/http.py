"""How each error of the tree reads over HTTP: one table for the service and the reference
backend, so the same error is the same status (and ``code``) in both.

>>> http_status(NotFoundError("no regime 9"))
(404, 'not_found')
>>> http_status(InfeasibleError("no server left"))
(409, 'infeasible')
"""

from __future__ import annotations

from regimetune.models.errors import (
    BackendError,
    BoundsError,
    ConfigError,
    ConflictError,
    InfeasibleError,
    InputError,
    NotFoundError,
    RegimetuneError,
    TuningError,
)

# most specific first; an error's own ``code`` attribute (e.g. "stale_version") wins over the
# code here
ERROR_STATUS: tuple[tuple[type[RegimetuneError], int, str], ...] = (
    (NotFoundError, 404, "not_found"),
    (ConflictError, 409, "conflict"),
    (InfeasibleError, 409, "infeasible"),  # refused before anything changed; the state decides
    (BoundsError, 422, "out_of_bounds"),
    (InputError, 422, "invalid_input"),
    (ConfigError, 422, "invalid_config"),
    (BackendError, 502, "backend_error"),
    (TuningError, 500, "tuning_failed"),
)


def http_status(exc: RegimetuneError) -> tuple[int, str]:
    """The status code and the machine-readable code of ``exc``."""
    for cls, status, code in ERROR_STATUS:
        if isinstance(exc, cls):
            return status, str(getattr(exc, "code", code))
    return 500, "internal"


__all__ = ["ERROR_STATUS", "http_status"]
