"""A workload read as a stream: each batch is windowed and spooled once, none is kept, and
the tuning's figures are those of a direct LRU simulation of the generated requests."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, generate
from regimetune.models import EventBatch, InputError, Op
from regimetune.regimes import OnlineRegimeDetector
from regimetune.tuner import CacheConfig, RegimePolicy, Workload, tune

WINDOW_S = 10.0


def lru_misses(keys: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Miss flag per request of an LRU cache that holds at most ``caps[i]`` keys at request i."""
    cache: OrderedDict[int, None] = OrderedDict()
    miss = np.zeros(len(keys), dtype=bool)
    for i, (k, c) in enumerate(zip(keys.tolist(), caps.tolist(), strict=True)):
        while len(cache) > c:
            cache.popitem(last=False)
        if k in cache:
            cache.move_to_end(k)
        else:
            miss[i] = True
            cache[k] = None
            while len(cache) > c:
                cache.popitem(last=False)
    return miss


@pytest.fixture(scope="module")
def run() -> list[EventBatch]:
    return list(generate(GeneratorConfig(duration_s=1200, workers=32, seed=3, preset="classic")))


def test_tuning_a_streamed_trace_reports_what_a_direct_lru_simulation_counts(run: list[EventBatch]) -> None:
    taken: list[int] = []

    def stream():  # one pass, one batch at a time
        for b in run:
            taken.append(len(b))
            yield b

    work = Workload.from_batches(
        stream(), window_s=WINDOW_S, detector=OnlineRegimeDetector(min_regime_s=300), keep_events=False
    )
    assert work.events is None and taken == [len(b) for b in run]
    res = tune(work, "cache", config=CacheConfig(budget=6), workers=0)

    events = EventBatch.concat(run)
    keys, ts, n = events.key, events.ts, len(events)
    first_ref = np.sort(np.unique(keys, return_index=True)[1])
    # the tuned policy file, run as the service runs it: each window under its regime's policy
    pf = res.policy_file
    tuned = RegimePolicy(
        policies={r: p.cache for r, p in pf.regimes.items()},
        window_starts_s=work.window_starts_s,
        labels=work.labels,
        default=pf.default.cache,
    )
    caps = tuned.schedule(ts=ts, first_ref=first_ref).cap_at(np.arange(n))
    miss = lru_misses(keys, caps)
    best = res.detail.best
    assert best.misses == int(miss.sum()) and res.report["best"]["hit_ratio"] == 1.0 - miss.sum() / n
    reads = events.op == Op.READ
    win = ((ts - ts[0]) // WINDOW_S).astype(np.int64)
    want = np.bincount(win[miss & reads], minlength=len(best.window_read_misses))
    assert best.window_read_misses.tolist() == want.tolist()
    # baselines: no limit, and the paper's 100K -> 10K two-phase (a switch on the keys held)
    assert res.detail.unlimited.misses == len(first_ref)
    two = res.detail.baselines["two_phase_100k_10k"]
    at = first_ref[100_000 - 1] + 1 if len(first_ref) >= 100_000 else n
    caps2 = np.where(np.arange(n) >= at, 10_000, n)
    assert two.misses == int(lru_misses(keys, caps2).sum())
    assert res.report["trace"]["requests"] == n and res.report["trace"]["keys"] == len(first_ref)


def test_neither_the_batches_a_trace_comes_in_nor_keeping_them_changes_the_tuning(
    run: list[EventBatch],
) -> None:
    events = EventBatch.concat(run)
    small = (events.slice(a, min(a + 997, len(events))) for a in range(0, len(events), 997))
    reports = [
        tune(
            Workload.from_batches(
                batches, window_s=WINDOW_S, detector=OnlineRegimeDetector(min_regime_s=300), keep_events=False
            ),
            "cache",
            config=CacheConfig(budget=4),
            workers=0,
        ).report
        for batches in (iter(run), small)
    ]
    kept = Workload.from_batches(
        iter(run), window_s=WINDOW_S, detector=OnlineRegimeDetector(min_regime_s=300)
    )
    assert kept.events is not None and len(kept.events) == len(events)  # held for the report
    reports.append(tune(kept, "cache", config=CacheConfig(budget=4), workers=0).report)
    assert reports[0] == reports[1] == reports[2]


@pytest.mark.parametrize("keep", [False, True])
def test_an_empty_stream_is_refused_by_name(keep: bool) -> None:
    with pytest.raises(InputError, match="empty trace"):
        Workload.from_batches(iter([]), keep_events=keep)
