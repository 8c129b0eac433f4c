"""``regimetune detect``: regimes of a recorded trace, online detector or the paper's K-means."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from regimetune.cli.output import prepare_output, print_tables, regime_name, since_start
from regimetune.cli.traces import (
    ColumnsOpt,
    DelimiterOpt,
    FormatOpt,
    NoHeaderOpt,
    ReadOpOpt,
    SkipBadOpt,
    TimeUnitOpt,
    WriteOpOpt,
    fail_cleanly,
    progress,
    report_reading,
    trace_options,
)
from regimetune.models import (
    DEFAULT_WINDOW_S,
    SERIES_STEP_S,
    ConfigError,
    EventBatch,
    InputError,
    RegimeChange,
    RegimeSegment,
    WindowFrame,
)
from regimetune.reports.page import SEGMENT_HEADERS, hindsight_note, segment_cells

if TYPE_CHECKING:
    from regimetune.regimes import DetectorParams, OnlineRegimeDetector

#: ``--param NAME=VALUE``: one detector parameter, for every command that detects regimes.
DetectorParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        metavar="NAME=VALUE",
        help="Set one parameter of the online regime detector (repeatable), e.g. --param "
        "min_regime_s=300. Names: block_s, regime_s, min_regime_s, min_step, min_count_step, "
        "wander, drift_per_h, match_p, max_regimes, features (durations in seconds, steps in "
        "feature units; docs/regimes.md says what each means).",
    ),
]


def _counted(batches: Iterable[EventBatch], prog: Any) -> Iterator[EventBatch]:
    task = prog.add_task("read", total=None, events=0)
    n = 0
    for b in batches:
        n += len(b)
        prog.update(task, events=n)
        yield b


def _segment_json(s: RegimeSegment) -> dict[str, Any]:
    return {
        "regime_id": s.regime_id,
        "kind": s.kind,
        "start_window": s.start_window,
        "end_window": s.end_window,
        "start": s.start,
        "end": s.end,
        "n_windows": s.n_windows,
        "centroid": list(s.centroid),
        "summary": s.summary,
    }


def _change_json(c: RegimeChange) -> dict[str, Any]:
    return {
        "from_id": c.from_id,
        "to_id": c.to_id,
        "at_window": c.at_window,
        "at_time": c.at_time,
        "confirmed_window": c.confirmed_window,
        "confirmed_time": c.confirmed_time,
        "delay_windows": c.delay_windows,
    }


def _segments_table(title: str, segments: list[RegimeSegment], origin: float) -> Table:
    t = Table(title=title)
    for name in SEGMENT_HEADERS:
        t.add_column(name, justify="right")
    for s in segments:
        t.add_row(*segment_cells(s, origin))
    return t


def _changes_table(changes: list[RegimeChange], origin: float) -> Table:
    t = Table(title="confirmed changes")
    for name in ("from", "to", "at window", "at", "confirmed window", "delay (windows)"):
        t.add_column(name, justify="right")
    for c in changes:
        t.add_row(
            regime_name(c.from_id),
            str(c.to_id),
            str(c.at_window),
            since_start(c.at_time - origin),
            str(c.confirmed_window),
            str(c.delay_windows),
        )
    return t


def _segment_points(frame: WindowFrame, segments: list[RegimeSegment]) -> list[tuple[float, float]]:
    """(mean time, mean reads/s) of each regime over its windows, for the plot's stars."""
    import numpy as np

    t = frame["start"] + frame["length"] / 2.0
    rate = frame.reads_per_s
    idx0 = int(frame["index"][0])
    pts: dict[int, list[int]] = {}
    for s in segments:
        pts.setdefault(s.regime_id, []).extend(range(s.start_window - idx0, s.end_window - idx0))
    return [(float(np.mean(t[v])), float(np.mean(rate[v]))) for v in pts.values()]


