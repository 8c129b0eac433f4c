"""Telemetry from a running Redis or Redis Cluster, read with the commands its operators use.

Every ``interval_s`` the collector reads each master's ``INFO`` (``keyspace_hits``,
``keyspace_misses``, ``used_memory``, ``total_commands_processed``, and ``commandstats``,
whose commands are sorted into reads and writes by their ``COMMAND INFO`` flags) and yields
the window between two reads, with the counters' increases (a counter that went down means
the server restarted: its new value is the increase, as Prometheus's ``increase()``).
``reads_total`` counts key lookups (hits + misses: an ``MGET`` of ten keys is ten reads),
``writes_total`` the calls of write commands.

On a cluster, each window also carries per-slot figures (buckets are slots): keys by
pipelined ``CLUSTER COUNTKEYSINSLOT``, bytes by the server-side scan of
:mod:`regimetune.backend.redis_cluster.measure` (``slot_bytes``; it reads every key's
``MEMORY USAGE``, so it costs about a second per few hundred thousand keys), and load: the
window's reads and writes spread over the slots in proportion to the keys' LFU counters when
the masters run an LFU policy, else in proportion to key counts. Redis exposes no per-key
request counts, so windows carry no per-key counts.

Hits, misses, used memory and ops of each window are kept in :attr:`RedisCollector.stats`.

>>> RedisCollector("127.0.0.1:6379").name
'redis'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from regimetune.collectors.base import BaseCollector, WindowBatch, poll
from regimetune.models.errors import SourceError

_COUNTERS = ("keyspace_hits", "keyspace_misses", "total_commands_processed")


@dataclass(frozen=True, slots=True)
class RedisStats:
    """One window's figures summed over the masters (counters are increases)."""

    window_start: float
    hits: int
    misses: int
    ops: int
    reads: int
    writes: int
    used_memory: int

    @property
    def hit_ratio(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else float("nan")


@dataclass(frozen=True, slots=True)
class _Reading:
    at: float
    counters: dict[str, dict[str, int]]  # node -> counter -> value
    used_memory: int


class RedisCollector(BaseCollector):
    """Read ``address`` (``HOST:PORT`` of a Redis, or of any node of a Redis Cluster: every
    master is read) every ``interval_s`` seconds; ``windows`` stops after that many
    (``None``: run until closed). A failed read raises :class:`SourceError` once more than
    ``max_errors`` reads in a row failed (``None``: never); the window after a failed read
    covers the gap."""

    name = "redis"
    notes = (
        "Redis keeps no per-key request counts: windows carry totals and, on a cluster, per-slot figures",
        "per-slot load follows the keys' LFU counters under an LFU maxmemory-policy, else key counts",
    )
    live = True
    window_option = "interval_s"

    def __init__(
        self,
        address: str = "127.0.0.1:6379",
        *,
        interval_s: float = 10.0,
        windows: int | None = None,
        slot_bytes: bool = True,
        align: bool = False,
        max_errors: int | None = 0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from regimetune.backend.redis_cluster.topology import parse_address

        parse_address(address)
        self.address = address
        self.interval_s = interval_s
        self.windows = windows
        self.slot_bytes = slot_bytes
        self.align = align
        self.max_errors = max_errors
        self.clock = clock
        self.sleep = sleep
        self.stats: list[RedisStats] = []
        self.errors = 0
        self.last_error: str | None = None
        self._conns: Any = None
        self._flags: dict[str, str] = {}
        self._cluster: bool | None = None

    # -- reading -----------------------------------------------------------------------------
    def _connections(self) -> Any:
        if self._conns is None:
            from regimetune.backend.redis_cluster.topology import Connections

            self._conns = Connections(timeout=10.0)
        return self._conns

    def _masters(self) -> list[str]:
        conns = self._connections()
        if self._cluster is None:
            info = conns.call(self.address, "INFO", "cluster")
            self._cluster = str(info.get("cluster_enabled", 0)) == "1"
        if not self._cluster:
            return [self.address]
        from regimetune.backend.redis_cluster.topology import read_topology

        return [n.address for n in read_topology(conns, self.address).masters]

    def _kind(self, address: str, command: str) -> str:
        """'read', 'write' or '' (neither) from the command's flags, asked once."""
        if command not in self._flags:
            reply = self._connections().call(address, "COMMAND", "INFO", command)
            doc = reply.get(command) or {} if isinstance(reply, dict) else {}
            flags = {f.decode() if isinstance(f, bytes) else str(f) for f in doc.get("flags", ())}
            self._flags[command] = "write" if "write" in flags else "read" if "readonly" in flags else ""
        return self._flags[command]

    def read(self) -> _Reading:
        """One reading of every master's counters."""
        from regimetune.backend.redis_cluster.topology import RedisUnreachable

        conns = self._connections()
        counters: dict[str, dict[str, int]] = {}
        used = 0
        try:
            for address in self._masters():
                info = conns.call(address, "INFO", "stats")
                mem = conns.call(address, "INFO", "memory")
                cmds = conns.call(address, "INFO", "commandstats")
                c = {k: int(info.get(k, 0)) for k in _COUNTERS}
                c["writes"] = 0
                for key, value in cmds.items():
                    if key.startswith("cmdstat_") and self._kind(address, key[8:]) == "write":
                        c["writes"] += int(value["calls"])
                counters[address] = c
                used += int(mem.get("used_memory", 0))
        except RedisUnreachable as exc:
            raise SourceError(str(exc)) from exc
        return _Reading(self.clock(), counters, used)

    def window(self, before: _Reading, now: _Reading) -> WindowBatch:
        """The window between two readings (and its :class:`RedisStats`)."""
        inc = dict.fromkeys((*_COUNTERS, "writes"), 0)
        for node, c in now.counters.items():
            prev = before.counters.get(node, {})
            for k, v in c.items():
                p = prev.get(k)
                inc[k] += v if p is None or v < p else v - p
        reads = inc["keyspace_hits"] + inc["keyspace_misses"]
        writes = inc["writes"]
        stats = RedisStats(
            window_start=before.at,
            hits=inc["keyspace_hits"],
            misses=inc["keyspace_misses"],
            ops=inc["total_commands_processed"],
            reads=reads,
            writes=writes,
            used_memory=now.used_memory,
        )
        self.stats.append(stats)
        ids, load, size = self._slots(reads + writes) if self._cluster else (None, None, None)
        extra: dict[str, Any] = {}
        if ids is not None:
            extra = {"bucket_ids": ids, "bucket_load": load, "bucket_bytes": size}
        return WindowBatch(
            window_start=before.at,
            length=now.at - before.at,
            reads_total=reads,
            writes_total=writes,
            **extra,
        )

    def _slots(self, requests: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from regimetune.backend.redis_cluster.measure import count_keys, lfu_enabled, measure_slots
        from regimetune.backend.redis_cluster.topology import read_topology

        conns = self._connections()
        topo = read_topology(conns, self.address)
        if self.slot_bytes or lfu_enabled(conns, topo):
            st = measure_slots(conns, topo)
            keys, size, weight = st.keys, st.bytes, st.load
        else:
            keys = count_keys(conns, topo)
            size, weight = np.zeros(keys.shape), keys.astype(np.float64)
        ids = np.flatnonzero(keys).astype(np.int32)
        w = weight[ids]
        share = w / w.sum() if w.sum() > 0 else np.zeros(len(ids))
        return ids, share * requests, size[ids].astype(np.float64)

    # -- the collector protocol ------------------------------------------------------------------
    def collect(self) -> Iterator[WindowBatch]:
        last: _Reading | None = None

        def window(now: _Reading) -> WindowBatch | None:
            nonlocal last
            w = None if last is None else self.window(last, now)
            last = now
            return w

        yield from poll(self, self.read, window)

    def close(self) -> None:
        if self._conns is not None:
            self._conns.close()
            self._conns = None


__all__ = ["RedisCollector", "RedisStats"]
