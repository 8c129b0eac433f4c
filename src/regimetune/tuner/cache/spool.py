"""Per-request columns of a trace kept in files, read back a row range at a time.

A :class:`Spool` is a temporary directory with one raw file per column: rows are appended as
the trace streams in and read back by row range with plain file reads (not a memory map, so
what a simulation has read does not stay in the process's memory). The directory lives as
long as the spool that created it, in the process that created it; a copy sent to a worker
process (pickled, or inherited by a fork) reads the same files and never deletes them, so
workers must see the directory (local processes, or a cluster on the same machine).

>>> s = Spool({"x": np.uint32})
>>> s.append("x", np.arange(5, dtype=np.uint32)); s.append("x", np.arange(2, dtype=np.uint32))
>>> s.finish(); s.rows("x"), s.read("x", 3, 6).tolist()
(7, [3, 4, 0])
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from regimetune.models.errors import InputError


class Spool:
    """Append-only columns ``name -> dtype`` in a temporary directory (in ``directory``,
    default the system's temporary directory)."""

    def __init__(self, columns: dict[str, npt.DTypeLike], directory: str | Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="regimetune-trace-", dir=directory))
        self.dtypes = {n: np.dtype(d) for n, d in columns.items()}
        self._rows = dict.fromkeys(columns, 0)
        self._files: dict[str, Any] | None = {n: open(self.dir / n, "wb") for n in columns}  # noqa: SIM115
        self._owner = weakref.finalize(self, _remove, self.dir, self._files, os.getpid())

    def append(self, name: str, rows: np.ndarray) -> None:
        if self._files is None:
            raise InputError("the spool is finished: no more rows can be appended")
        arr = np.ascontiguousarray(rows, dtype=self.dtypes[name])
        self._files[name].write(arr.data)
        self._rows[name] += len(arr)

    def finish(self) -> None:
        """Close the files for writing; rows can be read from now on."""
        if self._files is not None:
            for f in self._files.values():
                f.close()
            self._files = None

    def drop(self, name: str) -> None:
        """Forget column ``name`` and delete its file."""
        if self._files is not None:
            self._files.pop(name).close()
        (self.dir / name).unlink(missing_ok=True)
        del self.dtypes[name], self._rows[name]

    def __contains__(self, name: str) -> bool:
        return name in self.dtypes

    def rows(self, name: str) -> int:
        return self._rows[name]

    def read(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)`` of column ``name``."""
        if self._files is not None:
            raise InputError("finish the spool before reading it")
        dt = self.dtypes[name]
        lo, hi = max(int(lo), 0), min(int(hi), self._rows[name])
        if hi <= lo:
            return np.empty(0, dtype=dt)
        return np.fromfile(self.dir / name, dtype=dt, count=hi - lo, offset=lo * dt.itemsize)

    def __getstate__(self) -> dict[str, Any]:
        if self._files is not None:
            raise InputError("finish the spool before sending it to another process")
        return {"dir": str(self.dir), "dtypes": self.dtypes, "rows": self._rows}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a reader of the owner's files: it does not delete them
        self.dir, self.dtypes, self._rows = Path(state["dir"]), state["dtypes"], state["rows"]
        self._files = None
        self._owner = None  # type: ignore[assignment]


def _remove(directory: Path, files: dict[str, Any] | None, owner_pid: int) -> None:
    if os.getpid() != owner_pid:  # a forked worker holds the owner's object: not its files
        return
    for f in (files or {}).values():
        f.close()
    shutil.rmtree(directory, ignore_errors=True)


__all__ = ["Spool"]
