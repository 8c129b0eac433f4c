"""A recorded trace prepared for tuning, once: its windows, the regime whose policy is in force
in each, and what each objective simulates (the requests for the cache, the per-bucket window
statistics for the rescaling weights).

**One labelling rule** (:func:`policy_labels`): a window is labelled by the policy the service
would have in force during it, i.e. the regime the detector held online. A change counts from
its *confirmation*, not from the start the detector back-dates it to, so a regime confirmed
``k`` windows late runs the old regime's policy for those ``k`` windows, in the tuning as in
the service. Windows before the first confirmed regime are ``-1``: the policy file's default
is in force there (:data:`NO_REGIME`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from regimetune.models import EventBatch, WindowFrame
from regimetune.models.errors import InputError
from regimetune.models.regimes import RegimeHistory
from regimetune.tuner.cache.trace import CacheTrace, TraceBuilder

NO_REGIME = -1
"""The label of a window before the detector held any regime: the default policy's windows."""
DEFAULT_WINDOW_S = 10.0
DEFAULT_BUCKETS = 64
BATCH_ROWS = 1 << 20
"""Requests prepared for the cache simulator at a time, from events held in memory."""


def policy_labels(history: RegimeHistory) -> np.ndarray:
    """The regime whose policy is in force at each window: the detector's online labels (a
    change counts from its confirmation); :data:`NO_REGIME` before the first regime.

    >>> from regimetune.models.regimes import RegimeHistory
    >>> h = RegimeHistory(labels=np.array([0, 0, 1, 1, 1]), segments=[], changes=[],
    ...                   online_labels=np.array([-1, 0, 0, 0, 1]))
    >>> policy_labels(h).tolist()
    [-1, 0, 0, 0, 1]
    """
    online = history.labels if history.online_labels is None else history.online_labels
    labels = np.asarray(online, dtype=np.int64).copy()
    labels[labels < 0] = NO_REGIME
    return labels


