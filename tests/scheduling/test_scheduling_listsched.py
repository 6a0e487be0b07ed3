"""List scheduling, HEFT and Graham's bound: makespans of textbook graphs computed by hand, and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab as ll
from latte_lab.scheduling import (
    WorkloadSpec,
    diamond,
    fan_out,
    graham_bound,
    graham_example,
    heft,
    list_schedule,
    random_dag,
    simulate,
    upward_rank,
)

TIGHT = WorkloadSpec(tuple("abcdefg"), ((),) * 7, (1, 1, 1, 1, 1, 1, 3), name="graham-tight(3)")
"""Graham's worst case for m = 3: m(m-1) one-round tasks, then one of m rounds, listed last."""
FORK = WorkloadSpec(("a", "b", "c", "d", "e"), ((), ("a",), ("a",), ("a",), ("b", "c", "d")), (2, 4, 4, 2, 2),
                    name="fork-join")
WAIT_FOR_FAST = WorkloadSpec(("p", "q", "r"), ((), (), ()), (6, 6, 1), name="wait-for-fast")

# (workload, workers, priority, makespan worked out by hand round by round; see the comments)
TEXTBOOK_LIST = [
    # Graham (1969): 3 workers, list T1..T9. T1,T2,T3 at 0; T4 at 2; T9 at 3 on the worker T1 freed; T5,T6 at
    # 4; T7,T8 at 8 -> 12.
    (graham_example(), 3, "fifo", 12),
    # 4 workers: T1..T4 at 0; T5,T6,T7 at 2; at 3 the list puts T8 before T9; T9 starts at 6 -> 15.
    (graham_example(), 4, "fifo", 15),
    # every task one round shorter: T4 at 1, T5..T7 at 2, T8 and T9 at 5 -> 5 + 8 = 13.
    (graham_example(shorter=True), 3, "fifo", 13),
    # without T4 -> T5, T4 -> T6: T4,T5 at 2; T6 at 3; T7 at 4; T8 at 6; T9 only at 7 -> 16.
    (graham_example(fewer_edges=True), 3, "fifo", 16),
    # critical-path priority: T1,T4,T2 at 0; T5,T6 at 2; T9 at 3; T7,T8 at 6; T3 at 10 -> 12.
    (graham_example(), 3, "critical_path", 12),
    # ... and a fourth worker no longer hurts: T9 starts at 3 -> 12.
    (graham_example(), 4, "critical_path", 12),
    # the tight instance: six unit tasks fill rounds 0-1, the long one runs 2..5 -> 5 = 2m - 1 ...
    (TIGHT, 3, "fifo", 5),
    # ... while the longest-first order is optimal: 3.
    (TIGHT, 3, "critical_path", 3),
    # fan-out: FIFO leaves the 6-round leaf to last (1 + 2 + 6); critical path starts it at 1 (1 + 6).
    (fan_out(5, durations=[1, 1, 1, 1, 6]), 2, "fifo", 9),
    (fan_out(5, durations=[1, 1, 1, 1, 6]), 2, "critical_path", 7),
]


@pytest.mark.parametrize(("spec", "m", "priority", "expected"), TEXTBOOK_LIST,
                         ids=[f"{s.name}-{m}-{p}" for s, m, p, _ in TEXTBOOK_LIST])
def test_textbook_list_schedules(spec, m, priority, expected):
    res = list_schedule(spec, m, priority=priority)
    assert res.makespan == expected
    _check_schedule(res)
    assert res.makespan <= res.graham_bound + 1e-9
    if priority == "fifo":  # the round-by-round simulator's self-scheduling is the same list schedule
        assert simulate(spec, m, "self").makespan == expected


def test_graham_schedule_round_by_round():
    iv = list_schedule(graham_example(), 3, priority="fifo").intervals
    got = {r.node: (r.worker, r.start, r.end) for r in iv.itertuples()}
    assert got == {"T1": ("W1", 0, 3), "T2": ("W2", 0, 2), "T3": ("W3", 0, 2), "T4": ("W2", 2, 4),
                   "T9": ("W1", 3, 12), "T5": ("W2", 4, 8), "T6": ("W3", 4, 8), "T7": ("W2", 8, 12),
                   "T8": ("W3", 8, 12)}


def test_graham_bound_is_tight_and_implies_two_minus_one_over_m():
    res = list_schedule(TIGHT, 3, priority="fifo")
    assert res.makespan == graham_bound(TIGHT, 3) == 5.0
    assert res.makespan / TIGHT.lower_bound(3) == pytest.approx(2 - 1 / 3)
    spec = graham_example()
    assert graham_bound(spec, 3) == pytest.approx(34 / 3 + 2 / 3 * 12)


