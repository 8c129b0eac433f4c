"""Reproducible tuning: one seed, one result, whatever runs the evaluations (inline, a local
pool of 1 or 2 workers, a Dask cluster of 1 or 2 workers, a scheduler and worker started as
separate processes)."""

from __future__ import annotations

import concurrent.futures as cf
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from regimetune.models import ConfigError, TuningError
from regimetune.tuner import CacheConfig, CostModel, Workload
from regimetune.tuner import tune as tune_api
from regimetune.tuner.cache import CacheTrace, StoreModel
from regimetune.tuner.objectives import CacheObjective
from regimetune.tuner.optim import Param, Space, minimize
from regimetune.tuner.optim.executors import check_executor_spec, is_dask_address, open_executor

SRC = Path(__file__).resolve().parents[2] / "src"
STORE = StoreModel(capacity_ops_s=10.0, buffer_s=0.0)
OBJ = CacheObjective(efficiency_target=0.95, memory_budget=0.6)


def three_regime_trace() -> tuple[CacheTrace, np.ndarray, np.ndarray]:
    """Three regimes of 200 s at 50 req/s: a cyclic scan of 150 keys, 12 hot keys, a
    Zipf-like mix over 400 keys (seeded)."""
    rng = np.random.default_rng(3)
    n = 200 * 50
    keys = np.concatenate([np.arange(n) % 150, 1000 + np.arange(n) % 12, 2000 + (rng.zipf(1.3, n) % 400)])
    ts = np.arange(3 * n) / 50.0
    starts = np.arange(0, 600, 10.0)
    labels = (starts // 200).astype(np.int64)
    return CacheTrace.from_arrays(ts=ts, keys=keys, window_s=10.0), starts, labels


def tune(executor=None, workers: int = 0, optimizer: str = "Pounders", budget: int = 24):
    trace, starts, labels = three_regime_trace()
    config = CacheConfig(
        objective=OBJ, cost=CostModel.from_store(STORE), optimizer=optimizer, budget=budget, seed=0
    )
    work = Workload(labels=labels, window_starts_s=starts, trace=trace)
    return tune_api(work, "cache", config=config, executor=executor, workers=workers)


def fingerprint(res) -> tuple:
    """Everything a run decided: each evaluated point in order, and the tuned policy."""
    return (
        tuple(tuple(sorted(e.params.items())) for e in res.evaluations),
        res.policy_file.model_dump_json(),
    )


@pytest.fixture(scope="module")
def reference() -> dict[str, tuple]:
    return {opt: fingerprint(tune(optimizer=opt)) for opt in ("Pounders", "TwoPointsDE")}


@pytest.mark.parametrize("optimizer", ["Pounders", "TwoPointsDE"])
@pytest.mark.parametrize("workers", [1, 2])
def test_same_seed_same_result_on_a_local_pool(reference, optimizer: str, workers: int) -> None:
    assert fingerprint(tune(workers=workers, optimizer=optimizer)) == reference[optimizer]


def test_same_result_on_a_thread_pool_given_by_name(reference) -> None:
    assert fingerprint(tune(executor="thread", workers=3)) == reference["Pounders"]


def rosen(p: dict[str, float]) -> np.ndarray:
    return np.array([10 * (p["x2"] - p["x1"] ** 2), 1 - p["x1"]])


ROSEN = Space([Param("x1", -2, 2, init=-1.2), Param("x2", -2, 2, init=1.0)])


@pytest.mark.parametrize("optimizer", ["Pounders", "TwoPointsDE", "NGOpt", "OnePlusOne"])
def test_minimize_tells_in_the_order_asked_whatever_the_pool(optimizer: str) -> None:
    def points(res) -> list[dict[str, float]]:
        return [e.params for e in res.evaluations]

    inline = minimize(rosen, ROSEN, budget=40, optimizer=optimizer, seed=7)
    # a pool whose workers finish out of order: the slowest first
    with cf.ThreadPoolExecutor(max_workers=4) as pool:
        slow = minimize(_staggered, ROSEN, budget=40, optimizer=optimizer, seed=7, executor=pool)
    assert points(slow) == points(inline)
    assert slow.best_value == inline.best_value


_CALLS = iter(range(10**9))


def _staggered(p: dict[str, float]) -> np.ndarray:
    time.sleep(0.004 * (3 - next(_CALLS) % 4))  # later asks of a round come back first
    return rosen(p)


def test_pounders_runs_its_batches_in_parallel_without_changing_its_course() -> None:
    serial = minimize(rosen, ROSEN, budget=60, batch_size=1)
    batched = minimize(rosen, ROSEN, budget=60, batch_size=4)
    assert [e.params for e in batched.evaluations] == [e.params for e in serial.evaluations]
    assert batched.best_value <= 1e-6


def test_executor_names() -> None:
    assert is_dask_address("tcp://127.0.0.1:8786") and not is_dask_address("tcp://")
    assert check_executor_spec("thread") == "thread"
    with pytest.raises(ConfigError, match="Dask scheduler address"):
        check_executor_spec("processes")


# --- Dask -------------------------------------------------------------------------------

distributed = pytest.importorskip("distributed")


@pytest.mark.parametrize("n_workers", [1, 2])
def test_same_result_on_a_dask_cluster(reference, n_workers: int) -> None:
    with distributed.LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        res = tune(executor=cluster.scheduler_address)
    assert fingerprint(res) == reference["Pounders"]


def test_evaluations_run_on_several_dask_workers_at_once() -> None:
    """A round's candidates go to the cluster together: with two workers, four evaluations
    of 1 s take about 2 s, not 4 (with a margin for a loaded machine)."""
    space = Space([Param("x", -1, 1)])
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        open_executor(cluster.scheduler_address) as ex,
    ):
        t0 = time.perf_counter()
        res = minimize(_slow_square, space, budget=4, optimizer="RandomSearch", residuals=False, executor=ex)
        wall = time.perf_counter() - t0
    assert res.n_evaluations == 4 and wall < 3.5


def _slow_square(p: dict[str, float]) -> float:
    time.sleep(1.0)
    return p["x"] ** 2


def test_unreachable_scheduler_is_a_tuning_error() -> None:
    port = _free_port()
    with (
        pytest.raises(TuningError, match="cannot reach the Dask scheduler"),
        open_executor(f"tcp://127.0.0.1:{port}", connect_timeout_s=1.0),
    ):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_same_result_on_a_scheduler_and_worker_in_their_own_processes(reference, tmp_path) -> None:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    common = {
        "env": env,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "start_new_session": True,
    }
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--dashboard-address", ":0", "--no-show"], **common,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1", "--nthreads", "1",
         "--host", "127.0.0.1", "--dashboard-address", ":0", "--local-directory", str(tmp_path)], **common,
    )  # fmt: skip
    try:
        client = distributed.Client(address, timeout=60, set_as_default=False)
        try:
            client.wait_for_workers(1, timeout=90)
            worker_pids = client.run(os.getpid)
        finally:
            client.close()
        assert os.getpid() not in worker_pids.values()  # evaluations really run elsewhere
        assert fingerprint(tune(executor=address)) == reference["Pounders"]
    finally:
        for proc in (worker, scheduler):
            proc.terminate()
        for proc in (worker, scheduler):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
