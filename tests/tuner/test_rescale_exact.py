"""The exact MILP reference and the heuristic's optimality gap on small random instances."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.models import PRESETS, Bucket, InputError, RescaleOperation
from regimetune.tuner.rescale import plan_rescale
from regimetune.tuner.rescale.exact import solve_exact


def _instance(rng: np.random.Generator, kind: str):  # type: ignore[no-untyped-def]
    n = 16
    load = np.abs(rng.normal(1, 0.4, n))
    size = np.abs(rng.normal(1, 0.4, n)) * 8e9 / n
    buckets = [Bucket(id=j, load=float(load[j]), size=float(size[j])) for j in range(n)]
    if kind == "commission":
        servers = list(range(5))
        op = RescaleOperation(kind="commission", count=3)
    else:
        servers = list(range(8))
        op = RescaleOperation(
            kind="decommission", servers=tuple(sorted(rng.choice(8, 3, replace=False).tolist()))
        )
    placement = {j: int(rng.choice(servers)) for j in range(n)}
    return buckets, placement, servers, op


def _weighted(plan, w) -> float:  # type: ignore[no-untyped-def]
    m = plan.metrics
    return w.w_load * m.l_max / m.l_target + w.w_data * m.d_max / m.d_target + w.w_time * m.t_max / m.t_target


@pytest.mark.slow  # several MILPs of 64 binaries: ~10 s, more on a loaded machine
@pytest.mark.parametrize(("preset", "median_bound"), [("LT", 0.4), ("DT", 0.3)])
def test_exact_beats_heuristic_and_gap_is_bounded(preset: str, median_bound: float) -> None:
    # Measured on random 16-bucket instances from a random initial placement (3 <-> 4
    # servers, weighted objective, HiGHS within 1%): DT's gap had median 0.11, max 0.17; LT's
    # median 0.12-0.23, max 0.61. A random start is harder than the balanced placement the
    # heuristic keeps after warm-up, which is why the gaps are this large; LDT's MILP rarely
    # closes within 30 s, so it is measured in the report, not here.
    rng = np.random.default_rng(11)
    w = PRESETS[preset]
    gaps = []
    for k in range(4):
        inst = _instance(rng, "commission" if k % 2 else "decommission")
        exact = solve_exact(*inst, w, time_limit=20, rel_gap=0.01)
        heur = plan_rescale(*inst, w)
        assert exact.optimal
        h = _weighted(heur, w)
        assert exact.objective <= h * 1.01  # the optimum (within 1%) is never worse
        gaps.append(h / exact.objective - 1)
        assert not set(exact.plan.placement.values()) & set(inst[3].servers)
    assert float(np.median(gaps)) < median_bound
    assert max(gaps) < 1.0


def test_paper_lexicographic_strategies() -> None:
    rng = np.random.default_rng(2)
    inst = _instance(rng, "decommission")
    l_opt = solve_exact(*inst, objective="paper", strategy="L")
    lt = solve_exact(*inst, objective="paper", strategy="LT")
    # LT keeps L_max within 10% of L's optimum and is at least as fast.
    assert lt.plan.metrics.l_max <= 1.1 * l_opt.plan.metrics.l_max + 1e-9
    assert lt.plan.metrics.t_max <= l_opt.plan.metrics.t_max + 1e-9
    heur = plan_rescale(*inst, PRESETS["L"])
    assert l_opt.plan.metrics.l_max <= heur.metrics.l_max + 1e-9


def test_exact_refuses_large_instances() -> None:
    buckets = [Bucket(id=j, load=1.0, size=1.0) for j in range(40)]
    with pytest.raises(InputError, match="small instances"):
        solve_exact(buckets, {j: 0 for j in range(40)}, [0], RescaleOperation(kind="commission", count=2))
