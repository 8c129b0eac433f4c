from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from regimetune.models import (
    CacheMode,
    CachePolicy,
    EventBatch,
    InputError,
    PufferscaleWeights,
    RegimeSegment,
    RescaleKind,
    RescaleOperation,
    WindowFrame,
    WindowStats,
)


def test_event_batch_is_read_only_and_checks_lengths() -> None:
    b = EventBatch.from_columns(ts=[0.0, 1.0], key=[1, 2], op=[0, 1])
    with pytest.raises(ValueError):
        b.ts[0] = 5.0
    with pytest.raises(InputError, match="rows"):
        EventBatch(ts=b.ts, key=b.key[:1], op=b.op, size=b.size, bucket=b.bucket, label=b.label)
    both = EventBatch.concat([b, b.slice(1, 2)])
    assert both.key.tolist() == [1, 2, 2]
    assert (both.n_reads, both.n_writes) == (1, 2)


def test_window_frame_round_trips_records() -> None:
    recs = [
        WindowStats(
            index=i,
            start=float(i),
            length=1.0,
            reads=10 * i,
            writes=i,
            active_keys=i + 1,
            keyspace_size=2 * i + 1,
            topk_share=0.5,
            entropy=1.0,
            bucket_load=(1.0, 2.0),
            bucket_bytes=(3.0, 4.0),
        )
        for i in range(3)
    ]
    frame = WindowFrame.from_records(recs)
    assert list(frame.records()) == recs
    assert np.allclose(frame.reads_per_s, [0, 10, 20])
    assert frame.n_buckets == 2


def test_window_rejects_nonsense() -> None:
    with pytest.raises(InputError):
        WindowStats(
            index=0,
            start=0.0,
            length=0.0,
            reads=0,
            writes=0,
            active_keys=0,
            keyspace_size=0,
            topk_share=0.0,
            entropy=0.0,
        )
    with pytest.raises(InputError):
        WindowStats(
            index=0,
            start=float("nan"),
            length=1.0,
            reads=0,
            writes=0,
            active_keys=0,
            keyspace_size=0,
            topk_share=0.0,
            entropy=0.0,
        )


def test_a_segment_kind_is_one_the_tables_know() -> None:
    seg = RegimeSegment(regime_id=1, start_window=0, end_window=3, start=0.0, end=30.0, kind="transition")
    assert seg.kind == "transition" and RegimeSegment(0, 0, 1, 0.0, 10.0).kind == ""  # unknown
    with pytest.raises(InputError, match="segment kind must be one of"):
        RegimeSegment(regime_id=1, start_window=0, end_window=3, start=0.0, end=30.0, kind="decline")


def test_weights_follow_the_paper_convention() -> None:
    assert PufferscaleWeights.preset("ldt") == PufferscaleWeights(w_load=1, w_data=1, w_time=1)
    with pytest.raises(ValidationError):
        PufferscaleWeights(w_load=0.5, w_data=0.5, w_time=1)
    with pytest.raises(ValidationError):
        PufferscaleWeights(w_load=1, w_data=0, w_time=1)
    w = PufferscaleWeights.normalised(2.0, 1.0, 3.0)
    assert (w.w_load, w.w_data, w.w_time) == (1.0, 0.5, 3.0)


def test_cache_policy_shapes() -> None:
    CachePolicy(mode=CacheMode.TWO_PHASE, limit_keys=10, high_watermark_keys=100_000)
    with pytest.raises(ValidationError):
        CachePolicy(mode=CacheMode.TWO_PHASE, limit_keys=10)
    with pytest.raises(ValidationError):
        CachePolicy(mode=CacheMode.LRU)
    with pytest.raises(ValidationError):
        CachePolicy(mode=CacheMode.UNLIMITED, limit_keys=5)


def test_rescale_operation_shapes() -> None:
    RescaleOperation(kind=RescaleKind.DECOMMISSION, servers=(1, 2))
    with pytest.raises(ValidationError):
        RescaleOperation(kind=RescaleKind.DECOMMISSION, servers=(1, 1))
    with pytest.raises(ValidationError):
        RescaleOperation(kind=RescaleKind.COMMISSION, count=0)
