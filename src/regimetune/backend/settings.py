"""Settings of the reference backend: one pydantic-settings object, env prefix
``REGIMETUNE_BACKEND_``, built by :func:`load_settings` (never at import time).

>>> load_settings(port=9000, state="/tmp/b.db").port
9000
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from regimetune.models import ConfigError


class BackendSettings(BaseSettings):
    """Where the backend listens, where it keeps its state, and the planner's model of the
    machine (bytes/s per node, bytes per server)."""

    model_config = SettingsConfigDict(env_prefix="REGIMETUNE_BACKEND_", frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8081
    state: Path = Path("backend.db")
    token: str | None = None
    net_bandwidth: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.25e9
    capacity: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    model: Literal["network", "storage"] = "network"


def load_settings(**overrides: Any) -> BackendSettings:
    """Environment first, then ``overrides`` (e.g. from the command line; None means unset)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return BackendSettings(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"backend setting {where}: {first['msg']}") from exc


__all__ = ["BackendSettings", "load_settings"]
