from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from regimetune.models import InputError, WindowFrame, WindowStats
from regimetune.regimes.features import FEATURES, UNITS, FeatureExtractor, counter_columns, counter_rates
from regimetune.regimes.synthetic import parsplice_like_frame


def _window(i: int, length: float, keyspace: int, **counts: float) -> WindowStats:
    """Window ``i`` of ``length`` seconds with ``keyspace`` keys seen so far; one read on
    one key unless ``counts`` says otherwise."""
    stats = {"reads": 1, "writes": 0, "active_keys": 1, "topk_share": 1.0, "entropy": 0.0} | counts
    return WindowStats(index=i, start=length * i, length=length, keyspace_size=keyspace, **stats)  # type: ignore[arg-type]


def test_online_and_batch_paths_agree_bit_for_bit() -> None:
    frame = parsplice_like_frame(300, seed=4)
    batch = FeatureExtractor(lag=4).transform(frame)
    online_fx = FeatureExtractor(lag=4)
    online = np.array([online_fx.transform_row(w) for w in frame.records()])
    np.testing.assert_array_equal(batch, online)
    chunked_fx = FeatureExtractor(lag=4)
    chunked = np.vstack([chunked_fx.transform(frame.slice(a, a + 37)) for a in range(0, 300, 37)])
    np.testing.assert_array_equal(batch, chunked)


def test_variances_agree_bit_for_bit_between_paths_too() -> None:
    frame = parsplice_like_frame(120, seed=6)
    _, batch = FeatureExtractor(lag=3).transform_with_variance(frame)
    fx = FeatureExtractor(lag=3)
    online = np.array([fx.transform_row_with_variance(w)[1] for w in frame.records()])
    np.testing.assert_array_equal(batch, online)


def test_each_feature_and_its_count_variance_are_their_definitions() -> None:
    # one window of 10 s: 400 reads, 8 writes, 3 active keys, top-k share 0.9, 1.2 bits;
    # the keyspace grew from 100 to 130 keys over the one window of lag
    def window(i: int, keyspace: int) -> WindowStats:
        return _window(i, 10.0, keyspace, reads=400, writes=8, active_keys=3, topk_share=0.9, entropy=1.2)

    def rate_var(rate: float, exposure: float) -> float:  # Poisson, delta method, one pseudo-count
        return (rate + 1.0 / exposure) / (exposure * (1.0 + rate) ** 2)

    requests = 409.0
    want = {  # value, variance, before units
        "log_reads": (np.log1p(40.0), rate_var(40.0, 10.0)),
        "log_writes": (np.log1p(0.8), rate_var(0.8, 10.0)),
        "log_growth": (np.log1p(3.0), rate_var(3.0, 10.0)),
        "log_active": (np.log1p(3.0), rate_var(3.0, 1.0)),
        "topk_share": (0.9, max(0.9 * 0.1, 0.25 / requests) / requests),
        "entropy": (1.2, np.log2(4.0) ** 2 / (4.0 * requests)),
        "log_rw": (np.log(401.0 / 9.0), 1.0 / 401.0 + 1.0 / 9.0),
    }
    units = np.array([UNITS[n] for n in FEATURES])
    row_fx, batch_fx = FeatureExtractor(lag=1), FeatureExtractor(lag=1)
    row_fx.transform_row(window(0, 100))
    x, v = row_fx.transform_row_with_variance(window(1, 130))
    np.testing.assert_allclose(x, [want[n][0] for n in FEATURES] / units, rtol=1e-12)
    np.testing.assert_allclose(v, [want[n][1] for n in FEATURES] / units**2, rtol=1e-12)
    bx, bv = batch_fx.transform_with_variance(WindowFrame.from_records([window(0, 100), window(1, 130)]))
    np.testing.assert_array_equal(bx[1], x)
    np.testing.assert_array_equal(bv[1], v)


def test_growth_is_new_keys_per_second_over_the_lag() -> None:
    fx = FeatureExtractor(lag=2, features=("log_growth",))
    sizes = [10, 20, 40, 40]
    out = [fx.transform_one(_window(i, 2.0, s))["log_growth"] for i, s in enumerate(sizes)]
    # first window: no earlier size, so no rate (a missing value); then (20-10)/2,
    # (40-10)/4, (40-20)/4 keys per second
    np.testing.assert_allclose(out, np.log1p([np.nan, 5.0, 7.5, 5.0]) / UNITS["log_growth"])


def test_features_do_not_depend_on_trace_length() -> None:
    short = parsplice_like_frame(200, seed=2)
    long = parsplice_like_frame(4000, seed=2)
    # the same statistics give the same coordinates: no scale learnt from the trace
    a = FeatureExtractor().transform(short.slice(0, 20))
    b = FeatureExtractor().transform(long.slice(0, 20))
    assert np.abs(np.nanmean(a, 0) - np.nanmean(b, 0)).max() < 0.5


