"""Configuration of the service: ONE pydantic-settings object, built by :func:`load_settings`
and injected into :func:`regimetune.api.create_app` (never read at import time). The sections
of the application layer (engine, ingest, tuning) are defined with it, in
:mod:`regimetune.control.settings`; the store, auth and push sections here.

Sources, strongest first: keyword overrides, environment (``REGIMETUNE_`` prefix, nested
sections joined by ``__``, e.g. ``REGIMETUNE_STORE__URL``), a TOML or JSON config file, defaults.
Every bad setting is a :class:`ConfigError` of one line naming it: a value that does not
validate, a value that is not the JSON a list or table setting needs, and a ``REGIMETUNE_``
variable that names no setting (a typo would otherwise be ignored).

>>> s = load_settings(store={"url": "sqlite://"})
>>> s.store.url, s.engine.mode
('sqlite://', 'auto')
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
import types
import typing
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from regimetune.control.settings import EngineSettings, IngestSettings, TuningSettings
from regimetune.models.errors import ConfigError

_SECTION = ConfigDict(extra="forbid", frozen=True)
_CONFIG_FILE: ContextVar[Path | None] = ContextVar("regimetune_config_file", default=None)
ENV_PREFIX = "REGIMETUNE_"
OTHER_VARIABLES = ("REGIMETUNE_CONFIG", "REGIMETUNE_WRITE_TOKEN", "REGIMETUNE_FUZZ_SECONDS")
"""``REGIMETUNE_`` variables that are not service settings: the config file's path, the
compose file's token, the test suite's fuzzing budget; with the prefixes below (the reference
backend's settings, the tokens of ``replay`` and ``collect``)."""
OTHER_PREFIXES = ("REGIMETUNE_BACKEND_", "REGIMETUNE_REPLAY_", "REGIMETUNE_COLLECT_")


class StoreSettings(BaseModel):
    """Where decisions, policies, windows and the outbox live. Any SQLAlchemy URL works;
    ``schema_name`` (PostgreSQL only) isolates a deployment or a test run."""

    model_config = _SECTION
    url: str = "sqlite:///regimetune.db"
    schema_name: str | None = None
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL"] = "FULL"

    @model_validator(mode="after")
    def _database_url(self) -> StoreSettings:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(self.url)
        except ArgumentError:
            raise ValueError(
                "store.url is not a database URL (e.g. sqlite:///regimetune.db or postgresql+psycopg://host/db)"
            ) from None
        return self


class AuthSettings(BaseModel):
    """Bearer tokens. Writes always need a write token when any is configured; reads need a
    read or write token when ``protect_reads`` is set."""

    model_config = _SECTION
    write_tokens: tuple[SecretStr, ...] = ()
    read_tokens: tuple[SecretStr, ...] = ()
    protect_reads: bool = False
    allow_anonymous_writes: bool = False

    @model_validator(mode="after")
    def _reads_need_tokens(self) -> AuthSettings:
        if self.protect_reads and not (self.read_tokens or self.write_tokens):
            raise ValueError("auth.protect_reads needs at least one token")
        return self


class PushSettings(BaseModel):
    """Where policy versions go: ``none`` (backends pull ``GET /v1/policy``), ``reference``
    (the reference rescaling backend at base ``url``) or ``rest`` (any REST endpoint:
    ``url``, ``method``, and ``payload``, a mapping of the backend's JSON fields to dotted
    paths into the ``PolicyVersion``; none sends the whole version). A backend that is down
    is retried with backoff up to ``backoff_max_s`` apart, forever unless ``max_attempts``
    is set; ``supersede`` then sends the newest version first and records the older ones as
    superseded once it is delivered. ``max_per_hour`` is the flap budget: at most that many
    new policy versions in any hour (none: no budget); a change beyond it is held back and
    logged, and applied once the budget allows."""

    model_config = _SECTION
    backend: Literal["none", "reference", "rest"] = "none"
    url: str | None = None
    method: Literal["POST", "PUT", "PATCH"] = "PUT"
    payload: dict[str, str] | None = None
    headers: dict[str, str] = {}
    token: SecretStr | None = None
    timeout_s: Annotated[float, Field(gt=0)] = 5.0
    max_attempts: Annotated[int, Field(ge=1)] | None = None
    backoff_base_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 0.2
    backoff_max_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 30.0
    poll_interval_s: Annotated[float, Field(gt=0)] = 0.2
    supersede: bool = True
    max_per_hour: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _url(self) -> PushSettings:
        if self.backend != "none" and not self.url:
            raise ValueError(f"push.backend={self.backend} needs push.url")
        if self.url is None:
            return self
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"push.url must be an absolute http(s) URL (e.g. http://backend:8081), got {parts.scheme or 'no'} "
                "scheme" + ("" if parts.hostname else " and no host")
            )
        if (parts.username or parts.password) and self.token is not None:
            raise ValueError(
                "push.url carries a user and password and push.token is set: the URL's Basic auth "
                "would replace the bearer token; keep one of them"
            )
        return self


