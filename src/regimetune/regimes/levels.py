"""The regime layer: the change test's segments, in order, become regimes with stable ids.

Each segment is summed up as a :class:`Piece`: its head and tail (the means of its first and
last ``min_regime_s`` of blocks, with their standard errors), its lines' slopes, and its kind
once it is long enough to have one (``min_regime_s``): a **transition** where some feature's
line moves faster than ``drift_per_h`` (significantly, at ``match_p``) and by at least
``min_step`` over the segment, else a **level**. Then, piece by piece:

1. A piece that **continues** the regime in force (no step of ``min_step`` that is also
   significant between that regime's tail, the mean of its last ``min_regime_s``, and the
   piece's head, and the same kind, a transition going the same way) joins it; the pieces
   held back since (see 3) were a burst of it. A level and a move of one piece next to it
   with no step between are one level where, read as one line, they are a level and the
   line runs through the move's far end, no step from it (a level settling after its step).
2. A long piece that does not continue it **founds** a regime: a level returns to a known
   level's id when every feature is within ``min_step / 2`` of it, else it takes a new id. The
   pieces held back since the regime in force are settled: together at least ``min_regime_s``
   long they are a transition between the two (unless the regime left was one: then they
   were its end), else the first go with the regime left and the rest with the new one,
   where the split is nearest to each.
3. Any other piece (short, or a transition leaving a level) is **held back** until one of
   the above settles it; at the end of the blocks (a replay's end, or the blocks seen so far
   when the service asks for the regime in force) it is settled as in 2.

So a level that wanders slowly stays one regime, a burst that comes back leaves none, a sharp
step founds one, and a move between two levels that lasts is a transition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

LEVEL = "level"
TRANSITION = "transition"


class Rules(NamedTuple):
    """The layer's parameters in blocks and feature units (from ``DetectorParams``)."""

    min_blocks: int
    min_step: float | np.ndarray  # per feature, or one for all
    drift: float  # feature units per block
    z: float
    max_regimes: int
    join: bool = True  # False: every segment is a change (no piece continues a regime)


@dataclass(frozen=True)
class Piece:
    """A segment of blocks ``[start, end)`` summed up for the regime layer."""

    start: int
    end: int
    head: tuple[float, ...]
    tail: tuple[float, ...]
    sd: tuple[float, ...]  # standard error of the head and of the tail
    mean: tuple[float, ...]
    slope: tuple[float, ...]
    kind: str | None  # None: too short to tell

    @property
    def n(self) -> int:
        return self.end - self.start

    @classmethod
    def of(cls, y: np.ndarray, start: int, var: np.ndarray, rules: Rules) -> Piece:
        """Sum up the blocks ``y`` (rows, the first at block counter ``start``)."""
        n = len(y)
        k = min(n, rules.min_blocks)
        sd = np.sqrt(var / k)
        slope = np.zeros(y.shape[1])
        kind = None
        if n >= rules.min_blocks:
            t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
            stt = float((t * t).sum())
            if stt > 0:
                slope = (t[:, None] * (y - y.mean(axis=0))).sum(axis=0) / stt
            kind = _pace(slope, stt, n, var, rules)
        return cls(
            start=start,
            end=start + n,
            head=tuple(y[:k].mean(axis=0).tolist()),
            tail=tuple(y[n - k :].mean(axis=0).tolist()),
            sd=tuple(sd.tolist()),
            mean=tuple(y.mean(axis=0).tolist()),
            slope=tuple(slope.tolist()),
            kind=kind,
        )

    def line_at(self, block: float) -> np.ndarray:
        """The piece's line at block counter ``block``."""
        return np.asarray(self.mean) + np.asarray(self.slope) * (block - (self.start + self.end - 1) / 2.0)

    def followed_by(self, q: Piece, k: int) -> Piece:
        """This piece as the reference of its regime once the short piece ``q`` has joined
        it: its tail becomes the mean of the regime's last ``k`` blocks (this tail's blocks
        read at their mean), so steps are measured from where the regime last stood."""
        m = min(q.n, k)
        tail = (np.asarray(self.tail) * (k - m) + np.asarray(q.mean) * m) / k
        return replace(self, tail=tuple(tail.tolist()))

    def together(self, q: Piece, rules: Rules) -> Piece:
        """This piece and the later long piece ``q`` read as one: the least-squares line of
        both (from each one's mean and slope), its kind by its pace, ``q``'s tail."""
        n = np.array([self.n, q.n], dtype=np.float64)
        c = np.array([(self.start + self.end - 1) / 2.0, (q.start + q.end - 1) / 2.0])
        m, b = np.array([self.mean, q.mean]), np.array([self.slope, q.slope])
        sxx = n * (n * n - 1.0) / 12.0
        centre, mean = float(n @ c) / n.sum(), (n @ m) / n.sum()
        stt = float(sxx.sum() + (n * (c - centre) ** 2).sum())
        slope = (
            (sxx[:, None] * b).sum(axis=0) + ((n * (c - centre))[:, None] * (m - mean)).sum(axis=0)
        ) / stt
        var = np.asarray(self.sd) ** 2 * min(self.n, rules.min_blocks)
        return replace(
            self,
            end=q.end,
            tail=q.tail,
            mean=tuple(mean.tolist()),
            slope=tuple(slope.tolist()),
            kind=_pace(slope, stt, q.end - self.start, var, rules),
        )


