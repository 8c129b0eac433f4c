"""The Redis Cluster backend on real local clusters: commission and decommission with every
key kept, refusals of unhealthy clusters, dry runs and recommend mode that move nothing, a
mover killed mid-migration that the next run finishes, and the REST contract."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from regimetune.backend import create_app, load_settings
from regimetune.backend.redis_cluster import ClusterUnhealthy, RedisClusterRescaler, RedisStateStore
from regimetune.backend.redis_cluster.costs import DEFAULT_COSTS, MoveCosts, calibrate
from regimetune.backend.redis_cluster.local import LocalCluster
from regimetune.backend.redis_cluster.routes import router
from regimetune.backend.redis_cluster.service import RedisClusterService, RedisRescaleOrder
from regimetune.models import PufferscaleWeights, RescaleOperation

from .redis_helpers import cluster_with_keys, missing_keys

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster() -> Iterator[tuple[LocalCluster, dict[str, bytes]]]:
    yield from cluster_with_keys(3, 1, 3000)


def rescaler(cluster: LocalCluster, state: Path, **kw: object) -> RedisClusterRescaler:
    return RedisClusterRescaler(
        cluster.address,
        RedisStateStore(state),
        spares=[s.address for s in cluster.spares],
        **kw,  # type: ignore[arg-type]
    )


def owners(r: RedisClusterRescaler) -> dict[int, str]:
    return r.topology().slot_owners()


def test_commission_then_decommission_keeps_every_key(
    cluster: tuple[LocalCluster, dict[str, bytes]], tmp_path: Path
) -> None:
    lc, keys = cluster
    settings = load_settings(state=tmp_path / "b.db")
    r = rescaler(lc, settings.state)
    before = r.snapshot()
    b0 = max(before.placement().model_dump()["placement"].values())
    assert b0 == 2 and before.stats.keys.sum() == len(keys) and before.stats.bytes.sum() > 3000 * 50

    planned = r.plan(RescaleOperation(kind="commission", count=1), PufferscaleWeights(), settings)
    done = r.execute(planned)
    assert done.nodes_added == (lc.spares[0].address,)
    assert done.slots_moved == len(planned.plan.migrations) > 0
    assert done.keys_moved > 0 and done.bytes_moved == pytest.approx(planned.plan.metrics.bytes_moved)
    assert missing_keys(lc, keys) == []
    after = r.snapshot()
    assert sorted(after.servers.values()) == [0, 1, 2, 3]
    new_id = next(n for n, s in after.servers.items() if s == 3)
    assert any(o == new_id for o in owners(r).values())  # the new master holds slots
    assert r.store.journal() is None
    # the plan's balance is what the cluster shows: the largest master near the mean
    per_node = {n: 0.0 for n in after.servers}
    for s, n in owners(r).items():
        per_node[n] += float(after.stats.bytes[s])
    assert max(per_node.values()) / (sum(per_node.values()) / 4) == pytest.approx(
        done.max_bytes_over_mean, rel=0.05
    )
    assert done.max_bytes_over_mean < 1.5
    for n in lc.nodes:
        with n.client() as c:
            assert c.config_get("cluster-allow-replica-migration")["cluster-allow-replica-migration"] == "yes"

    # the slot moves were timed, and the next plan's prediction is fitted to them
    assert 0 < done.moves_s <= done.wall_s and done.predicted_s > 0
    timings = r.store.timings()
    assert len(timings) >= done.slots_moved / r.slot_batch
    assert (
        sum(t.slots for t in timings) == done.slots_moved and sum(t.keys for t in timings) == done.keys_moved
    )
    assert r.costs() == MoveCosts.fit(timings, DEFAULT_COSTS)

    planned = r.plan(RescaleOperation(kind="decommission", servers=[0]), PufferscaleWeights(), settings)
    gone = next(n for n, s in planned.snapshot.servers.items() if s == 0)
    leaving = next(m for m in lc.masters if m.address == planned.snapshot.topo.nodes[gone].address)
    done = r.execute(planned)
    assert done.nodes_removed == (leaving.address,)
    assert missing_keys(lc, keys, via=1 if leaving is lc.masters[0] else 0) == []
    topo = r.topology()
    assert len(topo.masters) == 3 and leaving.address not in {n.address for n in topo.nodes.values()}
    with leaving.client() as c:  # reset: it knows nobody and holds nothing
        assert c.dbsize() == 0
        assert "cluster_known_nodes:1" in c.execute_command("CLUSTER", "INFO").decode()
    assert topo.problems() == []


def test_unhealthy_clusters_are_refused_and_nothing_moves(
    cluster: tuple[LocalCluster, dict[str, bytes]], tmp_path: Path
) -> None:
    lc, _ = cluster
    settings = load_settings(state=tmp_path / "b.db")
    r = rescaler(lc, settings.state)
    op = RescaleOperation(kind="commission", count=1)
    m0, m1 = lc.masters[0], lc.masters[1]
    with m0.client() as c0, m1.client() as c1:
        ids = [c.execute_command("CLUSTER", "MYID").decode() for c in (c0, c1)]
        c0.execute_command("CLUSTER", "SETSLOT", 6000, "IMPORTING", ids[1])
        with pytest.raises(ClusterUnhealthy, match="slot 6000 is open"):
            r.plan(op, PufferscaleWeights(), settings)
        c0.execute_command("CLUSTER", "SETSLOT", 6000, "STABLE")
    lc.masters[2].stop()
    with pytest.raises(ClusterUnhealthy, match=r"does not answer|fail"):
        r.plan(op, PufferscaleWeights(), settings)
    with lc.spares[0].client() as c:
        assert "cluster_known_nodes:1" in c.execute_command("CLUSTER", "INFO").decode()


def test_dry_run_and_recommend_mode_change_nothing(
    cluster: tuple[LocalCluster, dict[str, bytes]], tmp_path: Path
) -> None:
    lc, _ = cluster
    state = tmp_path / "b.db"
    cmd = [
        sys.executable, "-m", "regimetune.backend", "--redis-cluster", lc.address, "--state", str(state),
        "--spare", lc.spares[0].address, "--rescale", "commission:1", "--dry-run", "--weights", "LDT",
    ]  # fmt: skip
    r = rescaler(lc, state)
    slots_before = owners(r)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=_env())
    assert out.returncode == 0, out.stderr
    assert '"applied": false' in out.stdout and '"migrations"' in out.stdout
    assert owners(r) == slots_before
    with lc.spares[0].client() as c:
        assert "cluster_known_nodes:1" in c.execute_command("CLUSTER", "INFO").decode()

    bad = subprocess.run(
        [*cmd[:-5], "--rescale", "grow:2"], capture_output=True, text=True, timeout=90, env=_env()
    )
    assert bad.returncode == 2 and "commission:N" in bad.stderr and "Traceback" not in bad.stderr

    service = RedisClusterService(load_settings(state=state), r, mode="recommend")
    result = service.rescale(RedisRescaleOrder(kind="commission", count=1))
    assert not result.applied and result.execution is None and result.plan.migrations
    assert owners(r) == slots_before


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGIMETUNE_BACKEND_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2] / "src"), env.get("PYTHONPATH", "")])
    return env


def test_a_mover_killed_mid_migration_is_finished_by_the_next_run(
    cluster: tuple[LocalCluster, dict[str, bytes]], tmp_path: Path
) -> None:
    lc, keys = cluster
    state = tmp_path / "b.db"
    cmd = [
        sys.executable, "-m", "regimetune.backend", "--redis-cluster", lc.address, "--state", str(state),
        "--spare", lc.spares[0].address, "--key-batch", "1",
    ]  # fmt: skip
    mover = subprocess.Popen(
        [*cmd, "--rescale", "commission:1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env()
    )
    r = rescaler(lc, state)
    open_seen = False
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and mover.poll() is None:
            if lc.spares[0].proc is not None:
                with lc.spares[0].client() as c:
                    nodes = c.execute_command("CLUSTER", "NODES").decode()
                me = next(line for line in nodes.splitlines() if "myself" in line)
                # past the joining node's first slot (moved alone), a batch is importing
                if "-<-" in me and len(me.split()) > 9:
                    mover.send_signal(signal.SIGKILL)
                    open_seen = True
                    break
            time.sleep(0.01)
    finally:
        if mover.poll() is None:
            mover.kill()
        mover.wait(10)
        assert mover.stderr is not None
        mover.stderr.close()
    assert open_seen, "the mover finished before it could be killed"
    topo = r.topology()
    assert topo.open_slots(), "the kill should leave a slot open"
    assert r.store.journal() is not None

    # a new order is refused while the journal is pending; the next run finishes the move
    with pytest.raises(Exception, match="in flight"):
        r.plan(RescaleOperation(kind="commission", count=1), PufferscaleWeights(), load_settings(state=state))
    done = r.resume()
    assert done is not None and done.resumed and done.slots_moved > 0
    assert r.store.journal() is None
    topo = r.topology()
    assert topo.problems() == []
    assert missing_keys(lc, keys) == []
    target = next(n.id for n in topo.nodes.values() if n.address == lc.spares[0].address)
    assert sum(1 for o in topo.slot_owners().values() if o == target) > 0


def test_rest_contract_over_a_cluster(cluster: tuple[LocalCluster, dict[str, bytes]], tmp_path: Path) -> None:
    lc, keys = cluster
    settings = load_settings(state=tmp_path / "b.db")
    r = rescaler(lc, settings.state)
    app = create_app(settings, service=RedisClusterService(settings, r), rescale_router=router)
    with TestClient(app) as client:
        got = client.get("/v1/placement")
        assert got.status_code == 200
        body = got.json()
        assert body["servers"] == [0, 1, 2] and len(body["buckets"]) == 16384
        assert sum(s["bytes"] for s in body["summary"]) > 0
        assert client.post("/v1/placement", json={"servers": [0], "buckets": []}).status_code == 409
        push = {
            "version": 1,
            "created_at": 0.0,
            "policy": {"weights": {"w_load": 1.0, "w_data": 0.5, "w_time": 1.0}},
        }
        assert (
            client.put("/v1/policy", json=push, headers={"Idempotency-Key": "1"}).json()["status"]
            == "applied"
        )
        assert client.put("/v1/policy", json=push).json()["status"] == "duplicate"
        unknown = client.post("/v1/rescale", json={"kind": "decommission", "servers": [9]})
        assert unknown.status_code == 404 and "9" in unknown.json()["detail"]
        stale = client.post(
            "/v1/rescale", json={"kind": "commission", "count": 1, "expected_revision": 10**6}
        )
        assert stale.status_code == 409
        too_many = client.post("/v1/rescale", json={"kind": "commission", "count": 2})
        assert too_many.status_code == 409 and "spare" in too_many.json()["detail"]
        res = client.post("/v1/rescale", json={"kind": "commission", "count": 1})
        assert res.status_code == 200, res.text
        out = res.json()
        assert out["applied"] and out["weights"]["w_data"] == 0.5 and out["policy_version"] == 1
        assert out["execution"]["slots_moved"] == len(out["plan"]["migrations"])
        assert client.get("/v1/placement").json()["servers"] == [0, 1, 2, 3]
    assert missing_keys(lc, keys) == []


def test_calibration_times_one_way_moves_and_loses_no_key(
    cluster: tuple[LocalCluster, dict[str, bytes]], tmp_path: Path
) -> None:
    lc, keys = cluster
    r = rescaler(lc, tmp_path / "b.db")
    snap = r.snapshot()
    timings = calibrate(r.conns, snap.topo, snap.stats, sizes=(1, 4), rounds=1)
    assert [t.slots for t in timings] == [1, 4] and all(t.seconds > 0 for t in timings)
    assert timings[0].keys > 0  # the largest slots first
    before = snap.topo.slot_owners()
    moved = {s for s, o in owners(r).items() if o != before[s]}
    assert len(moved) == 1 + 1 + 4  # one way, the untimed warm-up slot included
    assert missing_keys(lc, keys) == [] and r.topology().problems() == []
