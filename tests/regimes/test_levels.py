"""The regime layer alone: segments in order become regimes with stable ids."""

from __future__ import annotations

import numpy as np

from regimetune.regimes.levels import LEVEL, TRANSITION, Piece, RegimeLayer, Rules

# 10-block regimes, a 0.12 step, a drift of 0.5 per hour of 60-s blocks
RULES = Rules(min_blocks=10, min_step=0.12, drift=0.5 / 60, z=1.96, max_regimes=16)
VAR = np.array([0.03**2])


def _layer(*parts: np.ndarray, finish: bool = True) -> RegimeLayer:
    """Feed consecutive segments (arrays of block values) to a fresh layer."""
    layer = RegimeLayer()
    start = 0
    for y in parts:
        layer.feed(Piece.of(y[:, None], start, VAR, RULES), RULES)
        start += len(y)
    if finish:
        layer.finish(RULES)
    return layer


def flat(level: float, n: int) -> np.ndarray:
    return np.full(n, level) + np.tile([0.005, -0.005], n)[:n]


def ramp(a: float, b: float, n: int) -> np.ndarray:
    return np.linspace(a, b, n)


def test_a_piece_is_a_level_or_a_transition_by_its_pace() -> None:
    assert Piece.of(flat(5.0, 40)[:, None], 0, VAR, RULES).kind == LEVEL
    # easing 7 % in 45 minutes is a level's wander; 60 % in 30 minutes is a decline
    assert Piece.of(ramp(5.0, 4.93, 45)[:, None], 0, VAR, RULES).kind == LEVEL
    assert Piece.of(ramp(5.0, 4.4, 30)[:, None], 0, VAR, RULES).kind == TRANSITION
    assert Piece.of(flat(5.0, 5)[:, None], 0, VAR, RULES).kind is None  # too short to tell


def test_a_slowly_wandering_level_cut_in_pieces_is_one_regime() -> None:
    layer = _layer(flat(5.0, 30), flat(4.95, 30), flat(4.91, 30))
    assert layer.runs == [(0, 90, 0)] and layer.kinds == {0: LEVEL}


def test_a_sharp_step_founds_a_regime_dated_where_it_is() -> None:
    layer = _layer(flat(5.0, 40), flat(4.8, 40))
    assert layer.runs == [(0, 40, 0), (40, 80, 1)]


def test_a_burst_that_comes_back_leaves_no_regime() -> None:
    layer = _layer(flat(5.0, 40), flat(5.6, 4), flat(5.0, 40))
    assert layer.runs == [(0, 84, 0)]


def test_a_lasting_move_between_two_levels_is_a_transition() -> None:
    layer = _layer(flat(6.0, 30), ramp(5.9, 5.2, 30), flat(5.1, 30))
    assert [r[2] for r in layer.runs] == [0, 1, 2]
    assert layer.kinds == {0: LEVEL, 1: TRANSITION, 2: LEVEL}


def test_short_pieces_between_two_levels_go_with_the_nearer() -> None:
    # a 7-block shelf 0.4 below the level before and 0.2 below the one after (the real
    # 1M-1 runs near 3,800 s): the change is dated where the shelf begins
    layer = _layer(flat(5.45, 30), flat(5.07, 7), flat(5.27, 30))
    assert layer.runs == [(0, 30, 0), (30, 67, 1)]


def test_steps_across_a_short_piece_add_up() -> None:
    # 0.09 then 0.11: neither a step alone, together 0.2 from the level in force
    layer = _layer(flat(5.26, 30), flat(5.17, 4), flat(5.06, 30))
    assert len({r[2] for r in layer.runs}) == 2


def test_steps_are_measured_from_where_the_regime_last_stood() -> None:
    # a level easing 14 % over 20 minutes in short pieces (the real 1M-1 runs near 10,000 s):
    # no step of 0.12 separates the regime's last 10 blocks from what follows
    layer = _layer(flat(4.89, 30), flat(4.85, 6), flat(4.83, 6), flat(4.75, 30))
    assert layer.runs == [(0, 72, 0)]


