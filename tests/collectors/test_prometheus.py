"""The Prometheus collectors against real servers on 127.0.0.1: a prometheus-client exposition
server (scrapes, counter resets, hot keys) and an HTTP server speaking query_range JSON."""

from __future__ import annotations

import math

import pytest

from regimetune.collectors.keys import hash_key
from regimetune.collectors.prometheus import (
    PrometheusRangeCollector,
    PrometheusScrapeCollector,
    RateTracker,
    parse_exposition,
)
from regimetune.models import ConfigError, InputError
from regimetune.models.errors import SourceError


def _scripted(daemon, steps):  # type: ignore[no-untyped-def]
    """A ``sleep`` that runs the next step of the daemon's script instead of waiting."""
    it = iter(steps)

    def sleep(_: float) -> None:
        next(it)(daemon)

    return sleep


def test_scrapes_become_windows_with_resets_new_series_and_hot_keys(daemon) -> None:  # type: ignore[no-untyped-def]
    daemon.requests.labels("0", "read").inc(10)
    daemon.requests.labels("1", "write").inc(5)
    daemon.hot.labels("k1", "read").inc(7)
    daemon.bytes.labels("0").set(4096)

    def step1(d) -> None:  # type: ignore[no-untyped-def]
        d.requests.labels("0", "read").inc(4)
        d.requests.labels("1", "write").inc(1)
        d.requests.labels("2", "read").inc(3)  # a bucket seen for the first time
        d.hot.labels("k1", "read").inc(2)
        d.hot.labels("17", "write").inc(1)

    def step2(d) -> None:  # type: ignore[no-untyped-def]
        d.restart()
        d.requests.labels("0", "read").inc(20)  # past its old value 14: only _created tells
        d.requests.labels("1", "write").inc(2)  # below its old value 6

    coll = PrometheusScrapeCollector(
        daemon.url, interval_s=0.01, windows=2, top_k=5, sleep=_scripted(daemon, [step1, step2])
    )
    with coll:
        w1, w2 = list(coll.collect())
    assert (w1.reads_total, w1.writes_total) == (7, 1)
    assert dict(zip(w1.bucket_ids.tolist(), w1.bucket_load.tolist(), strict=True)) == {0: 4, 1: 1, 2: 3}
    assert w1.bucket_bytes[w1.bucket_ids.tolist().index(0)] == 4096
    got = dict(zip(w1.keys.tolist(), zip(w1.reads.tolist(), w1.writes.tolist(), strict=True), strict=True))
    assert got == {hash_key("k1"): (2, 0), 17: (0, 1)}
    assert w1.length > 0 and w2.window_start == pytest.approx(w1.window_start + w1.length)
    assert (w2.reads_total, w2.writes_total) == (20, 2)
    assert len(w2.keys) == 0  # the hot-key series restarted and were not touched again
    r, w = w1.rates
    assert r == pytest.approx(7 / w1.length) and w == pytest.approx(1 / w1.length)


def test_a_counter_that_drops_is_a_reset_even_without_created_samples() -> None:
    def text(v: float) -> str:
        return f'# TYPE m counter\nm_total{{bucket="0",op="read"}} {v}\n'

    t = RateTracker()
    assert t.update(parse_exposition(text(100), at=0.0, requests_metric="m")) is None
    assert t.update(parse_exposition(text(130), at=10.0, requests_metric="m")).reads_total == 30  # type: ignore[union-attr]
    assert t.update(parse_exposition(text(12), at=20.0, requests_metric="m")).reads_total == 12  # type: ignore[union-attr]


def test_top_k_bounds_the_hot_keys_per_window() -> None:
    def text(n: int) -> str:
        return "".join(f'h_total{{key="{k}",op="read"}} {n * (k + 1)}\n' for k in range(50))

    t = RateTracker(top_k=3)
    t.update(parse_exposition(text(1), at=0.0, hot_keys_metric="h"))
    w = t.update(parse_exposition(text(2), at=1.0, hot_keys_metric="h"))
    assert w is not None and w.keys.tolist() == [49, 48, 47] and w.reads.tolist() == [50, 49, 48]
    assert w.reads_total == sum(range(1, 51))  # no bucket counters: totals from every hot key


