"""A campaign's time budget: when testing stops, how long units and reductions may run on, and what the reserve is.

The decisions are pure functions of the clock (budget.py) and of the reduce queue's state, checked with exact
values; nothing here waits for a clock."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from fuzzer.campaign.budget import MAX_RESERVE_S, OVERRUN_S, UNIT_GRACE_S, Budget, format_budget, process_started
from fuzzer.campaign.reduce_queue import FIRST_GUESS_S, GRACE_S, START_S, ReduceQueue, Reducer, ReducerConfig


def test_a_three_minute_campaign_keeps_at_most_twelve_seconds_for_reductions() -> None:
    budget = Budget(start=100.0, seconds=180.0)
    assert (budget.deadline, budget.end) == (280.0, 280.0 + OVERRUN_S)
    assert budget.reserve_s(5.0) == 5.0  # what the waiting cases need, when it is little
    assert budget.reserve_s(400.0) == 12.0  # 13 cases waiting had kept 93 s back: capped at a fifteenth
    assert not budget.stop_testing(267.9, 400.0)
    assert budget.stop_testing(268.0, 400.0)
    assert not budget.stop_testing(279.9, 0.0) and budget.stop_testing(280.0, 0.0)  # nothing waiting: the deadline


def test_an_hour_keeps_four_minutes_at_most_and_a_week_ten() -> None:
    assert Budget(0.0, 3600.0).reserve_s(1e9) == 240.0
    assert Budget(0.0, 7 * 86400.0).reserve_s(1e9) == MAX_RESERVE_S
    assert Budget(0.0, 7 * 86400.0).reserve_s(90.0) == 90.0


def test_units_in_flight_and_reductions_end_within_a_minute_of_the_budget() -> None:
    budget = Budget(start=0.0, seconds=180.0)
    assert budget.grace_end(168.0, 60.0) == 168.0 + UNIT_GRACE_S  # a unit gets its grace...
    assert budget.grace_end(168.0, 5.0) == 173.0  # ...or its timeout, if shorter...
    assert budget.grace_end(205.0, 60.0) == budget.end  # ...never past the end
    assert budget.may_start_reduction(179.9) and not budget.may_start_reduction(180.0)
    assert budget.end - budget.deadline < 60.0


def test_the_time_line_says_how_much_of_the_budget_went_to_testing() -> None:
    budget = Budget(start=10.0, seconds=180.0)
    assert format_budget(budget, 17.0, 178.4, 191.0) == (
        "time: tested for 161 s of the 180 s budget (start-up 7 s); ended 1 s after it")
    assert format_budget(budget, None, None, 20.0) == "time: tested for 0 s of the 180 s budget; ended 170 s before it"


def test_the_budget_counts_from_the_process_start() -> None:
    started = process_started()
    assert started <= time.monotonic()
    # This process started before its test modules were imported: well before now.
    assert time.monotonic() - started > 0.1


def test_the_reserve_counts_the_waiting_cases_and_what_is_left_of_running_ones(tmp_path: Path) -> None:
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    queue.pending.extend(tmp_path / f"case-{i}" for i in range(2))
    # No process: estimate_s reads only the case a reducer is on and since when.
    queue.reducers.append(Reducer(proc=None, case_dir=tmp_path / "running", since=96.0))  # type: ignore[arg-type]
    assert queue.estimate_s(2, now=100.0) == START_S + (2 * FIRST_GUESS_S + (FIRST_GUESS_S - 4.0)) / 2
    assert queue.estimate_s(1, now=100.0) == 2 * FIRST_GUESS_S + (FIRST_GUESS_S - 4.0)  # no reducer to start
    assert queue.estimate_s(1, now=200.0) == 2 * FIRST_GUESS_S  # running past the mean: nothing more counted
    queue.pending.clear()
    assert queue.estimate_s(2, now=100.0) == FIRST_GUESS_S - 4.0  # nothing waiting: no reducer to start


def test_a_drain_past_its_deadline_starts_no_case_and_leaves_them_waiting(tmp_path: Path) -> None:
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    queue.pending.extend(tmp_path / f"case-{i}" for i in range(3))
    queue.polish.append(tmp_path / "case-9" / "case-9-reduced")
    now = time.monotonic()
    queue.drain(2, start_until=now - 1.0, stop_at=now + 30.0)
    assert (queue.reducers, queue.waiting, queue.reduced_beside, len(queue.polish)) == ([], 3, 0, 1)
    assert queue.summary() == (
        "reduction: 0 new cases minimized, 0 failed (see .logs/reduce.log), 3 waiting (minimized on --resume, or "
        "by `convsmith reduce CASE`); 0 of them minimized while testing; 0 reduced cases polished, 1 left to "
        "polish")


def test_a_case_running_when_reduction_stops_waits_again(tmp_path: Path) -> None:
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    queue.pending.append(tmp_path / "next")
    # fake_reducer: a process that never answers stands in for a reducer on a long case.
    fake_reducer = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    queue.reducers.append(Reducer(fake_reducer, case_dir=tmp_path / "running", since=time.monotonic()))
    queue.close(wait_s=0)
    assert fake_reducer.returncode is not None and queue.reducers == []
    assert list(queue.pending) == [tmp_path / "running", tmp_path / "next"]


def test_a_backlog_gets_one_more_reducer_beside_the_tests_per_lag_up_to_one_per_worker(tmp_path: Path) -> None:
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    queue.seconds.extend([6.0] * 7)  # with the first guess weighed in: (42 + 30) / 10 = 7.2 s a case
    assert queue.per_case_s() == 7.2 and queue.reducers_beside(2) == 1  # nothing waiting
    queue.pending.extend(tmp_path / f"case-{i}" for i in range(41))  # 295.2 s of first steps: under LAG_S
    assert queue.reducers_beside(2) == 1
    queue.later.extend(tmp_path / f"more-{i}" for i in range(1))  # 302.4 s
    assert queue.reducers_beside(2) == 2 and queue.reducers_beside(1) == 1
    queue.later.extend(tmp_path / f"more-{i}" for i in range(1, 200))
    assert queue.reducers_beside(2) == 2 and queue.reducers_beside(8) == 6  # 1,735 s: five lags more


def test_a_reducer_beyond_those_wanted_now_is_handed_no_case(tmp_path: Path) -> None:
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    queue.pending.extend(tmp_path / f"case-{i}" for i in range(3))
    # idle_reducers: processes reading their input stand in for two idle reducers (`cat` reads the cases sent).
    idle = [Reducer(subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)) for _ in range(2)]
    queue.reducers.extend(idle)
    try:
        queue.step(1)
        assert [r.case_dir for r in idle] == [tmp_path / "case-0", None] and queue.waiting == 2
        queue.step(2)
        assert idle[1].case_dir == tmp_path / "case-1" and queue.waiting == 1
    finally:
        for reducer in idle:
            reducer.stop()


def test_a_reducer_may_take_its_budget_and_two_check_timeouts_more_on_a_case_before_it_is_given_up() -> None:
    config = ReducerConfig(60.0, "fuzzer.converters:CONVERTERS", timeout_s=45.0)
    assert config.limit_s() == 60.0 + GRACE_S + 90.0
