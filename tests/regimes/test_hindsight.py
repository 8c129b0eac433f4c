"""The hindsight passes: a transition's slow tail is the transition (in the last run too), and
nothing else is; a step within the level's wander is no step, and nothing else is."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from regimetune.regimes import hindsight
from regimetune.regimes.hindsight import (
    MAX_BENDS,
    drift_ends,
    drifts_cut_in_two,
    merged_changes,
    ramps_into_levels,
    settled_tail,
    slow_tails,
    start_drift,
    steps_within_wander,
    transition_ends,
)

BLOCK = 10
P = 0.01


def _run(tail: np.ndarray, *, seed: int = 0, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """A decline (regime 0, a transition) from 2 down to 1, then ``tail`` (regime 1), then a
    plateau at the tail's last level (regime 2), with white noise; features, labels."""
    decline = np.linspace(2.0, 1.0, 40)
    plateau = np.full(100, tail[-1])
    x = np.r_[decline, tail, plateau] + np.random.default_rng(seed).normal(0.0, noise, 40 + len(tail) + 100)
    labels = np.r_[np.zeros(40, int), np.ones(len(tail), int), np.full(100, 2)]
    return x[:, None], labels


def _relabelled(x: np.ndarray, labels: np.ndarray, transitions: set[int] | None = None) -> bool:
    after = slow_tails(labels, x, transitions={0} if transitions is None else transitions, block=BLOCK, p=P)
    assert set(after.tolist()) <= set(labels.tolist())
    assert (after[labels != 1] == labels[labels != 1]).all(), "only the run after the transition may change"
    merged = (after[labels == 1] == 0).all()
    assert merged or (after[labels == 1] == 1).all(), "a run is merged whole or not at all"
    return bool(merged)


@pytest.mark.parametrize("seed", range(5))
def test_a_drift_on_the_way_the_decline_went_is_its_tail(seed: int) -> None:
    # 10 % more of the fall over 200 windows: under the noise of any 10-window block
    x, labels = _run(np.linspace(1.0, 0.9, 200), seed=seed)
    assert _relabelled(x, labels)


@pytest.mark.parametrize("seed", range(5))
def test_a_plateau_whose_first_block_still_falls_is_a_plateau(seed: int) -> None:
    # the decline's last drop lands a block late: one high block, then flat
    tail = np.r_[np.full(BLOCK, 1.1), np.full(190, 1.0)]
    x, labels = _run(tail, seed=seed)
    assert not _relabelled(x, labels)


@pytest.mark.parametrize("seed", range(5))
def test_a_level_that_wanders_or_rebounds_is_not_a_tail(seed: int) -> None:
    t = np.arange(200)
    assert not _relabelled(*_run(1.0 + 0.05 * np.sin(2 * np.pi * t / 100), seed=seed))
    assert not _relabelled(*_run(np.linspace(1.0, 1.1, 200), seed=seed))  # back up: not a decline


def test_only_a_run_after_a_transition_is_judged() -> None:
    x, labels = _run(np.linspace(1.0, 0.9, 200))
    assert not _relabelled(x, labels, transitions=set())  # regime 0 held still: a drift is a regime
    assert not _relabelled(x, labels, transitions={0, 1})  # the run is a transition itself


def test_a_trend_is_judged_on_block_means_at_match_p() -> None:
    # noiseless and monotone, so Kendall's exact p over n blocks is 2 / n!: five blocks
    # give 0.017, six 0.003; judged window by window, either would be a trend
    assert not _relabelled(*_run(np.linspace(1.0, 0.5, 5 * BLOCK), noise=0.0))
    assert _relabelled(*_run(np.linspace(1.0, 0.5, 6 * BLOCK), noise=0.0))


def test_tails_in_a_row_join_the_transition_and_the_changes_follow() -> None:
    x, labels = _run(np.linspace(1.0, 0.9, 200))
    labels[140:240] = 3  # the drift founded two regimes, one after the other
    after = slow_tails(labels, x, transitions={0}, block=BLOCK, p=P)
    assert (after[:240] == 0).all() and (after[240:] == 2).all()
    t0 = 1000  # the detector counts windows from its start, not from this frame's
    rows = np.asarray(
        [
            (-1, 0, t0, t0 + 5),
            (0, 1, t0 + 40, t0 + 90),
            (1, 3, t0 + 140, t0 + 170),
            (3, 2, t0 + 240, t0 + 260),
        ]
    )
    assert merged_changes(rows, after, t0).tolist() == [
        [-1, 0, t0, t0 + 5],
        [0, 2, t0 + 240, t0 + 260],
    ]
    assert merged_changes(rows[:0], after, t0).shape == (0, 4)


