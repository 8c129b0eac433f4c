"""WindowBatch and the ingest JSON it is read from (NATS messages) and written to."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from regimetune.collectors.base import WindowBatch, window_from_ingest
from regimetune.models import InputError


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([1, 2], "must be a JSON object"),
        ({"window_start": -1, "counts": {"keys": [], "reads": []}}, "window_start must be"),
        ({"window_start": True, "counts": {"keys": [], "reads": []}}, "window_start must be"),
        ({"window_start": 0}, "exactly one of"),
        ({"window_start": 0, "counts": {"keys": [1]}}, "needs keys and reads"),
        ({"window_start": 0, "counts": {"keys": [1, 2], "reads": [1]}}, "equal lengths"),
        ({"window_start": 0, "counts": {"keys": [-1], "reads": [1]}}, "out of range"),
        ({"window_start": 0, "counts": {"keys": [2**64], "reads": [1]}}, "out of range"),
        ({"window_start": 0, "counts": {"keys": [1.5], "reads": [1]}}, "not an integer"),
        ({"window_start": 0, "counts": {"keys": [1], "reads": [1]}, "extra": 1}, "unknown field"),
        ({"window_start": 5, "events": {"ts": [4.0], "key": [1]}}, "not older than window_start"),
        ({"window_start": 0, "events": {"ts": [1.0], "key": [1], "op": [2]}}, "other than 0"),
        ({"window_start": 0, "events": {"ts": [float("nan")], "key": [1]}}, "not finite"),
        (
            {
                "window_start": 0,
                "counts": {"keys": [1], "reads": [1]},
                "buckets": {"ids": [1, 1], "load": [1, 2], "bytes": [0, 0]},
            },
            "must not repeat",
        ),
    ],
)
def test_malformed_batches_say_why(body: Any, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        window_from_ingest(body)


def test_a_batch_goes_to_the_engine_and_back_to_json() -> None:
    body = {
        "window_start": 60,
        "counts": {"keys": [3, 9], "reads": [5, 1], "writes": [0, 2]},
        "buckets": {"ids": [0, 2], "load": [4.0, 4.0], "bytes": [10.0, 20.0]},
    }
    w = window_from_ingest(body, source_id="m1", length=60)
    assert (w.reads_total, w.writes_total, w.rates) == (6, 2, (0.1, 2 / 60))
    kind, cols = w.ingest_columns()
    assert kind == "counts" and cols["bucket_load"].tolist() == [4.0, 0.0, 4.0]
    assert window_from_ingest(w.to_ingest()).to_ingest() == w.to_ingest()
    assert not w.keys.flags.writeable
    e = window_from_ingest({"window_start": 0, "events": {"ts": [0.5, 0.7], "key": [1, 1], "op": [1, 0]}})
    assert e.ingest_columns()[0] == "events" and e.requests == 2 and np.isnan(e.rates[0])
    assert WindowBatch(window_start=0.0).requests == 0