def detect_cmd(
    trace: Annotated[
        Path,
        typer.Argument(
            help="Trace file (see `regimetune windows --help` for formats), or with --series a CSV series."
        ),
    ],
    window: Annotated[
        float | None,
        typer.Option(
            "--window",
            help=f"Window length in seconds (default {DEFAULT_WINDOW_S:g}); with --series the seconds one "
            f"row stands for (default {SERIES_STEP_S:g}: give a metric's scrape interval to keep the "
            "detector's durations in seconds).",
        ),
    ] = None,
    series: Annotated[
        bool,
        typer.Option(
            "--series",
            help="TRACE is a CSV of a time column (numbers or dates) and numeric columns, e.g. metrics "
            "exported from Prometheus; each row is one window.",
        ),
    ] = False,
    raw_counters: Annotated[
        bool,
        typer.Option(
            "--raw-counters",
            help="With --series: read a column that never decreases (a counter, e.g. requests served) as it "
            "is, not as its increase per row.",
        ),
    ] = False,
    log: Annotated[
        list[str] | None,
        typer.Option(
            "--log",
            metavar="COLUMN",
            help="With --series: read this column in log space (a rate, a latency, a price: noise that grows "
            "with the level); repeatable, or comma-separated. Its values must be positive. The others are "
            "read raw.",
        ),
    ] = None,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper", help="The paper's batch K-means on (time, reads/s) instead of the online detector."
        ),
    ] = False,
    k: Annotated[
        int | None,
        typer.Option("--k", min=1, help="Number of regimes (paper mode: default 4; online: the most kept)."),
    ] = None,
    param: DetectorParamOpt = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a figure (.png/.svg/.pdf) like the paper's Figure 7.")
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Write a self-contained HTML report (timeline by regime, segments, changes) here.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print segments and changes as JSON.")] = False,
    state: Annotated[
        Path | None, typer.Option("--state", help="Online mode: save the detector's state (JSON) here.")
    ] = None,
    fmt: FormatOpt = None,
    columns: ColumnsOpt = None,
    read_op: ReadOpOpt = None,
    write_op: WriteOpOpt = None,
    time_unit: TimeUnitOpt = "s",
    skip_bad: SkipBadOpt = 0,
    delimiter: DelimiterOpt = None,
    no_header: NoHeaderOpt = False,
) -> None:
    """Detect the workload regimes of a trace and print its segments."""
    from regimetune.collectors import window_frame
    from regimetune.regimes import paper_kmeans
    from regimetune.regimes.plot import plot_regimes

    with fail_cleanly():
        if window is None:
            window = SERIES_STEP_S if series else DEFAULT_WINDOW_S
        if not window > 0:
            raise ConfigError(f"--window must be positive, got {window}")
        if paper and param:
            raise ConfigError("--param sets the online detector; --paper has only --k")
        if (raw_counters or log) and not series:
            raise ConfigError("--raw-counters and --log apply to --series only")
        if series:
            if paper or plot is not None or report is not None:
                raise ConfigError("--series detects with the online detector and prints or --json only")
            _detect_series(
                trace,
                window=window,
                k=k,
                params=param,
                as_json=as_json,
                state=state,
                counters=not raw_counters,
                log=[name.strip() for item in log or [] for name in item.split(",") if name.strip()],
            )
            return
        if paper and state is not None:
            raise ConfigError("--state saves the online detector; it does not apply to --paper")
        if report is not None and report.suffix.lower() not in (".html", ".htm"):
            raise ConfigError(f"--report must end in .html, got {report.name!r}")
        for path in (plot, report, state):
            prepare_output(path)
        opts = trace_options(
            fmt=fmt,
            columns=columns,
            read_op=read_op,
            write_op=write_op,
            time_unit=time_unit,
            skip_bad=skip_bad,
            delimiter=delimiter,
            no_header=no_header,
        )
        reader = opts.open(trace)
        with progress(None, label="windowing") as prog:
            frame = window_frame(_counted(reader, prog), window_s=window)
        report_reading(reader)
        if len(frame) < 2:
            raise ConfigError(
                f"the trace spans a single window of {window:g} s; pass a shorter --window "
                "(or check --time-unit)"
            )
        origin = float(frame["start"][0])
        out: dict[str, Any] = {
            "trace": str(trace),
            "windows": len(frame),
            "window_s": window,
            "trace_start": origin,
        }
        no_regime: str | None = None
        if paper:
            r = paper_kmeans(frame, k=4 if k is None else k)
            segments, changes, labels = r.segments, [], r.labels
            centroids = r.centroids
            out |= {
                "mode": "paper",
                "k": r.k,
                "third_start_window": r.third_start_window,
                "third_start_time": r.third_start_time,
                "suggested_cache_keys": r.suggested_cache_keys,
            }
            title = f"{trace.name}: paper K-means, K={r.k}"
        else:
            det = online_detector(window, k, param)
            h = det.detect(frame)
            segments, changes, labels = h.segments, h.changes, h.labels
            centroids = _segment_points(frame, segments)
            out |= {"mode": "online", "n_regimes": h.n_regimes}
            title = f"{trace.name}: online detector, {h.n_regimes} regimes"
            if not h.n_regimes:
                no_regime = _no_regime_hint(trace.name, frame, det.params)
            if state is not None:
                det.save(state)
        out["segments"] = [_segment_json(s) for s in segments]
        out["changes"] = [_change_json(c) for c in changes]
        if plot is not None:
            switch = out.get("third_start_time")
            note = f"3rd regime: cache {out['suggested_cache_keys']:,} keys" if switch is not None else ""
            plot_regimes(
                frame,
                labels,
                plot,
                centroids=centroids,
                title=title,
                switch_time=switch,
                switch_note=note,
                kinds={s.regime_id: s.kind for s in segments},
            )
        if report is not None:
            from regimetune.reports import detect_report, write_detect_report

            write_detect_report(report, detect_report(frame, labels, segments, changes, title=title))
        if as_json:
            typer.echo(json.dumps(out, indent=2))
            return
        console = Console()
        if no_regime is not None:
            console.print(no_regime, highlight=False)
        else:
            print_tables(console, _segments_table(title, segments, origin))
        if changes:
            print_tables(console, _changes_table(changes, origin))
        if (hindsight := hindsight_note(changes, int(frame["index"][-1]))) is not None:
            console.print(hindsight, highlight=False)
        console.print(f"times are relative to the trace's start (t = {origin:,.3f} s)", highlight=False)
        if paper and out["third_start_window"] is not None:
            console.print(
                f"third regime starts at window {out['third_start_window']} "
                f"({since_start(out['third_start_time'] - origin)}): suggested cache size "
                f"{out['suggested_cache_keys']:,} keys",
                highlight=False,
            )
        if plot is not None:
            console.print(f"wrote {plot}", highlight=False)
        if report is not None:
            console.print(f"wrote the report to {report}", highlight=False)
        if state is not None:
            console.print(f"saved detector state to {state}", highlight=False)


