"""Re-dating the end of a transition with the windows that followed it.

Online, the end of a decline is dated when it is confirmed, from the little of the new
plateau seen so far: the knee of a line that turns flat, which lands late on a long
exponential decline (the rate is then within noise of the plateau for a long time). A
replay sees the plateau to its end, so it can fit the decline as what it usually is, an
exponential relaxation from the previous level, ``c + (before - c) exp(-(s - s0) / tau)``,
and date its end at the settling time: when the curve stays within ``band`` of its whole
move (5 %: three time constants, the usual definition). The fit is used only where it
explains the rate better than the line that turns flat (same data, the same number of
parameters), so a linear ramp keeps its knee, and it only ever moves a date earlier: the
online date was confirmed flat from there on, and being dated from a short stretch of
plateau, it errs late.

Only the dates (``at`` of the changes) and the back-dated labels move; the confirmations,
the online labels and the detector's state do not.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from regimetune.regimes._kernel import _knee

#: Time constants tried, log-spaced from one window to four times the fitted span.
_N_TAU = 256
#: Windows of the previous regime that give the level a transition started from.
_BEFORE = 30


def _relaxation(v: np.ndarray, before: float) -> tuple[float, float]:
    """Least-squares time constant of ``c + (before - c) exp(-i / tau)`` and its residual
    sum of squares."""
    n = len(v)
    taus = np.geomspace(1.0, 4.0 * n, _N_TAU)
    e = np.exp(-np.arange(n)[None, :] / taus[:, None])
    u = 1.0 - e  # v - before e = c u
    w = v[None, :] - before * e
    suu = np.einsum("ij,ij->i", u, u)
    suw = np.einsum("ij,ij->i", u, w)
    rss = np.einsum("ij,ij->i", w, w) - suw**2 / np.maximum(suu, 1e-300)
    k = int(np.argmin(rss))
    return float(taus[k]), float(rss[k])


def redate_transition_ends(
    rate: np.ndarray,
    labels: np.ndarray,
    changes: np.ndarray,
    transitions: Collection[int],
    first: int,
    *,
    min_seg: int,
    band: float = 0.05,
) -> None:
    """Re-date, in place, each change from a transition to a steady regime that lies in this
    replay with the transition's start. ``rate`` is the trend as a rate (one value per window
    of ``labels``), ``changes`` rows are ``(from, to, at, confirmed)`` window counters and
    ``first`` is the counter of ``labels[0]``."""
    n = len(rate)
    for r in range(len(changes)):
        frm, to, at = (int(v) for v in changes[r, :3])
        if frm not in transitions or to in transitions:
            continue
        into = [q for q in range(r) if changes[q, 1] == frm]
        if not into or changes[into[-1], 0] < 0:
            continue
        s0 = int(changes[into[-1], 2]) - first
        a = at - first
        e = int(changes[r + 1, 2]) - first if r + 1 < len(changes) else n
        if not (_BEFORE <= s0 < a < e <= n) or e - s0 < 4 * min_seg:
            continue
        v = rate[s0:e].astype(np.float64)
        before = float(np.mean(rate[s0 - _BEFORE : s0]))
        tau, rss = _relaxation(v, before)
        if rss >= _knee(v, min_seg)[1]:
            continue
        settle = s0 + int(np.ceil(tau * np.log(1.0 / band)))
        # only ever earlier: the online date was confirmed flat from there on, and dated from
        # a short stretch of plateau, it errs late
        new = min(max(settle, s0 + min_seg), a)
        labels[new:a] = to
        changes[r, 2] = new + first


__all__ = ["redate_transition_ends"]