def test_unknown_or_duplicate_feature_names_are_refused() -> None:
    with pytest.raises(InputError, match="unknown features"):
        _ = FeatureExtractor(features=("log_reads", "bogus")).names
    with pytest.raises(InputError, match="twice"):
        _ = FeatureExtractor(features=("log_reads", "log_reads")).names


def test_feature_dicts_must_be_complete_and_finite() -> None:
    fx = FeatureExtractor()
    good = dict.fromkeys(FEATURES, 1.0)
    assert fx.vector(good).shape == (len(FEATURES),)
    with pytest.raises(InputError, match="missing"):
        fx.vector({"log_reads": 1.0})
    with pytest.raises(InputError, match="finite"):
        fx.vector({**good, "entropy": float("nan")})
    with pytest.raises(InputError, match="numbers"):
        fx.vector({**good, "entropy": "high"})


def test_non_finite_window_statistics_are_refused() -> None:
    frame = parsplice_like_frame(50, seed=0)
    cols = {k: v.copy() for k, v in frame.columns.items()}
    cols["entropy"][10] = np.nan
    bad = type(frame)(columns=cols, bucket_load=frame.bucket_load, bucket_bytes=frame.bucket_bytes)
    with pytest.raises(InputError, match="entropy"):
        FeatureExtractor().transform(bad)

    window = next(iter(frame.records()))
    first = FeatureExtractor().transform_row(window)  # the first window's growth is missing, not bad
    growth = FEATURES.index("log_growth")
    assert np.isnan(first[growth]) and np.isfinite(np.delete(first, growth)).all()
    with pytest.raises(InputError, match="entropy"):
        FeatureExtractor().transform_row(dataclasses.replace(window, entropy=float("inf")))


def test_state_round_trip_continues_identically() -> None:
    frame = parsplice_like_frame(100, seed=1)
    fx = FeatureExtractor(lag=3)
    fx.transform(frame.slice(0, 50))
    clone = FeatureExtractor.from_state(fx.to_state())
    np.testing.assert_array_equal(fx.transform(frame.slice(50, 100)), clone.transform(frame.slice(50, 100)))


def test_counters_are_columns_that_never_decrease_and_do_not_stay_flat() -> None:
    rng = np.random.default_rng(1)
    ramp = np.arange(50.0) + rng.normal(0, 2.0, 50)  # a noisy gauge that trends up, not a counter
    total = np.cumsum(rng.poisson(3.0, 50)).astype(float)  # requests served; some rows add none
    x = np.c_[ramp, total, np.full(50, 7.0), -np.cumsum(np.ones(50))]
    assert counter_columns(x) == (1,)
    assert counter_columns(x[:2]) == ()  # too short to tell
    rates = counter_rates(x, [1])
    np.testing.assert_array_equal(rates[1:, 1], np.diff(total))
    assert rates[0, 1] == rates[1, 1]  # the first row has no predecessor: it takes the second's
    np.testing.assert_array_equal(rates[:, [0, 2, 3]], x[:, [0, 2, 3]])
    assert x[0, 1] == total[0]  # a copy: the input is left alone
    # a series of one column may come as (n,)
    assert counter_columns(total) == (0,)
    np.testing.assert_array_equal(counter_rates(total, [0]), rates[:, 1])


def test_series_inputs_reads_the_named_columns_in_log_space_once_each() -> None:
    from regimetune.regimes import series_inputs

    cols = np.c_[np.arange(1.0, 11.0), np.full(10, 3.0), np.linspace(1.0, 2.0, 10)]
    read = series_inputs(cols, log=np.array([2, 0, 2]), counters=False)
    assert read.log == (2, 0)  # indices, once each, in the order named
    np.testing.assert_allclose(read.values[:, [0, 2]], np.log(cols[:, [0, 2]]))
    np.testing.assert_array_equal(read.values[:, 1], cols[:, 1])
    assert series_inputs(cols, counters=False).log == ()  # every column raw by default
    with pytest.raises(InputError, match="the indices of columns"):
        series_inputs(cols, log="rate")  # type: ignore[arg-type]


def test_log_columns_keeps_missing_values_and_names_a_value_without_a_log() -> None:
    from regimetune.regimes import log_columns

    x = np.array([[1.0, 1.0], [np.nan, -2.0], [np.e**2, 0.0]])
    out = log_columns(x, [0])
    assert out[0, 0] == 0.0 and np.isnan(out[1, 0]) and out[2, 0] == pytest.approx(2.0)
    assert out[:, 1].tolist() == [1.0, -2.0, 0.0] and x[0, 0] == 1.0  # a copy: the input is kept
    with pytest.raises(InputError, match=r"'lat' has -2 at row 1"):
        log_columns(x, [1], names=("rate", "lat"))
