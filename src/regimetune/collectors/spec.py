"""How to read a trace file: which column is which, what the op strings mean, the time unit.

>>> s = TraceSpec(columns="ts,op,-,key")
>>> s.positions()
{'ts': 0, 'op': 1, 'key': 3}
>>> TraceSpec(columns="ts=time,key=lbn").names()
{'ts': 'time', 'key': 'lbn'}
>>> TraceSpec(time_unit="ms").time_scale
0.001
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from regimetune.models.errors import ConfigError

ROLES: tuple[str, ...] = ("ts", "key", "op", "size", "bucket", "label")
"""The event fields a trace column can map to; ``ts`` and ``key`` are required."""
COUNT_ROLE = "count"
"""One more role, never guessed by position: how many requests a record stands for
(CacheLib's ``op_count``); the record is repeated that many times."""

DEFAULT_READ_OPS: frozenset[str] = frozenset({"get", "read", "r", "0", "28"})
DEFAULT_WRITE_OPS: frozenset[str] = frozenset({"put", "set", "write", "w", "1", "2a"})
"""Op strings, compared case-insensitively (``28``/``2a`` are the SCSI read/write opcodes of
block traces such as CloudPhysics)."""

KEY_TYPES: tuple[str, ...] = ("auto", "int", "string")
"""How a reader takes its key column: ``int`` (unsigned 64-bit integers), ``string`` (hashed
to 64 bits, see :mod:`regimetune.collectors.keys`) or ``auto`` (decided once, from the first
record's key)."""

TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
LATEST_S = 253_402_300_800.0
"""The first second of the year 10000 (Unix time): a later timestamp is not a time but another
column (a key read as the ``ts`` column) or a wrong ``time_unit``."""
_PER_SECOND: dict[str, float] = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
FORMATS: tuple[str, ...] = ("csv", "tsv", "jsonl", "parquet", "oracle")

# Column names recognised in a header when no mapping is given.
_ALIASES: dict[str, tuple[str, ...]] = {
    "ts": ("ts", "time", "timestamp", "clock_time", "t", "op_time"),
    "key": ("key", "obj_id", "lbn", "lba", "id", "object", "state_id"),
    "op": ("op", "type", "operation", "opcode", "req_type"),
    "size": ("size", "obj_size", "bytes", "value_size"),
    "bucket": ("bucket",),
    "label": ("label", "regime"),
    COUNT_ROLE: ("op_count",),
}


def _parse_columns(columns: str) -> tuple[tuple[str, str], ...]:
    """``"ts,op,-,key"`` (roles by position) or ``"ts=time,key=3"`` (role = header name or
    0-based index) into ``((role, where), ...)``; positional entries get their index."""
    parts = [p.strip() for p in columns.split(",")]
    if not any(parts):
        raise ConfigError("--columns is empty")
    out: list[tuple[str, str]] = []
    for i, part in enumerate(parts):
        if part in ("-", ""):
            continue
        if "=" in part:
            role, _, where = (s.strip() for s in part.partition("="))
        else:
            role, where = part, str(i)
        if role not in (*ROLES, COUNT_ROLE):
            raise ConfigError(
                f"unknown column role {role!r} in {columns!r}; use {', '.join((*ROLES, COUNT_ROLE))} or -"
            )
        if not where:
            raise ConfigError(f"column role {role!r} maps to nothing in {columns!r}")
        out.append((role, where))
    roles = [r for r, _ in out]
    dup = {r for r in roles if roles.count(r) > 1}
    if dup:
        raise ConfigError(f"column role(s) {sorted(dup)} given twice in {columns!r}")
    for req in ("ts", "key"):
        if req not in roles:
            raise ConfigError(f"--columns {columns!r} does not say which column is {req!r}")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """The layout of a text or columnar trace.

    ``columns``: ``None`` to guess from the header (or ``ts,key,op,size,bucket,label`` by
    position without one); ``"ts,op,-,key"`` for roles by position (``-`` skips a column);
    ``"ts=time,key=lbn"`` for roles by header name (or 0-based index). ``read_ops`` and
    ``write_ops`` are the op strings (case-insensitive); ``time_unit`` is the unit of the ts
    column (``s``, ``ms``, ``us``, ``ns``); ``header`` is ``auto``, ``yes`` or ``no``;
    ``delimiter`` ``None`` means ``,`` (tab for ``.tsv``). ``ts_tolerance`` (seconds) is how
    far a timestamp may go backwards before the record counts as bad. ``skip_ops`` are op
    strings whose records are dropped quietly (a cache trace's ``delete``), not counted as
    bad. ``key_type`` is ``int``, ``string`` (hashed to 64 bits, see
    :mod:`regimetune.collectors.keys`) or ``auto`` (from the first record's key).
    """

    columns: str | None = None
    read_ops: frozenset[str] = DEFAULT_READ_OPS
    write_ops: frozenset[str] = DEFAULT_WRITE_OPS
    time_unit: str = "s"
    header: str = "auto"
    delimiter: str | None = None
    ts_tolerance: float = 1.0
    skip_ops: frozenset[str] = frozenset()
    key_type: str = "auto"
    _mapping: tuple[tuple[str, str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.time_unit not in TIME_UNITS:
            raise ConfigError(f"unknown time unit {self.time_unit!r}; use one of {', '.join(TIME_UNITS)}")
        if self.header not in ("auto", "yes", "no"):
            raise ConfigError(f"header must be auto, yes or no, got {self.header!r}")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ConfigError(f"delimiter must be one character, got {self.delimiter!r}")
        if not self.ts_tolerance >= 0:
            raise ConfigError(f"ts_tolerance must be >= 0, got {self.ts_tolerance}")
        r = frozenset(o.lower() for o in self.read_ops)
        w = frozenset(o.lower() for o in self.write_ops)
        if not r or not w:
            raise ConfigError("read_ops and write_ops must not be empty")
        both = r & w
        if both:
            raise ConfigError(f"op string(s) {sorted(both)} are both read and write ops")
        skip = frozenset(o.lower() for o in self.skip_ops)
        if skip & (r | w):
            raise ConfigError(f"op string(s) {sorted(skip & (r | w))} are both skipped and counted")
        if self.key_type not in KEY_TYPES:
            raise ConfigError(f"unknown key type {self.key_type!r}; use one of {', '.join(KEY_TYPES)}")
        object.__setattr__(self, "read_ops", r)
        object.__setattr__(self, "write_ops", w)
        object.__setattr__(self, "skip_ops", skip)
        if self.columns is not None:
            object.__setattr__(self, "_mapping", _parse_columns(self.columns))

    def unknown_op(self, value: object) -> str:
        """The reason given for a record whose op is neither a read nor a write op, with the
        options that name this trace's ops.

        >>> TraceSpec().unknown_op("DBMemoryPut")
        "unknown op 'DBMemoryPut' (reads: 0, 28, get, r, read; writes: 1, 2a, put, set, w, write): name this trace's ops with --read-op and --write-op"
        """
        return (
            f"unknown op {value!r} (reads: {', '.join(sorted(self.read_ops))}; writes: "
            f"{', '.join(sorted(self.write_ops))}): name this trace's ops with --read-op and --write-op"
        )

    def bad_times(self, seconds: np.ndarray) -> np.ndarray:
        """Mask of timestamps (already in seconds) that are not times: negative, not finite,
        or past the year 9999 (:data:`LATEST_S`)."""
        return ~((seconds >= 0.0) & (seconds < LATEST_S))

    def time_problem(self, seconds: float, text: object) -> str | None:
        """Why one timestamp (``text`` as read, ``seconds`` once converted) is not a time, or
        None; the message names the options that would fix it.

        >>> TraceSpec().time_problem(-5.0, "-5")
        "timestamp '-5' is negative"
        >>> TraceSpec().time_problem(7.9e18, "7.9e18")
        "timestamp '7.9e18' is after the year 9999 in seconds: is it the time column? (check --columns and --time-unit)"
        """
        if not math.isfinite(seconds):
            return f"timestamp {text!r} is not finite"
        if seconds < 0:
            return f"timestamp {text!r} is negative"
        if seconds >= LATEST_S:
            unit = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
            return (
                f"timestamp {text!r} is after the year 9999 in {unit[self.time_unit]}: is it the time "
                "column? (check --columns and --time-unit)"
            )
        return None

    @property
    def time_scale(self) -> float:
        """Seconds per unit of the ts column."""
        return TIME_UNITS[self.time_unit]

    def to_seconds(self, ts: np.ndarray) -> np.ndarray:
        """Times in this unit as seconds (divides, so 5 us is exactly ``5e-6``)."""
        per = _PER_SECOND[self.time_unit]
        return ts if per == 1.0 else ts / per

    def positions(self) -> dict[str, int]:
        """Roles given by position (``-`` columns skipped)."""
        return {r: int(w) for r, w in self._mapping if w.isdigit()}

    def names(self) -> dict[str, str]:
        """Roles given by header name."""
        return {r: w for r, w in self._mapping if not w.isdigit()}

    def resolve(self, header: list[str] | None, n_cols: int, *, source: str) -> dict[str, int]:
        """Role -> 0-based column index for a file with ``n_cols`` columns and this header
        (``None`` when the file has none)."""
        from regimetune.models.errors import TraceFormatError

        if self.columns is None:
            if header is None:
                return {r: i for i, r in enumerate(ROLES[:n_cols])}
            low = [h.strip().lower() for h in header]
            out: dict[str, int] = {}
            for role, aliases in _ALIASES.items():
                for a in aliases:
                    if a in low:
                        out[role] = low.index(a)
                        break
            for req in ("ts", "key"):
                if req not in out:
                    raise TraceFormatError(
                        f"cannot tell which column is {req!r} from header {header}; pass --columns",
                        source=source,
                        line=1,
                    )
            return out
        out = {}
        for role, where in self._mapping:
            if where.isdigit():
                idx = int(where)
            else:
                if header is None:
                    raise TraceFormatError(
                        f"column {where!r} is named but the file has no header", source=source, line=1
                    )
                names = [h.strip() for h in header]
                if where not in names:
                    raise TraceFormatError(
                        f"no column named {where!r} in header {names}", source=source, line=1
                    )
                idx = names.index(where)
            if idx >= n_cols:
                raise TraceFormatError(
                    f"column {role!r} at position {idx} but the file has {n_cols} columns",
                    source=source,
                    line=1,
                )
            out[role] = idx
        return out


__all__ = [
    "COUNT_ROLE",
    "KEY_TYPES",
    "LATEST_S",
    "DEFAULT_READ_OPS",
    "DEFAULT_WRITE_OPS",
    "FORMATS",
    "ROLES",
    "TIME_UNITS",
    "TraceSpec",
]
