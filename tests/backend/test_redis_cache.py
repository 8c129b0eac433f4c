"""A Redis used as a cache, sized by pushed cache policies: maxmemory from the key limit and
the bytes per key measured on the server, the two-phase switch at the high watermark, and
pushes through the reference backend's contract."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from regimetune.backend import create_app, load_settings
from regimetune.backend.redis_cache import RedisCache, RedisCacheService
from regimetune.backend.redis_cluster.local import LocalRedis
from regimetune.models import CachePolicy, InputError

from .redis_helpers import needs_redis

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LocalRedis]:
    needs_redis()
    r = LocalRedis(tmp_path).start()
    try:
        yield r
    finally:
        r.stop()


def fill(server: LocalRedis, n: int, start: int = 0) -> None:
    with server.client() as c:
        pipe = c.pipeline(transaction=False)
        for k in range(start, start + n):
            pipe.set(f"key:{k:08d}", b"v" * 100)
        pipe.execute()


def dbsize(server: LocalRedis) -> int:
    with server.client() as c:
        return int(c.dbsize())


def test_an_lru_limit_holds_about_that_many_keys(server: LocalRedis) -> None:
    cache = RedisCache(server.address)
    with pytest.raises(InputError, match="too few"):
        cache.apply(CachePolicy(mode="lru", limit_keys=500))
    fill(server, 2000)
    state = cache.apply(CachePolicy(mode="lru", limit_keys=1000))
    assert state.policy == "allkeys-lru" and state.maxmemory > 0
    held = []
    for k in range(8):  # new keys keep coming; the watch corrects maxmemory while Redis evicts
        fill(server, 500, start=10_000 * (k + 1))
        cache.watch()
        held.append(dbsize(server))
    assert all(abs(h - 1000) < 150 for h in held[-3:]), held
    unlimited = cache.apply(CachePolicy())
    assert unlimited.maxmemory == 0
    fill(server, 3000, start=30_000)
    assert dbsize(server) > 3000
    cache.close()


def test_two_phase_switches_at_the_high_watermark(server: LocalRedis) -> None:
    cache = RedisCache(server.address, bytes_per_key=160.0)
    cache.apply(CachePolicy(mode="two_phase", limit_keys=500, high_watermark_keys=2000))
    fill(server, 1500)
    assert not cache.watch() and cache.state().maxmemory == 0
    fill(server, 1000, start=5000)
    assert cache.watch() and cache.state().switched and cache.state().maxmemory > 0
    fill(server, 1000, start=9000)
    cache.watch()
    fill(server, 1000, start=12_000)
    assert dbsize(server) < 1000
    with pytest.raises(InputError, match="high watermark"):
        cache.apply(CachePolicy(mode="two_phase", limit_keys=500, switch_time_s=60.0))
    cache.close()


def test_pushed_policies_size_the_cache(server: LocalRedis, tmp_path: Path) -> None:
    settings = load_settings(state=tmp_path / "b.db")
    cache = RedisCache(server.address, bytes_per_key=160.0)
    app = create_app(settings, service=RedisCacheService(settings, cache))

    def push(n: int, limit: int) -> int:
        body = {"version": n, "created_at": 0.0, "policy": {"cache": {"mode": "lru", "limit_keys": limit}}}
        return client.put("/v1/policy", json=body).status_code

    with TestClient(app) as client:
        assert push(2, 1000) == 200
        first = cache.state().maxmemory
        assert push(3, 2000) == 200
        assert cache.state().maxmemory > first
        assert push(1, 10) == 409  # stale: Redis keeps the version in force
        assert cache.state().maxmemory > first
        timed = {
            "version": 4,
            "created_at": 0.0,
            "policy": {"cache": {"mode": "two_phase", "limit_keys": 5, "switch_time_s": 9}},
        }
        refused = client.put("/v1/policy", json=timed)
        assert refused.status_code == 422 and "high watermark" in refused.json()["detail"]
        assert client.get("/v1/policy").json()["version"] == 3
    server.stop()
    with TestClient(app) as client:  # Redis gone: the push is retried later (5xx), not recorded
        assert push(5, 3000) == 502
        assert client.get("/v1/policy").json()["version"] == 3
    cache.close()
