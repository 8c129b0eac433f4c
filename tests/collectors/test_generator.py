"""The synthetic ParSplice workload: its regimes, ratios, keyspace, knobs and reproducibility."""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import pytest
from scipy.ndimage import median_filter

from regimetune.collectors import GeneratorConfig, bucket_view, generate, window_frame
from regimetune.collectors.generator import PRESETS, keyspace_at, read_rate, regime_of, shape_of
from regimetune.collectors.presets import REALISTIC_PRESETS, build_shape
from regimetune.models import ConfigError, EventBatch, WindowFrame

SMALL = GeneratorConfig(duration_s=600, workers=32, seed=7, preset="classic")


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
    cfg = GeneratorConfig(preset="classic")
    assert keyspace_at(cfg, np.array([cfg.duration_s]))[0] == pytest.approx(150_000, rel=0.01)
    # a slice late in the run is enough to check ~100 active keys per second and ~600-750 reads/s
    late = GeneratorConfig(duration_s=9000, seed=3, preset="classic")
    b = [x for x in generate(late) if x.ts[0] >= 8000]
    f = window_frame(b)
    assert 60 <= np.median(f["active_keys"]) <= 160
    assert 500 <= np.median(f.reads_per_s) <= 800


@pytest.mark.parametrize("preset", PRESETS)
def test_same_seed_same_events_other_seed_other_events(preset: str) -> None:
    cfg = GeneratorConfig(duration_s=700, workers=8, seed=1, preset=preset)
    a = EventBatch.concat(list(generate(cfg)))
    b = EventBatch.concat(list(generate(cfg)))
    c = EventBatch.concat(list(generate(GeneratorConfig(duration_s=700, workers=8, seed=2, preset=preset))))
    for col in EventBatch.COLUMNS:
        np.testing.assert_array_equal(getattr(a, col), getattr(b, col))
    assert len(a) != len(c) or not np.array_equal(a.key, c.key)


def test_the_classic_preset_is_the_original_generator_event_for_event() -> None:
    # digest of the events of the generator before the presets existed (commit 8797101)
    cfg = GeneratorConfig(
        duration_s=700, workers=16, seed=5, n_buckets=4, temperature=1.5, growth=1.2, preset="classic"
    )
    h = hashlib.sha256()
    for b in generate(cfg):
        for col in ("ts", "key", "op", "size", "bucket", "label"):
            h.update(getattr(b, col).tobytes())
    assert h.hexdigest() == "65838663b02a59240a0f8a11a6395bb5ed8991ba4daa44648d394fc7f4573919"
    assert GeneratorConfig().preset == "parsplice"


def test_growth_stretches_the_time_axis() -> None:
    g1 = GeneratorConfig(duration_s=400, workers=32, seed=1, timescale_s=400, preset="classic")
    g2 = GeneratorConfig(duration_s=800, workers=32, seed=1, timescale_s=400, growth=2.0, preset="classic")
    assert g2.regime_starts() == pytest.approx(tuple(2 * t for t in g1.regime_starts()))
    f1 = window_frame(generate(g1), window_s=10.0)
    f2 = window_frame(generate(g2), window_s=20.0)
    assert len(f1) == len(f2) == 40
    # window i of g2 covers twice the time of window i of g1: same reads/s, same labels, same keyspace
    np.testing.assert_array_equal(f1["label"], f2["label"])
    np.testing.assert_allclose(f2.reads_per_s, f1.reads_per_s, rtol=0.2)
    np.testing.assert_allclose(f2["keyspace_size"], f1["keyspace_size"], rtol=0.1, atol=10)


