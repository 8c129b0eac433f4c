"""Local Redis Clusters for the Redis backend's tests: real ``redis-server`` processes on
free ports, a few thousand keys whose sizes and slots are skewed (hash tags)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from regimetune.backend.redis_cluster.local import LocalCluster, LocalRedis

# Fast failure detection and rejoin (the rejoin delay is the node timeout, at least 0.5 s).
FAST = ("cluster-node-timeout 1000",)


def needs_redis() -> None:
    if not LocalRedis.available():
        pytest.skip("redis-server is not installed")
    pytest.importorskip("redis")


def skewed_keys(n: int, seed: int = 0) -> dict[str, bytes]:
    """``n`` keys: 40% on a handful of hash tags (hot, large slots), the rest spread."""
    rng = np.random.default_rng(seed)
    out: dict[str, bytes] = {}
    for i in range(n):
        key = f"{{hot{int(rng.integers(0, 6))}}}:{i}" if rng.random() < 0.4 else f"k:{i}"
        out[key] = bytes([65 + i % 26]) * int(rng.integers(50, 1500))
    return out


def load_keys(cluster: LocalCluster, keys: dict[str, bytes]) -> None:
    import redis

    rc = redis.RedisCluster(host="127.0.0.1", port=cluster.masters[0].port)
    try:
        pipe = rc.pipeline()
        for k, v in keys.items():
            pipe.set(k, v)
        pipe.execute()
    finally:
        rc.close()


def missing_keys(cluster: LocalCluster, keys: dict[str, bytes], *, via: int = 0) -> list[str]:
    """Keys not readable through a cluster client (entering at master ``via``), or with
    another value."""
    import redis

    rc = redis.RedisCluster(host="127.0.0.1", port=cluster.masters[via].port)
    try:
        names = list(keys)
        got = rc.mget_nonatomic(names)
    finally:
        rc.close()
    return [k for k, v in zip(names, got, strict=True) if v != keys[k]]


def cluster_with_keys(
    masters: int, spares: int, n_keys: int
) -> Iterator[tuple[LocalCluster, dict[str, bytes]]]:
    needs_redis()
    with LocalCluster(masters, spares=spares, config=FAST) as cluster:
        keys = skewed_keys(n_keys)
        load_keys(cluster, keys)
        yield cluster, keys
