"""Static-LRU miss counts equal libcachesim's LRU (its C path) exactly, with unit object
sizes so that a capacity in bytes is a capacity in objects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from regimetune.models import CachePolicy
from regimetune.tuner.cache import CacheTrace, simulate

lcs = pytest.importorskip("libcachesim")

ORACLE = np.dtype([("time", "<u4"), ("obj_id", "<u8"), ("size", "<u4"), ("next", "<i8")])


def lcs_misses(path: Path, capacity: int) -> int:
    reader = lcs.TraceReader(
        str(path), lcs.TraceType.ORACLE_GENERAL_TRACE, lcs.ReaderInitParam(ignore_obj_size=True)
    )
    ratio, _ = lcs.LRU(capacity).process_trace(reader)
    return round(ratio * reader.get_num_of_req())


def write_oracle(path: Path, ts: np.ndarray, keys: np.ndarray) -> Path:
    rec = np.zeros(len(keys), dtype=ORACLE)
    rec["time"], rec["obj_id"], rec["size"], rec["next"] = ts.astype(np.uint32), keys, 1, -1
    rec.tofile(path)
    return path


@pytest.mark.shared_data
@pytest.mark.parametrize("capacity", [1, 100, 1000, 20_000])
def test_static_lru_equals_libcachesim_on_cloudphysics(shared_data, capacity):
    path = shared_data / "cloudphysics" / "cloudPhysicsIO.oracleGeneral.bin"
    rec = np.fromfile(path, dtype=ORACLE)
    trace = CacheTrace.from_arrays(ts=rec["time"].astype(np.float64), keys=rec["obj_id"], window_s=60)
    ours = simulate(trace, CachePolicy(mode="lru", limit_keys=capacity)).misses
    assert ours == lcs_misses(path, capacity)


@pytest.mark.parametrize("capacity", [3, 64, 900])
def test_static_lru_equals_libcachesim_on_generated_zipf(tmp_path, capacity):
    rng = np.random.default_rng(7)
    keys = (rng.zipf(1.1, 30_000) % 5000).astype(np.uint64) + 1
    ts = np.arange(len(keys), dtype=np.float64) // 100
    path = write_oracle(tmp_path / "zipf.oracleGeneral.bin", ts, keys)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, window_s=10)
    assert simulate(trace, CachePolicy(mode="lru", limit_keys=capacity)).misses == lcs_misses(path, capacity)


@pytest.mark.parametrize("capacity", [10, 2000])
def test_static_lru_equals_libcachesim_on_a_parsplice_like_trace(tmp_path, capacity):
    from regimetune.collectors import GeneratorConfig, generate
    from regimetune.models import EventBatch

    b = EventBatch.concat(
        list(generate(GeneratorConfig(duration_s=600, workers=32, seed=4, preset="classic")))
    )
    path = write_oracle(tmp_path / "parsplice.oracleGeneral.bin", b.ts, b.key)
    trace = CacheTrace.from_batches([b], window_s=10)
    assert simulate(trace, CachePolicy(mode="lru", limit_keys=capacity)).misses == lcs_misses(path, capacity)
