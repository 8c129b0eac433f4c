"""Persistence of the service (SQLAlchemy 2.0; SQLite in WAL mode by default, PostgreSQL
unchanged) with alembic migrations shipped in the package and run at start-up."""

from regimetune.api.store.store import SqlStore, migrate, pack_columns, unpack_columns

__all__ = ["SqlStore", "migrate", "pack_columns", "unpack_columns"]
