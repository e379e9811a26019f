"""`ImportedEnv`: one `Session` per episode, closed when the next episode opens and at close."""

from __future__ import annotations

from typing import Any

from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.task import Task
from rk_agent.types import EvaluateResult, Message


class CountingSession(BaseSession):
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name
        log.append(f"open {name}")

    def verify(self, messages: list[Message]) -> EvaluateResult:
        return EvaluateResult(score=1.0)

    def close(self) -> None:
        self.log.append(f"close {self.name}")


class CountingEnv(ImportedEnv):
    env_name = "counting"

    def __init__(self, **kwargs: Any) -> None:
        self.log: list[str] = []
        super().__init__(**kwargs)

    def generate_task(self, rng: Any) -> Task:
        n = int(rng.integers(1000))
        return Task(id=str(n), messages=[Message(role="user", content=f"task {n}")])

    def open_session(self, task: Task) -> CountingSession:
        return CountingSession(self.log, task.id)


def test_each_session_is_closed_at_the_next_reset_and_at_close() -> None:
    env = CountingEnv()
    first = env.reset(seed=1)[1]["task"].id
    second = env.reset(seed=2)[1]["task"].id
    assert env.log == [f"open {first}", f"close {first}", f"open {second}"]
    env.close()
    assert env.log[-1] == f"close {second}"
    env.close()  # once only
    assert env.log.count(f"close {second}") == 1
