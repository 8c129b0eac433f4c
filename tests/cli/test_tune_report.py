"""``regimetune tune --report``: one self-contained HTML file; every named chart an embedded
PNG with its data drawn (pixels in the colours of what it plots, not an empty frame), every
table with its rows; the cost-model sweep drawn when the result carries one and marked "not
computed" otherwise; and, where Debian's chromium is installed, the page as a browser
decodes it."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re
from collections.abc import Callable
from html import escape
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.collectors import read_trace
from regimetune.regimes import OnlineRegimeDetector
from regimetune.reports import regime_color
from regimetune.reports.page import BASELINE_LABELS, BASELINE_NOTE, tuned_policy_text
from regimetune.reports.tune import (
    DEFAULT_ROW,
    LIVE_SECTION,
    NOT_COMPUTED,
    POLICY_CAPTION,
    binding_note,
    cache_tune_report,
)
from regimetune.reports.tune_charts import cost_sweep, miss_ratio_curves
from regimetune.reports.tune_data import convergence_of
from regimetune.tuner import CacheConfig, Workload, tune

runner = CliRunner()
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*(?!["']?(?:data:|#))|https?://|url\(\s*(?!["']?data:)""")
CACHE_CHARTS = ("rate-by-regime", "miss-ratio-curves", "limits-over-time", "convergence")
RESCALE_CHARTS = ("rate-by-regime", "weights", "campaign-scores")


def _charts(html: str) -> dict[str, np.ndarray]:
    """Each named chart's PNG, decoded to RGB pixels."""
    found = re.findall(
        r'<figure id="chart-([\w-]+)"><img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html
    )
    return {n: np.asarray(Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB")) for n, b in found}


def _pixels_like(img: np.ndarray, color: str, tol: int = 40) -> int:
    """Pixels within ``tol`` (per channel) of ``color``: where that colour was drawn."""
    rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)])
    return int(np.count_nonzero(np.all(np.abs(img.astype(int) - rgb) <= tol, axis=-1)))


def _saturated(img: np.ndarray) -> int:
    """Coloured pixels: axes, ticks and text are grey, data is drawn in colour."""
    spread = img.max(axis=-1).astype(int) - img.min(axis=-1)
    return int(np.count_nonzero(spread > 60))


def _cache_charts(out: dict) -> tuple[str, ...]:
    """The charts a cache report has: the sweep's too when the tuning computed one."""
    return (*CACHE_CHARTS, "cost-sweep") if out.get("sweep") else CACHE_CHARTS


def _table_rows(html: str) -> list[int]:
    return [t.count("<tr>") for t in re.findall(r"<tbody>.*?</tbody>", html, flags=re.S)]


def _tables(html: str) -> dict[str, str]:
    """Each table by its caption."""
    return dict(
        (cap, t) for t, cap in re.findall(r"(<table><caption>(.*?)</caption>.*?</table>)", html, flags=re.S)
    )


