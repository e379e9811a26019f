"""Trajectory records: `Failure` kinds and sites, and lines written by older versions."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rk_agent.runs.trajectory import Failure, Trajectory
from rk_agent.types import FailureKind, FailureSite, Message

OLD_LINE = json.dumps({
    "id": "0-0", "task_index": 0, "sample": 0, "seed": 3,
    "task": {"id": "t", "messages": [{"role": "user", "content": "hi"}]},
    "env": "tools", "model": "m", "turns": [], "stop_reason": "error",
    "failure": {"kind": "tool_error", "where": "environment",
                "message": "the environment's reset() raised OSError: gone"},
})  # fmt: skip


def test_an_old_environment_crash_loads_as_an_env_error() -> None:
    trajectory = Trajectory.model_validate_json(OLD_LINE)
    assert trajectory.failure is not None
    assert trajectory.failure.kind is FailureKind.ENV_ERROR
    assert trajectory.failure.where is FailureSite.ENVIRONMENT
    assert json.loads(trajectory.model_dump_json())["failure"]["kind"] == "env_error"


@pytest.mark.parametrize("where", list(FailureSite))
@pytest.mark.parametrize(
    "kind", [FailureKind.MODEL_ERROR, FailureKind.ENV_ERROR, FailureKind.TIMEOUT,
             FailureKind.CONTEXT_OVERFLOW, FailureKind.PARSE_ERROR],
)  # fmt: skip
def test_failures_round_trip(kind: FailureKind, where: FailureSite) -> None:
    failure = Failure(kind=kind, where=where, message="m", retryable=True)
    again = Failure.model_validate_json(failure.model_dump_json())
    assert again == failure and json.loads(failure.model_dump_json())["where"] == where.value


def test_where_is_a_closed_vocabulary() -> None:
    with pytest.raises(ValidationError, match="'policy', 'environment' or 'engine'"):
        Failure(kind=FailureKind.TIMEOUT, where="reward", message="m")  # type: ignore[arg-type]
    assert [site.value for site in FailureSite] == ["policy", "environment", "engine"]


def test_the_opening_falls_back_to_the_tasks_messages() -> None:
    old = Trajectory.model_validate_json(OLD_LINE)  # written before `opening` existed
    assert old.opening is None and old.opening_messages == old.task.messages
    system = Message(role="system", content="Use the tools.")
    added = old.model_copy(update={"opening": [system, *old.task.messages]})
    assert added.opening_messages == added.conversation == [system, *old.task.messages]
    again = Trajectory.model_validate_json(added.model_dump_json())
    assert again.opening == added.opening and again.task == old.task