def test_workers_scale_rates_and_keyspace_and_temperature_widens() -> None:
    base = GeneratorConfig(duration_s=300, workers=16, seed=4, preset="classic")
    double = GeneratorConfig(duration_s=300, workers=32, seed=4, preset="classic")
    hot = GeneratorConfig(duration_s=300, workers=16, seed=4, temperature=3.0, preset="classic")
    n1, n2 = (sum(len(b) for b in generate(c)) for c in (base, double))
    assert n2 / n1 == pytest.approx(2.0, rel=0.05)
    f1, fh = window_frame(generate(base), window_s=20), window_frame(generate(hot), window_s=20)
    assert fh["keyspace_size"][-1] == pytest.approx(3 * f1["keyspace_size"][-1], rel=0.1)
    late = slice(10, None)  # 20 s windows see the whole active set despite the low rate
    assert fh["active_keys"][late].mean() > 1.8 * f1["active_keys"][late].mean()


def test_buckets_and_bucket_view(small: EventBatch) -> None:
    cfg = GeneratorConfig(duration_s=120, workers=8, seed=1, n_buckets=16, preset="classic")
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
        {"preset": "nope"},
        {"preset": "classic", "start_s": 3.0},
        {"start_s": -1.0},
    ],
)
def test_bad_config_is_refused(kw: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        GeneratorConfig(**kw)  # type: ignore[arg-type]


# -- the realistic presets: the facts of shared/design/real-workload-facts.md, with tolerances ------
HOUR = 3600.0


@functools.cache
def run(preset: str, seed: int = 3, workers: int = 256) -> tuple[GeneratorConfig, EventBatch, WindowFrame]:
    """An hour of ``preset`` and its 10 s windows (the last one ending at the trace's end)."""
    cfg = GeneratorConfig(duration_s=HOUR, workers=workers, seed=seed, preset=preset)
    b = EventBatch.concat(list(generate(cfg)))
    return cfg, b, window_frame([b], window_s=10.0, end=cfg.trace_end)


def _whole(f: WindowFrame) -> slice:
    return slice(1, len(f) - 1)  # the edge windows cover part of a window length


@pytest.mark.parametrize("preset", REALISTIC_PRESETS)
def test_consecutive_requests_reuse_one_key_and_reads_outnumber_writes(preset: str) -> None:
    cfg, b, _ = run(preset)
    reuse = np.mean(b.key[1:] == b.key[:-1])
    assert 0.87 <= reuse <= 0.996, reuse
    assert 50 <= b.n_reads / b.n_writes <= 100
    for lab in np.unique(b.label):
        m = b.label == lab
        r = np.count_nonzero(b.op[m] == 0) / max(1, np.count_nonzero(b.op[m] == 1))
        assert 45 <= r <= 110, (lab, r)
    assert (np.diff(b.ts) >= 0).all() and (np.diff(b.label) >= 0).all()  # labels only move forward
    assert len(cfg.regime_names()) == len(np.unique(b.label))


def test_parsplice_flash_crowd_is_one_or_two_keys_flipping_window_to_window() -> None:
    cfg, b, f = run("parsplice")
    w = _whole(f)
    active, lab = f["active_keys"][w], f["label"][w]
    # a spike of the active-key count (a minute, 3-5x) may fall in the flash crowd: leave it out
    t = f["start"][w][:, None] - cfg.trace_start + np.linspace(0, 10, 21)[None, :]
    spiked = (shape_of(cfg).spike(t) > 1).any(axis=1)
    assert (active[spiked & (lab == 0)] >= 3).all()
    flash = active[(lab == 0) & ~spiked][:-1]  # the last window may reach into the decline
    assert len(flash) >= 25  # 10-20 % of the run
    assert np.isin(flash, (1, 2)).all()
    assert 0.1 <= (flash == 1).mean() <= 0.9 and 0.1 <= (flash == 2).mean() <= 0.9
    assert np.count_nonzero(np.diff(flash) != 0) >= 5  # flips, not one switch
    assert len(np.unique(b.key[b.label == 0])) <= 12  # a handful of keys, spikes included
    later = active[lab >= 2]
    assert np.median(later) > 20 * np.median(flash)  # the active keyspace widens afterwards


def test_parsplice_shape_flash_decline_in_steps_then_plateaus_apart() -> None:
    cfg, _, f = run("parsplice")
    starts = np.asarray(cfg.regime_starts()) - cfg.trace_start
    assert 0.10 * HOUR <= starts[0] <= 0.20 * HOUR
    rate, lab = f.reads_per_s[_whole(f)], f["label"][_whole(f)]
    med = [np.median(rate[lab == i]) for i in range(4)]
    assert med[0] > med[1] > med[2] > med[3]
    gap = 1 - med[3] / med[2]
    assert 0.10 <= gap <= 0.20, gap
    assert 200 <= med[2] <= 360 and 550 <= med[0] <= 750  # reads/s at 256 workers
    # the step between the plateaus is sharp: within a minute
    t = cfg.regime_starts()[2]
    p1, p2 = read_rate(cfg, np.array([t - 30.0, t + 30.0]))
    assert p2 / p1 == pytest.approx(1 - gap, abs=0.03)
    # the decline falls in uneven steps: drops of 5-15 % between shelves of unequal length
    s = shape_of(cfg)
    a, z = np.searchsorted(s.knots_t, [starts[0], starts[1]])
    r = s.knots_rate[a : z + 1]
    drops = 1 - r[1:] / r[:-1]
    drops = drops[drops > 1e-9]
    assert len(drops) >= 4 and ((drops > 0.049) & (drops < 0.151)).all(), drops
    dt = np.diff(s.knots_t[a : z + 1])
    shelves = dt[(np.diff(r) == 0) & (dt > 0)]
    assert len(shelves) == len(drops) - 1 and shelves.max() > 1.3 * shelves.min()
    assert (shelves > 2 * (dt.sum() - shelves.sum()) / len(drops)).all()  # drops are short


@pytest.mark.parametrize("seed", range(6))
def test_a_long_runs_decline_has_shelves_of_a_few_minutes(seed: int) -> None:
    # "short shelves of a few minutes" on a 4-hour run too, not a decline cut in ~7 long steps
    s = build_shape("parsplice", seed=seed, timescale_s=4 * HOUR, duration_s=4 * HOUR, workers=256)
    a, z = np.searchsorted(s.knots_t, s.bounds[:2])
    dt, dr = np.diff(s.knots_t[a : z + 1]), np.diff(s.knots_rate[a : z + 1])
    shelves = dt[(dr == 0) & (dt > 0)]
    assert len(shelves) >= 6 and 60 <= np.median(shelves) <= 360 and shelves.max() <= 600, shelves


def test_fast_decay_drops_at_once_then_a_plateau_drifts_then_holds() -> None:
    cfg, _, _ = run("fast-decay")
    t = cfg.trace_start + np.array([0.0, 0.02, 0.1, 0.3]) * HOUR
    r0, r2, r10, r30 = read_rate(cfg, t)
    end = float(read_rate(cfg, np.array([cfg.trace_end]))[0])
    assert r2 < 0.95 * r0  # no flat flash crowd
    assert r0 - r10 > 0.7 * (r0 - end)  # most of the drop within the first 10 %
    assert r10 > r30 > end  # then a slow drift
    assert cfg.regime_names() == ("decline", "plateau")
    # the decline is the fast fall (three time constants); the drift belongs to the plateau
    plateau = cfg.regime_starts()[0]
    assert 0.07 * HOUR <= plateau - cfg.trace_start <= 0.11 * HOUR
    assert r0 - float(read_rate(cfg, np.array([plateau]))[0]) > 0.8 * (r0 - end)  # most of the fall is done


@pytest.mark.parametrize("preset", ["stationary", "parsplice"])
def test_noise_overdispersed_3_to_5_percent_with_one_window_dips_and_key_spikes(preset: str) -> None:
    cfg, _, f = run(preset)
    w = _whole(f)
    last = f["label"][w] == f["label"][w].max()  # the last plateau
    rate, reads, active = f.reads_per_s[w][last], f["reads"][w][last], f["active_keys"][w][last]
    base = median_filter(rate, size=31, mode="nearest")
    d = np.diff(rate) / np.median(rate)
    spread = 1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2)
    assert 0.025 <= spread <= 0.055, spread
    calm = rate > 0.9 * base
    assert np.var(reads[calm]) > 2 * np.mean(reads[calm])  # more spread than Poisson counts
    hours = len(rate) * 10 / HOUR
    dips = np.flatnonzero((rate < 0.8 * base) & (rate > 0.55 * base))
    assert 4 * hours <= len(dips) <= 30 * hours  # every few minutes
    assert np.mean(np.diff(dips) > 1) >= 0.8  # mostly isolated single windows
    # spikes of the active-key count: 3-5x for a minute, where the shape puts them, nowhere else
    t = f["start"][w][last][:, None] - cfg.trace_start + np.linspace(0, 10, 21)[None, :]
    spike = shape_of(cfg).spike(t)
    touched, covered = (spike > 1).any(axis=1), (spike > 1).all(axis=1)
    calm_keys = np.median(active[~touched])
    if covered.any():
        assert 2.5 * calm_keys < np.median(active[covered]) < 6 * calm_keys
    assert (active[~touched] < 2 * calm_keys).all()
    four_hours = shape_of(GeneratorConfig(duration_s=4 * HOUR, seed=cfg.seed, preset=preset))
    assert 3 <= len(four_hours.spike_start) <= 30  # now and then