@pytest.fixture(scope="module")
def cache_report(
    regimes_trace: Path, short_regimes: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("tune") / "report.html"
    res = runner.invoke(
        app,
        [
            "tune",
            str(regimes_trace),
            *short_regimes,
            "--budget",
            "10",
            "--jobs",
            "0",
            "--json",
            "--report",
            str(path),
        ],
    )
    assert res.exit_code == 0, res.output
    return path, json.loads(res.output)


@pytest.fixture(scope="module")
def rescale_report(
    regimes_trace: Path, short_regimes: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("rescale") / "report.html"
    args = [
        "tune",
        str(regimes_trace),
        *short_regimes,
        "--objective",
        "rescale",
        "--budget",
        "3",
        "--json",
        "--report",
        str(path),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return path, json.loads(res.output)


def test_the_cache_report_is_one_file_with_no_external_url(cache_report: tuple[Path, dict]) -> None:
    html = cache_report[0].read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert "<script" not in html and "None" not in html


def test_every_cache_chart_is_embedded_with_its_data_drawn(cache_report: tuple[Path, dict]) -> None:
    charts = _charts(cache_report[0].read_text())
    assert tuple(charts) == _cache_charts(cache_report[1])
    regimes = [int(r) for r in cache_report[1]["trace"]["regime_windows"]]
    assert len(regimes) >= 2
    for name, img in charts.items():
        assert img.shape == (420, 1000, 3), name
        assert img.std() > 10 and _saturated(img) > 1500, f"{name}: nothing drawn"
    for rid in regimes:  # a curve (and points) in every tuned regime's colour
        assert _pixels_like(charts["miss-ratio-curves"], regime_color(rid)) > 300, rid
        assert _pixels_like(charts["rate-by-regime"], regime_color(rid)) > 300, rid
    if -1 in regimes or "none yet (default)" in cache_report[0].read_text():
        # windows before the detector held a regime: grey, not in the colour of a regime "-1"
        assert _pixels_like(charts["rate-by-regime"], "#a0a0a0", tol=8) > 50
        assert _pixels_like(charts["rate-by-regime"], regime_color(-1), tol=20) == 0
    assert _pixels_like(charts["limits-over-time"], "#d62728") > 500  # the limit in force
    assert _pixels_like(charts["limits-over-time"], "#404040", tol=12) > 500  # the keyspace
    assert _pixels_like(charts["convergence"], "#1f77b4") > 300  # the best so far
    if cache_report[1]["best"]["feasible"]:  # at least the best evaluation's marker
        assert _pixels_like(charts["convergence"], "#2ca02c") > 30


def test_an_empty_chart_fails_the_drawn_check() -> None:
    """The check above can fail: axes, ticks and labels alone are not coloured."""
    from regimetune.reports import figure_data_uri

    uri = figure_data_uri(miss_ratio_curves(np.array([1, 10, 100]), {}))
    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))
    assert _saturated(img) < 200


def test_every_cache_table_has_its_rows(cache_report: tuple[Path, dict]) -> None:
    html, out = cache_report[0].read_text(), cache_report[1]
    tables = _tables(html)
    compare = tables["the tuned policy beside the baselines, simulated on the same trace"]
    assert compare.count("<tr>") - 1 == 1 + len(out["baselines"]) >= 4
    for label in ("tuned", "unlimited", "LRU 100K", "100K -&gt; 10K"):
        assert f"<td>{label}</td>" in compare
    assert f"<td>{out['best']['efficiency']:.4f}</td>" in compare
    relative = out["best"]["hit_ratio"] / out["baselines"]["unlimited"]["hit_ratio"]
    assert "<th>hit ratio / unlimited</th>" in compare and f"<td>{100 * relative:.2f} %</td>" in compare
    assert re.search(r"<td>unlimited</td>(?:<td>[^<]*</td>){2}<td>100.00 %</td>", compare)
    policy = tables[POLICY_CAPTION]
    for rid, limit in out["best"]["limits"].items():
        assert f"<td>{rid}</td>" in policy and f"<td>{limit:,}</td>" in policy
        assert f"background:{regime_color(int(rid))}" in policy
    windows = out["trace"]["regime_windows"]
    assert policy.count("<tr>") - 1 == len(windows) + ("none yet (default)" in policy)
    settings = tables["what the tuning assumed"]
    assert "<td>target: memory_budget</td><td>0.076</td>" in settings
    assert f"<td>evaluations</td><td>{out['n_evaluations']}</td>" in settings


def test_the_report_says_when_the_efficiency_target_never_binds(cache_report: tuple[Path, dict]) -> None:
    html, out = cache_report[0].read_text(), cache_report[1]
    effs = [out["best"]["efficiency"], *(r["efficiency"] for r in out["baselines"].values())]
    binds = min(effs) < out["target"]["efficiency_target"]
    if "binds" not in out:  # else the tuning's own notes are shown (below)
        assert ("the efficiency constraint never binds" in html) is (not binds)
    report = {"target": {"efficiency_target": 0.96}, "best": {"efficiency": 0.97}, "baselines": {}}
    assert "never binds" in binding_note(report)
    report["baselines"] = {"lru_100k": {"efficiency": 0.9}}
    assert binding_note(report) == ""


def test_the_tunings_own_binding_notes_and_push_decision_are_shown() -> None:
    report = {
        "target": {"efficiency_target": 0.96},
        "best": {"efficiency": 0.99},
        "baselines": {},
        "binds": {"notes": ["the memory budget never binds: <every> policy fits"]},
        "decision": {"push": False, "reason": "it did not beat the current policy on held-apart windows"},
    }
    html = binding_note(report)
    assert html.count('<p class="notice">') == 2 and "&lt;every&gt; policy fits" in html
    assert (
        "Decision: keep the current policy (it did not beat the current policy on held-apart windows)."
        in html
    )
    assert "never binds" not in binding_note({**report, "binds": {"notes": []}, "decision": {}})


def test_the_sweep_is_drawn_or_marked_not_computed(cache_report: tuple[Path, dict]) -> None:
    html, out = cache_report[0].read_text(), cache_report[1]
    section = html.split("<h2>cost-model sweep</h2>", 1)[1].split("<h2>", 1)[0]
    if out.get("sweep"):  # a row per miss cost, a line per policy
        assert NOT_COMPUTED not in section and 'id="chart-cost-sweep"' in section
        assert section.count("<tr>") - 1 == len(out["sweep"])
        assert _saturated(_charts(html)["cost-sweep"]) > 1500
    else:
        assert NOT_COMPUTED in section and "<img" not in section


@pytest.fixture(scope="module")
def tuned(regimes_trace: Path, short_regimes: tuple[str, ...]) -> tuple[object, Workload]:
    detector = OnlineRegimeDetector(min_regime_s=float(short_regimes[1].split("=")[1]))
    work = Workload.from_batches(read_trace(regimes_trace), window_s=10.0, detector=detector)
    return tune(work, "cache", config=CacheConfig(budget=6), workers=0), work


def test_a_sweep_in_the_result_is_drawn_and_its_absence_said(tuned: tuple) -> None:
    result, work = tuned
    args = {"frame": work.frame, "labels": work.labels, "ts": work.events.ts, "keys": work.events.key}
    without = dataclasses.replace(result, report={k: v for k, v in result.report.items() if k != "sweep"})
    html = cache_tune_report(without, title="t", **args)
    assert tuple(_charts(html)) == CACHE_CHARTS and NOT_COMPUTED in html
    # as the tuning reports it: miss cost -> policy -> efficiency
    sweep = {f"{c:g}": {"tuned": 1.0 - c, "unlimited": 1.0 - c / 2} for c in (0.1, 0.01, 0.05, 0.02)}
    with_sweep = dataclasses.replace(result, report={**result.report, "sweep": sweep})
    html = cache_tune_report(with_sweep, title="t", **args)
    charts = _charts(html)
    assert tuple(charts) == (*CACHE_CHARTS, "cost-sweep")
    assert (
        _pixels_like(charts["cost-sweep"], "#1f77b4") > 300
        and _pixels_like(charts["cost-sweep"], "#7f7f7f") > 300
    )
    table = _tables(html)["efficiency of each policy at each miss cost"]
    assert table.count("<tr>") - 1 == 4 and "<td>0.05</td><td>0.9500</td><td>0.9750</td>" in table
    assert NOT_COMPUTED not in html


def test_the_rescale_report_shows_weights_and_campaign_scores(rescale_report: tuple[Path, dict]) -> None:
    html, out = rescale_report[0].read_text(), rescale_report[1]
    assert not EXTERNAL.search(html) and "<script" not in html and "None" not in html
    charts = _charts(html)
    assert tuple(charts) == RESCALE_CHARTS
    for name, img in charts.items():
        assert _saturated(img) > 1500, f"{name}: nothing drawn"
    for color in ("#1f77b4", "#7f7f7f", "#ff7f0e"):  # a bar of each weight
        assert _pixels_like(charts["weights"], color, tol=10) > 200, color
    tables = _tables(html)
    weights = next(t for c, t in tables.items() if c.startswith("the weights in force per regime"))
    train = next(t for c, t in tables.items() if "on the tuning campaigns" in c)
    regimes = out["regimes"]
    assert weights.count("<tr>") - 1 == len(regimes) == train.count("<tr>") - 1
    assert out["objective"] == "rescale" and out["n_evaluations"] == sum(
        r["evaluations"] for r in regimes.values()
    )
    for rid, rep in regimes.items():
        name = DEFAULT_ROW if rid == "-1" else rid  # the default ran before the first regime
        in_force = "tuned" if rep["adopted"] else f"preset {rep['incumbent']}"
        assert f"<td>{name}</td><td>{rep['weights']['w_load']:.3g}</td>" in weights
        assert f"<td>{in_force}</td>" in weights
        assert f"<td>{name}</td><td>{rep['candidate_value']:.4g}</td>" in train
        assert f"<li>{'regime ' + rid if rid != '-1' else DEFAULT_ROW}: {escape(rep['reason'])}</li>" in html
    held = [t for c, t in tables.items() if "never seen by the tuning" in c]
    if any(rep["candidate_held_out_value"] is not None for rep in regimes.values()):
        assert len(held) == 1 and held[0].count("<tr>") - 1 == len(regimes)
        for rid, rep in regimes.items():
            name = DEFAULT_ROW if rid == "-1" else rid
            assert f"<td>{name}</td><td>{rep['candidate_held_out_value']:.4g}</td>" in held[0]
    else:
        assert held == []


def test_a_tune_report_must_be_named_html_and_is_refused_before_tuning(
    regimes_trace: Path, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["tune", str(regimes_trace), "--report", str(tmp_path / "r.png")])
    assert res.exit_code == 2 and "--report must end in .html" in res.output
    assert "cache policies" not in res.output


@pytest.mark.parametrize("which", ["cache_report", "rescale_report"])
def test_chromium_decodes_every_chart_and_table_of_the_tune_report(
    which: str, request: pytest.FixtureRequest, chromium_probe: Callable[[Path], dict]
) -> None:
    path, out = request.getfixturevalue(which)
    charts = _cache_charts(out) if which == "cache_report" else RESCALE_CHARTS
    probe = chromium_probe(path)
    assert probe["imgs"] == ["true:1000x420"] * len(charts)  # each PNG decoded at its size
    assert probe["rows"] == _table_rows(path.read_text())
    assert all(n > 0 for n in probe["rows"])


def test_the_tuned_policy_is_said_in_one_sentence_that_holds_together(
    cache_report: tuple[Path, dict],
) -> None:
    html, out = cache_report[0].read_text(), cache_report[1]
    sentence = tuned_policy_text(out["best"])
    assert f"<p>{escape(sentence)}.</p>" in html and f"<p>{escape(BASELINE_NOTE)}</p>" in html
    for rid, limit in out["best"]["limits"].items():
        assert f"regime {rid}: {limit:,} keys" in sentence
    from_start = {"switch": "keys", "high_watermark_keys": 0, "limits": {"0": 10}}
    assert tuned_policy_text(from_start).startswith("tuned policy: per-regime LRU limits from the start")
    assert "unlimited" not in tuned_policy_text(from_start).replace("no unlimited phase", "")
    timed = tuned_policy_text({"switch": "time", "switch_time_s": 1800.0, "limits": {}})
    assert timed == (
        "tuned policy: unlimited until t = 1,800 s (the detected 3rd regime's start), then per-regime LRU limits"
    )
    policy = _tables(html)[POLICY_CAPTION]
    assert "unlimited until the switch" not in html and "<th>limit in force</th>" in policy
    if int(out["best"]["high_watermark_keys"] or 0) <= 1 and out["best"]["switch"] != "time":
        assert "<td>from the start (no unlimited phase)</td>" in policy


def test_every_baseline_is_named_and_explained() -> None:
    for name in ("LRU 100K", "100K -> 10K", "K-means", "LRU at the memory budget"):
        assert name in BASELINE_LABELS.values() and name in BASELINE_NOTE
    assert "then holds as many keys as the keyspace had then" in BASELINE_NOTE  # a whole sentence


def test_the_convergence_chart_marks_the_evaluations_that_meet_the_constraints(tuned: tuple) -> None:
    """The pulls towards less memory and more efficiency are never zero: only the hinges of
    the efficiency target and the memory budget say whether an evaluation meets them."""
    from regimetune.models import Evaluation

    met = Evaluation(params={}, residuals=(0.0, 0.0, 2.4, 0.05), value=5.8)
    short = Evaluation(params={}, residuals=(1.5, 0.0, 0.9, 0.4), value=3.2)
    over = Evaluation(params={}, residuals=(0.0, 0.7, 3.1, 0.01), value=9.6)
    failed = Evaluation(params={}, error="boom")
    values, meets = convergence_of([met, short, over, failed])
    assert meets.tolist() == [True, False, False, False] and np.isnan(values[3])
    result, _work = tuned
    values, meets = convergence_of(result.evaluations)
    assert len(values) == len(result.evaluations)
    if result.report["best"]["feasible"]:  # the table's "meets constraints: yes" has a filled marker
        assert meets.any()


def test_the_cost_sweep_gives_every_policy_its_own_colour_and_marker() -> None:
    names = [BASELINE_LABELS[n] for n in ("tuned", "unlimited", "lru_100k", "two_phase_100k_10k",
                                          "kmeans_suggestion", "lru_scaled", "two_phase_scaled", "lru_budget")]  # fmt: skip
    x = np.array([0.01, 0.02, 0.05, 0.1])
    fig = cost_sweep(x, {n: 1.0 - x for n in names}, xlabel="miss cost")  # every line on the same points
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert set(lines) == set(names)
    assert len({ln.get_color() for ln in lines.values()}) == len(names)
    assert len({ln.get_marker() for ln in lines.values()}) == len(names)
    tuned = lines["tuned"]
    assert (
        tuned.get_zorder() > lines["LRU at the memory budget"].get_zorder()
        and tuned.get_markerfacecolor() == "none"
    )
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == names  # in the order given, the tuned policy first
    assert fig.axes[0].get_title() and "efficiency" in fig.axes[0].get_ylabel()


def test_the_timeline_says_its_regimes_are_the_live_ones(
    cache_report: tuple[Path, dict], rescale_report: tuple[Path, dict]
) -> None:
    for path, _out in (cache_report, rescale_report):
        html = path.read_text()
        assert f"<h2>{escape(LIVE_SECTION)}</h2>" in html and "(replayed)" not in html


@pytest.mark.parametrize("which", ["cache_report", "rescale_report"])
def test_the_tune_report_as_a_reader_sees_it(
    which: str, request: pytest.FixtureRequest, screenshot: Callable[..., Path]
) -> None:
    """The whole page in Chromium, kept as ``<which>.png``: every chart drawn in colour."""
    path, out = request.getfixturevalue(which)
    charts = _cache_charts(out) if which == "cache_report" else RESCALE_CHARTS
    shot = screenshot(path.as_uri(), which, height=900 + 560 * len(charts))
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[1] == 1400 and _saturated(img) > 1500 * len(charts)
