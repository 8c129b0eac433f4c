"""``regimetune plan``: a what-if Pufferscale rescaling plan for a bucket table.

BUCKETS is a CSV (header ``bucket,load,size,server``) or a JSON list of such objects;
``size`` is in bytes, ``server`` the bucket's current host. The current servers are the ones
named in the table plus ``--servers``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from regimetune.cli.output import print_tables
from regimetune.cli.traces import fail_cleanly
from regimetune.models import ConfigError, PufferscaleWeights, RescaleOperation, RescalePlan
from regimetune.models.rescale import PRESETS


def parse_weights(text: str) -> PufferscaleWeights:
    """A preset name (L, LT, DT, LDT) or ``wl,wd,wt`` (W_L and W_D are scaled so the larger is 1)."""
    if text.upper() in PRESETS:
        return PRESETS[text.upper()]
    parts = text.split(",")
    try:
        wl, wd, wt = (float(x) for x in parts)
    except ValueError:
        raise ConfigError(
            f"--weights must be one of {', '.join(PRESETS)} or three numbers wl,wd,wt; got {text!r}"
        ) from None
    if min(wl, wd, wt) <= 0:
        raise ConfigError(f"--weights must be > 0, got {text!r}")
    return PufferscaleWeights.normalised(wl, wd, wt)


def _ids(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{what} must be comma-separated server ids, got {text!r}") from None


def plan_json(plan: RescalePlan) -> dict[str, Any]:
    return {
        "metrics": plan.metrics.model_dump(),
        "placement": {str(k): v for k, v in plan.placement.items()},
        "migrations": [m.model_dump() for m in plan.migrations],
    }


def _print(plan: RescalePlan, console: Console, weights: PufferscaleWeights, *, commission: bool) -> None:
    m = plan.metrics
    t = Table(
        title=f"Pufferscale plan (W_L={weights.w_load:g}, W_D={weights.w_data:g}, W_T={weights.w_time:g})"
    )
    for col in ("objective", "plan", "target", "plan / target"):
        t.add_column(col, justify="right" if col != "objective" else "left")

    def row(name: str, v: float, ref: float | None, unit: str = "") -> None:
        ratio = f"{v / ref:.3f}" if ref else "-"
        t.add_row(name, f"{v:.6g}{unit}", "-" if ref is None else f"{ref:.6g}{unit}", ratio)

    row("max load per server (L_max)", m.l_max, m.l_target)
    row("max data per server (D_max, B)", m.d_max, m.d_target)
    row("duration (T_max, s)", m.t_max, m.t_target)
    # A commission may leave new servers empty (no time at all): its bound is the one of
    # reaching data balance, which a plan that trades balance for time may beat.
    label = "lower bound to reach data balance (s)" if commission else "duration lower bound (s)"
    row(label, m.t_lower_bound or 0.0, None)
    row("bytes moved", m.bytes_moved, None)
    print_tables(console, t)
    flows = Counter((mig.source, mig.target) for mig in plan.migrations)
    senders = Counter(mig.source for mig in plan.migrations)
    receivers = Counter(mig.target for mig in plan.migrations)
    console.print(
        f"{len(plan.migrations)} migrations between {len(flows)} server pairs; "
        f"{len(senders)} servers send, {len(receivers)} receive."
    )


def plan_command(
    buckets: Annotated[Path, typer.Argument(help="CSV or JSON table of bucket,load,size,server.")],
    commission: Annotated[int | None, typer.Option(help="Number of new servers to add.")] = None,
    decommission: Annotated[str | None, typer.Option(help="Comma-separated server ids to remove.")] = None,
    weights: Annotated[str, typer.Option(help="Preset L|LT|DT|LDT or wl,wd,wt.")] = "LDT",
    net_bandwidth: Annotated[float, typer.Option(help="Per-node network bandwidth, bytes/s.")] = 1.25e9,
    capacity: Annotated[float | None, typer.Option(help="Per-server capacity, bytes.")] = None,
    model: Annotated[
        str, typer.Option(help="Bottleneck: 'network' (Eq. 3) or 'storage' (Eq. 21).")
    ] = "network",
    write_bandwidth: Annotated[
        float, typer.Option(help="Storage write speed, bytes/s (storage model).")
    ] = 0.5e9,
    read_bandwidth: Annotated[
        float, typer.Option(help="Storage read speed, bytes/s (storage model).")
    ] = 1.0e9,
    servers: Annotated[str | None, typer.Option(help="Extra current server ids that hold no bucket.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Plan a commission or decommission with the Pufferscale heuristic (what-if: nothing moves)."""
    from regimetune.tuner.rescale import plan_rescale
    from regimetune.tuner.rescale.io import read_bucket_table

    with fail_cleanly():
        if (commission is None) == (decommission is None):
            raise ConfigError("give exactly one of --commission N or --decommission IDS")
        w = parse_weights(weights)
        table, placement, current = read_bucket_table(buckets)
        if servers:
            current = sorted(set(current) | set(_ids(servers, "--servers")))
        if commission is not None:
            if commission < 1:
                raise ConfigError(f"--commission must be >= 1, got {commission}")
            op = RescaleOperation(kind="commission", count=commission)
        else:
            ids = _ids(decommission or "", "--decommission")
            if not ids or len(set(ids)) != len(ids):
                raise ConfigError("--decommission needs distinct server ids")
            op = RescaleOperation(kind="decommission", servers=ids)
        if model not in ("network", "storage"):
            raise ConfigError(f"--model must be 'network' or 'storage', got {model!r}")
        plan = plan_rescale(
            table,
            placement,
            current,
            op,
            w,
            net_bandwidth=net_bandwidth,
            capacity=capacity,
            model=model,  # type: ignore[arg-type]
            write_bandwidth=write_bandwidth,
            read_bandwidth=read_bandwidth,
        )
    if as_json:
        typer.echo(json.dumps(plan_json(plan)))
    else:
        _print(plan, Console(), w, commission=commission is not None)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("plan")(plan_command)