# (workload, speeds, makespan of the HEFT plan worked out by hand)
TEXTBOOK_HEFT = [
    # ranks p 4, q 4, r 1: p on W1 (0..2), q waits for W1 (2..4, not 6 on W2), r on W2 (0..1) -> 4
    (WAIT_FOR_FAST, (3, 1), 4),
    # mean times a 1.5, b 3, c 3, d 1.5, e 1.5; ranks a 6, b 4.5, c 4.5, d 3, e 1.5. a W1 0..1; b W1 1..3;
    # c W1 3..5 (EFT 5 ties W2's, lowest worker wins); d W2 1..3; e W1 5..6 -> 6
    (FORK, (2, 1), 6),
    # identical workers on Graham's graph: T1 W1 0..3, T9 W1 3..12, T4 W2 0..2, T5 W2 2..6, T6 W3 2..6,
    # T7 W2 6..10, T8 W3 6..10, T2 into W3's gap 0..2, T3 W2 10..12 -> 12
    (graham_example(), (1, 1, 1), 12),
]


@pytest.mark.parametrize(("spec", "speeds", "expected"), TEXTBOOK_HEFT, ids=[s.name for s, _, _ in TEXTBOOK_HEFT])
def test_textbook_heft_plans(spec, speeds, expected):
    plan = heft(spec, speeds)
    assert plan.makespan == expected and plan.makespan >= plan.lower_bound
    _check_schedule(plan)


def test_heft_waits_for_the_fast_worker_where_a_greedy_list_does_not():
    assert list_schedule(WAIT_FOR_FAST, speeds=(3, 1), priority="upward_rank").makespan == 6
    assert heft(WAIT_FOR_FAST, (3, 1)).lower_bound == 4  # ceil(13 / 4): HEFT's 4 is optimal
    ranks = upward_rank(FORK, (2, 1))
    assert ranks == {"a": 6.0, "b": 4.5, "c": 4.5, "d": 3.0, "e": 1.5}
    assert upward_rank(FORK) == dict(zip(FORK.ids, FORK.bottom_levels))  # one worker: the bottom levels


def _check_schedule(res):
    iv = res.intervals
    assert sorted(iv["node"]) == sorted(res.spec.ids)
    assert res.makespan == iv["end"].max()
    speed = dict(zip([f"W{k + 1}" for k in range(res.n_workers)], res.speeds))
    for r in iv.itertuples():
        assert r.end - r.start == max(1, -(-res.spec.durations[res.spec._index[r.node]] // speed[r.worker]))
    for _, rows in iv.groupby("worker"):
        rows = rows.sort_values("start")
        assert (rows["start"].to_numpy()[1:] >= rows["end"].to_numpy()[:-1]).all()
    end = iv.set_index("node")["end"]
    start = iv.set_index("node")["start"]
    for nid, deps in zip(res.spec.ids, res.spec.deps):
        assert all(start[nid] >= end[d] for d in deps)
    assert res.makespan >= res.lower_bound


@st.composite
def workloads(draw):
    return random_dag(draw(st.integers(1, 30)), layers=draw(st.integers(1, 8)), max_deps=draw(st.integers(1, 3)),
                      seed=draw(st.integers(0, 10_000)), mean_duration=draw(st.sampled_from([1, 2, 4])))


@settings(max_examples=200, deadline=None)
@given(spec=workloads(), m=st.integers(1, 8), data=st.data())
def test_every_list_schedule_stays_within_grahams_bound(spec, m, data):
    """Graham: makespan <= W/m + (1 - 1/m) L <= (2 - 1/m) * max(L, W/m), for any priority list."""
    order = data.draw(st.permutations(list(spec.ids)))
    for priority in (order, "fifo", "critical_path", "upward_rank"):
        res = list_schedule(spec, m, priority=priority)
        _check_schedule(res)
        assert res.makespan * m <= spec.total_work + (m - 1) * spec.critical_path_length
        assert res.makespan <= (2 - 1 / m) * max(spec.critical_path_length, spec.total_work / m) + 1e-9
    for priority in ("fifo", "critical_path"):  # the simulator's self-scheduling is a list schedule too
        assert simulate(spec, m, "self", priority=priority).makespan <= graham_bound(spec, m) + 1e-9


@settings(max_examples=80, deadline=None)
@given(spec=workloads(), speeds=st.lists(st.sampled_from([1, 1.5, 2, 3]), min_size=1, max_size=5))
def test_schedules_with_speeds_are_valid(spec, speeds):
    for res in (heft(spec, speeds), list_schedule(spec, speeds=speeds, priority="upward_rank")):
        _check_schedule(res)
    assert heft(spec, len(speeds)).graham_bound is not None


@pytest.mark.parametrize("bad", [
    lambda: list_schedule(diamond(2), 2, priority="random"),
    lambda: list_schedule(diamond(2), 2, priority=["src", "m0"]),
    lambda: list_schedule(diamond(2), speeds=[1, 0]),
    lambda: list_schedule(diamond(2), 3, speeds=[1, 2]),
    lambda: list_schedule(diamond(2)),
    lambda: heft(diamond(2), []),
    lambda: graham_bound(diamond(2), 0),
])
def test_bad_input_names_the_problem(bad):
    with pytest.raises(ll.ConfigError):
        bad()