def test_the_recordings_last_run_is_not_judged() -> None:
    # it may hold the drift and the level it settled at: nothing after it tells them apart
    x, labels = _run(np.linspace(1.0, 0.9, 200))
    assert (slow_tails(labels[:240], x[:240], transitions={0}, block=BLOCK, p=P) == labels[:240]).all()


def test_a_drift_cut_into_two_levels_is_one_tail_even_if_its_first_is_too_short_to_trend() -> None:
    # at 10-s windows the drift may found two steady regimes; the first, four blocks long,
    # cannot show a trend alone (Kendall's tau over four blocks never reaches p = 0.01)
    assert not _relabelled(*_run(np.linspace(1.0, 0.5, 40), noise=0.0))
    x, labels = _run(np.r_[np.linspace(1.0, 0.98, 40), np.linspace(0.98, 0.9, 160)])
    labels[80:240] = 3
    after = slow_tails(labels, x, transitions={0}, block=BLOCK, p=P)
    assert (after[:240] == 0).all() and (after[240:] == 2).all()


def _wandering(
    levels: list[float], blocks: list[int], *, wander: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Steady runs (regime ``i`` at ``levels[i]`` for ``blocks[i]`` blocks) of a level that
    wanders from block to block (sd ``wander``), with white noise; features, labels."""
    rng = np.random.default_rng(seed)
    per_block = np.repeat(levels, blocks) + rng.normal(0.0, wander, sum(blocks))
    x = np.repeat(per_block, BLOCK) + rng.normal(0.0, 0.02, sum(blocks) * BLOCK)
    labels = np.repeat(np.arange(len(levels)), np.asarray(blocks) * BLOCK)
    return x[:, None], labels


@pytest.mark.parametrize("seed", range(5))
def test_a_young_regime_within_the_levels_wander_is_the_same_level(seed: int) -> None:
    # six blocks at 1.0, then a level 0.01 higher: two regimes online (the wander was not
    # yet known), one over the recording, whose block means wander by 0.05
    x, labels = _wandering([1.0, 1.01], [6, 30], wander=0.05, seed=seed)
    assert (steps_within_wander(labels, x, transitions=set(), block=BLOCK, p=P) == 0).all()


@pytest.mark.parametrize("seed", range(5))
def test_a_step_beyond_the_wander_stays(seed: int) -> None:
    x, labels = _wandering([1.0, 1.3], [6, 30], wander=0.05, seed=seed)
    assert (steps_within_wander(labels, x, transitions=set(), block=BLOCK, p=P) == labels).all()
    # a window without a value (a trace's first has no keyspace growth yet) changes nothing
    x[0] = np.nan
    assert (steps_within_wander(labels, x, transitions=set(), block=BLOCK, p=P) == labels).all()


def test_levels_in_a_row_join_the_first_and_the_changes_follow() -> None:
    x, labels = _wandering([1.0, 1.01, 0.99, 1.5], [6, 10, 20, 20], wander=0.05, seed=0)
    after = steps_within_wander(labels, x, transitions=set(), block=BLOCK, p=P)
    assert (after[: 36 * BLOCK] == 0).all() and (after[36 * BLOCK :] == 3).all()
    rows = np.asarray([(-1, 0, 0, 30), (0, 1, 60, 120), (1, 2, 160, 250), (2, 3, 360, 400)])
    assert merged_changes(rows, after, 0).tolist() == [[-1, 0, 0, 30], [0, 3, 360, 400]]


def test_a_transition_is_never_merged_nor_merged_into() -> None:
    # (unless it came back to the level it left: the tests above)
    x, labels = _wandering([1.0, 1.01, 1.5], [6, 10, 20], wander=0.05, seed=0)
    for transitions in ({0}, {1}, {2}):
        after = steps_within_wander(labels, x, transitions=transitions, block=BLOCK, p=P)
        t = next(iter(transitions))
        assert (after[labels == t] == t).all(), "a transition keeps its windows"
        assert not (after[labels != t] == t).any(), "and takes no others"


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("same_id", [True, False])
def test_a_transition_that_came_back_within_the_wander_is_the_level(seed: int, same_id: bool) -> None:
    # online, twelve blocks that held no level became a transition, and the level after it
    # matched the one before (A -> T -> A), or was founded as a new regime at the same level
    # (A -> T -> B: live, the level was judged before its wander was known): it never left
    # the level's wander
    x, labels = _wandering([1.0, 1.01, 1.0], [20, 12, 20], wander=0.05, seed=seed)
    if same_id:
        labels[labels == 2] = 0
    assert (steps_within_wander(labels, x, transitions={1}, block=BLOCK, p=P) == 0).all()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("same_id", [True, False])
def test_a_transition_that_came_back_from_beyond_the_wander_stays(seed: int, same_id: bool) -> None:
    x, labels = _wandering([1.0, 1.3, 1.0], [20, 12, 20], wander=0.05, seed=seed)
    if same_id:
        labels[labels == 2] = 0
    assert (steps_within_wander(labels, x, transitions={1}, block=BLOCK, p=P) == labels).all()


@pytest.mark.parametrize("seed", range(5))
def test_a_transition_to_a_level_beyond_the_wander_stays(seed: int) -> None:
    # A -> T -> B with T near A but B a step of many wanders away: a move, not a wander
    x, labels = _wandering([1.0, 1.01, 1.5], [20, 12, 20], wander=0.05, seed=seed)
    assert (steps_within_wander(labels, x, transitions={1}, block=BLOCK, p=P) == labels).all()


def test_without_a_steady_run_of_two_blocks_the_wander_is_unknown() -> None:
    x, labels = _wandering([1.0, 1.0], [1, 1], wander=0.05, seed=0)  # one level, in two runs
    assert (steps_within_wander(labels, x, transitions=set(), block=BLOCK, p=P) == labels).all()


LEVEL = 30  # windows a settled level holds at least


def _last(after: np.ndarray, *, seed: int = 0, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """A decline (regime 0, a transition) from 2 down to 1, then ``after`` as the
    recording's last run (regime 1), with white noise; features, labels."""
    decline = np.linspace(2.0, 1.0, 40)
    x = np.r_[decline, after] + np.random.default_rng(seed).normal(0.0, noise, 40 + len(after))
    return x[:, None], np.r_[np.zeros(40, int), np.ones(len(after), int)]


def _settled(x: np.ndarray, labels: np.ndarray, transitions: set[int] | None = None) -> int:
    """How many windows of the last run ``settled_tail`` gave the transition (a prefix)."""
    after = settled_tail(
        labels, x, transitions={0} if transitions is None else transitions, block=BLOCK, p=P, level=LEVEL
    )
    moved = np.flatnonzero(after != labels)
    assert (after[moved] == 0).all() and (moved == 40 + np.arange(len(moved))).all(), (
        "a prefix of the last run"
    )
    return len(moved)


@pytest.mark.parametrize("seed", range(5))
def test_the_last_runs_drift_is_its_transitions_up_to_where_it_settles(seed: int) -> None:
    # 10 % more of the fall over 150 windows, then level for 150: the drift ends at 150
    x, labels = _last(np.r_[np.linspace(1.0, 0.9, 150), np.full(150, 0.9)], seed=seed)
    assert abs(_settled(x, labels) - 150) <= 10


@pytest.mark.parametrize("seed", range(5))
def test_a_last_run_that_is_level_or_rebounds_is_not_a_tail(seed: int) -> None:
    assert _settled(*_last(np.full(300, 1.0), seed=seed)) == 0
    assert _settled(*_last(np.r_[np.linspace(1.0, 1.1, 150), np.full(150, 1.1)], seed=seed)) == 0


@pytest.mark.parametrize("seed", range(5))
def test_a_step_the_online_pass_missed_is_not_a_drift(seed: int) -> None:
    # the last run holds two levels (a step down, the transition's way): a line through
    # them trends, but two levels fit them better
    assert _settled(*_last(np.r_[np.full(120, 1.0), np.full(180, 0.9)], seed=seed)) == 0


def test_the_level_it_settles_at_holds_min_regime() -> None:
    x, labels = _last(np.r_[np.linspace(1.0, 0.9, 295), np.full(5, 0.9)])
    assert _settled(x, labels) == 0  # the drift may still be going: nothing settled long enough
    x, labels = _last(np.r_[np.linspace(1.0, 0.9, 300 - 2 * LEVEL), np.full(2 * LEVEL, 0.9)])
    assert _settled(x, labels) > 0


def test_only_a_last_run_after_a_transition_is_judged() -> None:
    x, labels = _last(np.r_[np.linspace(1.0, 0.9, 150), np.full(150, 0.9)])
    assert _settled(x, labels, transitions=set()) == 0
    assert _settled(x, labels, transitions={0, 1}) == 0
    plateau = np.full((100, 1), 0.9)  # a run after it: the slow-tail pass judges the drift
    assert (
        settled_tail(
            np.r_[labels, np.full(100, 2)], np.r_[x, plateau], transitions={0}, block=BLOCK, p=P, level=LEVEL
        )[40:340]
        == 1
    ).all()


def test_a_change_into_a_run_whose_drift_was_merged_is_dated_where_it_settled() -> None:
    x, labels = _last(np.r_[np.linspace(1.0, 0.9, 150), np.full(150, 0.9)])
    after = settled_tail(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL)
    turn = int(np.flatnonzero(after == 1)[0])
    t0 = 1000
    rows = np.asarray([(-1, 0, t0, t0 + 5), (0, 1, t0 + 40, t0 + 90)])
    # confirmed at 90, now dated later: known only in hindsight, at the recording's last window
    assert merged_changes(rows, after, t0).tolist() == [
        [-1, 0, t0, t0 + 5],
        [0, 1, t0 + turn, t0 + 339],
    ]
    early = np.asarray([(0, 1, t0 + 40, t0 + turn + 5)])  # confirmed after it: that stays
    assert merged_changes(early, after, t0).tolist() == [[0, 1, t0 + turn, t0 + turn + 5]]


def test_the_drift_is_judged_on_block_means_at_match_p() -> None:
    # noiseless, so the hinge is exact; Kendall's tau over five blocks cannot reach
    # p = 0.01 (2 / 5! = 0.017), over seven it does
    assert _settled(*_last(np.r_[np.linspace(1.0, 0.5, 5 * BLOCK), np.full(100, 0.5)], noise=0.0)) == 0
    assert (
        abs(
            _settled(*_last(np.r_[np.linspace(1.0, 0.5, 7 * BLOCK), np.full(100, 0.5)], noise=0.0))
            - 7 * BLOCK
        )
        <= 1
    )


@pytest.mark.parametrize("seed", range(3))
def test_after_every_pass_the_change_rows_are_the_labels_changes(seed: int) -> None:
    # random runs, transitions, blocks and features (some flat, some with a window that
    # has no value): whatever the passes merge or re-date, each change of the labels they
    # leave has exactly one row, dated there and confirmed no earlier
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n, d = int(rng.integers(2, 300)), int(rng.integers(1, 4))
        x = rng.normal(size=(n, d)).cumsum(axis=0) * rng.choice([0.0, 0.1, 1.0])
        x[0, int(rng.integers(d))] = np.nan
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(int(rng.integers(0, 6)), n - 1), replace=False))
        ids = rng.permutation(10)[: len(cuts) + 1]
        labels = ids[np.searchsorted(cuts, np.arange(n), side="right")]
        transitions = set(rng.choice(ids, size=int(rng.integers(0, len(ids) + 1)), replace=False).tolist())
        if len(cuts) >= 2 and rng.random() < 0.5:  # a decline, then a last run that drifts, then levels
            transitions.add(int(labels[cuts[-2]]))
            transitions.discard(int(labels[-1]))
            tail = n - cuts[-1]
            x[cuts[-2] :] = np.r_[np.linspace(3.0, 1.0, cuts[-1] - cuts[-2]), np.linspace(1.0, 0.5, tail)][
                :, None
            ]
            x[n - tail // 3 :] = 0.5
            x[cuts[-2] :] += rng.normal(0.0, 0.02, (n - cuts[-2], d))
        judge = {"transitions": transitions, "block": int(rng.integers(1, 40)), "p": P}
        after = slow_tails(labels, x, **judge)
        after = settled_tail(after, x, level=int(rng.integers(1, 60)), **judge)
        after = steps_within_wander(after, x, **judge)
        after = transition_ends(
            after, x, level=int(rng.integers(1, 60)), white=np.ones(d, dtype=bool), **judge
        )
        after = drifts_cut_in_two(
            after, x, level=int(rng.integers(1, 60)), white=np.ones(d, dtype=bool), **judge
        )
        after = drift_ends(after, x, level=int(rng.integers(1, 60)), white=np.ones(d, dtype=bool), **judge)
        after = ramps_into_levels(after, transitions=transitions, level=int(rng.integers(1, 60)))
        starts = np.r_[0, cuts]
        rows = np.asarray([(labels[s - 1] if s else -1, labels[s], s, min(s + 5, n - 1)) for s in starts])
        kept = merged_changes(rows, after, 0).tolist()
        changes = np.flatnonzero(after[1:] != after[:-1]) + 1
        assert [at for _, _, at, _ in kept] == [0, *changes.tolist()]
        for frm, to, at, conf in kept[1:]:
            assert (frm, to) == (after[at - 1], after[at]) and conf >= at


@pytest.mark.parametrize("seed", range(5))
def test_a_level_and_a_step_after_a_decline_are_not_a_drift(seed: int) -> None:
    # the online pass cut the decline's end into a steady run that levels off at 1.0, then
    # found the step to 0.85: a hinge over both runs would take the level and the step for
    # one drift (a line through them beats one split into two levels, and the rank test
    # cannot tell a step from a trend); only the last run is judged, and it is level
    rng = np.random.default_rng(seed)
    x = np.r_[np.linspace(2.0, 1.2, 40), np.linspace(1.2, 1.0, 24), np.full(60, 1.0), np.full(150, 0.85)]
    x = (x + rng.normal(0.0, 0.01, len(x)))[:, None]
    labels = np.r_[np.zeros(40, int), np.ones(84, int), np.full(150, 2)]
    assert (settled_tail(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL) == labels).all()


WHITE = np.ones(1, dtype=bool)


def _decline_then_level(end: int, *, seed: int = 0, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """A decline from 2 down to 1 over 100 windows, then level for 200, with white noise;
    the labels put the transition's end (the online date) at ``end``."""
    rng = np.random.default_rng(seed)
    x = np.r_[np.linspace(2.0, 1.0, 100), np.full(200, 1.0)] + rng.normal(0.0, noise, 300)
    return x[:, None], np.r_[np.zeros(end, int), np.ones(300 - end, int)]


def _end(x: np.ndarray, labels: np.ndarray, *, white: np.ndarray = WHITE) -> int:
    after = transition_ends(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL, white=white)
    assert set(np.unique(after[:40])) == {0} and set(np.unique(after[-40:])) == {1}
    return int(np.flatnonzero(after == 1)[0])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("online", [80, 120])
def test_a_transitions_end_moves_to_where_its_line_turns_level(seed: int, online: int) -> None:
    # dated 20 windows early or late online; the line turns level at 100
    assert abs(_end(*_decline_then_level(online, seed=seed)) - 100) <= 3


@pytest.mark.parametrize("seed", range(5))
def test_an_end_the_data_do_not_prefer_to_move_stays(seed: int) -> None:
    # two windows off under noise of a tenth of the fall: no likelihood ratio at match_p
    # tells the hinge from the online date (twenty off, it does)
    assert _end(*_decline_then_level(102, seed=seed, noise=0.1)) == 102
    assert abs(_end(*_decline_then_level(120, seed=seed, noise=0.1)) - 100) <= 5


def test_an_end_moves_by_min_regime_at_most_and_only_on_white_features() -> None:
    x, labels = _decline_then_level(100 + LEVEL + 5)
    assert _end(x, labels) == 100 + LEVEL + 5  # too far to be the same change
    x, labels = _decline_then_level(120)
    assert _end(x, labels, white=np.zeros(1, dtype=bool)) == 120  # AR(1) noise: not a likelihood


def test_a_change_into_a_run_that_now_starts_earlier_is_dated_there() -> None:
    x, labels = _decline_then_level(120)
    after = transition_ends(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL, white=WHITE)
    start = int(np.flatnonzero(after == 1)[0])
    assert start < 120
    rows = np.asarray([(-1, 0, 0, 5), (0, 1, 120, 150)])
    assert merged_changes(rows, after, 0).tolist() == [[-1, 0, 0, 5], [0, 1, start, 150]]


def _fall_drift_level(
    online: int, *, seed: int = 0, noise: float = 0.02, level_for: int = 300
) -> tuple[np.ndarray, np.ndarray]:
    """A fast fall from 2 to 1.2 over 60 windows, a slow drift to 1 over 300, then level for
    ``level_for`` (the drift turns level at 360), with white noise; the labels put the
    transition's end (the online date) at ``online``."""
    rng = np.random.default_rng(seed)
    path = np.r_[np.linspace(2.0, 1.2, 60), np.linspace(1.2, 1.0, 300), np.full(level_for, 1.0)]
    x = path + rng.normal(0.0, noise, len(path))
    return x[:, None], np.r_[np.zeros(online, int), np.ones(len(path) - online, int)]


def _drift_end(x: np.ndarray, labels: np.ndarray) -> int:
    after = drift_ends(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL, white=WHITE)
    assert set(after.tolist()) == {0, 1} and (np.diff(after) >= 0).all(), "one end, moved or not"
    return int(np.flatnonzero(after == 1)[0])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("online", [160, 260, 400])
def test_a_slow_drifts_end_is_found_however_far_the_online_date(seed: int, online: int) -> None:
    # online, the drift looked level 100-200 windows before it ended (or the end came late):
    # the line that turns level at 360 is the drift's, not the fast fall's
    assert abs(_drift_end(*_fall_drift_level(online, seed=seed)) - 360) <= 10


def test_one_hinge_over_the_fall_and_the_drift_misses_the_drifts_end() -> None:
    # why the bend: a single line through the fast fall and the drift turns where neither does
    x, labels = _fall_drift_level(200)
    after = transition_ends(labels, x, transitions={0}, block=BLOCK, p=P, level=1000, white=WHITE)
    assert abs(int(np.flatnonzero(after == 1)[0]) - 360) > 30


@pytest.mark.parametrize("seed", range(5))
def test_the_bent_hinge_is_least_squares_with_and_without_a_step_at_the_turn(seed: int) -> None:
    # both closed forms against a direct least-squares fit of the same columns
    rng = np.random.default_rng(seed)
    y = np.cumsum(rng.normal(0.0, 1.0, 60)) + rng.normal(0.0, 1.0, 60)
    bends = np.array([5, 17, 30])
    lines, stepped = hindsight._bent_hinge_rss(y, bends), hindsight._bent_hinge_rss(y, bends, step=True)
    u = np.arange(60.0)

    def rss(*cols: np.ndarray) -> float:
        a = np.c_[np.ones(60), *cols]
        fit = y - a @ np.linalg.lstsq(a, y, rcond=None)[0]
        return float(fit @ fit)

    for row, g in enumerate(bends):
        for h in range(g + 1, 58):
            bend, turn = np.minimum(u - g, 0), np.minimum(u - h, 0)
            assert lines[row, h - 2] == pytest.approx(rss(bend, turn), rel=1e-6)
            if h > g + 1:  # (one window apart, the step and the slower line are one column)
                assert stepped[row, h - 2] == pytest.approx(rss(bend, turn, u >= h), rel=1e-6)
                assert stepped[row, h - 2] <= lines[row, h - 2] * (1 + 1e-9)
        assert np.isinf(lines[row, : g - 1]).all() and np.isinf(stepped[row, :g]).all()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("online", [200, 300, 420])
def test_a_drifts_end_where_another_feature_steps_is_dated_at_the_step(seed: int, online: int) -> None:
    # the reads per write change with the phase: the read rate only bends at 360 (under the
    # 3-5 % noise of 10-s windows), the write rate follows it down and steps up by 0.2
    # there, under the noise of fewer counts; a fit that must stay continuous at the turn
    # passes near the step and dates it off (by 9-60 windows in 13 of these 15 runs)
    x, labels = _fall_drift_level(online, seed=seed, noise=0.06)
    step = 0.2 * (np.arange(len(x)) >= 360)
    writes = x[:, 0] + step + np.random.default_rng(seed + 99).normal(0.0, 0.15, len(x))
    assert abs(_drift_end(np.c_[x, writes], labels) - 360) <= 8


def test_an_end_at_the_turn_moves_at_rate_p_at_most() -> None:
    # dated right online: the best of the ~900 windows searched beats it by chance alone, so
    # the likelihood ratio is judged at match_p shared among them (at match_p for one
    # window, 6 of these 200 runs move)
    moved = sum(
        _drift_end(*_fall_drift_level(360, seed=seed, noise=0.1, level_for=600)) != 360 for seed in range(200)
    )
    assert moved <= P * 200


def test_a_drift_end_needs_min_regime_of_level_after_it() -> None:
    x, labels = _fall_drift_level(200, level_for=LEVEL // 2)
    assert _drift_end(x, labels) == 200
    x, labels = _fall_drift_level(200, level_for=LEVEL + 30)
    assert abs(_drift_end(x, labels) - 360) <= 10


def test_only_a_transitions_end_is_moved() -> None:
    x, labels = _fall_drift_level(200)
    assert (
        drift_ends(labels, x, transitions=set(), block=BLOCK, p=P, level=LEVEL, white=WHITE) == labels
    ).all()
    not_white = np.zeros(1, dtype=bool)
    assert (
        drift_ends(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL, white=not_white) == labels
    ).all()


def test_a_long_transition_tries_a_coarser_grid_of_bends() -> None:
    # one-window blocks: 258 bends before the online date, tried every other one
    x, labels = _fall_drift_level(260)
    after = drift_ends(labels, x, transitions={0}, block=1, p=P, level=LEVEL, white=WHITE)
    assert MAX_BENDS < 258
    assert abs(int(np.flatnonzero(after == 1)[0]) - 360) <= 10


@pytest.mark.parametrize("ends", [transition_ends, drift_ends])
def test_an_end_moves_only_where_the_transition_still_lasts_min_regime(
    ends: Callable[..., np.ndarray],
) -> None:
    # online, a drop of LEVEL // 2 windows was followed by a flat stretch that the
    # transition kept: the line turns level where the transition would be shorter than a
    # regime, so it is not one to date
    rng = np.random.default_rng(0)
    x = (
        np.r_[np.linspace(2.0, 1.0, LEVEL // 2), np.full(400, 1.0)] + rng.normal(0.0, 0.02, LEVEL // 2 + 400)
    )[:, None]
    labels = np.r_[np.zeros(LEVEL // 2 + 15, int), np.ones(400 - 15, int)]
    after = ends(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL, white=WHITE)
    assert (after == labels).all()


def test_a_transition_one_window_longer_than_a_block_has_no_bend_to_try() -> None:
    # (shorter ones have no direction: their first and last blocks are the same windows)
    x, labels = _fall_drift_level(BLOCK + 1)
    after = drift_ends(labels, x, transitions={0}, block=BLOCK, p=P, level=LEVEL, white=WHITE)
    assert (after == labels).all()


def _cut_in_two(path: np.ndarray, cuts: tuple[int, int], *, seed: int = 0, **judge: object) -> np.ndarray:
    """The changes :func:`drifts_cut_in_two` leaves where ``path`` (plus white noise) was
    labelled a transition (0) until ``cuts[0]``, then two steady runs (1, 2) split at
    ``cuts[1]``."""
    x = (path + np.random.default_rng(seed).normal(0.0, 0.02, len(path)))[:, None]
    labels = np.searchsorted(np.asarray(cuts), np.arange(len(path)), side="right")
    kw = {"transitions": {0}, "block": BLOCK, "p": P, "level": LEVEL, "white": WHITE, **judge}
    after = drifts_cut_in_two(labels, x, **kw)  # type: ignore[arg-type]
    assert (after[: cuts[0]] == 0).all() and set(after.tolist()) <= {0, 1, 2}
    return np.flatnonzero(np.diff(after)) + 1


def _fall_drift(level_for: int = 300) -> np.ndarray:
    """A fast fall from 2 to 1.2 over 60 windows, a slow drift to 1 over 300 (it turns
    level at 360), then level for ``level_for``."""
    return np.r_[np.linspace(2.0, 1.2, 60), np.linspace(1.2, 1.0, 300), np.full(level_for, 1.0)]


@pytest.mark.parametrize("seed", range(5))
def test_a_drift_cut_into_two_steady_runs_is_the_transition_up_to_its_turn(seed: int) -> None:
    # online, the drift looked level at 100, then stepped at 220 (it had drifted a level's
    # worth): one continuous fit explains both runs as well as two levels do, so the
    # transition runs on to where the line turns level (on the block grid)
    changes = _cut_in_two(_fall_drift(), (100, 220), seed=seed)
    assert len(changes) == 1 and abs(changes[0] - 360) <= 2 * BLOCK


@pytest.mark.parametrize("seed", range(5))
def test_a_level_then_a_step_after_a_decline_stay_two_regimes(seed: int) -> None:
    # parsplice's shape: the decline's end, a plateau, a step down to the next plateau. The
    # step is far beyond the level's wander: no continuous line explains it (a step of a
    # fifth of that too)
    for step in (0.15, 0.03):
        path = np.r_[
            np.linspace(2.0, 1.2, 60), np.linspace(1.2, 1.0, 40), np.full(120, 1.0), np.full(300, 1.0 - step)
        ]
        assert _cut_in_two(path, (100, 220), seed=seed).tolist() == [100, 220]


@pytest.mark.parametrize("seed", range(5))
def test_a_second_run_that_rebounds_is_not_the_drift(seed: int) -> None:
    # the bent fit could take the rebound for its slower line: the drift must trend the way
    # the transition went
    path = np.r_[
        np.linspace(2.0, 1.2, 60), np.linspace(1.2, 1.1, 160), np.linspace(1.1, 1.2, 100), np.full(200, 1.2)
    ]
    assert _cut_in_two(path, (100, 220), seed=seed).tolist() == [100, 220]


def test_a_drift_cut_in_two_is_judged_only_after_a_transition_on_white_features() -> None:
    assert _cut_in_two(_fall_drift(), (100, 220), transitions=set()).tolist() == [100, 220]
    assert _cut_in_two(_fall_drift(), (100, 220), white=np.zeros(1, dtype=bool)).tolist() == [100, 220]


def test_a_drift_cut_in_two_needs_min_regime_of_level_after_its_turn() -> None:
    # 60 windows of level after the turn at 360: a regime of 50 windows, not one of 80
    assert len(_cut_in_two(_fall_drift(level_for=60), (100, 220), level=50)) == 1
    assert _cut_in_two(_fall_drift(level_for=60), (100, 220), level=80).tolist() == [100, 220]


def test_a_drift_cut_in_two_in_one_window_blocks_tries_a_coarser_grid_of_bends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 218 bends before the second run, tried every other one: still one turn, near 360
    tried: set[int] = set()
    fit = hindsight._bent_hinge_rss

    def counting(y: np.ndarray, bends: np.ndarray, step: bool = False) -> np.ndarray:
        tried.update(bends.tolist())
        return fit(y, bends, step)

    monkeypatch.setattr(hindsight, "_bent_hinge_rss", counting)
    changes = _cut_in_two(_fall_drift(), (100, 220), block=1)
    assert tried and len(tried) <= MAX_BENDS < 218
    assert len(changes) == 1 and abs(changes[0] - 360) <= 20


@pytest.mark.parametrize("seed", range(3))
def test_a_drift_that_turns_in_the_first_run_is_left_to_drift_ends(seed: int) -> None:
    # the line turns level at 200, inside the first steady run: moving that end is
    # drift_ends' (at its own rate), this pass only joins a drift that runs into the second
    path = np.r_[np.linspace(2.0, 1.2, 60), np.linspace(1.2, 1.0, 140), np.full(400, 1.0)]
    assert _cut_in_two(path, (100, 260), seed=seed).tolist() == [100, 260]


def test_a_transition_shorter_than_a_regime_is_a_ramp_into_the_level_after_it() -> None:
    # a recording's first four windows, back-dated into a transition of their own when the
    # level after them held; and a transition that lasted a regime, which stays
    labels = np.r_[np.zeros(4, int), np.ones(200, int), np.full(LEVEL, 2), np.full(100, 3)]
    after = ramps_into_levels(labels, transitions={0, 2}, level=LEVEL)
    assert (after[:204] == 1).all() and (after[204:] == labels[204:]).all()


def test_a_short_transition_before_another_transition_or_at_the_end_stays() -> None:
    labels = np.r_[np.zeros(4, int), np.ones(200, int), np.full(5, 2)]
    assert (ramps_into_levels(labels, transitions={0, 1, 2}, level=LEVEL) == labels).all()
    assert (ramps_into_levels(labels, transitions={2}, level=LEVEL) == labels).all()


def _start_drift(
    path: np.ndarray, *, seed: int = 0, noise: float = 0.02, cut: int | None = None
) -> np.ndarray:
    """The change points :func:`start_drift` leaves in a recording of ``path`` (plus white
    noise) that the online pass saw as one regime (or two, cut at ``cut``), the new id 7."""
    x = (path + np.random.default_rng(seed).normal(0.0, noise, len(path)))[:, None]
    labels = (np.arange(len(path)) >= (cut or len(path))).astype(int)
    after = start_drift(
        labels, x, transitions=set(), block=BLOCK, p=P, level=LEVEL, white=np.ones(1, bool), new_id=7
    )
    assert set(after[after != labels].tolist()) <= {7}, "only the new id is given"
    return np.flatnonzero(np.diff(after)) + 1


@pytest.mark.parametrize("seed", range(3))
def test_a_recording_that_starts_in_a_drift_gets_a_transition_up_to_where_it_turns_level(seed: int) -> None:
    # the fall is a ramp into the first level online, the drift that level following it:
    # one regime; in hindsight the drift is a transition that ends where it turned level
    changes = _start_drift(_fall_drift(), seed=seed)
    assert len(changes) == 1 and abs(changes[0] - 360) <= BLOCK


@pytest.mark.parametrize("seed", range(3))
def test_a_level_that_wanders_like_a_random_walk_is_no_drift(seed: int) -> None:
    # a steady trend by rank (nearly noiseless windows: Kendall's tau is exact), but a level
    # that steps 0.06 block to block could have moved its 0.05 in the same time
    wander = np.repeat(np.tile([0.03, -0.03], 20), BLOCK)  # a zigzag about the level
    path = np.r_[np.linspace(1.05, 1.0, 200), np.full(400, 1.0) + wander]
    assert len(_start_drift(path, seed=seed, noise=0.001)) == 0
    # the same trend against a level that holds: a drift
    still = np.r_[np.linspace(1.05, 1.0, 200), np.full(400, 1.0)]
    assert len(_start_drift(still, seed=seed, noise=0.001)) == 1


def test_a_start_in_a_drift_is_judged_only_where_the_recording_was_one_regime() -> None:
    # a boundary the online pass found (or a level too short to be a regime) stays as it is
    assert _start_drift(_fall_drift(), cut=500).tolist() == [500]
    assert len(_start_drift(_fall_drift(level_for=LEVEL // 3))) == 0
