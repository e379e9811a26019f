"""The watch's signals, computed exactly, from outcomes and from real trajectories."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rk_agent.envs.task import Task
from rk_agent.rewards.decorator import reward_function
from rk_agent.runs.group_sampling import StepSampling
from rk_agent.runs.trajectory import ToolCallOutcome, Trajectory, Turn
from rk_agent.runs.watch import (
    STEP_REWARDS,
    EpisodeOutcome,
    final_answer,
    has_spread,
    outcome_of,
    trajectory_groups,
    watch_signals,
)
from rk_agent.runs.watch_log import append_watch_line, read_watch
from rk_agent.types import EvaluateResult, Message, ScoreFault, StopReason


def _o(reward: float | None, success: bool | None = None, **kwargs: object) -> EpisodeOutcome:
    return EpisodeOutcome(reward=reward, success=success, **kwargs)  # type: ignore[arg-type]


def test_zero_spread_groups_are_split_into_all_fail_and_all_pass() -> None:
    groups = [
        [_o(0.0, False), _o(0.0, False)],  # zero spread, all fail
        [_o(1.0, True), _o(1.0, True)],  # zero spread, all pass
        [_o(1.0, True), _o(0.0, False)],  # spread
        [_o(0.5), _o(0.5)],  # zero spread, no verdict: neither
    ]
    signals = watch_signals(groups)
    assert (signals.groups, signals.episodes) == (4, 8)
    assert signals.zero_spread == 0.75
    assert signals.zero_spread_all_fail == 0.25
    assert signals.zero_spread_all_pass == 0.25
    assert signals.reward_mean == 0.5
    assert signals.reward_std == pytest.approx(math.sqrt(6 * 0.25 / 8))
    assert signals.reward_group_std == 0.125  # (0 + 0 + 0.5 + 0) / 4
    assert signals.success_mean == 0.5
    assert signals.success_std == 0.5


def test_a_group_with_fewer_than_two_valid_rewards_has_zero_spread() -> None:
    signals = watch_signals([[_o(1.0, True), _o(None, nan=True)], [_o(0.0), _o(1.0)]])
    assert signals.zero_spread == 0.5
    assert signals.zero_spread_all_pass == 0.5
    assert (signals.invalid_rewards, signals.nan_rewards) == (1, 1)
    assert signals.reward_group_std == 0.5  # only the second group has two valid rewards


def test_has_spread_is_the_zero_spread_rule_for_one_group() -> None:
    assert has_spread([1.0, 0.0]) and has_spread([None, 0.5, 0.25])
    assert not has_spread([1.0, 1.0 + 1e-12]) and not has_spread([0.5, None])
    assert not has_spread([]) and not has_spread([None, None])


def test_a_watch_line_carries_what_dynamic_sampling_did(tmp_path: Path) -> None:
    signals = watch_signals([[_o(1.0), _o(0.0)]])
    sampling = StepSampling(draws=2, drawn=3, kept=1, dropped=2, retired=["t1"])
    append_watch_line(tmp_path, 1, signals, [])
    append_watch_line(tmp_path, 2, signals, [], {"tokens/drift_turns": 0.0}, sampling)
    first, second = read_watch(tmp_path)
    assert "sampling" not in first
    assert second["sampling"] == sampling.model_dump(mode="json")
    assert StepSampling.model_validate(second["sampling"]) == sampling


def test_component_shares_are_shares_of_the_absolute_contributions() -> None:
    outcomes = [
        _o(1.1, components={"answer": 1.0, STEP_REWARDS: 0.1}, outcome=frozenset({"answer"})),
        _o(-0.3, components={"answer": 0.0, STEP_REWARDS: -0.3}, outcome=frozenset({"answer"})),
    ]
    signals = watch_signals([outcomes])
    assert signals.component_shares == {"answer": pytest.approx(1 / 1.4), STEP_REWARDS: 0.4 / 1.4}
    assert signals.outcome_components == ["answer"]
    assert signals.step_reward_mean == pytest.approx(-0.1)
    zero = watch_signals([[_o(0.0, components={"answer": 0.0})]])
    assert zero.component_shares == {}


def test_distinct_answers_per_group_and_single_answer_groups() -> None:
    groups = [
        [_o(0, answer="4"), _o(0, answer="4"), _o(0, answer=None)],  # one answer: collapsed
        [_o(0, answer="4"), _o(0, answer="5"), _o(0, answer="6")],  # three
        [_o(0, answer="4"), _o(0, answer=None)],  # fewer than two answers: not counted
    ]
    signals = watch_signals(groups)
    assert signals.distinct_answers == 2.0
    assert signals.single_answer_groups == 0.5


def test_lengths_truncation_and_tool_calls() -> None:
    outcomes = [
        _o(0, completion_tokens=10, truncated=True, tool_calls=3),
        _o(0, completion_tokens=20, truncated=False, tool_calls=0),
        _o(0, completion_tokens=30, truncated=False, tool_calls=0),
        _o(0, completion_tokens=40, truncated=False, tool_calls=1),
    ]
    signals = watch_signals([outcomes])
    assert signals.completion_tokens_mean == 25.0
    assert signals.truncated == 0.25
    assert signals.tool_calls_mean == 1.0


def test_an_empty_batch_measures_nothing() -> None:
    signals = watch_signals([])
    assert signals.groups == 0 and signals.zero_spread is None and signals.reward_mean is None
    assert signals.flat() == {
        "watch/groups": 0.0,
        "watch/episodes": 0.0,
        "watch/invalid_rewards": 0.0,
        "watch/nan_rewards": 0.0,
    }


def test_flat_figures_name_each_share() -> None:
    signals = watch_signals([[_o(1.0, components={"answer": 1.0})]])
    flat = signals.flat()
    assert flat["watch/share/answer"] == 1.0 and flat["watch/reward_mean"] == 1.0
    assert "watch/success_mean" not in flat  # no verdict: left out, not 0


def _trajectory(
    turns: list[Turn],
    episode: EvaluateResult | None,
    *,
    task_index: int = 0,
    success: bool | None = None,
    stop: StopReason = StopReason.ANSWERED,
    **metadata: object,
) -> Trajectory:
    return Trajectory(
        id=f"{task_index}-0",
        task_index=task_index,
        sample=0,
        task=Task(id="t", messages=[Message(role="user", content="2+2?")]),
        env="tools",
        model="m",
        turns=turns,
        episode=episode,
        success=success,
        stop_reason=stop,
        metadata=dict(metadata),
    )


def _turn(index: int, text: str = "", calls: int = 0, reward: float = 0.0, **kw: object) -> Turn:
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "calc", "arguments": "{}"}}
        for i in range(calls)
    ]
    message = Message(role="assistant", content=text, tool_calls=tool_calls or None)
    outcomes = [ToolCallOutcome(name="calc", ok=True) for _ in range(calls)]
    return Turn(index=index, assistant=message, tool_calls=outcomes, reward=reward, **kw)  # type: ignore[arg-type]


def test_an_episode_outcome_reads_the_weighted_components_and_the_step_rewards() -> None:
    episode = EvaluateResult(
        score=1.0,
        metrics={"answer": 1.0, "efficiency": 0.5},
        weights={"answer": 1.0, "efficiency": 0.0},
    )
    turns = [
        _turn(0, calls=2, reward=0.05, token_ids=[1, 2, 3]),
        _turn(1, "Answer:  4 ", token_ids=[4, 5], finish_reason="stop"),
    ]
    outcome = outcome_of(_trajectory(turns, episode, success=True), step_weight=2.0)
    assert outcome.reward == pytest.approx(1.1)
    assert outcome.components == {"answer": 1.0, "efficiency": 0.0, STEP_REWARDS: 0.1}
    assert outcome.outcome == frozenset({"answer"})
    assert (outcome.success, outcome.nan, outcome.truncated) == (True, False, False)
    assert outcome.answer == "answer: 4"
    assert (outcome.completion_tokens, outcome.tool_calls) == (5, 2)


def test_a_non_finite_episode_score_is_a_nan_reward() -> None:
    @reward_function
    def nan_reward(messages: list[Message], **kwargs: object) -> float:
        return math.nan

    invalid = nan_reward(messages=[Message(role="user", content="x")])
    outcome = outcome_of(_trajectory([_turn(0, "x")], invalid))
    assert outcome.reward is None and outcome.nan
    failed = outcome_of(_trajectory([_turn(0, "x")], None))
    assert failed.reward is None and not failed.nan


def test_nan_is_told_by_the_fault_never_by_the_message() -> None:
    worded = EvaluateResult(score=0.0, error="ValueError: a non-finite score, says the judge")
    assert not outcome_of(_trajectory([_turn(0, "x")], worded)).nan
    typed = EvaluateResult.invalid("judge gave inf", fault=ScoreFault.NON_FINITE)
    assert outcome_of(_trajectory([_turn(0, "x")], typed)).nan
    step = _turn(0, "x", reward=0.0, reward_valid=False, reward_fault=ScoreFault.NON_FINITE)
    outcome = outcome_of(_trajectory([step], EvaluateResult(score=1.0)))
    assert outcome.reward is None and outcome.nan  # a NaN step reward counts too


@pytest.mark.parametrize(
    ("turn", "stop", "metadata"),
    [
        ({"finish_reason": "length"}, StopReason.ANSWERED, {}),
        ({}, StopReason.TRUNCATED, {}),
        ({}, StopReason.MAX_TURNS, {"budget_hit": True}),
    ],
)
def test_truncated_is_any_token_limit(
    turn: dict[str, object], stop: StopReason, metadata: dict[str, object]
) -> None:
    trajectory = _trajectory([_turn(0, "x", **turn)], None, stop=stop, **metadata)
    assert outcome_of(trajectory).truncated


def test_final_answer_is_none_when_the_episode_ends_on_a_tool_call() -> None:
    assert final_answer(_trajectory([_turn(0, "let me look", calls=1)], None)) is None
    assert final_answer(_trajectory([], None)) is None


def test_trajectory_groups_follow_task_index() -> None:
    a, b, c = (_trajectory([], None, task_index=i) for i in (1, 0, 1))
    assert trajectory_groups([a, b, c]) == [[b], [a, c]]
