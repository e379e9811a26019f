"""`ImportedEnv` around one `Session` per episode: when sessions close, and which one solves."""

from __future__ import annotations

import gc
import weakref
from typing import Any, ClassVar

import numpy as np
import pytest

from rk_agent.envs.check import play_with_solver
from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.task import Task
from rk_agent.errors import EnvError
from rk_agent.types import EvaluateResult, Message

CLOSED: list[str] = []


class Echo(BaseSession):
    """Say the task's word; a session knows its own word and, when ``strict``, answers only
    the conversation of its own task (the word is the opening message's ``name``, which the
    solver's lookup by opening does not read: every task opens alike for it)."""

    def __init__(self, task: Task, strict: bool) -> None:
        self.word = str(task.ground_truth)
        self.strict = strict

    def verify(self, messages: list[Message]) -> EvaluateResult:
        return EvaluateResult(score=float(messages[-1].text == self.word))

    def solve(self, messages: list[Message], tools: Any) -> Message | None:
        if self.strict and messages[0].name != self.word:
            return None
        return Message(role="assistant", content=self.word)

    def close(self) -> None:
        CLOSED.append(self.word)


class EchoEnv(ImportedEnv):
    """Two tasks that open alike (``say it``) with other words."""

    env_name: ClassVar[str] = "echo"
    source_name: ClassVar[str] = "echo"
    has_solver: ClassVar[bool] = True
    strict: ClassVar[bool] = True

    def generate_task(self, rng: np.random.Generator) -> Task:
        word = ["apple", "pear"][int(rng.integers(2))]
        opening = Message(role="user", content="say it", name=word)
        return Task(id=word, messages=[opening], ground_truth=word)

    def open_session(self, task: Task) -> Echo:
        return Echo(task, self.strict)


def seed_of(word: str) -> int:
    env = EchoEnv()
    try:
        return next(s for s in range(50) if env.reset(seed=s)[1]["task"].id == word)
    finally:
        env.close()


def test_a_session_is_closed_once_its_episode_is_scored_and_by_reset_and_close() -> None:
    apple = seed_of("apple")
    CLOSED.clear()
    env = EchoEnv()
    played = play_with_solver(env, env.reference_solver, seed=apple)  # type: ignore[arg-type]
    assert played.episode is not None and played.episode.score == 1.0
    assert CLOSED == ["apple"]  # as soon as it was scored
    env.reset(seed=apple)
    env.reset(seed=apple)  # the unfinished episode's session is closed by the next reset
    assert CLOSED == ["apple", "apple"]
    env.close()
    assert CLOSED == ["apple", "apple", "apple"]


class Alike(EchoEnv):
    """Every session answers any conversation that opens as its own does."""

    strict: ClassVar[bool] = False


def test_sessions_that_open_alike_are_asked_the_episodes_own_first() -> None:
    envs = [Alike(), Alike()]
    envs[0].reset(seed=seed_of("apple"))
    envs[1].reset(seed=seed_of("pear"))
    solve = Alike.reference_solver
    assert solve is not None
    # The rollout engine passes the episode's own message objects: its session answers.
    assert solve(envs[0].conversation, None).text == "apple"
    assert solve(envs[1].conversation, None).text == "pear"
    # A copy of the conversation matches both: the newest answers.
    assert solve([Message(role="user", content="say it")], None).text == "pear"
    for env in envs:
        env.close()


def test_a_session_that_does_not_know_the_conversation_lets_the_next_answer() -> None:
    envs = [EchoEnv(), EchoEnv()]
    envs[0].reset(seed=seed_of("apple"))
    envs[1].reset(seed=seed_of("pear"))
    solve = EchoEnv.reference_solver
    assert solve is not None
    copies = [m.model_copy() for m in envs[0].conversation]  # not the episode's own objects
    assert solve(copies, None).text == "apple"
    envs[0].close()
    with pytest.raises(EnvError, match="knows no answer to this conversation"):
        solve(copies, None)  # its episode is over: its session is closed and forgotten
    envs[1].close()


def test_an_environment_dropped_unclosed_is_collected_with_its_session() -> None:
    env = EchoEnv()
    env.reset(seed=0)
    session = weakref.ref(env.state.scratch["session"])
    dropped = weakref.ref(env)
    del env
    gc.collect()
    assert dropped() is None and session() is None


class SayEnv(EchoEnv):
    """Tasks that open differently: ``say apple``, ``say pear``."""

    def generate_task(self, rng: np.random.Generator) -> Task:
        task = super().generate_task(rng)
        return task.model_copy(
            update={"messages": [Message(role="user", content=f"say {task.id}")]}
        )


def test_its_reward_scores_only_the_episode_its_session_plays() -> None:
    # Called on another conversation (single-turn GRPO's reward functions score TRL's
    # completions with the environment's rewards, no episode played), the open session must
    # not score it: it did, against the last task the environment opened.
    env = SayEnv()
    env.reset(seed=seed_of("apple"))
    reward = env.episode_reward_specs["echo"]
    assert callable(reward)
    own = [Message(role="user", content="say apple"), Message(role="assistant", content="apple")]
    assert reward(messages=own).score == 1.0
    other = [Message(role="user", content="say pear"), Message(role="assistant", content="pear")]
    result = reward(messages=other)
    assert not result.is_score_valid
    assert result.error == (
        "echo scores an episode in the session that played it, and this conversation is not "
        "the one its session plays (score it with the environment that played it, or with a "
        "reward that reads the transcript)"
    )
    env.close()


def test_single_turn_training_refuses_a_source_that_scores_only_in_its_sessions() -> None:
    # TRL generates single-turn completions and plays no episode: every score would be invalid.
    from rk_agent.errors import ConfigError
    from rk_agent.trainers.rewards import single_turn_reward_funcs

    with pytest.raises(ConfigError) as info:
        single_turn_reward_funcs(SayEnv())
    assert str(info.value) == (
        "echo cannot train single-turn (--single-turn): its reward 'echo' scores an episode in "
        "the session that played it, and single-turn GRPO plays no episode (TRL generates one "
        "reply per prompt). Train it on whole episodes (drop --single-turn), or give a "
        "--reward that reads the transcript."
    )
    funcs, _ = single_turn_reward_funcs(
        SayEnv(), rewards={"exact": "rk_agent.rewards.builtin.math:math_reward"}
    )
    assert [f.__name__ for f in funcs] == ["exact"]
