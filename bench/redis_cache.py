"""The cache simulator against a real Redis used as a cache, on a real trace.

The CloudPhysics block trace (``../shared/data/cloudphysics``, oracleGeneral, 113,872
requests over 48,974 blocks) is replayed through a local ``redis-server`` sized by
:class:`regimetune.backend.redis_cache.RedisCache` for an LRU limit of ``limit_keys`` keys:
``maxmemory`` from the limit and the bytes per key measured on the same build and settings
(a probe fill of ``limit_keys`` keys of the replay's key and value sizes on a fresh server;
each run then gets a fresh server), ``allkeys-lru``, corrected while
the replay runs so that Redis holds ``limit_keys`` keys once it evicts (``RedisCache.watch``
every 2,000 requests). Each request is a
read-through: ``GET``, and on a miss ``SET`` (one Lua call per request, pipelined). Redis's
hit ratio comes from ``INFO stats`` (``keyspace_hits / (hits + misses)``); the simulator's
(exact LRU on the same keys, the same limit) from :func:`regimetune.tuner.cache.simulate`.

Limits: ``--fractions`` of the distinct keys (the tuner's limit sits in that range on this
trace's regimes), at ``maxmemory-samples`` 10 and 5. The difference is in points (Redis
minus simulator).

    nice .venv/bin/python bench/redis_cache.py

The last line is JSON: {"trace": ..., "rows": [{limit_keys, samples, sim, redis, diff_points,
evicted, bytes_per_key}, ...]}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from regimetune.backend.redis_cache import RedisCache
from regimetune.backend.redis_cluster.local import LocalRedis
from regimetune.collectors.readers import read_trace
from regimetune.models import CachePolicy, EventBatch
from regimetune.tuner.cache import CacheTrace, simulate

TRACE = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "data"
    / "cloudphysics"
    / "cloudPhysicsIO.oracleGeneral.bin"
)

PIPELINE = 100
"""Requests per pipeline: a client's buffers count in ``used_memory``, so a long pipeline
would take room from the keys."""

WATCH_EVERY = 2000

READ_THROUGH = """
if ARGV[1] == '1' then redis.call('SET', KEYS[1], ARGV[2]) return 0 end
if redis.call('GET', KEYS[1]) then return 1 end
redis.call('SET', KEYS[1], ARGV[2])
return 0
"""


def name(key: int) -> str:
    return f"{key:016x}"


def probe_bytes_per_key(root: Path, n: int, value: bytes) -> float:
    """On a fresh server: the memory ``n`` keys shaped as the replay's take (written as the
    replay writes them), per key."""
    r = LocalRedis(root).start()
    try:
        with r.client() as c:
            empty = int(c.info("memory")["used_memory"])
            script = c.register_script(READ_THROUGH)
            for a in range(0, n, PIPELINE):
                pipe = c.pipeline(transaction=False)
                for k in range(a, min(a + PIPELINE, n)):
                    script(keys=[name(10**12 + k)], args=["1", value], client=pipe)
                pipe.execute()
            return (int(c.info("memory")["used_memory"]) - empty) / n
    finally:
        r.stop()


def replay(
    r: LocalRedis, cache: RedisCache, keys: np.ndarray, writes: np.ndarray, value: bytes
) -> tuple[int, int, int]:
    """The trace through the cache; every ``WATCH_EVERY`` requests the cache's watch (which
    corrects ``maxmemory`` to the key limit once Redis evicts)."""
    with r.client() as c:
        c.config_resetstat()
        script = c.register_script(READ_THROUGH)
        for a in range(0, len(keys), PIPELINE):
            if a % WATCH_EVERY == 0:
                cache.watch()
            pipe = c.pipeline(transaction=False)
            for k in range(a, min(a + PIPELINE, len(keys))):
                script(keys=[name(int(keys[k]))], args=["1" if writes[k] else "0", value], client=pipe)
            pipe.execute()
        info = c.info("stats")
        return int(info["keyspace_hits"]), int(info["keyspace_misses"]), int(info["evicted_keys"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--fractions", default="0.02,0.05,0.1,0.2,0.4")
    ap.add_argument("--samples", default="10,5")
    ap.add_argument("--value-bytes", type=int, default=64)
    args = ap.parse_args()
    if not LocalRedis.available():
        sys.exit("redis-server is not installed")
    if not args.trace.exists():
        sys.exit(f"no trace at {args.trace}")
    batches = list(read_trace(args.trace, fmt="oracle"))
    events = EventBatch.concat(batches)
    trace = CacheTrace.from_batches(batches)
    writes = events.op.astype(bool)
    reads = int((~writes).sum())
    value = b"v" * args.value_bytes
    print(f"{args.trace.name}: {len(events)} requests ({reads} reads), {trace.n_keys} keys", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for frac in (float(f) for f in args.fractions.split(",")):
            limit = max(1, round(frac * trace.n_keys))
            sim = simulate(trace, CachePolicy(mode="lru", limit_keys=limit))
            sim_hit = 1.0 - sim.read_misses / reads
            bpk = probe_bytes_per_key(Path(tmp), limit, value)
            for samples in (int(s) for s in args.samples.split(",")):
                server = LocalRedis(Path(tmp)).start()  # a fresh server for every run
                try:
                    cache = RedisCache(server.address, bytes_per_key=bpk, samples=samples)
                    cache.apply(CachePolicy(mode="lru", limit_keys=limit))
                    t = time.perf_counter()
                    hits, misses, evicted = replay(server, cache, events.key, writes, value)
                    with server.client() as c:
                        held = int(c.dbsize())
                    cache.close()
                finally:
                    server.stop()
                red_hit = hits / (hits + misses)
                row = {
                    "limit_keys": limit,
                    "fraction": frac,
                    "samples": samples,
                    "sim": sim_hit,
                    "redis": red_hit,
                    "diff_points": 100 * (red_hit - sim_hit),
                    "keys_held_at_end": held,
                    "evicted": evicted,
                    "bytes_per_key": bpk,
                    "replay_s": time.perf_counter() - t,
                }
                rows.append(row)
                print(
                    f"limit {limit:6d} keys ({frac:.0%})  samples {samples:2d}  simulator {sim_hit:.4f}  "
                    f"Redis {red_hit:.4f}  diff {row['diff_points']:+.2f} pts  held {held} keys at the end  "
                    f"({bpk:.0f} B/key, {row['replay_s']:.1f} s)",
                    flush=True,
                )
    worst = {
        s: max(abs(r["diff_points"]) for r in rows if r["samples"] == s) for s in {r["samples"] for r in rows}
    }
    print(f"largest |difference| by maxmemory-samples: {worst}")
    print(
        json.dumps(
            {
                "trace": args.trace.name,
                "requests": len(events),
                "keys": trace.n_keys,
                "rows": rows,
                "max_abs_diff_points": worst,
            }
        )
    )


if __name__ == "__main__":
    main()
