"""Trace commands (``generate``, ``windows``) and the trace-reading options other commands reuse.

Another command takes the same trace options by declaring the ``*Opt`` aliases and building a
:class:`TraceOptions`::

    def detect(trace: Path, fmt: FormatOpt = None, columns: ColumnsOpt = None, ...):
        with fail_cleanly():
            reader = trace_options(fmt=fmt, columns=columns, ...).open(trace)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from regimetune.cli.output import prepare_output, print_tables
from regimetune.collectors.spec import COUNT_ROLE, DEFAULT_READ_OPS, DEFAULT_WRITE_OPS, ROLES, TraceSpec
from regimetune.models.errors import ConfigError, RegimetuneError
from regimetune.models.windows import DEFAULT_WINDOW_S

if TYPE_CHECKING:
    from regimetune.collectors import TraceReader
    from regimetune.models.events import EventBatch
    from regimetune.models.windows import WindowFrame

EXIT_BAD_INPUT = 2
T = TypeVar("T")

WindowOpt = Annotated[
    float,
    typer.Option("--window", min=1e-6, help=f"Window length in seconds (default {DEFAULT_WINDOW_S:g})."),
]
"""``--window``: the same option, with the same default, in every command that cuts windows."""
ServiceWindowOpt = Annotated[
    float,
    typer.Option(
        "--window",
        min=1e-6,
        help=f"Window length in seconds; must be the service's engine.window_s (default {DEFAULT_WINDOW_S:g}).",
    ),
]
"""``--window`` of a command that feeds the service: the service's window, same default."""
SimWorkersOpt = Annotated[
    int,
    typer.Option(
        "--sim-workers", min=1, help="Simulated ParSplice workers: scales rates and keyspace linearly."
    ),
]
"""Workers of a generated ParSplice run (not processes of this machine: that is ``--jobs``)."""
OldWorkersOpt = Annotated[
    int | None, typer.Option("--workers", hidden=True, help="Old name of --sim-workers.")
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="csv, tsv, jsonl, parquet, oracle, or a published trace: twitter, cachelib "
        "(default: from the extension).",
    ),
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="Column roles by position ('ts,op,-,key', '-' skips) or by header name ('ts=time,key=lbn'). "
        f"Roles: {', '.join(ROLES)}, and {COUNT_ROLE} (how many requests a record stands for).",
    ),
]
ReadOpOpt = Annotated[
    list[str] | None,
    typer.Option("--read-op", help="Op string meaning a read (repeatable; replaces the defaults)."),
]
WriteOpOpt = Annotated[
    list[str] | None,
    typer.Option("--write-op", help="Op string meaning a write (repeatable; replaces the defaults)."),
]
TimeUnitOpt = Annotated[str, typer.Option("--time-unit", help="Unit of the ts column: s, ms, us or ns.")]
SkipBadOpt = Annotated[
    int, typer.Option("--skip-bad", min=0, help="Skip up to N malformed records instead of stopping.")
]
DelimiterOpt = Annotated[
    str | None, typer.Option("--delimiter", help="Field delimiter (default ',' or tab for .tsv).")
]
NoHeaderOpt = Annotated[
    bool, typer.Option("--no-header", help="The first line is data, not a header (default: guess).")
]


def renamed(value: T, old_name_value: T | None) -> T:
    """The value of an option that was renamed: what the old name (a hidden alias) gave, if
    given, else the new name's.

    >>> renamed(256, None), renamed(256, 64)
    (256, 64)
    """
    return value if old_name_value is None else old_name_value


def report_reading(reader: TraceReader) -> None:
    """Say on stderr what a read left out: the bad records it skipped (``--skip-bad``) and
    the reader's notes."""
    err = Console(stderr=True)
    if reader.bad_records:
        err.print(f"skipped {reader.bad_records:,} bad record(s)", highlight=False)
    for note in reader.notes:
        err.print(f"note: {note}", highlight=False)