def _no_regime_hint(name: str, frame: WindowFrame, params: DetectorParams) -> str:
    """What to do when the online detector confirmed no regime: a level is a regime once it
    has held ``min_regime_s``, which a short trace may never reach; the value suggested leaves
    the detector a fifth of the trace (at least a block, ``block_s``)."""
    span = float(frame["start"][-1] + frame["length"][-1] - frame["start"][0])
    window = float(frame["length"].max())
    shorter = max(window * round(min(params.min_regime_s, span) / 5 / window), params.block_s)
    return (
        f"{name}: online detector, no regime confirmed in {span:,.0f} s of trace: a level is a regime "
        f"once it has held min_regime_s ({params.min_regime_s:g} s). Detect shorter regimes with "
        f"--param min_regime_s={shorter:g}, or give a longer trace."
    )


def online_detector(window: float | None, k: int | None, params: list[str] | None) -> OnlineRegimeDetector:
    """The online detector for ``--window``, ``--k`` and ``--param NAME=VALUE`` overrides."""
    from regimetune.regimes import DetectorParams, OnlineRegimeDetector

    fixed: dict[str, Any] = {"window_s": window} | ({} if k is None else {"max_regimes": k})
    return OnlineRegimeDetector.from_params(DetectorParams.from_assignments(params or [], **fixed))


def _detect_series(
    trace: Path,
    *,
    window: float,
    k: int | None,
    params: list[str] | None,
    as_json: bool,
    state: Path | None,
    counters: bool,
    log: list[str],
) -> None:
    """``detect --series``: regimes of a CSV series, each row one window of ``window`` s; a
    counter column (it never decreases) read as its increase per row unless ``counters`` is
    false, the columns named in ``log`` in log space."""
    from regimetune.collectors.series import read_series

    s = read_series(trace)
    unknown = [name for name in log if name not in s.names]
    if unknown:
        raise ConfigError(
            f"--log names columns {unknown} that {trace.name} does not have; it has {list(s.names)}"
        )
    chosen = [s.names.index(name) for name in log]
    det = online_detector(window, k, params)
    try:
        h, (_, as_rates, logged) = det.detect_series(s.values, counters=counters, log=chosen, names=s.names)
    except InputError as exc:
        raise InputError(f"{trace}: {exc}") from None
    changes = [
        {
            "from_id": c.from_id,
            "to_id": c.to_id,
            "at_window": c.at_window,
            "at_time": s.time_of(c.at_window),
            "confirmed_window": c.confirmed_window,
            "confirmed_time": s.time_of(c.confirmed_window),
            "delay_windows": c.delay_windows,
        }
        for c in h.changes
    ]
    segments: list[dict[str, Any]] = [
        {
            "regime_id": g.regime_id,
            "kind": g.kind,
            "start_row": g.start_window,
            "end_row": g.end_window,
            "start_time": s.time_of(g.start_window),
            "n_rows": g.n_windows,
            "summary": g.summary,
        }
        for g in h.segments
    ]
    if state is not None:
        det.save(state)
    if as_json:
        out = {
            "series": str(trace),
            "mode": "online",
            "rows": len(s.values),
            "columns": list(s.names),
            "counters": [s.names[j] for j in as_rates],
            "log": [s.names[j] for j in logged],
            "window_s": window,
            "noise_sd": det.noise_sd,
            "n_regimes": h.n_regimes,
            "segments": segments,
            "changes": changes,
        }
        typer.echo(json.dumps(out, indent=2))
        return
    read_as = "".join(f", {s.names[j]} per row" for j in as_rates) + "".join(
        f", log {s.names[j]}" for j in logged
    )
    noise = ", noise sd " + ", ".join(f"{name} {v:.3g}" for name, v in det.noise_sd.items())
    t = Table(
        title=f"{trace.name}: online detector, {h.n_regimes} regimes, one row = {window:g} s{read_as}{noise}"
    )
    heads = [f"log {n}" if j in logged else n for j, n in enumerate(s.names)]  # the mean is of what was read
    for name in ("regime", "kind", "rows", "from", *(f"mean {n}" for n in heads)):
        t.add_column(name, justify="right")
    for g in segments:
        t.add_row(
            str(g["regime_id"]),
            g["kind"],
            f"{g['start_row']}-{g['end_row']}",
            str(g["start_time"]),
            *(f"{g['summary'][f'mean_{n}']:,.4g}" for n in s.names),
        )
    console = Console()
    print_tables(console, t)
    if state is not None:
        console.print(f"saved detector state to {state}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("detect")(detect_cmd)