def test_a_level_that_settles_after_its_step_is_one_level() -> None:
    # read live (the real 4-71689 run near 5,600 s): writes step down, a new level is founded
    # on the first 10 blocks after the step, the segment is read again a block later as an
    # 11-block settle (a move), and a flat stretch follows with no step: one level
    layer = RegimeLayer()
    settle = np.linspace(0.58, 0.40, 11)
    for start, y in ((0, flat(1.24, 30)), (30, flat(0.5, 10)), (30, settle), (41, flat(0.39, 40))):
        layer.feed(Piece.of(y[:, None], start, VAR, RULES), RULES)
    assert Piece.of(settle[:, None], 30, VAR, RULES).kind == TRANSITION
    assert [r[2] for r in layer.runs] == [0, 1] and layer.runs[-1] == (30, 81, 1)
    assert layer.kinds == {0: LEVEL, 1: LEVEL}
    # a decline read as one move, then a plateau: the decline stays a transition
    layer = _layer(flat(6.0, 30), ramp(5.9, 5.2, 30), flat(5.15, 30))
    assert layer.kinds[1] == TRANSITION and len(layer.kinds) == 3


def test_a_fall_then_a_level_is_no_settling_when_the_fall_is_a_step() -> None:
    # a fast decay (generated fast-decay): a 19-block exponential fall, then a level drifting
    # 0.16 over 95 blocks, no step at the joint; read as one line the two move slower than a
    # level may drift, but that line passes a step below where the fall began
    fall = 5.86 + 0.45 * np.exp(-np.arange(19) / 6.0)
    layer = _layer(fall, ramp(5.85, 5.69, 95), flat(5.68, 120))
    assert Piece.of(fall[:, None], 0, VAR, RULES).kind == TRANSITION
    assert [r[2] for r in layer.runs] == [0, 1] and layer.runs[0] == (0, 19, 0)
    assert layer.kinds == {0: TRANSITION, 1: LEVEL}


def test_a_level_the_trace_returns_to_gets_its_id_back() -> None:
    layer = _layer(flat(5.0, 30), flat(4.5, 30), flat(5.02, 30))
    assert [r[2] for r in layer.runs] == [0, 1, 0]
    assert layer.n_regimes == 2


def test_a_new_level_near_a_known_one_but_not_at_it_is_new() -> None:
    layer = _layer(flat(5.0, 30), flat(4.5, 30), flat(4.85, 30))
    assert [r[2] for r in layer.runs] == [0, 1, 2]


def test_a_growing_piece_is_read_as_it_stands() -> None:
    # the service reads the last segment as it grows: short, it is held (the regime in
    # force stays); once long and at a new level, it founds a regime
    layer = _layer(flat(5.0, 30), finish=False)
    early = layer.copy()
    early.feed(Piece.of(flat(4.6, 5)[:, None], 30, VAR, RULES), RULES)
    early.finish(RULES, growing=True)
    assert early.runs[-1][2] == 0
    later = layer.copy()
    later.feed(Piece.of(flat(4.6, 12)[:, None], 30, VAR, RULES), RULES)
    later.finish(RULES, growing=True)
    assert later.runs[-1] == (30, 42, 1)


def test_past_max_regimes_a_new_level_joins_the_nearest() -> None:
    rules = RULES._replace(max_regimes=2)
    layer = RegimeLayer()
    for i, level in enumerate((5.0, 4.0, 3.1)):
        layer.feed(Piece.of(flat(level, 30)[:, None], 30 * i, VAR, rules), rules)
    assert [r[2] for r in layer.runs] == [0, 1]  # 3.1 joined 4.0, the nearest
    assert layer.n_regimes == 2


def test_the_state_round_trips() -> None:
    layer = _layer(flat(5.0, 30), flat(5.6, 4), finish=False)
    again = RegimeLayer.from_state(layer.to_state())
    assert again == layer
