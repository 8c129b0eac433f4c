"""Regime detection: features, online clustering with stable ids, stability, paper mode, metrics.

The service calls :meth:`OnlineRegimeDetector.update` per window; offline tools call
:meth:`OnlineRegimeDetector.detect` on a whole frame, or :func:`paper_kmeans` for the
paper's batch K-means.

The names below are imported on first use (PEP 562): the service's settings hold a
:class:`DetectorParams` without loading numba and scipy for the detector's kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from regimetune._lazy import lazy_attributes
from regimetune.models.regimes import RegimeHistory

if TYPE_CHECKING:
    from regimetune.regimes.detector import (
        FORMAT_VERSION,
        SERIES_STEP_S,
        OnlineRegimeDetector,
        detect_series,
        segments_of,
    )
    from regimetune.regimes.features import (
        DEFAULT_FEATURES,
        FEATURES,
        UNITS,
        FeatureExtractor,
        counter_columns,
        counter_rates,
        log_columns,
        series_inputs,
    )
    from regimetune.regimes.metrics import (
        DetectionScore,
        ari,
        change_points,
        detection_delays,
        false_changes_per_hour,
        precision_recall_f1,
        regimes_entered,
        reversals,
        score,
    )
    from regimetune.regimes.paper import PaperResult, paper_kmeans
    from regimetune.regimes.params import DetectorParams

_WHERE = {
    **dict.fromkeys(
        ("FORMAT_VERSION", "SERIES_STEP_S", "OnlineRegimeDetector", "detect_series", "segments_of"),
        "detector",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_FEATURES",
            "FEATURES",
            "UNITS",
            "FeatureExtractor",
            "counter_columns",
            "counter_rates",
            "log_columns",
            "series_inputs",
        ),
        "features",
    ),
    **dict.fromkeys(
        (
            "DetectionScore",
            "ari",
            "change_points",
            "detection_delays",
            "false_changes_per_hour",
            "precision_recall_f1",
            "regimes_entered",
            "reversals",
            "score",
        ),
        "metrics",
    ),
    **dict.fromkeys(("PaperResult", "paper_kmeans"), "paper"),
    "DetectorParams": "params",
}

__getattr__ = lazy_attributes(__name__, _WHERE)

__all__ = [
    "DEFAULT_FEATURES",
    "FEATURES",
    "FORMAT_VERSION",
    "SERIES_STEP_S",
    "UNITS",
    "DetectionScore",
    "DetectorParams",
    "FeatureExtractor",
    "counter_columns",
    "counter_rates",
    "log_columns",
    "series_inputs",
    "OnlineRegimeDetector",
    "PaperResult",
    "RegimeHistory",
    "ari",
    "change_points",
    "detect_series",
    "detection_delays",
    "false_changes_per_hour",
    "paper_kmeans",
    "precision_recall_f1",
    "regimes_entered",
    "reversals",
    "score",
    "segments_of",
]
