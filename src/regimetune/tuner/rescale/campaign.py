"""Campaigns of rescalings (the paper's protocol, Section VII-B) scored by a user's real costs.

A campaign draws bucket loads and sizes (Normal, 40% std, load summing to 1, 4,096 GB in
total), or takes them from a trace's per-bucket window statistics; runs warm-up rescalings to
random cluster sizes between the bounds with the strategy under test (so the starting
placement is the strategy's own); then records ``operations`` rescalings. Loads and sizes may
drift between operations (``volatility``: std of a log-normal factor per bucket per operation),
or follow the trace's windows in order.

The score of a weight setting is built from per-operation residuals (``f = sum r^2``):

- imbalance: time-averaged ``L_max/L_t - 1`` between one operation and the next (mean of its
  value right after the operation and right before the next one, after the drift);
- memory: the same for the bytes, ``D_max/D_t - 1``: the server that fills first sets the
  capacity every server must have (a Redis master's ``maxmemory``, a disk);
- duration: ``T_max / T_t`` (Eq. 3 over Eq. 11: scale-free);
- spread: the duration's deviation from the mean of operations of the same kind;
- moved: bytes moved over the bytes stored.

Each residual is scaled by ``sqrt(cost weight / K)`` for K recorded operations, so ``f`` is the
weighted sum of mean squares (and, for the spread, of the variance).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from regimetune.models.errors import InputError
from regimetune.models.rescale import PufferscaleWeights
from regimetune.tuner.rescale.planner import (
    DEFAULT_NET_BANDWIDTH,
    ArrayPlan,
    Heuristic,
    Model,
    plan_arrays,
)

COMPONENTS = ("imbalance", "memory", "duration", "spread", "moved")


@dataclass(frozen=True, eq=False)
class CampaignSpec:
    """What a campaign looks like. ``load_series``/``size_series`` (shape ``(W, B)`` or
    ``(B,)``) replace the synthetic draws; with two dimensions operation k sees row
    ``(k * windows_per_operation) % W``. ``p_commission`` None draws every new cluster size
    uniformly between the bounds (the paper); a number makes the next operation a commission
    with that probability. ``costs`` weighs the score's components; ``heuristic`` is the
    planner's (``"paper"`` for Algorithms 1 and 2 as printed)."""

    n_buckets: int = 8192
    total_load: float = 1.0
    total_size: float = 4096e9
    rel_std: float = 0.4
    min_servers: int = 128
    max_servers: int = 2048
    warmup: int = 25
    operations: int = 20
    p_commission: float | None = None
    volatility: float = 0.0
    size_volatility: float = 0.0
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH
    model: Model = "network"
    heuristic: Heuristic = "release"
    load_series: np.ndarray | None = None
    size_series: np.ndarray | None = None
    windows_per_operation: int = 1
    costs: dict[str, float] = field(default_factory=lambda: {c: 1.0 for c in COMPONENTS})

    def validate(self) -> None:
        if not 1 <= self.min_servers < self.max_servers:
            raise InputError(
                f"need 1 <= min_servers < max_servers, got {self.min_servers}, {self.max_servers}"
            )
        if self.operations < 1 or self.warmup < 0:
            raise InputError("a campaign records at least one operation and has warmup >= 0")
        if self.p_commission is not None and not 0 <= self.p_commission <= 1:
            raise InputError(f"p_commission must be in [0, 1], got {self.p_commission}")
        if self.volatility < 0 or self.size_volatility < 0 or self.rel_std < 0:
            raise InputError("volatility and rel_std must be >= 0")
        unknown = set(self.costs) - set(COMPONENTS)
        if unknown:
            raise InputError(f"unknown cost component(s) {sorted(unknown)}; known: {COMPONENTS}")
        for name in ("load_series", "size_series"):
            a = getattr(self, name)
            if a is not None and (np.asarray(a).ndim not in (1, 2) or not np.all(np.asarray(a) >= 0)):
                raise InputError(f"{name} must be a 1-D or 2-D array of non-negative numbers")
        if self.load_series is not None and self.size_series is not None:
            if np.asarray(self.load_series).shape[-1] != np.asarray(self.size_series).shape[-1]:
                raise InputError("load_series and size_series must have the same number of buckets")


