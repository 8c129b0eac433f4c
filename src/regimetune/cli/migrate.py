"""``regimetune migrate``: bring the service's store to the newest schema revision, as a
one-shot step before ``serve`` (the compose file's ``migrate`` service). Idempotent: a store
already at the newest revision is left as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def migrate(
    store_url: str | None = typer.Option(
        None, help="Store URL (else the config file, $REGIMETUNE_STORE__URL, sqlite:///regimetune.db)."
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="TOML or JSON settings file (else $REGIMETUNE_CONFIG)."
    ),
) -> None:
    """Upgrade the store to the latest Alembic revision (what 'serve' would do at start-up,
    so that several replicas never race to migrate). Prints one line; exit code 2 and a
    one-line reason when the store cannot be reached or upgraded."""
    from regimetune.api import load_settings
    from regimetune.api.store import SqlStore
    from regimetune.models import ConfigError

    settings = load_settings(config)
    cfg = settings.store
    if store_url is not None:
        cfg = cfg.model_copy(update={"url": store_url})
    where = _safe_url(cfg.url)
    try:
        store = SqlStore.open(cfg)
    except ConfigError as exc:
        raise ConfigError(f"cannot migrate store {where}: {_reason(exc)}") from None
    except ImportError as exc:  # e.g. a postgresql+psycopg URL without psycopg installed
        raise ConfigError(f"cannot migrate store {where}: its driver is not installed ({exc.name})") from None
    try:
        revision = _revision(store.db)
    finally:
        store.close()
    typer.echo(f"store {where} is at revision {revision} (head)")


def _revision(engine: Any) -> str:
    """The revision recorded in the store's Alembic version table."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": "rt_alembic_version"})
        return ctx.get_current_revision() or "none"


def _reason(exc: BaseException) -> str:
    """The first line of the driver's message (never the URL, which may hold a password)."""
    cause = exc.__cause__ or exc
    orig = getattr(cause, "orig", None) or cause
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    first = lines[0] if lines else type(orig).__name__
    return f"{type(orig).__name__}: {first}"


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from regimetune.models import ConfigError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        raise ConfigError(f"store URL {url!r} is not a database URL (e.g. sqlite:///regimetune.db)") from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="migrate")(migrate)