@dataclass(frozen=True, eq=False)
class Workload:
    """What tuning needs of a trace. ``labels[w]`` is the regime in force in the window
    starting at ``window_starts_s[w]`` (:func:`policy_labels`); ``events`` (the requests)
    serve the cache objective, ``frame`` (windows with per-bucket statistics) the weights.
    ``switch_time_s`` and ``suggested_keys`` are the paper's K-means suggestion (the third
    regime's start and its keyspace), tried and compared by the cache tuning;
    ``detector_state`` goes into the policy file, so the service maps the same regime ids.

    Build one with :meth:`from_batches` or :meth:`read`; tests and benchmarks may pass the
    parts (``cache_trace`` instead of ``events``)."""

    labels: np.ndarray
    window_starts_s: np.ndarray
    window_s: float = DEFAULT_WINDOW_S
    events: EventBatch | None = None
    frame: WindowFrame | None = None
    switch_time_s: float | None = None
    suggested_keys: int | None = None
    detector_state: dict[str, Any] | None = None
    name: str | None = None
    trace: CacheTrace | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        lab = np.asarray(self.labels, dtype=np.int64)
        starts = np.asarray(self.window_starts_s, dtype=np.float64)
        if lab.shape != starts.shape or lab.ndim != 1 or len(lab) == 0:
            raise InputError("labels and window starts must be equally long, non-empty vectors")
        if self.frame is not None and len(self.frame) != len(lab):
            raise InputError(f"one label per window is needed: {len(lab)} labels, {len(self.frame)} windows")
        if not self.window_s > 0:
            raise InputError(f"the window length must be positive, got {self.window_s}")
        lab = np.where(lab < 0, NO_REGIME, lab)
        lab.setflags(write=False)
        starts.setflags(write=False)
        object.__setattr__(self, "labels", lab)
        object.__setattr__(self, "window_starts_s", starts)

    # --- building ---------------------------------------------------------------------------

    @classmethod
    def from_batches(
        cls,
        batches: Iterable[EventBatch],
        *,
        window_s: float = DEFAULT_WINDOW_S,
        n_buckets: int = DEFAULT_BUCKETS,
        detector: Any | None = None,
        name: str | None = None,
        keep_events: bool = True,
    ) -> Workload:
        """Window the trace (with ``n_buckets`` per-bucket statistics), detect its regimes
        online with ``detector`` (default: a fresh :class:`OnlineRegimeDetector`; the service
        passes one restored from its state, so the ids are its own) and fit the paper's
        K-means. The batches are read once, one at a time. With ``keep_events`` (what the
        cache report needs) the workload holds them as ``events``; without, each batch's
        requests go to the cache simulator's spool on disk as it is read
        (:class:`~regimetune.tuner.cache.trace.TraceBuilder`) and the batch is let go, so
        memory does not grow with the trace's length."""
        from regimetune.collectors import window_frame

        if not window_s > 0:
            raise InputError(f"the window length must be positive, got {window_s}")
        builder = None if keep_events else TraceBuilder(window_s=window_s)
        kept: list[EventBatch] = []
        take = kept.append if builder is None else builder.push
        read = _Counted(batches)
        try:
            frame = window_frame(read, window_s=window_s, n_buckets=n_buckets, on_batch=take)
        except InputError:
            if read.done and read.events == 0:  # read to its end, and nothing in it
                raise InputError("cannot tune on an empty trace") from None
            raise  # a malformed record: its file and line
        return cls.from_frame(
            frame,
            detector=detector,
            name=name,
            events=EventBatch.concat(kept) if builder is None else None,
            window_s=window_s,
            trace=None if builder is None else builder.finish(),
        )

    @classmethod
    def from_frame(
        cls,
        frame: WindowFrame,
        *,
        detector: Any | None = None,
        name: str | None = None,
        events: EventBatch | None = None,
        window_s: float | None = None,
        trace: CacheTrace | None = None,
    ) -> Workload:
        """From windows alone (enough for the weights; the cache needs ``events`` or the
        prepared ``trace`` too)."""
        from regimetune.regimes import OnlineRegimeDetector, paper_kmeans

        if len(frame) == 0:
            raise InputError("the trace has no windows")
        det = detector if detector is not None else OnlineRegimeDetector()
        labels = policy_labels(det.detect(frame))
        third = suggested = None
        try:
            paper = paper_kmeans(frame)
            third, suggested = paper.third_start_time, paper.suggested_cache_keys
        except InputError:  # too few windows or distinct rates for four regimes
            pass
        return cls(
            labels=labels,
            window_starts_s=np.asarray(frame["start"], dtype=np.float64),
            window_s=float(window_s if window_s is not None else np.median(frame["length"])),
            events=events,
            frame=frame,
            switch_time_s=third,
            suggested_keys=suggested,
            detector_state=det.to_state() if hasattr(det, "to_state") else None,
            name=name,
            trace=trace,
        )

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str],
        *,
        window_s: float = DEFAULT_WINDOW_S,
        n_buckets: int = DEFAULT_BUCKETS,
        detector: Any | None = None,
        keep_events: bool = True,
        **read_options: Any,
    ) -> Workload:
        """Read a trace file (``read_options`` as :func:`regimetune.collectors.read_trace`
        takes them: ``fmt``, ``spec``, ``skip_bad``) and prepare it (``keep_events`` as in
        :meth:`from_batches`)."""
        from regimetune.collectors import read_trace

        return cls.from_batches(
            read_trace(path, **read_options),
            window_s=window_s,
            n_buckets=n_buckets,
            detector=detector,
            name=str(path),
            keep_events=keep_events,
        )

    # --- what the objectives use ------------------------------------------------------------

    @cached_property
    def cache_trace(self) -> CacheTrace:
        """The requests with their LRU stack distances (computed on first use)."""
        if self.trace is not None:
            return self.trace
        if self.events is None:
            raise InputError("cache tuning needs the trace's requests, not only its windows")
        ev, step = self.events, BATCH_ROWS
        return CacheTrace.from_batches(
            (ev.slice(a, a + step) for a in range(0, len(ev), step)), window_s=self.window_s
        )

    @property
    def regime_ids(self) -> tuple[int, ...]:
        """The regimes with windows, in order (:data:`NO_REGIME` not included)."""
        return tuple(int(r) for r in np.unique(self.labels) if r != NO_REGIME)

    def windows_of(self) -> dict[int, int]:
        """Windows per label, :data:`NO_REGIME` included when there are any."""
        ids, counts = np.unique(self.labels, return_counts=True)
        return {int(r): int(n) for r, n in zip(ids, counts, strict=True)}


class _Counted:
    """Batches passed through, counting their events and noting whether they ran out (an
    error raised while reading is not an empty trace)."""

    def __init__(self, batches: Iterable[EventBatch]) -> None:
        self._it = iter(batches)
        self.events = 0
        self.done = False

    def __iter__(self) -> _Counted:
        return self

    def __next__(self) -> EventBatch:
        try:
            b = next(self._it)
        except StopIteration:
            self.done = True
            raise
        self.events += len(b)
        return b


__all__ = ["NO_REGIME", "Workload", "policy_labels"]