@dataclass(frozen=True, eq=False)
class CampaignResult:
    """Per recorded operation arrays, named components (means), residuals and their value."""

    kind: np.ndarray  # 1 commission, 0 decommission
    n_before: np.ndarray
    n_after: np.ndarray
    l_ratio: np.ndarray
    d_ratio: np.ndarray
    t_ratio: np.ndarray
    t_max: np.ndarray
    t_lower_bound: np.ndarray
    moved: np.ndarray
    imbalance: np.ndarray
    memory: np.ndarray
    planner_seconds: np.ndarray
    components: dict[str, float]
    residuals: np.ndarray
    value: float


class Cluster:
    """A placement that rescalings act on; servers are indices ``0..n-1``."""

    def __init__(
        self, load: np.ndarray, size: np.ndarray, n: int, rng: np.random.Generator, **plan_kw: object
    ) -> None:
        self.load = np.asarray(load, dtype=np.float64)
        self.size = np.asarray(size, dtype=np.float64)
        self.n = int(n)
        self.host = np.asarray(rng.integers(0, self.n, self.load.shape[0]), dtype=np.int64)
        self._plan_kw = plan_kw

    def rescale_to(self, m: int, rng: np.random.Generator, weights: PufferscaleWeights) -> ArrayPlan:
        """Commission up to, or decommission (random servers) down to, ``m`` servers."""
        n = self.n
        if m > n:
            stays = np.ones(m, np.bool_)
            res = plan_arrays(self.load, self.size, self.host, stays, n, weights, **self._plan_kw)  # type: ignore[arg-type]
            self.host = res.target
        else:
            stays = np.ones(n, np.bool_)
            stays[rng.choice(n, n - m, replace=False)] = False
            res = plan_arrays(self.load, self.size, self.host, stays, n, weights, **self._plan_kw)  # type: ignore[arg-type]
            self.host = np.asarray((np.cumsum(stays) - 1)[res.target], dtype=np.int64)
        self.n = m
        return res

    def load_ratio(self) -> float:
        return _max_over_mean(self.host, self.load, self.n)

    def data_ratio(self) -> float:
        return _max_over_mean(self.host, self.size, self.n)


def _max_over_mean(host: np.ndarray, values: np.ndarray, n: int) -> float:
    """The fullest server's share of ``values`` over the mean share."""
    per = np.bincount(host, weights=values, minlength=n)
    mean = values.sum() / n
    return float(per.max() / mean) if mean > 0 else 1.0


def _draw(rng: np.random.Generator, n: int, total: float, rel_std: float) -> np.ndarray:
    x = np.abs(rng.normal(1.0, rel_std, n))  # |.| keeps the rare negative draw (p < 1e-6) valid
    return x * (total / x.sum())


def _next_size(spec: CampaignSpec, rng: np.random.Generator, n: int) -> int:
    lo, hi = spec.min_servers, spec.max_servers
    u = rng.random()
    if spec.p_commission is None:
        m = int(rng.integers(lo, hi))  # in [lo, hi - 1]; skip the current size
        return m + 1 if m >= n else m
    grow = (u < spec.p_commission and n < hi) or n <= lo
    return int(rng.integers(n + 1, hi + 1)) if grow else int(rng.integers(lo, n))


def _series_row(a: np.ndarray | None, k: int, per_op: int) -> np.ndarray | None:
    if a is None:
        return None
    a = np.asarray(a, dtype=np.float64)
    return a if a.ndim == 1 else a[(k * per_op) % a.shape[0]]


