from __future__ import annotations

import pytest

from regimetune.models import InputError
from regimetune.regimes import paper_kmeans
from regimetune.regimes.synthetic import parsplice_like_frame

from .helpers import empty_frame, steps


@pytest.mark.parametrize("stretch", [1.0, 2.0, 4.0])
def test_four_segments_in_time_order(stretch: float) -> None:
    frame = parsplice_like_frame(1200, stretch=stretch, seed=5)
    r = paper_kmeans(frame)
    assert [s.regime_id for s in r.segments] == [0, 1, 2, 3]
    assert all(a.end_window == b.start_window for a, b in zip(r.segments, r.segments[1:], strict=False))
    # the flash crowd has the highest read rate; centroids in (time, reads/s) go forward in time
    assert r.segments[0].summary["mean_reads_per_s"] == max(s.summary["mean_reads_per_s"] for s in r.segments)
    assert [c[0] for c in r.centroids] == sorted(c[0] for c in r.centroids)
    assert r.third_start_window == r.segments[2].start_window
    assert r.suggested_cache_keys == int(frame["keyspace_size"][r.third_start_window])


def test_third_regime_starts_later_when_growth_stretches_the_trace() -> None:
    starts = [
        paper_kmeans(parsplice_like_frame(1200, stretch=s, seed=6)).third_start_window for s in (1, 3, 6)
    ]
    assert starts[0] < starts[1] < starts[2]


def test_k_below_three_has_no_third_regime() -> None:
    r = paper_kmeans(parsplice_like_frame(200, seed=1), k=2)
    assert r.third_start_window is None and r.suggested_cache_keys is None
    assert len(r.segments) == 2


@pytest.mark.parametrize(
    ("frame_fn", "k", "match"),
    [
        (empty_frame, 4, "no windows"),
        (lambda: steps((0, 1)), 4, "single window"),
        (lambda: steps((0, 3)), 4, "cannot be found"),
        (lambda: steps((0, 20)), 0, "positive integer"),
    ],
)
def test_bad_input_gives_a_clear_error(frame_fn, k: int, match: str) -> None:
    with pytest.raises(InputError, match=match):
        paper_kmeans(frame_fn(), k=k)
