"""Presets for two published key-value cache traces with anonymised string keys.

**Twitter** (``twitter/cache-trace``, Yang et al., OSDI 2020): headerless CSV, one request
per line, ``timestamp,anonymized key,key size,value size,client id,operation,TTL``, time in
seconds. ``get``/``gets`` are reads; ``set``/``add``/``replace``/``cas``/``append``/
``prepend``/``incr``/``decr`` are writes; ``delete`` (the only other op the README lists) is
skipped quietly: it neither loads the cache like a read nor fills it like a write. Any other
op is a bad record. The event size is the value size.

**CacheLib** (``cachebench``'s key-value replay, ``KVReplayGenerator``): CSV with a header
naming the columns; ``key``, ``op`` and ``size`` are required there, ``op_time``,
``op_count``, ``key_size``, ``ttl`` and ``cache_hits`` optional, in any order. Assumed here:
``op_time`` is present (a trace without times cannot be windowed; such a file is refused with
its name) and in milliseconds (cachebench's default ``timestampFactor`` of 1000); ops
``GET``/``GET_LEASE`` are reads, ``SET``/``SET_LEASE`` writes, ``DELETE`` skipped, as
cachebench treats them (it refuses other ops, and so do we); ``op_count`` (default 1) repeats
the request that many times, and 0 is a bad record (cachebench refuses it too); the event size
is ``size``. ``key_size`` (cachebench pads keys to it) does not change the key's identity and
is ignored.

Options given with a preset (``--time-unit``, ``--read-op``, ...) override its fields.

>>> TwitterReader.preset.columns, CacheLibReader.preset.time_unit
('ts,key,-,size,-,op,-', 'ms')
"""

from __future__ import annotations

from regimetune.collectors.readers import CsvReader
from regimetune.collectors.spec import TraceSpec

TWITTER = TraceSpec(
    columns="ts,key,-,size,-,op,-",
    read_ops=frozenset({"get", "gets"}),
    write_ops=frozenset({"set", "add", "replace", "cas", "append", "prepend", "incr", "decr"}),
    skip_ops=frozenset({"delete"}),
    header="no",
    key_type="string",
)
CACHELIB = TraceSpec(
    columns=None,  # by header name: op_time, key, op, size, op_count (see _ALIASES in spec)
    read_ops=frozenset({"get", "get_lease"}),
    write_ops=frozenset({"set", "set_lease"}),
    skip_ops=frozenset({"delete"}),
    header="yes",
    time_unit="ms",
    key_type="string",
)


class TwitterReader(CsvReader):
    """Twitter's cache traces (Twemcache/Pelikan, 2020), plain or ``.zst``."""

    name = "twitter"
    preset = TWITTER
    notes = ("twitter: delete requests are skipped; get/gets are reads, other ops writes",)


class CacheLibReader(CsvReader):
    """CacheLib's key-value replay traces (cachebench ``KVReplayGenerator`` CSV)."""

    name = "cachelib"
    preset = CACHELIB
    notes = ("cachelib: op_time read as milliseconds, DELETE skipped, op_count repeats a request",)


__all__ = ["CACHELIB", "TWITTER", "CacheLibReader", "TwitterReader"]
