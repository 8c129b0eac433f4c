"""``regimetune migrate``: upgrades a store to the newest revision, twice without harm, on SQLite
and PostgreSQL; a store it cannot reach is one line on stderr and exit code 2, without the
password of the URL."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from regimetune.api.settings import StoreSettings
from regimetune.api.store import SqlStore
from regimetune.cli.main import app, main

from .conftest import PG_URL, pg_reachable


def head() -> str:
    from importlib import resources

    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("regimetune.api.store") / "migrations"))
    rev = ScriptDirectory.from_config(cfg).get_current_head()
    assert rev is not None
    return rev


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], clean_env: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """``regimetune <args>`` through the real entry point (its one-line error handler), in
    process: a subprocess per call costs seconds of imports."""

    def call(*args: str, env: dict[str, str] | None = None) -> Ran:
        for k, v in (env or {}).items():
            clean_env.setenv(k, v)
        clean_env.setattr(sys, "argv", ["regimetune", *args])
        capsys.readouterr()
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return call


def test_upgrades_a_new_sqlite_store_and_is_idempotent(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'rt.db'}"
    for _ in range(2):
        r = CliRunner().invoke(app, ["migrate", "--store-url", url])
        assert r.exit_code == 0, r.output
        assert f"is at revision {head()} (head)" in r.output
    eng = sa.create_engine(url)
    tables = set(sa.inspect(eng).get_table_names())
    eng.dispose()
    assert "rt_alembic_version" in tables and len(tables) > 3
    store = SqlStore.open(StoreSettings(url=url))  # serve's own start-up finds nothing to do
    store.close()


def test_reads_the_store_from_the_environment(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    db = tmp_path / "env.db"
    clean_env.setenv("REGIMETUNE_STORE__URL", f"sqlite:///{db}")
    r = CliRunner().invoke(app, ["migrate"])
    assert r.exit_code == 0, r.output
    assert db.is_file()


def test_an_unreachable_store_is_one_line(tmp_path: Path, run: Callable[..., Ran]) -> None:
    r = run("migrate", "--store-url", f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "cannot migrate store" in lines[0] and "unable to open database file" in lines[0]
    r = run("migrate", "--store-url", "not a url")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "is not a database URL" in r.stderr


@pytest.mark.postgres
def test_postgresql_store_and_a_hidden_password(run: Callable[..., Ran]) -> None:
    if not pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    schema = f"rt_migrate_{uuid.uuid4().hex[:8]}"
    env = {"REGIMETUNE_STORE__SCHEMA_NAME": schema}
    try:
        for _ in range(2):
            r = run("migrate", "--store-url", PG_URL, env=env)
            assert r.returncode == 0, r.stderr
            assert f"is at revision {head()} (head)" in r.stdout
        r = run(
            "migrate",
            "--store-url",
            "postgresql+psycopg://nobody:topsecret@127.0.0.1:1/test?connect_timeout=2",
            env=env,
        )
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "cannot migrate store" in r.stderr and "topsecret" not in r.stderr and "***" in r.stderr
    finally:
        eng = sa.create_engine(PG_URL)
        with eng.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        eng.dispose()