@dataclass
class RegimeLayer:
    """The regimes found so far: runs of blocks with ids, the regime in force and what it
    ended at, the pieces held back, the known levels."""

    runs: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, id), in order
    kinds: dict[int, str] = field(default_factory=dict)
    levels: dict[int, tuple[float, ...]] = field(default_factory=dict)  # a level regime's last level
    centroids: dict[int, tuple[float, ...]] = field(default_factory=dict)
    current: Piece | None = None  # the last piece of the regime in force
    current_id: int = -1
    held: list[Piece] = field(default_factory=list)

    @property
    def n_regimes(self) -> int:
        return len(self.kinds)

    def feed(self, p: Piece, rules: Rules) -> None:
        """Take the next segment; one that starts where the piece in force started is that
        piece grown (the service's regime in force is read from a growing segment)."""
        cur = self.current
        if cur is not None and p.start == cur.start and not self.held:
            s, _, rid = self.runs[-1]
            self.runs[-1] = (s, p.end, rid)
            if p.kind is not None:
                if self._alone(p):  # the regime is this piece alone: it is what the piece is
                    self.kinds[rid] = p.kind
                self.current = p
                self._note(p, rid)
            return
        alone = cur is not None and self._alone(cur)
        if cur is not None and _continues(cur, p, rules, alone=alone):
            self._label(self.held, self.current_id)  # a burst: the trace came back
            self.held = []
            self._label([p], self.current_id)
            if p.kind is None:
                self.current = cur.followed_by(p, rules.min_blocks)
            elif p.kind != cur.kind:  # a level with a short move in it: the regime is that level
                if alone:
                    self.kinds[self.current_id] = LEVEL
                self.current = cur.together(p, rules)
                self._note(self.current, self.current_id)
            else:
                self.current = p
            return
        if p.kind == LEVEL or (cur is None and p.kind == TRANSITION):
            late = self._settle(p, rules)
            back = self._match(p, rules) if p.kind == LEVEL else None
            found = self._new_id(p, rules) if back is None else back
            self._label([*late, p], found)
            self.current, self.current_id = p, found
            return
        self.held.append(p)

    def _alone(self, piece: Piece) -> bool:
        """Whether the regime in force is ``piece`` alone (it began there, and not before)."""
        return (
            bool(self.runs)
            and self.runs[-1][0] == piece.start
            and all(r[2] != self.current_id for r in self.runs[:-1])
        )

    def finish(self, rules: Rules, *, growing: bool = False) -> None:
        """Settle the pieces held back at the end of the blocks. ``growing``: the blocks go
        on (the service's reading), so the last piece may still settle into a level: the
        held pieces make a transition only if those before it lasted ``min_regime_s``. The
        first regime is founded once the pieces held have lasted ``min_regime_s``."""
        if self.current is None and sum(q.n for q in self.held) < rules.min_blocks:
            return  # nothing has lasted long enough to be the first regime
        if growing and self.current is not None and sum(q.n for q in self.held[:-1]) < rules.min_blocks:
            return
        late = self._settle(None, rules)
        if late:  # nothing founded a regime yet: they found one, a level unless they moved
            kind = TRANSITION if any(q.kind == TRANSITION for q in late) else LEVEL
            last = replace(late[-1], kind=kind)
            rid = self._new_id(last, rules)
            self._label(late, rid)
            self.current, self.current_id = last, rid

    def _settle(self, p: Piece | None, rules: Rules) -> list[Piece]:
        """Label the held pieces between the regime in force and ``p`` (``None``: the end);
        return those that go with what comes next."""
        held, self.held = self.held, []
        cur = self.current
        if not held:
            return []
        if cur is None:
            return held
        if cur.kind == TRANSITION:  # the transition went on through them
            self._label(held, self.current_id)
            return []
        if sum(q.n for q in held) >= rules.min_blocks:  # a move that lasted: a transition
            last = replace(held[-1], kind=TRANSITION)
            rid = self._new_id(last, rules)
            self._label(held, rid)
            self.current, self.current_id = last, rid
            return []
        if p is None:
            self._label(held, self.current_id)
            return []
        before, after = np.asarray(cur.tail), np.asarray(p.head)
        costs = [
            sum(float(np.abs(np.asarray(q.mean) - before).max()) for q in held[:k])
            + sum(float(np.abs(np.asarray(q.mean) - after).max()) for q in held[k:])
            for k in range(len(held) + 1)
        ]
        k = int(np.argmin(costs))
        self._label(held[:k], self.current_id)
        return held[k:]

    def _match(self, p: Piece, rules: Rules) -> int | None:
        """A known level (not the one in force) ``p`` is back at, if any."""
        m = np.asarray(p.mean)
        for rid, level in self.levels.items():
            if rid != self.current_id and np.all(np.abs(m - np.asarray(level)) < rules.min_step / 2):
                return rid
        return None

    def _new_id(self, p: Piece, rules: Rules) -> int:
        if self.n_regimes < rules.max_regimes:
            rid = self.n_regimes
            self.kinds[rid] = p.kind or LEVEL
            return rid
        known = list(self.centroids.items())  # no id left: the nearest regime
        return min(known, key=lambda kv: float(np.abs(np.asarray(kv[1]) - np.asarray(p.mean)).max()))[0]

    def _label(self, pieces: list[Piece], rid: int) -> None:
        for q in pieces:
            if self.runs and self.runs[-1][2] == rid and self.runs[-1][1] == q.start:
                s, _, _ = self.runs[-1]
                self.runs[-1] = (s, q.end, rid)
            else:
                self.runs.append((q.start, q.end, rid))
            self._note(q, rid)

    def _note(self, q: Piece, rid: int) -> None:
        """Where regime ``rid`` stands after piece ``q`` (a burst's short piece moves nothing)."""
        if q.kind is None and rid in self.centroids:
            return
        if self.kinds.get(rid) == LEVEL:
            self.levels[rid] = q.tail
        self.centroids[rid] = q.tail if self.kinds.get(rid) == LEVEL else q.mean

    def copy(self) -> RegimeLayer:
        """A copy to read ahead on (pieces and levels are immutable; of the runs only the last
        is kept, the one a new piece may extend)."""
        return RegimeLayer(
            runs=self.runs[-1:],
            kinds=dict(self.kinds),
            levels=dict(self.levels),
            centroids=dict(self.centroids),
            current=self.current,
            current_id=self.current_id,
            held=list(self.held),
        )

    def to_state(self) -> dict[str, Any]:
        return {
            "runs": [list(r) for r in self.runs],
            "kinds": {str(k): v for k, v in self.kinds.items()},
            "levels": {str(k): list(v) for k, v in self.levels.items()},
            "centroids": {str(k): list(v) for k, v in self.centroids.items()},
            "current": None if self.current is None else asdict(self.current),
            "current_id": self.current_id,
            "held": [asdict(q) for q in self.held],
        }

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> RegimeLayer:
        def piece(d: dict[str, Any]) -> Piece:
            def floats(k: str) -> tuple[float, ...]:
                return tuple(float(v) for v in d[k])

            return Piece(
                start=int(d["start"]),
                end=int(d["end"]),
                head=floats("head"),
                tail=floats("tail"),
                sd=floats("sd"),
                mean=floats("mean"),
                slope=floats("slope"),
                kind=None if d["kind"] is None else str(d["kind"]),
            )

        return cls(
            runs=[(int(a), int(b), int(c)) for a, b, c in s["runs"]],
            kinds={int(k): str(v) for k, v in s["kinds"].items()},
            levels={int(k): tuple(float(x) for x in v) for k, v in s["levels"].items()},
            centroids={int(k): tuple(float(x) for x in v) for k, v in s["centroids"].items()},
            current=None if s["current"] is None else piece(s["current"]),
            current_id=int(s["current_id"]),
            held=[piece(q) for q in s["held"]],
        )


