"""Read a bucket table for what-if planning: CSV or JSON rows of ``bucket,load,size,server``.

CSV: a header naming the four columns (any order, extra columns ignored), one bucket per
line; ``load`` any non-negative unit, ``size`` bytes, ``server`` the current host id. JSON: a
list of objects with the same four keys. Errors name the file and the line (CSV) or the
item (JSON, 1-based).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from regimetune.models.errors import InputError, TraceFormatError
from regimetune.models.rescale import Bucket

COLUMNS = ("bucket", "load", "size", "server")


def _row(values: dict[str, Any], source: str, line: int) -> tuple[Bucket, int]:
    out: dict[str, float] = {}
    for col in COLUMNS:
        raw = values.get(col)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise TraceFormatError(f"missing value for {col!r}", source=source, line=line)
        try:
            v = float(raw)
        except (TypeError, ValueError):
            raise TraceFormatError(f"{col} is not a number: {raw!r}", source=source, line=line) from None
        if not math.isfinite(v) or v < 0:
            raise TraceFormatError(
                f"{col} must be a finite number >= 0, got {raw!r}", source=source, line=line
            )
        if col in ("bucket", "server") and v != int(v):
            raise TraceFormatError(f"{col} must be an integer id, got {raw!r}", source=source, line=line)
        out[col] = v
    return Bucket(id=int(out["bucket"]), load=out["load"], size=out["size"]), int(out["server"])


def read_bucket_table(path: str | Path) -> tuple[list[Bucket], dict[int, int], list[int]]:
    """Buckets, placement (bucket -> server) and the sorted server ids of a bucket table."""
    p = Path(path)
    source = str(p)
    if not p.is_file():
        raise InputError(f"no such bucket table: {source}")
    rows: list[tuple[Bucket, int, int]] = []
    text = p.read_text(encoding="utf-8", errors="replace")
    if p.suffix.lower() == ".json":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from None
        if not isinstance(items, list):
            raise TraceFormatError(
                "expected a JSON list of {bucket, load, size, server} objects", source=source
            )
        for k, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                raise TraceFormatError(f"item {k} is not an object", source=source)
            try:
                b, s = _row(item, source, k)
            except TraceFormatError as exc:
                raise TraceFormatError(f"item {k}: {exc.reason}", source=source) from None
            rows.append((b, s, k))
    else:
        reader = csv.DictReader(text.splitlines())
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise TraceFormatError(
                f"header must name {', '.join(COLUMNS)}; missing {', '.join(missing)}", source=source, line=1
            )
        reader.fieldnames = header
        for k, rec in enumerate(reader, start=2):
            b, s = _row(rec, source, k)
            rows.append((b, s, k))
    if not rows:
        raise TraceFormatError("the table has no buckets", source=source)
    seen: dict[int, int] = {}
    for b, _, line in rows:
        if b.id in seen:
            raise TraceFormatError(
                f"bucket {b.id} appears twice (first at {seen[b.id]})", source=source, line=line
            )
        seen[b.id] = line
    buckets = [b for b, _, _ in rows]
    placement = {b.id: s for b, s, _ in rows}
    return buckets, placement, sorted(set(placement.values()))
