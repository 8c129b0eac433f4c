"""A Redis used as a cache, sized by the cache policy regimetune pushes.

regimetune's cache limits count keys; Redis's ``maxmemory`` counts bytes. The limit becomes
``maxmemory = used_memory + (limit_keys - DBSIZE) * bytes_per_key`` (what the server uses
now, plus or minus the keys it holds off the limit), with the bytes per key measured on that
server (once it holds keys) or given, under ``maxmemory-policy allkeys-lru``. Redis's LRU is sampled: each
eviction takes the least recently used of ``maxmemory-samples`` keys drawn at random (plus
a pool of earlier candidates), so it evicts a little off exact LRU; 10 samples come close.

A two-phase policy grows without limit until the cache holds ``high_watermark_keys``, then
holds ``limit_keys``: :meth:`RedisCache.watch` (called periodically) makes the switch, and
once Redis evicts, corrects ``maxmemory`` so that the keys held match the limit (the bytes a
key takes depend on its size and the server's buffers, which a first measure only guesses).
:class:`RedisCacheService` is the reference backend whose pushes also apply the policy.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Literal

from regimetune.backend.service import ReferenceService
from regimetune.backend.settings import BackendSettings
from regimetune.models import CachePolicy, InputError, PolicyVersion
from regimetune.models.errors import BackendError
from regimetune.models.policy import CacheMode

MIN_KEYS_TO_MEASURE = 100
DAMPING = 0.5
"""Share of the gap between the keys held and the limit that one correction closes."""


@dataclass(frozen=True, slots=True)
class CacheState:
    """What the server runs now: ``maxmemory`` (0: no limit) and the policy it enforces."""

    maxmemory: int
    policy: str
    bytes_per_key: float | None
    switched: bool


class RedisCache:
    """Applies cache policies to the Redis at ``address``."""

    def __init__(
        self, address: str, *, bytes_per_key: float | None = None, samples: int | None = None
    ) -> None:
        from regimetune.backend.redis_cluster.topology import Connections, parse_address

        parse_address(address)
        self.address = address
        self.conns = Connections(timeout=10.0)
        self.fixed_bytes_per_key = bytes_per_key
        self.samples = samples
        self.policy: CachePolicy = CachePolicy()
        self.switched = False
        self._bpk = bytes_per_key or 0.0
        self._evicted = 0
        self._lock = threading.Lock()

    def _info(self, section: str) -> dict[str, Any]:
        info: dict[str, Any] = self.conns.call(self.address, "INFO", section)
        return info

    def bytes_per_key(self) -> float:
        """Bytes a key takes on this server, as measured now (``(used_memory -
        used_memory_startup) / DBSIZE``: the server's buffers count a little in it) or as
        given."""
        if self.fixed_bytes_per_key is not None:
            return self.fixed_bytes_per_key
        mem = self._info("memory")
        keys = int(self.conns.call(self.address, "DBSIZE"))
        if keys < MIN_KEYS_TO_MEASURE:
            raise InputError(
                f"{self.address} holds {keys} key(s): too few to measure the bytes per key "
                f"(>= {MIN_KEYS_TO_MEASURE}); give bytes_per_key"
            )
        return (int(mem["used_memory"]) - int(mem["used_memory_startup"])) / keys

    def maxmemory_for(self, keys: int) -> int:
        """What the server uses now, plus or minus the keys it holds off ``keys``."""
        mem = self._info("memory")
        held = int(self.conns.call(self.address, "DBSIZE"))
        self._bpk = self.bytes_per_key()
        return self._floored(int(mem["used_memory"]) + (keys - held) * self._bpk, mem, keys)

    def _floored(self, maxmemory: float, mem: dict[str, Any], limit: int) -> int:
        """Never below what eviction cannot free (the server's overhead) and a tenth of the
        keys: below it, writes fail with OOM."""
        return int(max(maxmemory, int(mem["used_memory_overhead"]) + 0.1 * limit * self._bpk))

    def _set(self, maxmemory: int) -> None:
        self.conns.call(self.address, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        if self.samples is not None:
            self.conns.call(self.address, "CONFIG", "SET", "maxmemory-samples", self.samples)
        self.conns.call(self.address, "CONFIG", "SET", "maxmemory", maxmemory)

    def apply(self, policy: CachePolicy) -> CacheState:
        """Put ``policy`` in force: no limit, a static LRU limit, or a two-phase policy
        (no limit until the high watermark). A switch at a time is not something a Redis
        can watch: it is refused."""
        with self._lock:
            if policy.mode is CacheMode.TWO_PHASE and policy.high_watermark_keys is None:
                raise InputError("a Redis cache switches at a high watermark of keys, not at a time")
            self.policy, self.switched = policy, False
            if policy.mode is CacheMode.LRU:
                assert policy.limit_keys is not None
                self._set(self.maxmemory_for(policy.limit_keys))
            else:
                self._set(0)
        self.watch()
        return self.state()

    def limit_in_force(self) -> int | None:
        """The key limit Redis enforces now (None: no limit)."""
        p = self.policy
        if p.mode is CacheMode.LRU or (p.mode is CacheMode.TWO_PHASE and self.switched):
            return p.limit_keys
        return None

    def calibrate(self, *, tolerance: float = 0.01) -> int | None:
        """While Redis evicts, correct ``maxmemory`` by the keys it holds off the limit: the
        bytes of the keys set aside, and the hash table and allocator, make the first
        figure a guess. Answers the new ``maxmemory`` (None: nothing to correct)."""
        with self._lock:
            limit = self.limit_in_force()
            evicted = int(self._info("stats")["evicted_keys"])
            fresh, self._evicted = evicted > self._evicted, evicted
            if limit is None or not fresh:
                return None
            held = int(self.conns.call(self.address, "DBSIZE"))
            if abs(held - limit) <= tolerance * limit:
                return None
            now = int(self.conns.config(self.address, "maxmemory"))
            maxmemory = self._floored(now + DAMPING * (limit - held) * self._bpk, self._info("memory"), limit)
            self.conns.call(self.address, "CONFIG", "SET", "maxmemory", maxmemory)
            return maxmemory

    def watch(self) -> bool:
        """For a two-phase policy: once the cache holds the high watermark, hold the limit
        from now on; with a limit in force, :meth:`calibrate` it. Answers whether it
        switched now."""
        self.calibrate()
        with self._lock:
            p = self.policy
            if p.mode is not CacheMode.TWO_PHASE or self.switched or p.high_watermark_keys is None:
                return False
            if int(self.conns.call(self.address, "DBSIZE")) < p.high_watermark_keys:
                return False
            assert p.limit_keys is not None
            self._set(self.maxmemory_for(p.limit_keys))
            self.switched = True
            return True

    def state(self) -> CacheState:
        got = self.conns.call(self.address, "CONFIG", "GET", "maxmemory*")
        values = {k.decode(): v.decode() for k, v in got.items()}
        bpk = None
        with contextlib.suppress(InputError):  # too few keys to measure yet
            bpk = self.bytes_per_key()
        return CacheState(int(values["maxmemory"]), values["maxmemory-policy"], bpk, self.switched)

    def hit_ratio(self) -> tuple[int, int]:
        """(keyspace_hits, keyspace_misses) since the server started or ``CONFIG RESETSTAT``."""
        info = self._info("stats")
        return int(info["keyspace_hits"]), int(info["keyspace_misses"])

    def close(self) -> None:
        self.conns.close()


class RedisCacheService(ReferenceService):
    """The reference backend whose policy pushes also size a Redis cache: a version newer
    than the one in force is applied to Redis first, then recorded; if Redis cannot take it
    the push fails (502) and the outbox sends it again."""

    def __init__(self, settings: BackendSettings, cache: RedisCache) -> None:
        super().__init__(settings)
        self.cache = cache

    def apply_policy(self, version: PolicyVersion) -> Literal["applied", "duplicate"]:
        current = self.store.current_policy()
        if current is None or version.version > current.version:
            try:
                self.cache.apply(version.policy.cache)
            except InputError:
                raise
            except Exception as exc:
                raise BackendError(f"Redis cache {self.cache.address}: {exc}") from exc
        return super().apply_policy(version)


__all__ = ["CacheState", "RedisCache", "RedisCacheService"]