def test_keyspace_grows_linearly_to_tens_of_thousands() -> None:
    cfg, _, f = run("parsplice")
    after = f["label"] >= 1
    ks, t = f["keyspace_size"][after], f["start"][after]
    assert np.corrcoef(t, ks)[0, 1] > 0.995
    assert ks[-1] == pytest.approx(keyspace_at(cfg, np.array([cfg.trace_end]))[0], rel=0.05)
    four_h = GeneratorConfig(duration_s=4 * HOUR, workers=256, seed=0)
    assert 1e4 <= keyspace_at(four_h, np.array([four_h.trace_end]))[0] <= 1e5
    # late in the run some keys are several times as popular as others
    late = f["start"] > f["start"][-1] - 600
    _, b, _ = run("parsplice")
    _, counts = np.unique(b.key[b.ts > f["start"][late][0]], return_counts=True)
    top = np.sort(counts)[-5:]
    assert (top > 3 * np.median(counts)).all() and top[-1] < 12 * np.median(counts)


@pytest.mark.parametrize("preset", REALISTIC_PRESETS)
def test_a_realistic_trace_starts_and_ends_off_window_boundaries(preset: str) -> None:
    cfg, b, f = run(preset)
    assert 0.5 <= cfg.trace_start <= 9.5 and cfg.trace_start != round(cfg.trace_start)
    assert cfg.trace_start <= b.ts[0] < cfg.trace_start + 1 and b.ts[-1] < cfg.trace_end
    assert f["length"][0] == pytest.approx(10 - b.ts[0] % 10)
    assert f["length"][-1] == pytest.approx(cfg.trace_end % 10)
    np.testing.assert_array_equal(b.label, regime_of(cfg, b.ts))
    given = GeneratorConfig(duration_s=60, workers=8, preset=preset, start_s=100.0)
    assert given.trace_start == 100.0 and given.trace_end == 160.0


def test_realistic_presets_scale_with_workers_and_stretch_with_growth() -> None:
    one = GeneratorConfig(duration_s=HOUR, workers=64, seed=1, timescale_s=HOUR)
    two = GeneratorConfig(duration_s=2 * HOUR, workers=64, seed=1, timescale_s=HOUR, growth=2.0)
    a, b = (np.asarray(c.regime_starts()) - c.trace_start for c in (one, two))
    np.testing.assert_allclose(b, 2 * a)
    more = GeneratorConfig(duration_s=HOUR, workers=128, seed=1)
    t = one.trace_start + np.linspace(0, HOUR, 50)
    np.testing.assert_allclose(read_rate(more, t - one.trace_start + more.trace_start), 2 * read_rate(one, t))
    assert keyspace_at(two, np.array([two.trace_end]))[0] == pytest.approx(
        keyspace_at(one, np.array([one.trace_end]))[0], rel=0.01
    )
