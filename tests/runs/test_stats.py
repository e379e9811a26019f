"""`EpisodeStats`: one definition behind ``summary.json`` and the training logs."""

from __future__ import annotations

from typing import Any

import pytest

from rk_agent.runs.stats import EpisodeStats
from rk_agent.runs.summary import summarize
from rk_agent.runs.trajectory import Failure, ToolCallOutcome, Trajectory, Turn
from rk_agent.trainers.rewards import episode_stats
from rk_agent.types import EvaluateResult, FailureKind, FailureSite, Message, StopReason


def trajectory(
    index: int,
    *,
    success: bool | None,
    tools: tuple[bool, ...] = (),
    parse_error: str | None = None,
    stop: StopReason = StopReason.ANSWERED,
    failure: FailureKind | None = None,
    **extra: Any,
) -> Trajectory:
    turns = [Turn(index=0, assistant=Message(role="assistant", content="x"), reward=0.5,
                  tool_calls=[ToolCallOutcome(name="t", ok=ok) for ok in tools],
                  parse_error=parse_error)]  # fmt: skip
    return Trajectory(
        id=f"{index}-0", task_index=index, sample=0,
        task={"id": f"t{index}", "messages": []},  # type: ignore[arg-type]
        env="e", model="m", turns=turns, stop_reason=stop, success=success,
        episode=None if success is None else EvaluateResult(score=float(success)),
        failure=None if failure is None else Failure(
            kind=failure, message="m", where=FailureSite.POLICY),
        **extra,
    )  # fmt: skip


BATCH = [
    trajectory(0, success=True, tools=(True, False)),
    # The context overflowed: scored as truncated, and a failure.
    trajectory(1, success=False, stop=StopReason.TRUNCATED, failure=FailureKind.CONTEXT_OVERFLOW,
               metadata={"budget_hit": True}),
    # The endpoint failed: no verdict.
    trajectory(2, success=None, stop=StopReason.ERROR, failure=FailureKind.MODEL_ERROR,
               parse_error="bad"),
]  # fmt: skip


def test_the_counts_and_rates() -> None:
    stats = EpisodeStats.of(BATCH)
    assert (stats.episodes, stats.failed, stats.judged, stats.succeeded) == (3, 2, 2, 1)
    assert stats.failure_rate == pytest.approx(2 / 3)  # context overflow counts
    assert stats.success_rate == 0.5  # over the episodes with a verdict
    assert stats.tool_success_rate == 0.5 and stats.parse_error_rate == pytest.approx(1 / 3)
    assert stats.turns_mean == 1.0 and stats.budget_hit_rate == pytest.approx(1 / 3)
    assert stats.failures == {"context_overflow": 1, "model_error": 1}
    assert stats.stop_reasons == {"answered": 1, "truncated": 1, "error": 1}


def test_summary_and_training_logs_say_the_same() -> None:
    summary, logged = summarize(BATCH), episode_stats(BATCH)
    assert logged["episodes/failure_rate"] == summary.failed / summary.episodes
    assert logged["episodes/success_rate"] == summary.success_rate
    assert logged["episodes/tool_success_rate"] == summary.tool_call_success_rate
    assert logged["episodes/parse_error_rate"] == summary.parse_error_rate
    assert logged["episodes/turns_mean"] == summary.turns_mean
    assert logged["episodes/step_reward_mean"] == summary.step_reward.mean
    assert {k.removeprefix("episodes/stop/"): v * 3 for k, v in logged.items()
            if k.startswith("episodes/stop/")} == summary.stop_reasons  # fmt: skip


def test_no_tool_calls_is_no_tool_success_rate_not_zero() -> None:
    batch = [trajectory(0, success=True), trajectory(1, success=False)]
    assert EpisodeStats.of(batch).tool_success_rate is None
    assert summarize(batch).tool_call_success_rate is None
    logged = episode_stats(batch)
    assert "episodes/tool_success_rate" not in logged
    assert logged["episodes/tool_calls_per_episode"] == 0.0


def test_nothing_to_count() -> None:
    stats = EpisodeStats.of([])
    assert (stats.success_rate, stats.failure_rate, stats.turns_mean) == (None, None, None)
    assert episode_stats([]) == {}
    only_failed = [trajectory(0, success=None, failure=FailureKind.ENV_ERROR)]
    assert "episodes/success_rate" not in episode_stats(only_failed)
    assert summarize(only_failed).success_rate is None
