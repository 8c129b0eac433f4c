"""The Redis collector on real servers: a window's reads, writes, hits and misses are the
requests made between two readings; on a cluster, per-slot keys, bytes and load."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from regimetune.backend.redis_cluster.local import LocalCluster, LocalRedis
from regimetune.collectors.checks import CollectorCase
from regimetune.collectors.redis import RedisCollector
from regimetune.collectors.registry import build_collector
from regimetune.models.errors import SourceError

pytestmark = pytest.mark.timeout(120)


def needs_redis() -> None:
    if not LocalRedis.available():
        pytest.skip("redis-server is not installed")
    pytest.importorskip("redis")


def started_server(root: Path) -> LocalRedis:
    """A fresh redis-server under ``root`` (skips without one)."""
    needs_redis()
    return LocalRedis(root).start()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LocalRedis]:
    r = started_server(tmp_path)
    try:
        yield r
    finally:
        r.stop()


def workload(server: LocalRedis) -> Callable[[float], None]:
    """A ``sleep`` for the collector that, at tick i, writes 10*i keys and reads 10*i keys
    of which half exist, plus one MGET of 4 keys (2 exist)."""
    step = iter(range(1, 100))

    def sleep(_: float) -> None:
        i = next(step)
        with server.client() as c:
            for k in range(10 * i):
                c.set(f"w{i}:{k}", b"x" * 100)
            for k in range(10 * i):
                c.get(f"w{i}:{k}" if k % 2 == 0 else f"absent:{k}")
            c.mget([f"w{i}:0", f"w{i}:2", "nope1", "nope2"])

    return sleep


def redis_case(server: LocalRedis) -> CollectorCase:
    """Three windows: 10*i writes and 10*i + 4 reads in window i."""
    return CollectorCase(
        "redis",
        lambda: build_collector("redis", server.address, interval_s=0.01, windows=3, sleep=workload(server)),
        sum(20 * i + 4 for i in (1, 2, 3)),
        lambda: build_collector("redis", "127.0.0.1:1", windows=1),
    )


def test_windows_count_the_requests_between_readings(server: LocalRedis) -> None:
    c = RedisCollector(server.address, interval_s=0.01, windows=3, sleep=workload(server))
    windows = list(c.collect())
    c.close()
    assert [w.writes_total for w in windows] == [10, 20, 30]
    assert [w.reads_total for w in windows] == [14, 24, 34]
    assert [(s.hits, s.misses) for s in c.stats] == [(7, 7), (12, 12), (17, 17)]
    assert all(s.ops >= s.reads - 3 + s.writes for s in c.stats)  # an MGET is one op, several reads
    assert c.stats[-1].used_memory > c.stats[0].used_memory > 0
    assert c.stats[0].hit_ratio == pytest.approx(0.5)
    assert windows[0].bucket_ids.size == 0  # a standalone server has no slots


def test_an_unreachable_server_is_a_source_error() -> None:
    needs_redis()
    with pytest.raises(SourceError, match=r"127\.0\.0\.1:1"):
        list(RedisCollector("127.0.0.1:1", windows=1).collect())


def test_a_cluster_window_has_per_slot_keys_bytes_and_load() -> None:
    needs_redis()
    import redis
    from redis.crc import key_slot

    with LocalCluster(3, config=("maxmemory-policy allkeys-lfu", "lfu-log-factor 0")) as lc:
        rc = redis.RedisCluster(host="127.0.0.1", port=lc.masters[0].port)
        names = [f"{{t{k % 20}}}:{k}" for k in range(400)] + [f"{{hot}}:{k}" for k in range(10)]

        def sleep(_: float) -> None:
            for n in names:
                rc.set(n, b"y" * 300)
            for _ in range(30):  # the {hot} keys are read 30 times more
                for k in range(10):
                    rc.get(f"{{hot}}:{k}")

        c = RedisCollector(lc.address, interval_s=0.01, windows=1, sleep=sleep)
        (w,) = list(c.collect())
        c.close()
        rc.close()
    slots = sorted({key_slot(n.encode()) for n in names})
    assert w.bucket_ids.tolist() == slots
    assert w.writes_total == len(names) and w.reads_total == 300
    assert w.bucket_bytes.sum() > 300 * len(names)
    hot = slots.index(key_slot(b"{hot}"))
    assert w.bucket_load[hot] == max(w.bucket_load)  # the LFU counters see the hot slot
    assert w.bucket_load.sum() == pytest.approx(w.requests)
    assert np.all(w.bucket_load > 0)
