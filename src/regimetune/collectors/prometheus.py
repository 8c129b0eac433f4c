"""Telemetry from Prometheus: a daemon's ``/metrics`` exposition, or a Prometheus server.

What a storage daemon exposes (names are options; these are the defaults):

- ``storage_bucket_requests_total{bucket="3",op="read"}``: a counter per bucket and op, the
  cardinality a real deployment can afford (buckets x 2, never a series per key);
- ``storage_hot_key_requests_total{key="...",op="read"}`` (optional): counters of a bounded
  top-k of hot keys; a key that enters the top-k gets a fresh series (counting from 0);
  ``key`` is an integer or any string (hashed as trace keys are, see ``keys``);
- ``storage_bucket_bytes{bucket="3"}`` (optional): a gauge of the bytes each bucket holds.

:class:`RateTracker` turns consecutive scrapes into windows: the increase of each counter
between two scrapes, with counter resets handled as Prometheus's ``increase()`` does (a value
below the last one means the counter restarted from 0, so the increase is the new value); a
``_created`` sample that changed (prometheus_client exposes one per counter) also marks a
restart, even when the counter has already climbed past its old value. A series that appears
after the first scrape counts from 0. The first scrape is only the baseline.

:class:`PrometheusScrapeCollector` scrapes every ``interval_s``; :class:`PrometheusRangeCollector`
asks a Prometheus server's ``/api/v1/query_range`` for ``increase(...)`` per step instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from regimetune.collectors.base import BaseCollector, WindowBatch, poll
from regimetune.collectors.keys import hash_key, is_int_key
from regimetune.models.errors import ConfigError, InputError, SourceError

READ_OPS = frozenset({"read", "get", "r"})
WRITE_OPS = frozenset({"write", "put", "set", "w"})


def _op(value: str | None) -> int | None:
    v = (value or "").lower()
    return 0 if v in READ_OPS else 1 if v in WRITE_OPS else None


def _key(label: str) -> int:
    return int(label) if is_int_key(label) else hash_key(label)


@dataclass(frozen=True, slots=True)
class Scrape:
    """One parsed exposition: counter values (and ``_created`` times, ``nan`` if absent) per
    ``(bucket, op)`` and per ``(key, op)``, and bytes per bucket, taken at ``time``."""

    time: float
    buckets: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    hot: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    bucket_bytes: dict[int, float] = field(default_factory=dict)


def parse_exposition(
    text: str,
    *,
    at: float,
    requests_metric: str = "storage_bucket_requests",
    hot_keys_metric: str | None = "storage_hot_key_requests",
    bytes_metric: str | None = "storage_bucket_bytes",
    max_series: int = 100_000,
) -> Scrape:
    """Parse Prometheus text exposition with ``prometheus_client.parser``; other metrics are
    ignored. A malformed exposition raises :class:`InputError`, and so does one with more than
    ``max_series`` bucket or hot-key series (a hot-key metric must be a bounded top-k, not a
    series per key: that would be unbounded memory here and in Prometheus).

    >>> s = parse_exposition('r_total{bucket="2",op="read"} 7\\n', at=1.0, requests_metric="r")
    >>> s.buckets
    {(2, 0): (7.0, nan)}
    """
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {
        f"{requests_metric}_total": "buckets",
        f"{requests_metric}_created": "buckets_created",
    }
    if hot_keys_metric:
        wanted |= {f"{hot_keys_metric}_total": "hot", f"{hot_keys_metric}_created": "hot_created"}
    if bytes_metric:
        wanted[bytes_metric] = "bytes"
    values: dict[str, dict[tuple[int, int], float]] = {v: {} for v in wanted.values()}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                slot = wanted.get(s.name)
                if slot is None:
                    continue
                lab = s.labels
                if slot == "bytes":
                    values[slot][(int(lab["bucket"]), 0)] = float(s.value)
                    continue
                op = _op(lab.get("op"))
                if op is None:
                    continue
                ident = int(lab["bucket"]) if slot.startswith("buckets") else _key(lab["key"])
                values[slot][(ident, op)] = float(s.value)
                if len(values[slot]) > max_series:
                    raise InputError(
                        f"the exposition has more than {max_series} {s.name} series: "
                        "expose per-bucket counters and a bounded top-k of hot keys"
                    )
    except InputError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"malformed Prometheus exposition: {exc!r}") from exc

    def joined(total: str, created: str) -> dict[tuple[int, int], tuple[float, float]]:
        c = values.get(created, {})
        return {k: (v, c.get(k, math.nan)) for k, v in values[total].items()}

    return Scrape(
        time=at,
        buckets=joined("buckets", "buckets_created"),
        hot=joined("hot", "hot_created") if hot_keys_metric else {},
        bucket_bytes={b: v for (b, _), v in values.get("bytes", {}).items()},
    )


def _increase(
    now: dict[tuple[int, int], tuple[float, float]], before: dict[tuple[int, int], tuple[float, float]]
) -> dict[tuple[int, int], float]:
    """Per series, what the counter added since ``before`` (resets handled)."""
    out: dict[tuple[int, int], float] = {}
    for k, (v, created) in now.items():
        prev = before.get(k)
        if prev is None:
            out[k] = v  # a new series counts from 0
            continue
        pv, pcreated = prev
        restarted = v < pv or (not math.isnan(created) and not math.isnan(pcreated) and created != pcreated)
        out[k] = v if restarted else v - pv
    return out


class RateTracker:
    """Turns consecutive :class:`Scrape` s into :class:`WindowBatch` es (``update`` returns
    ``None`` for the first, which is the baseline). ``top_k`` bounds the hot keys per window."""

    def __init__(self, *, top_k: int = 100) -> None:
        self.top_k = top_k
        self._last: Scrape | None = None

    def update(self, scrape: Scrape) -> WindowBatch | None:
        last, self._last = self._last, scrape
        if last is None:
            return None
        if scrape.time <= last.time:
            raise InputError(f"scrape at {scrape.time} is not after the previous one at {last.time}")
        per_bucket = _increase(scrape.buckets, last.buckets)
        per_key = _increase(scrape.hot, last.hot)
        totals = [0.0, 0.0]
        load: dict[int, float] = {}
        for (b, op), d in per_bucket.items():
            totals[op] += d
            load[b] = load.get(b, 0.0) + d
        if not per_bucket:  # no bucket counters: the hot keys are all there is
            for (_, op), d in per_key.items():
                totals[op] += d
        ids = np.array(sorted(load | dict.fromkeys(scrape.bucket_bytes, 0.0)), dtype=np.int32)
        keys, reads, writes = _top_keys(per_key, self.top_k)
        return WindowBatch(
            window_start=last.time,
            length=scrape.time - last.time,
            keys=keys,
            reads=reads,
            writes=writes,
            reads_total=round(totals[0]),
            writes_total=round(totals[1]),
            bucket_ids=ids,
            bucket_load=np.array([load.get(int(b), 0.0) for b in ids]),
            bucket_bytes=np.array([scrape.bucket_bytes.get(int(b), 0.0) for b in ids]),
        )


def _top_keys(per_key: dict[tuple[int, int], float], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` keys with the most requests in the window, as keys, reads, writes."""
    counts: dict[int, list[float]] = {}
    for (key, op), d in per_key.items():
        if d > 0:
            counts.setdefault(key, [0.0, 0.0])[op] += d
    best = sorted(counts.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:k]
    keys = np.array([kk for kk, _ in best], dtype=np.uint64)
    reads = np.array([round(c[0]) for _, c in best], dtype=np.uint32)
    writes = np.array([round(c[1]) for _, c in best], dtype=np.uint32)
    return keys, reads, writes


