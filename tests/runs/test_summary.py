"""Run summaries: the unbiased pass@k estimator and the statistics."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rk_agent.runs.summary import pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [(1, 0, 1, 0.0), (1, 1, 1, 1.0), (4, 1, 1, 0.25), (4, 1, 2, 0.5), (4, 2, 4, 1.0),
     (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5))],
)  # fmt: skip
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_needs_k_at_most_n() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)


def test_a_summary_carries_the_watch_over_its_task_groups() -> None:
    from rk_agent.runs.summary import summarize
    from rk_agent.types import EvaluateResult
    from tests.runs.test_watch import _trajectory, _turn

    def episode(task: int, score: float) -> Any:
        result = EvaluateResult(score=score, metrics={"answer": score}, weights={"answer": 1.0})
        turns = [_turn(0, f"Answer: {score}", finish_reason="stop")]
        return _trajectory(turns, result, task_index=task, success=score >= 1.0)

    trajectories = [episode(0, 1.0), episode(0, 0.0), episode(1, 0.0), episode(1, 0.0)]
    watch = summarize(trajectories).watch
    assert watch is not None
    assert (watch.groups, watch.zero_spread, watch.zero_spread_all_fail) == (2, 0.5, 0.5)
    assert watch.distinct_answers == 1.5 and watch.single_answer_groups == 0.5
    assert watch.component_shares == {"answer": 1.0, "step_rewards": 0.0}


def test_a_summary_is_built_from_a_stream_and_long_answers_still_count_apart() -> None:
    from rk_agent.runs.summary import SummaryBuilder, summarize
    from rk_agent.types import EvaluateResult
    from tests.runs.test_watch import _trajectory, _turn

    def episode(task: int, answer: str, score: float) -> Any:
        result = EvaluateResult(score=score, metrics={"answer": score}, weights={"answer": 1.0})
        turns = [_turn(0, answer, finish_reason="stop")]
        return _trajectory(turns, result, task_index=task, success=score >= 1.0)

    long = "x" * 500
    episodes = [episode(0, long + "a", 1.0), episode(0, long + "b", 0.0),
                episode(1, long, 0.0), episode(1, long, 0.0)]  # fmt: skip
    from_list = summarize(episodes)
    from_stream = summarize(iter(episodes))
    assert from_stream == from_list
    assert from_list.watch is not None
    assert from_list.watch.distinct_answers == 1.5  # 2 in task 0, 1 in task 1
    assert from_list.pass_at_k == {"pass@1": 0.25, "pass@2": 0.5}
    builder = SummaryBuilder()
    for t in episodes[:2]:
        builder.add(t)
    assert builder.summary().episodes == 2  # a summary of what was taken so far


def _interleaved_groups() -> list[Any]:
    """Four groups of two, interleaved (episodes are written as they finish), some steps and
    scores invalid."""
    from rk_agent.types import EvaluateResult
    from tests.runs.test_watch import _trajectory, _turn

    def episode(task: int, score: float | None, answer: str) -> Any:
        result = (
            EvaluateResult(score=score, metrics={"answer": score}, weights={"answer": 1.0})
            if score is not None
            else EvaluateResult.invalid("the judge timed out")
        )
        turn = _turn(0, answer, finish_reason="stop").model_copy(
            update={"reward": 0.25, "reward_valid": task != 2}
        )
        return _trajectory([turn], result, task_index=task, success=(score or 0.0) >= 1.0)

    return [
        episode(0, 1.0, "4"), episode(1, 0.0, "5"), episode(0, 0.0, "x" * 100),
        episode(2, 0.5, "6"), episode(1, 0.0, "5"), episode(3, None, "7"),
        episode(2, 0.5, "6"), episode(3, 1.0, "7"),
    ]  # fmt: skip


def test_a_builder_told_the_group_size_counts_each_group_as_it_completes() -> None:
    # Counting each group once complete gives the summary that keeping every outcome gives.
    from rk_agent.runs.summary import SummaryBuilder

    episodes = _interleaved_groups()

    def summary(group_size: int | None) -> Any:
        builder = SummaryBuilder(group_size)
        for t in episodes:
            builder.add(t)
        return builder.summary(2)

    kept, counted = summary(None), summary(2)
    assert counted == kept
    assert kept.watch is not None and kept.watch.groups == 4
    assert kept.pass_at_k == {"pass@1": 0.25, "pass@2": 0.5}
    assert kept.step_reward.invalid == 2 and kept.episode_reward.invalid == 1


def test_a_group_counted_as_it_completes_compares_long_answers_as_an_open_one_does() -> None:
    # The episode that completes a group is compared with the others by the same form of its
    # answer (a digest when long): the same long answer is one distinct answer, not two.
    from rk_agent.runs.summary import SummaryBuilder
    from rk_agent.types import EvaluateResult
    from tests.runs.test_watch import _trajectory, _turn

    def episode(task: int, answer: str) -> Any:
        result = EvaluateResult(score=1.0, metrics={"answer": 1.0}, weights={"answer": 1.0})
        turns = [_turn(0, answer, finish_reason="stop")]
        return _trajectory(turns, result, task_index=task, success=True)

    long = "x" * 100
    episodes = [episode(0, long), episode(0, long), episode(1, long), episode(1, long + "y")]
    watches = []
    for group_size in (None, 2):
        builder = SummaryBuilder(group_size)
        for t in episodes:
            builder.add(t)
        watches.append(builder.summary(2).watch)
    assert watches[0] == watches[1]
    assert watches[1] is not None
    assert (watches[1].distinct_answers, watches[1].single_answer_groups) == (1.5, 0.5)


def test_a_summary_of_pickled_facts_is_the_summary_of_the_episodes() -> None:
    # What worker processes send (`EpisodeFacts`, pickled) summarises as the episodes do.
    import pickle

    from rk_agent.runs.summary import EpisodeFacts, SummaryBuilder, summarize

    episodes = _interleaved_groups()
    builder = SummaryBuilder(2)
    for t in episodes:
        builder.add_facts(pickle.loads(pickle.dumps(EpisodeFacts.of(t))))
    assert builder.summary(2) == summarize(episodes, 2)
