from __future__ import annotations

import pytest

from rk_agent.envs.guess_env import GuessEnv
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, DataError
from rk_agent.trainers.tasks import task_rows
from rk_agent.types import Message


def test_a_generator_gives_distinct_tasks_skipping_seeds_that_repeat_one() -> None:
    env = GuessEnv(high=4)  # only four questions exist: secrets 1..4
    rows = task_rows(env, 4, seed=7)
    assert sorted(r.task.id for r in rows) == [f"guess-4-{s}" for s in (1, 2, 3, 4)]
    for row in rows:  # each row's seed resets the env to that very task
        _, info = env.reset(seed=row.seed)
        assert info["task"].id == row.task.id
    assert rows[0].seed == 7


def test_a_generator_that_cannot_give_enough_distinct_tasks_says_so() -> None:
    with pytest.raises(DataError, match=r"only 4 distinct tasks in 100 draws .* fewer than the 5"):
        task_rows(GuessEnv(high=4), 5, seed=0)


def test_a_dataset_with_a_repeated_id_is_refused() -> None:
    task = Task(id="same", messages=[Message(role="user", content="Guess?")], ground_truth=1)
    env = GuessEnv(tasks=[task, task])
    with pytest.raises(DataError, match="task id 'same' appears more than once"):
        task_rows(env)


def test_a_dataset_row_i_is_task_i() -> None:
    tasks = [
        Task(id=f"t{i}", messages=[Message(role="user", content="Guess?")], ground_truth=i)
        for i in (1, 2, 3)
    ]
    rows = task_rows(GuessEnv(tasks=tasks), seed=10)
    assert [(r.task.id, r.seed) for r in rows] == [("t1", 10), ("t2", 11), ("t3", 12)]


@pytest.mark.parametrize("n", [0, -3])
def test_the_number_of_tasks_must_be_positive(n: int) -> None:
    with pytest.raises(ConfigError, match=f"at least 1, got {n}"):
        task_rows(GuessEnv(), n)


def test_a_generator_needs_a_number_of_tasks() -> None:
    with pytest.raises(ConfigError, match="say how many to train on"):
        task_rows(GuessEnv())
