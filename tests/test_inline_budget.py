"""Tests for `rk_agent.inline_budget`: when a callable moves to its caller's thread, and back."""

from __future__ import annotations

import doctest

from rk_agent import inline_budget
from rk_agent.inline_budget import InlineBudget


def trial(budget: InlineBudget, wall_s: float, cpu_s: float, times: int) -> None:
    for _ in range(times):
        budget.record(wall_s, inline=False, cpu_s=cpu_s)


def test_it_starts_off_the_thread_and_decides_after_its_trials() -> None:
    budget = InlineBudget(trials=4)
    trial(budget, 0.0005, 0.0004, 3)
    assert not budget.inline
    trial(budget, 0.0005, 0.0004, 1)
    assert budget.inline and not budget.demoted


def test_waits_for_the_gil_do_not_keep_a_quick_callable_off_the_thread() -> None:
    # Many busy episodes make a thread's wall time long; its CPU time stays what the work costs.
    budget = InlineBudget(trials=4)
    trial(budget, 0.012, 0.0003, 4)
    assert budget.inline


def test_a_callable_that_waits_every_time_stays_off_the_thread_for_good() -> None:
    budget = InlineBudget(trials=4)
    trial(budget, 0.05, 0.0001, 4)  # waiting on the network: little CPU, long wall time
    assert not budget.inline and not budget.demoted  # or only for the GIL: measured again
    trial(budget, 0.05, 0.0001, 16 + 4)  # 4x its trials later, slow again
    assert not budget.inline and not budget.demoted
    trial(budget, 0.05, 0.0001, 64 + 4)  # 16x later, the third round: slow every time
    assert not budget.inline and budget.demoted
    trial(budget, 0.0001, 0.0001, 1000)  # then no more chances
    assert not budget.inline


def test_a_quick_callable_slow_on_the_clock_at_a_busy_start_is_promoted_later() -> None:
    # The first calls of a run wait for the GIL behind every other episode's start.
    budget = InlineBudget(trials=4)
    trial(budget, 0.08, 0.0003, 4)
    assert not budget.inline
    trial(budget, 0.0004, 0.0003, 15)  # the calls between the rounds are not measured
    assert not budget.inline
    trial(budget, 0.0004, 0.0003, 1 + 4)
    assert budget.inline and not budget.demoted


def test_a_callable_that_computes_long_stays_off_the_thread() -> None:
    budget = InlineBudget(trials=4)
    trial(budget, 0.004, 0.004, 4)
    assert not budget.inline and budget.demoted


def test_the_median_decides_not_one_outlier() -> None:
    budget = InlineBudget(trials=5)
    trial(budget, 0.0005, 0.0005, 4)
    budget.record(0.2, inline=False, cpu_s=0.2)
    assert budget.inline


def test_one_slow_inline_call_is_a_pause_three_in_a_row_a_pattern() -> None:
    budget = InlineBudget(trials=1)
    trial(budget, 0.0001, 0.0001, 1)
    budget.record(0.5, inline=True)
    assert budget.inline
    for _ in range(20):
        budget.record(0.0001, inline=True)
    budget.record(0.5, inline=True)
    budget.record(0.5, inline=True)
    assert budget.inline  # two, after a long quick stretch
    budget.record(0.5, inline=True)
    assert not budget.inline and budget.demoted


def test_slow_one_call_in_three_is_a_pattern_too() -> None:
    budget = InlineBudget(trials=1)
    trial(budget, 0.0001, 0.0001, 1)
    calls = 0
    while budget.inline and calls < 300:
        budget.record(0.5 if calls % 3 == 0 else 0.0001, inline=True)
        calls += 1
    assert not budget.inline and calls < 300


def test_a_fixed_mode_never_changes() -> None:
    always = InlineBudget(mode=True)
    never = InlineBudget(mode=False)
    assert always.inline and not never.inline
    for budget in (always, never):
        trial(budget, 0.0001, 0.0001, 20)
        for _ in range(20):
            budget.record(1.0, inline=True)
    assert always.inline and not never.inline


def test_repr_names_the_state() -> None:
    budget = InlineBudget(trials=1)
    assert repr(budget) == "InlineBudget(threaded, mode=None)"
    trial(budget, 0.0001, 0.0001, 1)
    assert repr(budget) == "InlineBudget(inline, mode=None)"
    assert repr(InlineBudget(trials=1, mode=False)) == "InlineBudget(threaded, mode=False)"


def test_docstring_examples_run() -> None:
    result = doctest.testmod(inline_budget)
    assert result.failed == 0 and result.attempted >= 1