class Settings(BaseSettings):
    """Everything the service reads from its environment."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )
    store: StoreSettings = StoreSettings()
    auth: AuthSettings = AuthSettings()
    ingest: IngestSettings = IngestSettings()
    engine: EngineSettings = EngineSettings()
    push: PushSettings = PushSettings()
    tuning: TuningSettings = TuningSettings()
    policy_file: str | None = None
    # whose detector names the regimes when the policy file's detector_state and the one in
    # the store differ: "refuse" to start, the "policy-file" (restart detection from it) or
    # the "store" (the file's per-regime policies are then not loaded)
    detector_from: Literal["refuse", "policy-file", "store"] = "refuse"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))


class _FileSource(PydanticBaseSettingsSource):
    """The config file named by :func:`load_settings` (TOML or JSON)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_FILE.get()
        if path is None:
            return {}
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        try:
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {path} is not valid {path.suffix or 'TOML'}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a table of settings")
        return data


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings from overrides, environment, config file (argument, else
    ``REGIMETUNE_CONFIG``) and defaults; invalid settings raise :class:`ConfigError`."""
    path = config_file if config_file is not None else os.environ.get("REGIMETUNE_CONFIG")
    check_environment(os.environ)
    token = _CONFIG_FILE.set(Path(path) if path else None)
    try:
        return Settings(**overrides)
    except SettingsError as exc:
        raise ConfigError(_not_json(os.environ) or f"invalid setting from the environment: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            msg = "no such setting (deploy/regimetune.example.toml names them all)"
        raise ConfigError(f"invalid setting {where}: {msg}") from None
    finally:
        _CONFIG_FILE.reset(token)


def check_environment(environ: typing.Mapping[str, str]) -> None:
    """Refuse a ``REGIMETUNE_`` variable that names no setting (``REGIMETUNE_STORE__URL``
    does; ``REGIMETUNE_STORE_URL`` or ``REGIMETUNE_FOO`` would be silently ignored)."""
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in OTHER_VARIABLES or name.startswith(OTHER_PREFIXES):
            continue
        if _field_of(name) is None:
            raise ConfigError(
                f"environment variable {name} names no setting (sections and settings are joined "
                "by '__', e.g. REGIMETUNE_STORE__URL; deploy/regimetune.example.toml names them all)"
            )


def _field_of(name: str) -> Any:
    """The type of the setting that variable ``name`` sets (None: no such setting). Below a
    section or a parameter set the names must exist; below a table (``push.headers``) any key
    does."""
    node: Any = Settings
    for part in name.removeprefix(ENV_PREFIX).lower().split("__"):
        fields = _fields(node)
        if fields is None:
            return node if _is_json(node) else None  # a key of a table; nothing below a value
        if part not in fields:
            return None
        node = _unwrap(fields[part])
    return node


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    if typing.get_origin(annotation) is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else annotation
    return annotation


def _fields(node: Any) -> dict[str, Any] | None:
    """The named fields of a section (a model) or a parameter set (a dataclass), else None."""
    if isinstance(node, type) and issubclass(node, BaseModel):
        return {k: f.annotation for k, f in node.model_fields.items()}
    if isinstance(node, type) and dataclasses.is_dataclass(node):
        return typing.get_type_hints(node)
    return None


def _is_json(node: Any) -> bool:
    """A setting whose environment value is JSON: a list, a table, a section."""
    return _fields(node) is not None or typing.get_origin(node) in (tuple, list, dict, set)


def _not_json(environ: typing.Mapping[str, str]) -> str | None:
    """Which variable holds a value that is not the JSON its setting needs, and why."""
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        node = _field_of(name)
        if node is None or not _is_json(node):
            continue
        try:
            json.loads(environ[name])
        except ValueError as exc:
            return f"invalid setting {name}: not JSON ({exc}); e.g. {name}='[\"a\"]' or '{{\"k\": 1}}'"
    return None


__all__ = [
    "AuthSettings",
    "PushSettings",
    "Settings",
    "StoreSettings",
    "load_settings",
]