@dataclass(frozen=True)
class TraceOptions:
    """The trace-reading options of a command, resolved into a :class:`TraceSpec`."""

    fmt: str | None
    spec: TraceSpec
    skip_bad: int = 0

    def open(self, path: Path, *, chunk_rows: int = 1 << 20) -> TraceReader:
        from regimetune.collectors import read_trace

        return read_trace(path, fmt=self.fmt, spec=self.spec, skip_bad=self.skip_bad, chunk_rows=chunk_rows)


def trace_options(
    *,
    fmt: str | None = None,
    columns: str | None = None,
    read_op: list[str] | None = None,
    write_op: list[str] | None = None,
    time_unit: str = "s",
    skip_bad: int = 0,
    delimiter: str | None = None,
    no_header: bool = False,
) -> TraceOptions:
    """Turn the command-line trace options into a :class:`TraceOptions` (raises ConfigError)."""
    if delimiter == "\\t":
        delimiter = "\t"
    spec = TraceSpec(
        columns=columns,
        read_ops=frozenset(read_op) if read_op else DEFAULT_READ_OPS,
        write_ops=frozenset(write_op) if write_op else DEFAULT_WRITE_OPS,
        time_unit=time_unit,
        header="no" if no_header else "auto",
        delimiter=delimiter,
    )
    return TraceOptions(fmt=fmt, spec=spec, skip_bad=skip_bad)


@contextmanager
def fail_cleanly() -> Iterator[None]:
    """Turn the project's errors into one red line on stderr and exit code 2 (also under
    typer's CliRunner, which bypasses ``cli.main.main``)."""
    try:
        yield
    except RegimetuneError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None


def progress(total: float | None = None, *, label: str = "reading") -> Progress:
    """A rich progress bar on stderr, shown only on a terminal."""
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        TextColumn("{task.fields[events]:,} events"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not sys.stderr.isatty(),
    )


def _tracked(
    batches: Iterable[EventBatch], prog: Progress, total: float | None, by_time: bool
) -> Iterator[EventBatch]:
    task = prog.add_task("run", total=total, events=0)
    n = 0
    for b in batches:
        n += len(b)
        if by_time and len(b):
            prog.update(task, completed=float(b.ts[-1]), events=n)
        else:
            prog.update(task, events=n)
        yield b


def generate_cmd(
    out: Annotated[Path, typer.Argument(help="Output file; format from the extension unless --format.")],
    duration: Annotated[float, typer.Option("--duration", help="Run length in seconds.")] = 9000.0,
    growth: Annotated[
        float, typer.Option("--growth", help="Stretch of the time axis (2 = twice as slow).")
    ] = 1.0,
    temperature: Annotated[float, typer.Option("--temperature", help="Widens the active keyspace.")] = 1.0,
    workers: SimWorkersOpt = 256,
    workers_old: OldWorkersOpt = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random generator.")] = 0,
    buckets: Annotated[int, typer.Option("--buckets", help="Hash keys into B buckets (0: none).")] = 0,
    timescale: Annotated[
        float | None,
        typer.Option(
            "--timescale", help="Seconds over which growth 1 unfolds the regimes (default: duration)."
        ),
    ] = None,
    fmt: FormatOpt = None,
    preset: Annotated[
        str,
        typer.Option(
            "--preset",
            help="Shape of the run: parsplice (flash crowd, stepwise decline, plateaus), fast-decay, "
            "stationary, or classic (the original generator).",
        ),
    ] = "parsplice",
) -> None:
    """Generate a ParSplice-like key-value trace with a ground-truth regime label column."""
    from regimetune.collectors import GeneratorConfig, generate, write_events

    with fail_cleanly():
        cfg = GeneratorConfig(
            duration_s=duration,
            growth=growth,
            temperature=temperature,
            workers=renamed(workers, workers_old),
            seed=seed,
            n_buckets=buckets,
            timescale_s=timescale,
            preset=preset,
        )
        with progress(duration, label="generating") as prog:
            n = write_events(_tracked(generate(cfg), prog, duration, True), out, fmt)
        Console().print(f"wrote {n:,} events to {out}", highlight=False)


