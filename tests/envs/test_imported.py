"""`ImportedEnv`: one session per episode, opened at the reset and closed after it."""

from __future__ import annotations

import numpy as np

from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.task import Task
from rk_agent.types import EvaluateResult, Message


class CountingSession(BaseSession):
    opened: list[CountingSession] = []  # noqa: RUF012  # the test's record

    def __init__(self) -> None:
        self.closed = 0
        self.opened.append(self)

    def verify(self, messages: list[Message]) -> EvaluateResult:
        return EvaluateResult(score=1.0)

    def close(self) -> None:
        self.closed += 1


class CountingEnv(ImportedEnv):
    env_name = "counting"

    def generate_task(self, rng: np.random.Generator) -> Task:
        return Task(id="0", messages=[Message(role="user", content="Say hi.")])

    def open_session(self, task: Task) -> CountingSession:
        return CountingSession()


def test_each_episodes_session_is_closed_at_the_next_reset_and_at_close() -> None:
    CountingSession.opened.clear()
    env = CountingEnv()
    env.reset(seed=0)
    env.reset(seed=1)
    first, second = CountingSession.opened
    assert (first.closed, second.closed) == (1, 0)
    env.close()
    assert (first.closed, second.closed) == (1, 1)
    env.close()  # once only
    assert second.closed == 1
