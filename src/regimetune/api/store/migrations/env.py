"""Alembic environment: run programmatically by :func:`regimetune.api.store.migrate`, which
hands over an open connection in ``config.attributes["connection"]``. Importing this module
outside alembic (e.g. to run doctests) does nothing."""

from __future__ import annotations

from alembic import context

from regimetune.api.store.schema import metadata


def run_migrations() -> None:
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=metadata, version_table="rt_alembic_version")
    with context.begin_transaction():
        context.run_migrations()


try:
    _active = context.config is not None
except (NameError, AttributeError):  # not run by alembic
    _active = False
if _active:
    run_migrations()