def test_bad_exposition_and_unreachable_daemon_are_clear_errors(daemon) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="malformed Prometheus exposition"):
        parse_exposition('m_total{bucket="x",op="read"} 1\n', at=0.0, requests_metric="m")
    per_key = "".join(f'h_total{{key="u{k}",op="read"}} 1\n' for k in range(11))
    with pytest.raises(InputError, match=r"^the exposition has more than 10 h_total series"):
        parse_exposition(per_key, at=0.0, hot_keys_metric="h", max_series=10)
    with pytest.raises(InputError, match="not after"):
        t = RateTracker()
        t.update(parse_exposition("", at=5.0))
        t.update(parse_exposition("", at=5.0))
    daemon.stop()
    with (
        pytest.raises(SourceError, match="cannot scrape"),
        PrometheusScrapeCollector(daemon.url, windows=1) as c,
    ):
        list(c.collect())
    with pytest.raises(ConfigError):
        list(PrometheusScrapeCollector(daemon.url, interval_s=0).collect())


def _fill(api, times, rate_of) -> None:  # type: ignore[no-untyped-def]
    for b in range(3):
        for op in ("read", "write"):
            api.series["buckets"][(("bucket", str(b)), ("op", op))] = {t: rate_of(b, op, t) for t in times}
    api.series["hot"][(("key", "k1"), ("op", "read"))] = {t: 5.0 for t in times}
    api.series["hot"][(("key", "42"), ("op", "write"))] = {t: 1.4 for t in times}


def test_range_queries_become_one_window_per_step(prom_api) -> None:  # type: ignore[no-untyped-def]
    times = [1000.0 + 60 * i for i in range(1, 26)]
    _fill(prom_api, times, lambda b, op, t: (10.0 * (b + 1) if op == "read" else 1.0) + (t - 1000) / 60)
    coll = PrometheusRangeCollector(prom_api.url, start=1060, end=1000 + 60 * 25, step_s=60, max_points=10)
    with coll:
        ws = list(coll.collect())
    assert [w.window_start for w in ws] == [t - 60 for t in times]
    i = 4  # t = 1300: bucket b reads 10(b+1) + 5, writes 1 + 5
    assert (ws[i].reads_total, ws[i].writes_total) == (75, 18)
    assert ws[i].bucket_load.tolist() == [21.0, 31.0, 41.0]
    assert dict(zip(ws[i].keys.tolist(), ws[i].reads.tolist(), strict=True)) == {hash_key("k1"): 5, 42: 0}
    assert ws[i].writes[ws[i].keys.tolist().index(42)] == 1  # increase() 1.4 rounds to 1
    # 25 steps in pieces of at most 10 points: 3 pieces, 2 queries each
    assert len(prom_api.queries) == 6
    assert all(float(q["step"]) == 60 for q in prom_api.queries)
    assert "increase(storage_bucket_requests_total[60s])" in prom_api.queries[0]["query"]


def test_range_collector_reports_what_prometheus_refused(prom_api) -> None:  # type: ignore[no-untyped-def]
    bad = PrometheusRangeCollector(prom_api.url, start=0, end=60 * 20_000, step_s=60, max_points=20_000)
    with pytest.raises(InputError, match="exceeded maximum resolution"):
        list(bad.collect())
    with pytest.raises(SourceError):
        list(PrometheusRangeCollector("http://127.0.0.1:9", start=0, end=60, timeout_s=1).collect())


def test_increase_of_nan_is_skipped(prom_api) -> None:  # type: ignore[no-untyped-def]
    prom_api.series["buckets"][(("bucket", "0"), ("op", "read"))] = {60.0: math.nan, 120.0: 3.0}
    ws = list(PrometheusRangeCollector(prom_api.url, start=60, end=120, hot_keys_metric=None).collect())
    assert [(w.window_start, w.reads_total, w.length) for w in ws] == [(60.0, 3, 60.0)]
