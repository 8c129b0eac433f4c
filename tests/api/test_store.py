"""The store on SQLite and on the real PostgreSQL server (same code, same checks): the push
package's outbox contract, migrations, frozen returns, one transaction per window."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from regimetune.api.outbox import SqlOutbox
from regimetune.api.settings import StoreSettings
from regimetune.api.store import SqlStore
from regimetune.api.store.store import migrate, pack_columns
from regimetune.models import Decision, Policy, PolicyVersion, PushOutcome, WindowStats
from regimetune.push.checks import OUTBOX_STORE_CHECKS

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _pg_reachable() -> bool:
    try:
        eng = sa.create_engine(PG_URL, connect_args={"connect_timeout": 2})
        with eng.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        eng.dispose()
        return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SqlStore]]:
    opened: list[SqlStore] = []
    schemas: list[str] = []

    def make() -> SqlStore:
        if request.param == "sqlite":
            cfg = StoreSettings(url=f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}")
        else:
            name = f"rt_test_{uuid.uuid4().hex[:12]}"
            schemas.append(name)
            cfg = StoreSettings(url=PG_URL, schema_name=name)
        s = SqlStore.open(cfg)
        opened.append(s)
        return s

    if request.param == "postgres" and not _pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    yield make
    for s in opened:
        s.close()
    if schemas:
        eng = sa.create_engine(PG_URL)
        with eng.begin() as conn:
            for name in schemas:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        eng.dispose()


@pytest.mark.parametrize("check", OUTBOX_STORE_CHECKS, ids=lambda c: c.__name__)
def test_sql_outbox_store_conforms(make_store, check) -> None:
    check(lambda: SqlOutbox(make_store()))


def window(i: int, requests: int = 100) -> WindowStats:
    return WindowStats(
        index=i,
        start=60.0 * i,
        length=60.0,
        reads=requests,
        writes=0,
        active_keys=10,
        keyspace_size=10 * (i + 1),
        topk_share=0.5,
        entropy=2.0,
    )


def test_windows_segments_decisions_versions(make_store) -> None:
    s = make_store()
    for i, rid in enumerate([0, 0, 1, 1, 1, 0]):
        d = Decision(at=float(i), regime_from=None, regime_to=rid, detail="why") if i in (0, 2, 5) else None
        s.commit_window(
            window(i),
            rid,
            regime_kind="transition" if rid == 1 else "level",
            checkpoint={"i": i},
            decision=d,
            policy=Policy(regime_id=rid),
            make_version=d is not None,
            enqueue=d is not None,
        )
    segs, total = s.segments()
    assert total == 3 and [(x.regime_id, x.start_window, x.end_window) for x in segs] == [
        (0, 0, 2),
        (1, 2, 5),
        (0, 5, 6),
    ]
    assert [x.kind for x in segs] == ["level", "transition", "level"]
    assert s.load_checkpoint("engine") == ({"i": 5}, 5)
    decisions, n = s.decisions()
    assert n == 3 and [d.policy_version for d in decisions] == [3, 2, 1]
    assert [v.version for v in s.versions()] == [3, 2, 1]
    out = SqlOutbox(s)
    assert [e.version.version for e in out.pending()] == [1, 2, 3]
    out.mark_delivered(1, at=1.0)
    out.mark_failed(3, error="refused", at=2.0)
    s.set_outcome(1, PushOutcome.DELIVERED, "delivered")
    assert s.in_force_version().version == 2  # 3 failed: the newest version not given up on
    assert s.decisions()[0][-1].detail == "why | push: delivered"


def test_returns_are_frozen_and_detached(make_store) -> None:
    s = make_store()
    s.put_regime_policy(Policy(regime_id=4, source="operator"))
    p = s.regime_policy(4)
    with pytest.raises(ValueError):
        p.source = "tuned"  # type: ignore[misc]
    s.put_regime_policy(Policy(regime_id=4, source="tuned"))
    assert p.source == "operator" and s.regime_policy(4).source == "tuned"
    _, v = s.record_decision(
        Decision(at=0.0, regime_from=None, regime_to=4), p, make_version=True, enqueue=False
    )
    assert isinstance(v, PolicyVersion) and s.version(v.version) == v


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    cfg = StoreSettings(url=f"sqlite:///{tmp_path / 'm.db'}")
    SqlStore.open(cfg).close()
    s = SqlStore.open(cfg)  # second start: nothing to migrate, data kept
    assert s.probe() is None  # it writes
    with s.db.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM rt_alembic_version")).scalar() == "0004"
        mode = conn.execute(sa.text("PRAGMA journal_mode")).scalar()
    assert mode == "wal"


def test_a_store_of_the_first_schema_is_upgraded_with_its_data(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    migrate(engine, "0001")  # as a store written before snapshots existed
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO rt_ingest_batches (received_at, window_start, kind, n_rows, payload) "
                "VALUES (1.0, 0.0, 'counts', 0, :p)"
            ),
            {"p": pack_columns({})},
        )
    engine.dispose()
    s = SqlStore.open(StoreSettings(url=url))
    assert s.last_seq() == 1 and s.load_snapshot("aggregator") is None
    s.save_snapshot("aggregator", 1, {"k": 1}, {"a": np.arange(3)})
    seq, meta, arrays = s.load_snapshot("aggregator") or (0, {}, {})
    assert seq == 1 and meta == {"k": 1} and arrays["a"].tolist() == [0, 1, 2]


def test_segments_stored_before_kinds_read_as_unknown_and_new_ones_keep_theirs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    migrate(engine, "0003")  # as a store written before segments had a kind
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                'INSERT INTO rt_segments (regime_id, start_window, "end_window", start, "end", summary) '
                "VALUES (0, 0, 1, 0.0, 60.0, '{}')"
            )
        )
    engine.dispose()
    s = SqlStore.open(StoreSettings(url=url))
    s.commit_window(window(1), 1, regime_kind="transition")
    segs, total = s.segments()
    assert total == 2 and [(x.regime_id, x.kind) for x in segs] == [(0, ""), (1, "transition")]


@pytest.mark.postgres
def test_service_runs_unchanged_on_postgresql(tmp_path: Path, workload) -> None:
    """The same app on a PostgreSQL URL: ingest, regimes, decisions, policy, restart."""
    if not _pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    from regimetune.api import create_app

    from .conftest import TestClient, post_window, settings_for

    name = f"rt_test_{uuid.uuid4().hex[:12]}"
    settings = settings_for(tmp_path, store={"url": PG_URL, "schema_name": name})
    try:
        with TestClient(create_app(settings)) as c:
            for wc in workload[:40]:
                post_window(c, wc)
            decisions = c.get("/v1/decisions").json()
            assert decisions["total"] >= 1
            assert c.get("/v1/policy").json()["version"] == decisions["items"][0]["policy_version"]
            regime = c.get("/v1/regimes/current").json()["regime_id"]
        with TestClient(create_app(settings)) as c:  # restart: replayed from the store
            assert c.get("/v1/regimes/current").json()["regime_id"] == regime
            assert c.get("/v1/engine").json()["windows"] == 39
    finally:
        eng = sa.create_engine(PG_URL)
        with eng.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        eng.dispose()