def windows_cmd(
    trace: Annotated[Path, typer.Argument(help="Trace file.")],
    window: WindowOpt = DEFAULT_WINDOW_S,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Hot keys counted in topk_share.")] = 10,
    buckets: Annotated[int, typer.Option("--buckets", min=0, help="Per-bucket load over B buckets.")] = 0,
    exact_key_limit: Annotated[
        int, typer.Option("--exact-key-limit", min=0, help="Distinct keys counted exactly before sketching.")
    ] = 1_000_000,
    out: Annotated[Path | None, typer.Option("--out", help="Write the windows to .csv or .parquet.")] = None,
    fmt: FormatOpt = None,
    columns: ColumnsOpt = None,
    read_op: ReadOpOpt = None,
    write_op: WriteOpOpt = None,
    time_unit: TimeUnitOpt = "s",
    skip_bad: SkipBadOpt = 0,
    delimiter: DelimiterOpt = None,
    no_header: NoHeaderOpt = False,
) -> None:
    """Cut a trace into windows and summarise them (or write them with --out)."""
    from regimetune.collectors import window_frame, write_windows

    with fail_cleanly():
        if out is not None and out.suffix.lower() not in (".csv", ".parquet", ".pq"):
            raise ConfigError(f"--out must end in .csv or .parquet, got {out.name!r}")
        prepare_output(out)
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
            frame = window_frame(
                _tracked(reader, prog, None, False),
                window_s=window,
                top_k=top_k,
                exact_key_limit=exact_key_limit,
                n_buckets=buckets,
            )
        console = Console()
        report_reading(reader)
        if out is not None:
            write_windows(frame, out)
            console.print(f"wrote {len(frame):,} windows to {out}", highlight=False)
        else:
            print_tables(console, summary_table(frame, trace.name))


def summary_table(frame: WindowFrame, title: str, *, head: int = 5, tail: int = 5) -> Table:
    """The first and last windows and the totals, as a rich table."""
    t = Table(
        title=f"{title}: {len(frame):,} windows of {frame['length'].max():g} s",  # edges may be shorter
        caption=f"start: seconds since the trace's start (t = {frame['start'][0]:,.3f} s)",
    )
    for name in ("index", "start", "reads/s", "writes/s", "active", "keyspace", "top-k", "entropy", "label"):
        t.add_column(name, justify="right")
    n = len(frame)
    rows = list(range(min(head, n)))
    if n > head + tail:
        rows += [-1]
    rows += list(range(max(head, n - tail), n))

    for i in rows:
        if i < 0:
            t.add_row(*(["…"] * 9))
            continue
        t.add_row(
            str(frame["index"][i]),
            f"{frame['start'][i] - frame['start'][0]:,.1f}",
            f"{frame.reads_per_s[i]:.1f}",
            f"{frame.writes_per_s[i]:.1f}",
            str(frame["active_keys"][i]),
            f"{frame['keyspace_size'][i]:,}" + ("" if frame["exact"][i] else "~"),
            f"{frame['topk_share'][i]:.3f}",
            f"{frame['entropy'][i]:.2f}",
            str(frame["label"][i]),
        )
    reads, writes = int(frame["reads"].sum()), int(frame["writes"].sum())
    t.add_section()
    t.add_row(
        "total",
        "",
        f"{reads:,} reads",
        f"{writes:,} writes",
        "",
        f"{int(frame['keyspace_size'][-1]):,}",
        "",
        "",
        "",
    )
    return t


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("generate")(generate_cmd)
    app.command("windows")(windows_cmd)


__all__ = [
    "ColumnsOpt",
    "DelimiterOpt",
    "FormatOpt",
    "NoHeaderOpt",
    "OldWorkersOpt",
    "ReadOpOpt",
    "ServiceWindowOpt",
    "SimWorkersOpt",
    "SkipBadOpt",
    "TimeUnitOpt",
    "TraceOptions",
    "WindowOpt",
    "WriteOpOpt",
    "fail_cleanly",
    "progress",
    "register",
    "renamed",
    "report_reading",
    "summary_table",
    "trace_options",
]
