"""The synthetic ParSplice workload: its regimes, ratios, keyspace, knobs and reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, bucket_view, generate, window_frame
from regimetune.collectors.generator import keyspace_at, regime_of
from regimetune.models import ConfigError, EventBatch, WindowFrame

SMALL = GeneratorConfig(duration_s=600, workers=32, seed=7)


@pytest.fixture(scope="module")
def small() -> EventBatch:
    return EventBatch.concat(list(generate(SMALL)))


@pytest.fixture(scope="module")
def small_frame(small: EventBatch) -> WindowFrame:
    return window_frame([small], window_s=5.0)


def test_time_ordered_with_labels_0_to_3_in_order(small: EventBatch) -> None:
    assert (np.diff(small.ts) >= 0).all()
    assert small.ts[0] >= 0 and small.ts[-1] < SMALL.duration_s
    assert (np.diff(small.label) >= 0).all()
    assert sorted(set(small.label.tolist())) == [0, 1, 2, 3]
    np.testing.assert_array_equal(small.label, regime_of(SMALL, small.ts))
    assert (small.size == SMALL.value_size).all()


def test_reads_outnumber_writes_50_to_100_times(small: EventBatch) -> None:
    ratio = small.n_reads / small.n_writes
    assert 50 <= ratio <= 100
    for lab in range(4):
        m = small.label == lab
        r = np.count_nonzero(small.op[m] == 0) / max(1, np.count_nonzero(small.op[m] == 1))
        assert 40 <= r <= 110, (lab, r)


def test_regimes_are_visible_in_the_read_rate(small_frame: WindowFrame) -> None:
    f = small_frame
    rate = f.reads_per_s
    mean = [rate[f["label"] == lab].mean() for lab in range(4)]
    assert mean[0] > 1.5 * mean[2]  # flash crowd >> plateau A
    assert mean[2] > 1.3 * mean[3]
    dec = rate[f["label"] == 1]
    k = len(dec) // 4
    assert dec[:k].mean() > 1.3 * dec[-k:].mean()  # the decline declines


def test_flash_crowd_is_few_keys_and_keyspace_grows(small_frame: WindowFrame) -> None:
    f = small_frame
    flash = f["label"] == 0
    late = f["label"] == 3
    assert f["topk_share"][flash].mean() > 0.8
    assert f["active_keys"][flash].mean() < 0.5 * f["active_keys"][late].mean()
    assert f["entropy"][flash].mean() < f["entropy"][late].mean()
    ks = f["keyspace_size"]
    assert (np.diff(ks) >= 0).all()
    assert ks[-1] == pytest.approx(SMALL.keyspace_end, rel=0.05)
    assert ks[len(ks) // 2] < 0.5 * ks[-1]  # convex: most keys are new later, as the rate falls


@pytest.mark.slow
def test_full_size_keyspace_and_late_active_keys_match_the_paper() -> None:
    cfg = GeneratorConfig()
    assert keyspace_at(cfg, np.array([cfg.duration_s]))[0] == pytest.approx(150_000, rel=0.01)
    # a slice late in the run is enough to check ~100 active keys per second and ~600-750 reads/s
    late = GeneratorConfig(duration_s=9000, seed=3)
    b = [x for x in generate(late) if x.ts[0] >= 8000]
    f = window_frame(b)
    assert 60 <= np.median(f["active_keys"]) <= 160
    assert 500 <= np.median(f.reads_per_s) <= 800


def test_same_seed_same_events_other_seed_other_events() -> None:
    cfg = GeneratorConfig(duration_s=120, workers=8, seed=1)
    a = EventBatch.concat(list(generate(cfg)))
    b = EventBatch.concat(list(generate(cfg)))
    c = EventBatch.concat(list(generate(GeneratorConfig(duration_s=120, workers=8, seed=2))))
    for col in EventBatch.COLUMNS:
        np.testing.assert_array_equal(getattr(a, col), getattr(b, col))
    assert len(a) != len(c) or not np.array_equal(a.key, c.key)


def test_growth_stretches_the_time_axis() -> None:
    g1 = GeneratorConfig(duration_s=400, workers=32, seed=1, timescale_s=400)
    g2 = GeneratorConfig(duration_s=800, workers=32, seed=1, timescale_s=400, growth=2.0)
    assert g2.regime_starts() == pytest.approx(tuple(2 * t for t in g1.regime_starts()))
    f1 = window_frame(generate(g1), window_s=10.0)
    f2 = window_frame(generate(g2), window_s=20.0)
    assert len(f1) == len(f2) == 40
    # window i of g2 covers twice the time of window i of g1: same reads/s, same labels, same keyspace
    np.testing.assert_array_equal(f1["label"], f2["label"])
    np.testing.assert_allclose(f2.reads_per_s, f1.reads_per_s, rtol=0.2)
    np.testing.assert_allclose(f2["keyspace_size"], f1["keyspace_size"], rtol=0.1, atol=10)


def test_workers_scale_rates_and_keyspace_and_temperature_widens() -> None:
    base = GeneratorConfig(duration_s=300, workers=16, seed=4)
    double = GeneratorConfig(duration_s=300, workers=32, seed=4)
    hot = GeneratorConfig(duration_s=300, workers=16, seed=4, temperature=3.0)
    n1, n2 = (sum(len(b) for b in generate(c)) for c in (base, double))
    assert n2 / n1 == pytest.approx(2.0, rel=0.05)
    f1, fh = window_frame(generate(base), window_s=20), window_frame(generate(hot), window_s=20)
    assert fh["keyspace_size"][-1] == pytest.approx(3 * f1["keyspace_size"][-1], rel=0.1)
    late = slice(10, None)  # 20 s windows see the whole active set despite the low rate
    assert fh["active_keys"][late].mean() > 1.8 * f1["active_keys"][late].mean()


def test_buckets_and_bucket_view(small: EventBatch) -> None:
    cfg = GeneratorConfig(duration_s=120, workers=8, seed=1, n_buckets=16)
    b = EventBatch.concat(list(generate(cfg)))
    assert b.bucket.min() >= 0 and b.bucket.max() < 16
    buckets = bucket_view([b], 16)
    assert sum(x.load for x in buckets) == len(b)
    assert sum(x.size for x in buckets) == len(np.unique(b.key)) * cfg.value_size
    loads = np.array([x.load for x in buckets])
    np.testing.assert_array_equal(loads, np.bincount(b.bucket, minlength=16))
    with pytest.raises(ConfigError):
        bucket_view([b], 0)


@pytest.mark.parametrize(
    "kw",
    [
        {"duration_s": 0},
        {"growth": -1},
        {"workers": 0},
        {"workers": 2.5},
        {"temperature": float("nan")},
        {"seed": -1},
    ],
)
def test_bad_config_is_refused(kw: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        GeneratorConfig(**kw)  # type: ignore[arg-type]
