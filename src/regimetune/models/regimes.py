"""Detected regimes, their history as segments, and confirmed changes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from regimetune.models.errors import InputError


@dataclass(frozen=True, slots=True)
class Regime:
    """A workload regime: a stable id, its centroid in feature space (feature names in
    ``features``), how many windows it has absorbed, and whether it is a ``transition``:
    a regime that moved and never levelled off (a decline, a ramp), whose centroid is where
    it was last seen rather than a level it held."""

    id: int
    centroid: tuple[float, ...]
    features: tuple[str, ...] = ()
    n_windows: int = 0
    transition: bool = False

    @property
    def kind(self) -> str:
        """``transition`` or ``level``, as a segment of this regime names it."""
        return "transition" if self.transition else "level"

    def __post_init__(self) -> None:
        if self.id < 0:
            raise InputError(f"regime id must be >= 0, got {self.id}")
        if self.features and len(self.features) != len(self.centroid):
            raise InputError("regime centroid and feature names differ in length")


#: What a segment's regime is: a steady ``level``, a ``transition`` (it moved and never
#: levelled off), a ``cluster`` of the paper's batch K-means (which has no such notion), or
#: ``""`` where it is not known (a segment read back from the store).
SEGMENT_KINDS = ("level", "transition", "cluster", "")


@dataclass(frozen=True, slots=True)
class RegimeSegment:
    """A maximal run of windows ``[start_window, end_window)`` assigned to one regime,
    spanning ``[start, end)`` seconds, with summary statistics (e.g. mean reads/s) and the
    regime's ``kind`` (:data:`SEGMENT_KINDS`)."""

    regime_id: int
    start_window: int
    end_window: int
    start: float
    end: float
    centroid: tuple[float, ...] = ()
    summary: dict[str, float] = field(default_factory=dict)
    kind: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SEGMENT_KINDS:
            raise InputError(f"segment kind must be one of {SEGMENT_KINDS}, got {self.kind!r}")
        if self.end_window <= self.start_window:
            raise InputError("a segment holds at least one window")
        if self.end < self.start:
            raise InputError("a segment cannot end before it starts")

    @property
    def n_windows(self) -> int:
        return self.end_window - self.start_window


@dataclass(frozen=True, slots=True)
class RegimeChange:
    """A confirmed change from ``from_id`` (``None`` at start) to ``to_id``: the change
    took effect at window ``at_window`` (time ``at_time``) and the detector confirmed it
    at window ``confirmed_window`` (time ``confirmed_time``), so the detection delay is
    ``confirmed_window - at_window`` windows."""

    from_id: int | None
    to_id: int
    at_window: int
    at_time: float
    confirmed_window: int
    confirmed_time: float

    def __post_init__(self) -> None:
        if self.confirmed_window < self.at_window:
            raise InputError("a change cannot be confirmed before it happens")

    @property
    def delay_windows(self) -> int:
        return self.confirmed_window - self.at_window


@dataclass(frozen=True)
class RegimeHistory:
    """What a detector saw over a run of windows: ``labels`` (regime id per window,
    back-dated to when each confirmed change took effect), ``online_labels`` (the regime
    the detector held at each window, i.e. without hindsight), the maximal ``segments`` of
    ``labels``, the confirmed ``changes`` and the ``regimes`` known at the end."""

    labels: np.ndarray
    segments: list[RegimeSegment]
    changes: list[RegimeChange]
    regimes: list[Regime] = field(default_factory=list)
    online_labels: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.labels.setflags(write=False)
        if self.online_labels is not None:
            if len(self.online_labels) != len(self.labels):
                raise InputError("online labels and labels differ in length")
            self.online_labels.setflags(write=False)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def n_regimes(self) -> int:
        return len({int(v) for v in self.labels.tolist() if v >= 0})


__all__ = ["SEGMENT_KINDS", "Regime", "RegimeChange", "RegimeHistory", "RegimeSegment"]