def _continues(cur: Piece, p: Piece, rules: Rules, *, alone: bool) -> bool:
    """Whether ``p`` goes on from ``cur``: no step a person sees (at least ``min_step`` and
    significant) in any feature, and the same kind (a transition the same way), or a level
    and a move that, read as one line, are a level, the move's far end no step from that
    line (a level's settling; not the end of a transition of several pieces: ``alone`` says the
    regime in force is ``cur`` alone)."""
    if not rules.join:
        return False
    sd = np.hypot(np.asarray(p.sd), np.asarray(cur.sd))

    def stepped(a: Any, b: Any) -> bool:
        step = np.abs(np.asarray(a) - np.asarray(b))
        return bool(np.any((step >= rules.min_step) & (step >= rules.z * sd)))

    if stepped(p.head, cur.tail):
        return False
    if cur.kind is None or p.kind is None:
        return True
    if cur.kind != p.kind:
        if not (cur.kind == LEVEL or alone):
            return False
        one = cur.together(p, rules)  # a level only if its line runs through the move's far end
        if p.kind == LEVEL:  # the move came first: its head, centred k/2 blocks in
            far, at = cur.head, cur.start + (min(cur.n, rules.min_blocks) - 1) / 2
        else:
            far, at = p.tail, p.end - (min(p.n, rules.min_blocks) + 1) / 2
        return one.kind == LEVEL and not stepped(far, one.line_at(at))
    return cur.kind == LEVEL or bool(np.all(np.sign(p.slope) * np.sign(cur.slope) >= 0))


def _pace(slope: np.ndarray, stt: float, n: int, var: np.ndarray, rules: Rules) -> str:
    """A line's kind: a transition where some feature moves faster than the drift a level
    may have (significantly) and by at least ``min_step`` over its ``n`` blocks."""
    if stt <= 0:
        return LEVEL
    se = np.sqrt(var / stt)
    moved = (np.abs(slope) - rules.z * se > rules.drift) & (np.abs(slope) * (n - 1) >= rules.min_step)
    return TRANSITION if moved.any() else LEVEL


__all__ = ["LEVEL", "TRANSITION", "Piece", "RegimeLayer", "Rules"]
