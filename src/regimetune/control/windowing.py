"""The service's windowing state: the lateness buffer (:mod:`~regimetune.control.lateness`)
holds each window open for late batches, and the windowing aggregator
(:class:`~regimetune.collectors.WindowAggregator`) turns a window the watermark passed into
its statistics. Windows are numbered from time 0, so a window's index is its start over
``window_s`` whatever was pruned; a window nobody reported is skipped, not closed as empty.

The state is snapshotted (:meth:`Windowing.snapshot`) so that a restart replays only the
batches after the last one it covers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from regimetune.control.lateness import Part, WindowBuffer
from regimetune.control.settings import ControlSettings
from regimetune.models import EventBatch, WindowStats

if TYPE_CHECKING:
    from regimetune.collectors import WindowAggregator

log = logging.getLogger(__name__)

SNAPSHOT = "aggregator"
"""The name of the windowing snapshot in the store."""
_FORMAT = 2  # 2: absolute window indices and the open windows of the lateness buffer
_BUFFER = "buffer."  # prefix of the lateness buffer's arrays in the snapshot

Snapshot = tuple[int, dict[str, Any], dict[str, np.ndarray]]
"""(the last batch it covers, metadata, arrays), as the store keeps it."""


def lateness_buffer(settings: ControlSettings) -> WindowBuffer:
    """An empty lateness buffer with the settings' window length and lateness."""
    return WindowBuffer(
        window_s=settings.engine.window_s,
        lateness=settings.ingest.allowed_lateness_windows,
        max_future_s=settings.ingest.max_future_s,
    )


class Windowing:
    """The lateness buffer, the aggregator and the last batch they have taken (``seq``)."""

    def __init__(self, aggregator: WindowAggregator, buffer: WindowBuffer, seq: int = 0) -> None:
        self.aggregator = aggregator
        self.buffer = buffer
        self.seq = seq

    @classmethod
    def restore(cls, settings: ControlSettings, snapshot: Snapshot | None) -> Windowing:
        """From ``snapshot`` when it was taken by this version with the same settings, else
        fresh (the stored batches then rebuild it)."""
        from regimetune.collectors import WindowAggregator

        e = settings.engine
        fresh = cls(
            WindowAggregator(window_s=e.window_s, n_buckets=e.n_buckets, origin=0.0),
            lateness_buffer(settings),
        )
        if snapshot is None:
            return fresh
        seq, meta, arrays = snapshot
        params = meta.get("aggregator", {}).get("params")
        if meta.get("format") != _FORMAT or params != fresh.aggregator.get_params():
            log.warning(
                "the aggregator snapshot was taken with other settings or by an older version (%s); "
                "starting from the stored batches",
                params,
            )
            return fresh
        mine = {n: a for n, a in arrays.items() if not n.startswith(_BUFFER)}
        theirs = {n[len(_BUFFER) :]: a for n, a in arrays.items() if n.startswith(_BUFFER)}
        fresh.buffer.restore(meta["buffer"], theirs)
        return cls(WindowAggregator.from_state(meta["aggregator"], mine), fresh.buffer, seq)

    def snapshot(self) -> Snapshot:
        """The state as the store keeps it (see :meth:`restore`)."""
        meta, arrays = self.aggregator.to_state()
        bmeta, barrays = self.buffer.to_state()
        arrays |= {_BUFFER + n: a for n, a in barrays.items()}
        return self.seq, {"format": _FORMAT, "aggregator": meta, "buffer": bmeta}, arrays

    def add(
        self, seq: int, kind: str, window_start: float, columns: dict[str, np.ndarray]
    ) -> list[WindowStats]:
        """Take admitted batch ``seq``; returns the windows the watermark passed, closed."""
        self.seq = seq
        closed: list[WindowStats] = []
        for k, parts in self.buffer.add(kind, window_start, columns):
            closed.extend(self._close(k, parts))
        return closed

    def _close(self, k: int, parts: list[Part]) -> list[WindowStats]:
        """Window ``k`` from every part that arrived for it; the windows before it that nobody
        reported are skipped in O(1), not closed as empty."""
        agg = self.aggregator
        start = k * agg.window_s
        agg.skip_to(start)
        for kind, cols in parts:
            if kind == "counts":
                agg.push_counts(
                    start,
                    cols["keys"],
                    cols["reads"],
                    cols.get("writes"),
                    bucket_load=cols.get("bucket_load"),
                    bucket_bytes=cols.get("bucket_bytes"),
                )
            elif len(cols.get("ts", ())):
                agg.push(
                    EventBatch.from_columns(
                        ts=cols["ts"], key=cols["key"], op=cols.get("op"), size=cols.get("size")
                    )
                )
        return agg.close_window()

    @property
    def open_windows(self) -> int:
        """Windows held open for late batches."""
        return self.buffer.open_windows


__all__ = ["SNAPSHOT", "Snapshot", "Windowing", "lateness_buffer"]
