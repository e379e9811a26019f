"""`check_env` catches the mistakes it promises to catch; `play_with_solver` plays."""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
import pytest

from rk_agent.envs import ChatEnv, Task, check_env, play_with_solver
from rk_agent.envs.guess_env import GuessEnv
from rk_agent.errors import EnvError


def task(n: int) -> Task:
    return Task.model_validate(
        {"id": f"t{n}", "messages": [{"role": "user", "content": f"Say {n}"}], "ground_truth": n}
    )


def say_it(messages: list[Any], tools: Any) -> str:
    return messages[-1].text.split()[-1]


class SayEnv(ChatEnv):
    """Say the number back."""

    default_episode_rewards = {"said": lambda messages, ground_truth: float(  # noqa: RUF012
        messages[-1].text == str(ground_truth))}  # fmt: skip
    reference_solver = staticmethod(say_it)

    def generate_task(self, rng: np.random.Generator) -> Task:
        return task(int(rng.integers(1000)))


class UnseededEnv(SayEnv):
    def generate_task(self, rng: np.random.Generator) -> Task:
        return task(random.randrange(10**9))


class ConstantEnv(SayEnv):
    def generate_task(self, rng: np.random.Generator) -> Task:
        return task(7)


class WrongSolverEnv(SayEnv):
    reference_solver = staticmethod(lambda messages, tools: "nope")


class BadSchemaEnv(SayEnv):
    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        good = {"type": "function", "function": {"name": "f", "description": "d",
                                                 "parameters": {"type": "object"}}}  # fmt: skip
        bad = {"type": "function", "function": {"name": "bad name", "parameters": {
            "type": "object", "properties": {"x": {"type": "nonsense"}}}}}  # fmt: skip
        return [good, good, bad]


def test_a_good_user_env_passes() -> None:
    check_env(SayEnv)
    check_env(SayEnv(render_mode="ansi"))  # an instance: no spec, so our own render check


def test_unseeded_task_generation_is_caught() -> None:
    message = "check_env(UnseededEnv): reset(seed=0) gave different tasks on two calls."
    with pytest.raises(EnvError, match=re.escape(message)):
        check_env(UnseededEnv())
    with pytest.raises(EnvError, match=re.escape(message)):
        check_env(UnseededEnv)


def test_one_task_for_every_seed_is_caught() -> None:
    with pytest.raises(EnvError, match=re.escape("seeds 0-9 all gave the same task")):
        check_env(ConstantEnv)


def test_a_solver_that_fails_is_caught() -> None:
    message = "check_env(WrongSolverEnv): the reference solver's episode for seed 0 has reward 0"
    with pytest.raises(EnvError, match=re.escape(message)):
        check_env(WrongSolverEnv)
    check_env(WrongSolverEnv, use_solver=False)


def test_bad_tool_schemas_are_caught() -> None:
    message = (
        "check_env(BadSchemaEnv): bad tool schemas: tool 2 has an invalid name 'bad name' "
        "(1-64 of [a-zA-Z0-9_-]); tool 'bad name' has no description; tool 'bad name': "
        "parameters are not a valid JSON schema: "
    )
    with pytest.raises(EnvError, match=re.escape(message)) as caught:
        check_env(BadSchemaEnv)
    assert str(caught.value).endswith("tool names appear more than once: ['f'].")


def test_a_solver_that_never_finishes_is_caught() -> None:
    class Stubborn(GuessEnv):
        reference_solver = staticmethod(lambda messages, tools: "1")

    with pytest.raises(EnvError, match=re.escape("did not finish seed 0 (max_turns)")):
        check_env(Stubborn, high=1000)


def test_play_with_solver_records_the_episode() -> None:
    env = SayEnv()
    played = play_with_solver(env, say_it, seed=3)
    assert played.terminated and played.episode is not None and played.episode.score == 1.0
    assert played.task == env.state.task
    assert [m.role for m in played.messages] == ["user", "assistant"]
    assert played.total_reward == 1.0
    assert [turn.done for turn in played.turns] == [True]
    assert played.step_results == [played.turns[0].step]
