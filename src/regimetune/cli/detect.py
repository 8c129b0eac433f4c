"""``regimetune detect``: regimes of a recorded trace, online detector or the paper's K-means."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

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
    trace_options,
)
from regimetune.models import ConfigError, EventBatch, RegimeChange, RegimeSegment, WindowFrame


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


def _segments_table(title: str, segments: list[RegimeSegment]) -> Table:
    t = Table(title=title)
    for name in ("regime", "windows", "start s", "end s", "reads/s", "writes/s", "active", "keys seen"):
        t.add_column(name, justify="right")
    for s in segments:
        t.add_row(
            str(s.regime_id),
            f"{s.start_window}-{s.end_window}",
            f"{s.start:,.0f}",
            f"{s.end:,.0f}",
            f"{s.summary['mean_reads_per_s']:,.1f}",
            f"{s.summary['mean_writes_per_s']:,.1f}",
            f"{s.summary['mean_active_keys']:,.1f}",
            f"{s.summary['keyspace_at_start']:,.0f}",
        )
    return t


def _changes_table(changes: list[RegimeChange]) -> Table:
    t = Table(title="confirmed changes")
    for name in ("from", "to", "at window", "at s", "confirmed window", "delay (windows)"):
        t.add_column(name, justify="right")
    for c in changes:
        t.add_row(
            "-" if c.from_id is None else str(c.from_id),
            str(c.to_id),
            str(c.at_window),
            f"{c.at_time:,.0f}",
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
    trace: Annotated[Path, typer.Argument(help="Trace file (see `regimetune windows --help` for formats).")],
    window: Annotated[float, typer.Option("--window", help="Window length in seconds.")] = 1.0,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper", help="The paper's batch K-means on (time, reads/s) instead of the online detector."
        ),
    ] = False,
    k: Annotated[
        int | None,
        typer.Option("--k", min=1, help="Number of regimes (paper mode: default 4; online: an upper bound)."),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a figure (.png/.svg/.pdf) like the paper's Figure 7.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print segments and changes as JSON.")] = False,
    state: Annotated[
        Path | None, typer.Option("--state", help="Online mode: save the detector's state (JSON) here.")
    ] = None,
    hindsight: Annotated[
        bool,
        typer.Option(
            "--hindsight/--no-hindsight",
            help="Online mode: re-date the end of each decline with the windows that followed it "
            "(--no-hindsight: the dates known when each change was confirmed).",
        ),
    ] = True,
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
    from regimetune.regimes import OnlineRegimeDetector, paper_kmeans
    from regimetune.regimes.plot import plot_regimes

    with fail_cleanly():
        if not window > 0:
            raise ConfigError(f"--window must be positive, got {window}")
        if paper and state is not None:
            raise ConfigError("--state saves the online detector; it does not apply to --paper")
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
        if len(frame) < 2:
            raise ConfigError(
                f"the trace spans a single window of {window:g} s; pass a shorter --window "
                "(or check --time-unit)"
            )
        out: dict[str, Any] = {"trace": str(trace), "windows": len(frame), "window_s": window}
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
            det = OnlineRegimeDetector(k=k)
            h = det.detect(frame, hindsight=hindsight)
            segments, changes, labels = h.segments, h.changes, h.labels
            centroids = _segment_points(frame, segments)
            out |= {"mode": "online", "n_regimes": len(h.regimes)}
            title = f"{trace.name}: online detector, {len(h.regimes)} regimes"
            if state is not None:
                det.save(state)
        out["segments"] = [_segment_json(s) for s in segments]
        out["changes"] = [_change_json(c) for c in changes]
        if plot is not None:
            switch = out.get("third_start_time")
            note = f"3rd regime: cache {out['suggested_cache_keys']:,} keys" if switch is not None else ""
            plot_regimes(
                frame, labels, plot, centroids=centroids, title=title, switch_time=switch, switch_note=note
            )
        if as_json:
            typer.echo(json.dumps(out, indent=2))
            return
        console = Console()
        console.print(_segments_table(title, segments))
        if changes:
            console.print(_changes_table(changes))
        if paper and out["third_start_window"] is not None:
            console.print(
                f"third regime starts at window {out['third_start_window']} "
                f"({out['third_start_time']:,.0f} s): suggested cache size "
                f"{out['suggested_cache_keys']:,} keys",
                highlight=False,
            )
        if plot is not None:
            console.print(f"wrote {plot}", highlight=False)
        if state is not None:
            console.print(f"saved detector state to {state}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("detect")(detect_cmd)
