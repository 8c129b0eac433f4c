"""Save and load a :class:`WindowFrame` as CSV or Parquet (one row per window; per-bucket
columns ``load_<j>`` and ``bytes_<j>``).

>>> import tempfile, pathlib
>>> from regimetune.collectors.windows import window_frame
>>> b = EventBatch.from_columns(ts=[0.1, 1.2, 1.3], key=[1, 2, 2])
>>> f = window_frame([b], n_buckets=2)
>>> p = pathlib.Path(tempfile.mkdtemp()) / "w.csv"
>>> write_windows(f, p)
>>> g = read_windows(p)
>>> g["active_keys"].tolist(), g.bucket_load.sum(axis=1).tolist()
([1, 1], [1.0, 2.0])
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from regimetune.models.errors import ConfigError, InputError, TraceFormatError
from regimetune.models.events import EventBatch  # noqa: F401  (doctest)
from regimetune.models.windows import COLUMN_DTYPES, SCALAR_COLUMNS, WindowFrame


def _fmt(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise ConfigError(f"windows are written as .csv or .parquet, not {path.name!r}")


def frame_table(frame: WindowFrame) -> pa.Table:
    cols: dict[str, np.ndarray] = {name: np.asarray(frame[name]) for name in SCALAR_COLUMNS}
    for j in range(frame.n_buckets):
        cols[f"load_{j}"] = frame.bucket_load[:, j]
    for j in range(frame.n_buckets):
        cols[f"bytes_{j}"] = frame.bucket_bytes[:, j]
    return pa.table(cols)


def write_windows(frame: WindowFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` to ``path`` (``.csv`` or ``.parquet``)."""
    p = Path(path)
    fmt = _fmt(p)
    if not p.parent.is_dir():
        raise InputError(f"cannot write {p}: directory {p.parent} does not exist")
    t = frame_table(frame)
    if fmt == "csv":
        pacsv.write_csv(t, p, write_options=pacsv.WriteOptions(quoting_style="none"))
    else:
        pq.write_table(t, p)


def read_windows(path: str | os.PathLike[str]) -> WindowFrame:
    """Load a frame written by :func:`write_windows`."""
    p = Path(path)
    fmt = _fmt(p)
    if not p.is_file():
        raise InputError(f"no such windows file: {p}")
    try:
        t = pacsv.read_csv(p) if fmt == "csv" else pq.read_table(p)
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"cannot read windows: {exc}", source=str(p)) from exc
    missing = [c for c in SCALAR_COLUMNS if c not in t.column_names]
    if missing:
        raise TraceFormatError(f"windows file lacks columns {missing}", source=str(p))
    cols = {c: np.asarray(t.column(c).to_numpy(), dtype=COLUMN_DTYPES[c]) for c in SCALAR_COLUMNS}
    nb = sum(1 for c in t.column_names if c.startswith("load_"))
    load = (
        np.column_stack([t.column(f"load_{j}").to_numpy() for j in range(nb)])
        if nb
        else np.zeros((t.num_rows, 0))
    )
    size = (
        np.column_stack([t.column(f"bytes_{j}").to_numpy() for j in range(nb)])
        if nb
        else np.zeros((t.num_rows, 0))
    )
    return WindowFrame(columns=cols, bucket_load=load.astype(float), bucket_bytes=size.astype(float))


__all__ = ["frame_table", "read_windows", "write_windows"]