class PrometheusScrapeCollector(BaseCollector):
    """Scrape a daemon's ``/metrics`` every ``interval_s`` seconds and yield one window per
    interval (after a first, baseline scrape); ``windows`` stops after that many (``None``:
    run until closed). ``client`` (an ``httpx.Client``) and ``clock``/``sleep`` may be given.

    ``align`` scrapes on multiples of ``interval_s`` on the clock, so that each window starts
    where the service's window of that length starts. A failed scrape (daemon unreachable or
    answering an error) raises :class:`SourceError` once more than ``max_errors`` scrapes in a
    row failed (``None``: never); until then it is counted in ``errors`` and retried at the
    next tick, and the window after it covers the gap (no request is lost, the window is
    longer)."""

    name = "prometheus-scrape"
    notes = ("per-key counts cover only the hot keys the daemon exposes; totals come from bucket counters",)
    live = True
    window_option = "interval_s"

    def __init__(
        self,
        url: str,
        *,
        interval_s: float = 10.0,
        windows: int | None = None,
        top_k: int = 100,
        requests_metric: str = "storage_bucket_requests",
        hot_keys_metric: str | None = "storage_hot_key_requests",
        bytes_metric: str | None = "storage_bucket_bytes",
        timeout_s: float = 5.0,
        align: bool = False,
        max_errors: int | None = 0,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.interval_s = interval_s
        self.windows = windows
        self.top_k = top_k
        self.requests_metric = requests_metric
        self.hot_keys_metric = hot_keys_metric
        self.bytes_metric = bytes_metric
        self.timeout_s = timeout_s
        self.align = align
        self.max_errors = max_errors
        self.client = client
        self.clock = clock
        self.sleep = sleep
        self.errors = 0
        self.last_error: str | None = None
        self._own: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self.client is not None:
            return self.client
        if self._own is None:
            self._own = httpx.Client(timeout=self.timeout_s)
        return self._own

    def scrape(self) -> Scrape:
        """Fetch and parse the exposition once."""
        try:
            resp = self._http().get(self.url)
            resp.raise_for_status()
        except httpx.HTTPError as exc:
            raise SourceError(f"cannot scrape {self.url}: {exc}") from exc
        return parse_exposition(
            resp.text,
            at=self.clock(),
            requests_metric=self.requests_metric,
            hot_keys_metric=self.hot_keys_metric,
            bytes_metric=self.bytes_metric,
        )

    def collect(self) -> Iterator[WindowBatch]:
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0, got {self.top_k}")
        yield from poll(self, self.scrape, RateTracker(top_k=self.top_k).update)

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None


class PrometheusRangeCollector(BaseCollector):
    """Windows from a Prometheus server: ``increase()`` of the request counters per bucket and
    op (and the top-k hot keys) over each ``step_s`` from ``start`` to ``end`` (unix seconds),
    through ``/api/v1/query_range``; the range is asked in pieces of at most ``max_points``
    steps (Prometheus refuses more than 11,000 points per series). A value at time ``t``
    becomes the window ``[t - step_s, t)``."""

    name = "prometheus-range"
    notes = ("increase() extrapolates to the window's edges: counts are rounded to integers",)
    window_option = "step_s"

    def __init__(
        self,
        base_url: str,
        *,
        start: float,
        end: float,
        step_s: float = 60.0,
        top_k: int = 100,
        requests_metric: str = "storage_bucket_requests",
        hot_keys_metric: str | None = "storage_hot_key_requests",
        max_points: int = 10_000,
        timeout_s: float = 30.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.start = start
        self.end = end
        self.step_s = step_s
        self.top_k = top_k
        self.requests_metric = requests_metric
        self.hot_keys_metric = hot_keys_metric
        self.max_points = max_points
        self.timeout_s = timeout_s
        self.client = client
        self._own: httpx.Client | None = None

    def queries(self) -> dict[str, str]:
        """The PromQL this collector asks (``buckets`` and, with hot keys, ``hot``)."""
        step = f"{self.step_s:g}s"
        q = {"buckets": f"sum by (bucket, op) (increase({self.requests_metric}_total[{step}]))"}
        if self.hot_keys_metric:
            q["hot"] = (
                f"topk({self.top_k}, sum by (key, op) (increase({self.hot_keys_metric}_total[{step}])))"
            )
        return q

    def _http(self) -> httpx.Client:
        if self.client is not None:
            return self.client
        if self._own is None:
            self._own = httpx.Client(timeout=self.timeout_s)
        return self._own

    def _range(self, query: str, start: float, end: float) -> list[dict[str, Any]]:
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{self.step_s:g}"}
        url = f"{self.base_url}/api/v1/query_range"
        try:
            resp = self._http().get(url, params=params)
        except httpx.HTTPError as exc:
            raise SourceError(f"cannot query {url}: {exc}") from exc
        try:
            body = resp.json()
        except ValueError as exc:
            raise InputError(f"{url} answered {resp.status_code} without JSON") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            why = body.get("error", body) if isinstance(body, dict) else body
            raise InputError(f"Prometheus refused {query!r}: {why}")
        data = body.get("data") or {}
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise InputError(f"Prometheus answered {query!r} with no matrix")
        result: list[dict[str, Any]] = data["result"]
        return result

    def collect(self) -> Iterator[WindowBatch]:
        if not self.step_s > 0 or not self.end >= self.start:
            raise ConfigError("need step_s > 0 and end >= start")
        if self.max_points < 1:
            raise ConfigError(f"max_points must be >= 1, got {self.max_points}")
        queries = self.queries()
        t = self.start
        while t <= self.end:
            piece_end = min(self.end, t + (self.max_points - 1) * self.step_s)
            per_time: dict[float, dict[str, dict[tuple[int, int], float]]] = {}
            for what, q in queries.items():
                for series in self._range(q, t, piece_end):
                    _gather(series, what, per_time)
            for at in sorted(per_time):
                yield self._window(at, per_time[at])
            t = piece_end + self.step_s

    def _window(self, at: float, got: dict[str, dict[tuple[int, int], float]]) -> WindowBatch:
        buckets = got.get("buckets", {})
        totals = [0.0, 0.0]
        load: dict[int, float] = {}
        for (b, op), v in buckets.items():
            totals[op] += v
            load[b] = load.get(b, 0.0) + v
        keys, reads, writes = _top_keys(got.get("hot", {}), self.top_k)
        ids = np.array(sorted(load), dtype=np.int32)
        return WindowBatch(
            window_start=at - self.step_s,
            length=self.step_s,
            keys=keys,
            reads=reads,
            writes=writes,
            reads_total=round(totals[0]),
            writes_total=round(totals[1]),
            bucket_ids=ids,
            bucket_load=np.array([load[int(b)] for b in ids]),
            bucket_bytes=np.zeros(len(ids)),
        )

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None


def _gather(
    series: dict[str, Any], what: str, per_time: dict[float, dict[str, dict[tuple[int, int], float]]]
) -> None:
    """File one matrix series' values under their timestamps."""
    labels = series.get("metric") or {}
    op = _op(labels.get("op"))
    if op is None:
        return
    try:
        ident = int(labels["bucket"]) if what == "buckets" else _key(str(labels["key"]))
        points = [(float(t), float(v)) for t, v in series.get("values", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"malformed query_range series {labels}: {exc!r}") from exc
    for t, v in points:
        if math.isfinite(v):
            slot = per_time.setdefault(t, {}).setdefault(what, {})
            slot[(ident, op)] = slot.get((ident, op), 0.0) + v


__all__ = [
    "PrometheusRangeCollector",
    "PrometheusScrapeCollector",
    "RateTracker",
    "Scrape",
    "parse_exposition",
]
