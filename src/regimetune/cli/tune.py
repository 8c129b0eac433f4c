"""``regimetune tune``: tune a storage service's knobs per regime on a recorded trace.

The trace becomes a :class:`regimetune.tuner.Workload` and :func:`regimetune.tuner.tune`
tunes it: ``--objective cache`` a key limit per detected regime and the two-phase switch
point, ``--objective rescale`` the Pufferscale weights per regime. This module only reads the
options, prints the tuned policy beside the baselines and writes the policy file and report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from regimetune.cli.detect import DetectorParamOpt, online_detector
from regimetune.cli.output import prepare_output, print_tables
from regimetune.cli.traces import (
    ColumnsOpt,
    DelimiterOpt,
    FormatOpt,
    NoHeaderOpt,
    ReadOpOpt,
    SkipBadOpt,
    TimeUnitOpt,
    WindowOpt,
    WriteOpOpt,
    fail_cleanly,
    renamed,
    report_reading,
    trace_options,
)
from regimetune.models.errors import ConfigError
from regimetune.models.windows import DEFAULT_WINDOW_S
from regimetune.reports.page import BASELINE_LABELS, BASELINE_NOTE, tuned_policy_text


def _fraction(name: str, v: float, *, closed_low: bool = False) -> float:
    if not (0.0 < v < 1.0 or (v == 1.0 and closed_low)):
        raise ConfigError(f"{name} must be a fraction in (0, 1{']' if closed_low else ')'}, got {v}")
    return v


def _row_cells(label: str, row: dict[str, float]) -> list[str]:
    return [
        label,
        f"{row['efficiency']:.4f}",
        f"{row['memory_fraction'] * 100:.2f}%",
        f"{row['mean_bytes'] / 1e6:,.1f} MB",
        f"{row['peak_bytes'] / 1e6:,.1f} MB",
        f"{row.get('hit_ratio_vs_unlimited', row['hit_ratio']):.4f}",
        "yes" if row["feasible"] else "no",
    ]


def _print_cache_report(report: dict[str, Any], out: Path | None) -> None:
    con = Console()
    best = report["best"]
    table = Table(title="cache policies on this trace", title_justify="left")
    for col in ("policy", "efficiency", "mem/unl.", "mem avg", "mem peak", "hits/unl.", "meets"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    table.add_row(*_row_cells("[bold]tuned[/]", best))
    for name, row in report["baselines"].items():
        table.add_row(*_row_cells(BASELINE_LABELS.get(name, name), row))
    print_tables(con, table)
    con.print(BASELINE_NOTE, highlight=False)
    obj = report["target"]
    con.print(
        f"{tuned_policy_text(best)}\n"
        f"target: efficiency >= {obj['efficiency_target']}, memory <= {obj['memory_budget'] * 100:.1f}% "
        f"of unlimited; {report['optimizer']}, {report['n_evaluations']} evaluations; store "
        f"{report['store']['capacity_ops_s']:g} ops/s, miss cost {report['cost_model']['miss_cost']:g} x compute",
        highlight=False,
    )
    _print_sweep(con, report)
    for note in report["binds"]["notes"]:
        con.print(f"note: {note}", highlight=False)
    dec = report["decision"]
    con.print(f"{'push' if dec['push'] else 'do not push'}: {dec['reason']}", highlight=False)
    if out is not None:
        con.print(f"wrote the policy file to {out}", highlight=False)


def _print_sweep(con: Console, report: dict[str, Any]) -> None:
    sweep = report.get("sweep") or {}
    if not sweep:
        return
    names = list(next(iter(sweep.values())))
    table = Table(title="efficiency over the miss cost (x compute per request)", title_justify="left")
    table.add_column("policy")
    for m in sweep:
        table.add_column(m, justify="right")
    for n in names:
        table.add_row(BASELINE_LABELS.get(n, n), *(f"{sweep[m][n]:.4f}" for m in sweep))
    print_tables(con, table)


def tune_cmd(
    trace: Annotated[Path, typer.Argument(help="Trace file.")],
    objective: Annotated[
        str, typer.Option("--objective", help="What to tune: 'cache' (limits per regime) or 'rescale'.")
    ] = "cache",
    budget: Annotated[int, typer.Option("--budget", min=1, help="Simulations the optimizer may run.")] = 80,
    optimizer: Annotated[
        str, typer.Option("--optimizer", help="'Pounders' or any nevergrad optimizer name.")
    ] = "Pounders",
    efficiency_target: Annotated[
        float,
        typer.Option("--efficiency-target", help="Least acceptable efficiency (trace / simulated time)."),
    ] = 0.96,
    memory_budget: Annotated[
        float,
        typer.Option(
            "--memory-budget", help="Most time-averaged memory, as a fraction of the unlimited cache's."
        ),
    ] = 0.076,
    efficiency_weight: Annotated[
        float,
        typer.Option(
            "--efficiency-weight", min=0.0, help="Weight of an efficiency shortfall in the objective."
        ),
    ] = 1.0,
    memory_weight: Annotated[
        float,
        typer.Option("--memory-weight", min=0.0, help="Weight of memory (and of exceeding the budget)."),
    ] = 1.0,
    window: WindowOpt = DEFAULT_WINDOW_S,
    store_ops: Annotated[
        float | None,
        typer.Option(
            "--store-ops", help="Persistent store throughput, ops/s (default: sized by --store-headroom)."
        ),
    ] = None,
    store_buffer: Annotated[
        float | None, typer.Option("--store-buffer", help="Seconds of store work the tiers can buffer.")
    ] = None,
    value_size: Annotated[int, typer.Option("--value-size", min=1, help="Bytes per cached value.")] = 4096,
    miss_cost: Annotated[
        float,
        typer.Option(
            "--miss-cost",
            min=0.0,
            help="Read-miss latency relative to the compute time per request (ParSplice on LevelDB/Lustre: 0.05).",
        ),
    ] = 0.05,
    store_headroom: Annotated[
        float,
        typer.Option(
            "--store-headroom",
            min=1.0,
            help="Store throughput as a multiple of the heaviest window's unavoidable load (ignored with --store-ops).",
        ),
    ] = 1.5,
    max_limit: Annotated[
        str | None,
        typer.Option(
            "--max-limit", help="Largest regime limit: keys ('10000') or a share of the keyspace ('5%')."
        ),
    ] = None,
    holdout: Annotated[
        float | None,
        typer.Option(
            "--holdout",
            min=0.0,
            max=0.5,
            help="Share of the data held apart to validate the tuned policy: windows (cache; default "
            "0.25) or campaigns (rescale; default 0.5).",
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option("--jobs", "-j", min=0, help="Local processes for evaluations (0: in this process)."),
    ] = 2,
    jobs_old: Annotated[
        int | None, typer.Option("--workers", min=0, hidden=True, help="Old name of --jobs.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the optimizer.")] = 0,
    param: DetectorParamOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the policy file (JSON) here.")] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Write a self-contained HTML report here (regimes, miss-ratio curves, limits over time, "
            "convergence, baselines; rescale: weights and campaign scores).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON instead of tables.")
    ] = False,
    fmt: FormatOpt = None,
    columns: ColumnsOpt = None,
    read_op: ReadOpOpt = None,
    write_op: WriteOpOpt = None,
    time_unit: TimeUnitOpt = "s",
    skip_bad: SkipBadOpt = 0,
    delimiter: DelimiterOpt = None,
    no_header: NoHeaderOpt = False,
) -> None:
    """Tune cache limits per detected regime (or rescaling weights) on a recorded trace."""
    with fail_cleanly():
        opts = trace_options(
            fmt=fmt, columns=columns, read_op=read_op, write_op=write_op, time_unit=time_unit,
            skip_bad=skip_bad, delimiter=delimiter, no_header=no_header,
        )  # fmt: skip
        if report is not None and report.suffix.lower() not in (".html", ".htm"):
            raise ConfigError(f"--report must end in .html, got {report.name!r}")
        if objective not in ("cache", "rescale"):
            raise ConfigError(f"--objective must be 'cache' or 'rescale', got {objective!r}")
        prepare_output(out)
        prepare_output(report)
        from regimetune.tuner import (
            CacheConfig,
            CacheObjective,
            CostModel,
            RescaleConfig,
            Validation,
            Workload,
            tune,
        )
        from regimetune.tuner.cache.limits import KeyLimit

        config: CacheConfig | RescaleConfig
        if objective == "rescale":
            config = RescaleConfig(budget=budget, optimizer=optimizer, seed=seed)
        else:
            config = CacheConfig(
                objective=CacheObjective(
                    efficiency_target=_fraction("--efficiency-target", efficiency_target),
                    memory_budget=_fraction("--memory-budget", memory_budget, closed_low=True),
                    efficiency_weight=efficiency_weight,
                    memory_weight=memory_weight,
                ),
                cost=CostModel(
                    miss_cost=miss_cost,
                    store_headroom=store_headroom,
                    store_ops_s=store_ops,
                    buffer_s=CostModel().buffer_s if store_buffer is None else store_buffer,
                ),
                value_size=value_size,
                max_limit=None if max_limit is None else KeyLimit.parse(max_limit),
                budget=budget,
                optimizer=optimizer,
                seed=seed,
            )
        detector = online_detector(window, None, param)  # checked before the trace is read
        with _bar(as_json) as prog:
            task = prog.add_task("reading", total=None)

            reader = opts.open(trace)

            def batches() -> Iterator[Any]:  # streamed: windowed and spooled one at a time
                n = 0
                for b in reader:
                    yield b
                    n += len(b)
                    prog.update(task, description=f"reading ({n:,} events)")
                report_reading(reader)
                prog.update(task, description="windows, regimes")

            workload = Workload.from_batches(
                batches(), window_s=window, detector=detector, name=str(trace), keep_events=report is not None
            )

            def on_progress(done: int, total: int) -> None:
                prog.update(task, description="tuning", completed=done, total=total)

            result = tune(
                workload, objective, config=config, validation=Validation(holdout=holdout),
                workers=renamed(jobs, jobs_old), progress=on_progress,
            )  # fmt: skip
            if report is not None:
                prog.update(task, description="report")
                _write_report(report, result, workload, trace.name)
        if out is not None:
            out.write_text(result.policy_file.model_dump_json(indent=2) + "\n")
        if as_json:
            typer.echo(json.dumps(result.report, default=str))
        elif objective == "cache":
            _print_cache_report(result.report, out)
        else:
            _print_rescale_report(result.report, out)
        if report is not None and not as_json:
            Console().print(f"wrote the report to {report}", highlight=False)


def _write_report(path: Path, result: Any, workload: Any, name: str) -> None:
    from regimetune.reports.tune import write_cache_tune_report, write_rescale_tune_report

    if result.objective.value == "cache":
        write_cache_tune_report(path, result, workload=workload, title=f"{name}: cache limits per regime")
    else:
        write_rescale_tune_report(
            path, result, workload=workload, title=f"{name}: rescaling weights per regime"
        )


def _print_rescale_report(report: dict[str, Any], out: Path | None) -> None:
    con = Console()
    t = Table(title="Pufferscale weights per regime", title_justify="left")
    for col in ("regime", "W_L", "W_D", "W_T", "objective", "best preset", "gain", "held-out gain"):
        t.add_column(col, justify="right")
    regimes = report["regimes"]
    for r, rep in regimes.items():
        w, best = rep["weights"], rep["best_preset"]
        held, presets = rep["held_out_value"], rep["held_out_preset_values"]
        held_gain = (
            f"{100 * (1 - held / min(presets.values())):.1f}%"
            if held is not None and presets
            else "not measured"
        )
        t.add_row(
            _regime_label(r),
            f"{w['w_load']:.3g}",
            f"{w['w_data']:.3g}",
            f"{w['w_time']:.3g}",
            f"{rep['value']:.4g}",
            f"{best} {rep['preset_values'][best]:.4g}",
            f"{100 * rep['improvement_over_best_preset']:.1f}%",
            held_gain,
        )
    print_tables(con, t)
    for r, rep in regimes.items():
        con.print(f"{_regime_label(r)}: {rep['reason']}", highlight=False)
    if out is not None:
        con.print(f"wrote the policy file to {out}", highlight=False)


def _regime_label(r: Any) -> str:
    """A regime's name in the tables; label -1 is the default, in force before the first regime."""
    return "default (before the first regime)" if int(r) < 0 else f"regime {r}"


def _bar(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=quiet or not Console(stderr=True).is_terminal,
    )


def register(app: typer.Typer) -> None:
    """Add ``tune`` to ``app``."""
    app.command("tune")(tune_cmd)
