"""Keys, bytes and load of every slot, measured on the cluster's masters.

Bytes come from a Lua script run on each master over its own slots, in chunks of
``CHUNK_SLOTS`` (each call holds the node for a few milliseconds): ``MEMORY USAGE`` of every
key of the slot. Load has three sources: ``lfu`` sums the keys' ``OBJECT FREQ`` (the masters
must run an LFU ``maxmemory-policy``; with ``lfu-log-factor 0`` the counter counts accesses,
up to 255 per key); ``keys`` takes each slot's key count (every key equally hot); or the
caller passes per-slot counts a client made. Redis 7.0 has no per-slot load of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from regimetune.backend.redis_cluster.topology import SLOTS, Connections, Topology, iter_ranges
from regimetune.models import InputError

LoadSource = Literal["auto", "lfu", "keys"]
CHUNK_SLOTS = 256

SCAN_SLOTS = """
local out = {}
local with_freq = ARGV[3] == '1'
for s = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  local n = redis.call('CLUSTER', 'COUNTKEYSINSLOT', s)
  if n > 0 then
    local keys = redis.call('CLUSTER', 'GETKEYSINSLOT', s, n)
    local b, f = 0, 0
    for _, k in ipairs(keys) do
      b = b + (redis.call('MEMORY', 'USAGE', k) or 0)
      if with_freq then f = f + redis.call('OBJECT', 'FREQ', k) end
    end
    out[#out + 1] = s; out[#out + 1] = n; out[#out + 1] = b; out[#out + 1] = f
  end
end
return out
"""


@dataclass(frozen=True, slots=True)
class SlotStats:
    """Per-slot arrays of length 16,384 and where the load came from."""

    keys: np.ndarray
    bytes: np.ndarray
    load: np.ndarray
    load_source: str


def lfu_enabled(conns: Connections, topo: Topology) -> bool:
    return all("lfu" in conns.config(node.address, "maxmemory-policy") for node in topo.masters)


def measure_slots(
    conns: Connections,
    topo: Topology,
    *,
    load_source: LoadSource = "auto",
    client_load: np.ndarray | None = None,
) -> SlotStats:
    """Scan every master's slots; ``client_load`` (per-slot counts) replaces the load source."""
    use_lfu = load_source == "lfu" or (
        load_source == "auto" and client_load is None and lfu_enabled(conns, topo)
    )
    if load_source == "lfu" and not lfu_enabled(conns, topo):
        raise InputError("load source 'lfu' needs an LFU maxmemory-policy (e.g. allkeys-lfu) on every master")
    keys = np.zeros(SLOTS, np.int64)
    size = np.zeros(SLOTS, np.float64)
    freq = np.zeros(SLOTS, np.float64)
    for node in topo.masters:
        conn = conns.get(node.address)
        script = conn.register_script(SCAN_SLOTS)
        for a, b in iter_ranges(node.slots, CHUNK_SLOTS):
            flat = script(args=[a, b, "1" if use_lfu else "0"])
            for k in range(0, len(flat), 4):
                s = int(flat[k])
                keys[s] = int(flat[k + 1])
                size[s] = float(flat[k + 2])
                freq[s] = float(flat[k + 3])
    if client_load is not None:
        load = np.asarray(client_load, dtype=np.float64)
        if load.shape != (SLOTS,) or not np.all(np.isfinite(load)) or np.any(load < 0):
            raise InputError(f"a per-slot load is {SLOTS} finite counts >= 0")
        return SlotStats(keys, size, load, "client")
    if use_lfu:
        return SlotStats(keys, size, freq, "lfu")
    return SlotStats(keys, size, keys.astype(np.float64), "keys")


def count_keys(conns: Connections, topo: Topology) -> np.ndarray:
    """Keys per slot by pipelined ``CLUSTER COUNTKEYSINSLOT`` (no key is read)."""
    keys = np.zeros(SLOTS, np.int64)
    for node in topo.masters:
        pipe = conns.get(node.address).pipeline(transaction=False)
        for s in node.slots:
            pipe.execute_command("CLUSTER", "COUNTKEYSINSLOT", s)
        for s, n in zip(node.slots, pipe.execute(), strict=True):
            keys[s] = int(n)
    return keys


__all__ = ["CHUNK_SLOTS", "LoadSource", "SlotStats", "count_keys", "lfu_enabled", "measure_slots"]
