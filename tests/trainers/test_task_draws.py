"""Fresh tasks and retired ones: new seeds for a generator, passes over a dataset, retirement
after K settled groups, and a state that carries a run through a checkpoint unchanged."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

from rk_agent.envs.guess_env import GuessEnv
from rk_agent.envs.task import Task
from rk_agent.runs.group_sampling import Settled
from rk_agent.trainers import task_draws
from rk_agent.trainers.task_draws import TaskDraws, TaskSource, task_source
from rk_agent.trainers.tasks import TaskRow, TaskTable, task_columns, task_rows
from rk_agent.types import Message


def _dataset(n: int) -> list[TaskRow]:
    tasks = [
        Task(id=f"t{i}", messages=[Message(role="user", content="Guess?")], ground_truth=i)
        for i in range(n)
    ]
    return task_rows(GuessEnv(tasks=tasks))


def _generated(n: int, **kwargs: Any) -> TaskDraws:
    env = GuessEnv(high=1000)
    rows = task_rows(env, n, seed=100)
    return TaskDraws(task_source(env, rows, task_columns, lambda: GuessEnv(high=1000)), **kwargs)


def _ids(rows: list[TaskRow]) -> list[str]:
    return [r.task.id for r in rows]


def test_a_generator_gives_new_seeds_after_the_tables_and_tells_the_rollout() -> None:
    env = GuessEnv(high=1000)
    rows = task_rows(env, 3, seed=100)
    table = TaskTable(rows)
    draws = TaskDraws(task_source(env, rows, task_columns, lambda: GuessEnv(high=1000),
                                  on_fresh=table.add))  # fmt: skip
    draws.begin_step()
    fresh = draws.fresh(2) + draws.fresh(1)
    assert [r.seed for r in fresh] == [103, 104, 105]
    assert len(set(_ids(fresh)) | set(_ids(rows))) == 6
    assert len(table) == 6  # the rollout finds a fresh task's prompt
    for row in fresh:
        assert table.for_prompt(task_columns(row)["prompt"]) == row
    # TRL's own draws of the table are played as drawn (the sampler owns their order)
    draws.begin_step()
    assert draws.admit(_ids(rows) + _ids(rows), step=2) == [None] * 6


def test_a_generated_task_that_repeats_the_table_or_an_earlier_one_is_skipped() -> None:
    env = GuessEnv(high=4)  # four tasks in all
    rows = task_rows(env, 2, seed=0)
    draws = TaskDraws(task_source(env, rows, task_columns, lambda: GuessEnv(high=4)))
    draws.begin_step()
    fresh = draws.fresh(5)  # only two tasks are left
    assert len(fresh) == 2 and not set(_ids(fresh)) & set(_ids(rows))
    assert draws.fresh(1) == []


def test_a_dataset_gives_rows_not_yet_drawn_in_the_pass() -> None:
    rows = _dataset(5)
    draws = TaskDraws(TaskSource(rows, task_columns), seed=3)
    draws.begin_step()
    assert draws.admit(["t0", "t1"], step=1) == [None, None]
    fresh = draws.fresh(2, exclude=["t0", "t1"])
    assert len(fresh) == 2 and not {"t0", "t1"} & set(_ids(fresh))
    drawn = {"t0", "t1", *_ids(fresh)}
    (last,) = set(_ids(rows)) - drawn
    # Next step TRL draws two rows the pass has played: each plays the pass's next row, and
    # when the pass runs out a new one starts (a row may be drawn again, not twice a step).
    draws.begin_step()
    out = draws.admit([_ids(fresh)[0], "t0"], step=2)
    assert out[0] is not None and out[0].task.id == last
    assert draws.pass_index == 1
    assert out[1] is not None and out[1].task.id not in {"t0", last}


def test_a_dataset_row_plays_as_drawn_when_no_other_is_left() -> None:
    rows = _dataset(2)
    draws = TaskDraws(TaskSource(rows, task_columns))
    draws.begin_step()
    assert draws.admit(["t0", "t1"], step=1) == [None, None]
    draws.begin_step()
    assert draws.admit(["t0", "t1"], step=2) == [None, None]  # a new pass, the same two
    assert draws.fresh(1, exclude=["t0", "t1"]) == []


def test_a_task_retires_after_k_groups_settled_the_same_way() -> None:
    draws = _generated(4, retire_after=3)
    task = next(iter(draws.source.rows)).task.id
    assert draws.observe(task, Settled.ALL_PASS, 1) is None
    assert draws.observe(task, Settled.ALL_PASS, 2) is None
    assert draws.observe(task, None, 3) is None  # a group with spread starts over
    assert draws.observe(task, Settled.ALL_PASS, 4) is None
    assert draws.observe(task, Settled.ALL_FAIL, 5) is None  # so does another kind
    assert draws.observe(task, Settled.ALL_FAIL, 6) is None
    retired = draws.observe(task, Settled.ALL_FAIL, 7)
    assert retired is not None
    assert (retired.task_id, retired.step, retired.settled, retired.groups) == (
        task, 7, Settled.ALL_FAIL, 3,
    )  # fmt: skip
    assert draws.observe(task, Settled.ALL_FAIL, 8) is None  # retired once
    assert list(draws.retired) == [task]
    fresh = draws.fresh(1)[0].task.id
    assert draws.observe(fresh, Settled.ALL_PASS, 9) is None and fresh not in draws.streaks
    assert _generated(4).observe(task, Settled.ALL_PASS, 1) is None  # retirement is off


def test_a_retired_task_is_replaced_by_a_fresh_one_unless_kept() -> None:
    draws = _generated(4, retire_after=1)
    first, second = _ids(list(draws.source.rows))[:2]
    draws.observe(first, Settled.ALL_PASS, 1)
    draws.begin_step()
    out = draws.admit([first, second], step=2)
    assert out[0] is not None and out[0].task.id not in _ids(list(draws.source.rows))
    assert out[1] is None
    # With retire_keep, a share of the draws still plays it, the same ones every time.
    kept = _generated(4, retire_after=1, retire_keep=0.5)
    kept.observe(first, Settled.ALL_PASS, 1)
    plays = []
    for step in range(2, 202):
        kept.begin_step()
        plays.append(kept.admit([first], step=step)[0] is None)
    assert 70 < sum(plays) < 130
    again = _generated(4, retire_after=1, retire_keep=0.5)
    again.observe(first, Settled.ALL_PASS, 1)
    again.begin_step()
    assert (again.admit([first], step=2)[0] is None) == plays[0]


@pytest.mark.parametrize("generated", [True, False])
def test_a_run_restored_from_its_state_draws_what_it_would_have(generated: bool) -> None:
    def make() -> TaskDraws:
        if generated:
            return _generated(6, seed=5, retire_after=2)
        return TaskDraws(TaskSource(_dataset(6), task_columns), seed=5, retire_after=2)

    def step(draws: TaskDraws, number: int) -> list[str]:
        draws.begin_step()
        ids = _ids(list(draws.source.rows))
        drawn = [ids[(2 * number) % 6], ids[(2 * number + 1) % 6]]
        played = [row.task.id if row else drawn[i]
                  for i, row in enumerate(draws.admit(drawn, step=number))]  # fmt: skip
        played += _ids(draws.fresh(2, exclude=drawn))
        for task in played:
            draws.observe(task, Settled.ALL_PASS if task == ids[0] else None, number)
        return played

    whole = make()
    straight = [step(whole, n) for n in range(1, 7)]
    first = make()
    halves = [step(first, n) for n in (1, 2, 3)]
    resumed = make()
    resumed.load(first.state())
    halves += [step(resumed, n) for n in (4, 5, 6)]
    assert halves == straight
    assert resumed.state() == whole.state()
    assert list(whole.retired) == [_ids(list(whole.source.rows))[0]]


def test_docstring_examples() -> None:
    assert doctest.testmod(task_draws, raise_on_error=True).failed == 0
