"""Frames for the regimes tests."""

from __future__ import annotations

import numpy as np

from regimetune.models import WindowFrame
from regimetune.models.windows import SCALAR_COLUMNS
from regimetune.regimes.synthetic import PARSPLICE, frame_from_profiles

FLASH, _, PLATEAU_A, PLATEAU_B = PARSPLICE


def steps(*parts: tuple[int, int], seed: int = 0, noise: float = 0.05, window_s: float = 10.0) -> WindowFrame:
    """Abrupt regimes: ``(profile index into PARSPLICE, n_windows)`` pairs, in windows of
    ``window_s`` (10 s: a 300-window regime lasts 50 minutes)."""
    return frame_from_profiles(
        [PARSPLICE[p] for p, _ in parts], [n for _, n in parts], seed=seed, noise=noise, window_s=window_s
    )


def empty_frame() -> WindowFrame:
    cols = {name: np.zeros(0) for name in SCALAR_COLUMNS}
    return WindowFrame(columns=cols, bucket_load=np.zeros((0, 0)), bucket_bytes=np.zeros((0, 0)))