def simulate_campaign(
    weights: PufferscaleWeights,
    campaign: CampaignSpec,
    *,
    seed: int = 0,
    decommission_weights: PufferscaleWeights | None = None,
) -> CampaignResult:
    """Run ``campaign`` with ``weights``; the same ``seed`` gives every weight setting the same
    buckets, cluster sizes, decommissioned servers and drifts (common random numbers).
    ``decommission_weights`` (default: ``weights``) plan the decommissions instead, e.g. to
    see which kind of operation a setting's gain comes from.

    >>> spec = CampaignSpec(n_buckets=64, min_servers=4, max_servers=8, warmup=3, operations=4)
    >>> r = simulate_campaign(PufferscaleWeights(), spec, seed=1)
    >>> sorted(r.components), r.residuals.shape
    (['duration', 'imbalance', 'memory', 'moved', 'spread'], (20,))
    """
    import time

    campaign.validate()
    rng = np.random.default_rng(seed)
    series_b = next(
        (np.asarray(a).shape[-1] for a in (campaign.load_series, campaign.size_series) if a is not None), None
    )
    nb = campaign.n_buckets if series_b is None else int(series_b)
    base_load = _draw(rng, nb, campaign.total_load, campaign.rel_std)
    base_size = _draw(rng, nb, campaign.total_size, campaign.rel_std)
    drift_rng = np.random.default_rng([seed, 1])  # drifts independent of the operations' draws

    def loads_at(k: int, load: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        row_l = _series_row(campaign.load_series, k, campaign.windows_per_operation)
        row_s = _series_row(campaign.size_series, k, campaign.windows_per_operation)
        # Stationary drift around the drawn values (no compounding: a bucket's expected load
        # stays its base load), renormalised to the campaign's totals.
        if campaign.volatility > 0:
            v = campaign.volatility
            load = base_load * np.exp(v * drift_rng.standard_normal(nb) - v * v / 2)
            load *= campaign.total_load / load.sum()
        if campaign.size_volatility > 0:
            v = campaign.size_volatility
            size = base_size * np.exp(v * drift_rng.standard_normal(nb) - v * v / 2)
            size *= campaign.total_size / size.sum()
        if row_l is not None:
            load = row_l
        if row_s is not None:
            size = row_s
        return load, size

    load, size = loads_at(0, base_load, base_size)
    n0 = int(rng.integers(campaign.min_servers, campaign.max_servers + 1))
    cluster = Cluster(
        load,
        size,
        n0,
        rng,
        model=campaign.model,
        net_bandwidth=campaign.net_bandwidth,
        heuristic=campaign.heuristic,
    )
    total = campaign.warmup + campaign.operations
    rec: dict[str, list[float]] = {
        k: [] for k in CampaignResult.__dataclass_fields__ if k not in ("components", "residuals", "value")
    }
    for k in range(total):
        m = _next_size(campaign, rng, cluster.n)
        n_before = cluster.n
        w = weights if decommission_weights is None or m > n_before else decommission_weights
        t0 = time.perf_counter()
        res = cluster.rescale_to(m, rng, w)
        dt = time.perf_counter() - t0
        after_op = cluster.load_ratio(), cluster.data_ratio()
        load, size = loads_at(k + 1, cluster.load, cluster.size)
        cluster.load, cluster.size = load, size
        before_next = cluster.load_ratio(), cluster.data_ratio()
        if k < campaign.warmup:
            continue
        tg = res.targets
        rec["kind"].append(1.0 if m > n_before else 0.0)
        rec["n_before"].append(n_before)
        rec["n_after"].append(m)
        rec["l_ratio"].append(res.l_max / tg.l_t if tg.l_t > 0 else 1.0)
        rec["d_ratio"].append(res.d_max / tg.d_t if tg.d_t > 0 else 1.0)
        rec["t_ratio"].append(res.t_max / tg.t_t if tg.t_t > 0 else 0.0)
        rec["t_max"].append(res.t_max)
        rec["t_lower_bound"].append(res.t_lower_bound)
        rec["moved"].append(res.bytes_moved / max(float(size.sum()), 1e-300))
        rec["imbalance"].append(0.5 * (after_op[0] + before_next[0]) - 1.0)
        rec["memory"].append(0.5 * (after_op[1] + before_next[1]) - 1.0)
        rec["planner_seconds"].append(dt)
    arr = {k: np.asarray(v) for k, v in rec.items()}
    return _score(arr, campaign.costs)


def _score(arr: dict[str, np.ndarray], costs: dict[str, float]) -> CampaignResult:
    k = arr["kind"].shape[0]
    t = arr["t_ratio"]
    spread = np.zeros(k)
    for kind in (0.0, 1.0):
        sel = arr["kind"] == kind
        if sel.any():
            spread[sel] = t[sel] - t[sel].mean()
    parts = {
        "imbalance": arr["imbalance"],
        "memory": arr["memory"],
        "duration": t,
        "spread": spread,
        "moved": arr["moved"],
    }
    residuals = np.concatenate([np.sqrt(costs.get(c, 0.0) / k) * parts[c] for c in COMPONENTS])
    components = {
        "imbalance": float(arr["imbalance"].mean()),
        "memory": float(arr["memory"].mean()),
        "duration": float(t.mean()),
        "spread": float(np.sqrt(np.mean(spread**2))),
        "moved": float(arr["moved"].mean()),
    }
    return CampaignResult(
        **arr,
        components=components,
        residuals=residuals,
        value=float(residuals @ residuals),
    )


@dataclass(frozen=True, eq=False)
class ScenarioRuns:
    """Recorded operations of :func:`run_scenario`, one entry per repetition."""

    l_ratio: np.ndarray
    d_ratio: np.ndarray
    t_ratio: np.ndarray
    t_max: np.ndarray
    t_target: np.ndarray
    t_lower_bound: np.ndarray
    moved: np.ndarray
    planner_seconds: np.ndarray  # CPU seconds of the planning thread


def run_scenario(
    weights: PufferscaleWeights,
    *,
    start: int,
    end: int,
    reps: int,
    n_buckets: int = 8192,
    total_size: float = 4096e9,
    min_servers: int = 128,
    max_servers: int = 2048,
    warmup: int = 25,
    between: int = 9,
    seed: int = 0,
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH,
    heuristic: Heuristic = "release",
) -> ScenarioRuns:
    """The paper's protocol (VII-B): draw buckets, ``warmup`` random rescalings with the same
    strategy, then ``reps`` times: ``between`` rescalings, the last of which goes to ``start``
    servers, then the recorded rescaling from ``start`` to ``end``. ``heuristic="paper"``
    plans with Algorithms 1 and 2 as printed, to reproduce the paper's figures.

    >>> r = run_scenario(PufferscaleWeights(), start=5, end=8, reps=2, n_buckets=16,
    ...                  total_size=8e9, min_servers=2, max_servers=8, warmup=9)
    >>> r.l_ratio.shape
    (2,)
    """
    import time

    if not (min_servers <= start <= max_servers and min_servers <= end <= max_servers and start != end):
        raise InputError(f"start and end must differ and lie in [{min_servers}, {max_servers}]")
    rng = np.random.default_rng(seed)
    load = _draw(rng, n_buckets, 1.0, 0.4)
    size = _draw(rng, n_buckets, total_size, 0.4)
    spec = CampaignSpec(min_servers=min_servers, max_servers=max_servers)
    cluster = Cluster(
        load,
        size,
        int(rng.integers(min_servers, max_servers + 1)),
        rng,
        net_bandwidth=net_bandwidth,
        heuristic=heuristic,
    )
    for _ in range(warmup):
        cluster.rescale_to(_next_size(spec, rng, cluster.n), rng, weights)
    out: dict[str, list[float]] = {k: [] for k in ScenarioRuns.__dataclass_fields__}
    for _ in range(reps):
        for _ in range(between - 1):
            cluster.rescale_to(_next_size(spec, rng, cluster.n), rng, weights)
        if cluster.n != start:
            cluster.rescale_to(start, rng, weights)
        t0 = time.thread_time()  # one core's work, whatever else the machine runs
        res = cluster.rescale_to(end, rng, weights)
        out["planner_seconds"].append(time.thread_time() - t0)
        tg = res.targets
        out["l_ratio"].append(res.l_max / tg.l_t)
        out["d_ratio"].append(res.d_max / tg.d_t)
        out["t_ratio"].append(res.t_max / tg.t_t)
        out["t_max"].append(res.t_max)
        out["t_target"].append(tg.t_t)
        out["t_lower_bound"].append(res.t_lower_bound)
        out["moved"].append(res.bytes_moved / total_size)
    return ScenarioRuns(**{k: np.asarray(v) for k, v in out.items()})
