"""Regime detection: features, online clustering with stable ids, stability, paper mode, metrics.

The service calls :meth:`OnlineRegimeDetector.update` per window; offline tools call
:meth:`OnlineRegimeDetector.detect` on a whole frame, or :func:`paper_kmeans` for the
paper's batch K-means.
"""

from regimetune.models.regimes import RegimeHistory
from regimetune.regimes.detector import (
    FORMAT_VERSION,
    SERIES_STEP_S,
    OnlineRegimeDetector,
    detect_series,
    segments_of,
)
from regimetune.regimes.features import DEFAULT_FEATURES, FEATURES, UNITS, FeatureExtractor
from regimetune.regimes.metrics import (
    DetectionScore,
    ari,
    change_points,
    detection_delays,
    false_changes_per_hour,
    precision_recall_f1,
    score,
)
from regimetune.regimes.paper import PaperResult, paper_kmeans
from regimetune.regimes.params import DetectorParams

__all__ = [
    "DEFAULT_FEATURES",
    "FEATURES",
    "FORMAT_VERSION",
    "SERIES_STEP_S",
    "UNITS",
    "DetectionScore",
    "DetectorParams",
    "FeatureExtractor",
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
    "score",
    "segments_of",
]
