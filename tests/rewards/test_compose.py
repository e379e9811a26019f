"""combine(): aggregation, namespaced metrics, weights, gates, invalid components."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from rk_agent import EvaluateResult, RewardFunction, combine, reward_function
from rk_agent.errors import ConfigError

CHAT = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<answer>4</answer>"}]


@reward_function
def answer(response: str, ground_truth: str) -> EvaluateResult:
    ok = ground_truth in response
    return EvaluateResult(score=float(ok), metrics={"exact": float(ok)})


@reward_function
def safety(messages: Any) -> tuple[float, dict[str, float]]:
    return 0.5, {"safety_penalty": -0.5}


@reward_function
def broken(messages: Any) -> float:
    raise RuntimeError("judge unreachable")


def test_weighted_sum_with_namespaced_metrics_and_weights() -> None:
    reward = combine({"answer": answer, "safety": safety}, weights={"answer": 2.0, "safety": 1.0})
    result = reward(messages=CHAT, ground_truth="4")
    assert result.score == 2.5
    assert result.weights == {"answer": 2.0, "safety": 1.0}
    assert result.metrics["safety"].score == 0.5
    assert result.metrics["safety.safety_penalty"].score == -0.5
    assert result.metrics["answer.exact"].score == 1.0


@pytest.mark.parametrize(("method", "expected"), [("mean", 0.75), ("min", 0.5), ("product", 0.5)])
def test_methods(method: Any, expected: float) -> None:
    reward = combine([answer, safety], method=method)
    assert reward(messages=CHAT, ground_truth="4").score == expected


def test_gate_zeroes_the_score_but_keeps_components_visible() -> None:
    reward = combine([answer], gate=RewardFunction("format", tags=["answer"]), gate_threshold=1.0)
    passed = reward(messages=CHAT, ground_truth="4")
    assert passed.score == 1.0
    unformatted = [CHAT[0], {"role": "assistant", "content": "4"}]
    failed = reward(messages=unformatted, ground_truth="4")
    assert failed.score == 0.0
    assert failed.metrics["answer"].score == 1.0  # the hack (right answer, no format) is visible
    assert failed.metrics["gate"].score < 1.0
    assert failed.reason is not None and failed.reason.startswith("gate failed")


def test_an_invalid_component_makes_the_whole_score_invalid() -> None:
    result = combine([answer, broken])(messages=CHAT, ground_truth="4")
    assert result.is_score_valid is False
    assert result.error == "broken: RuntimeError: judge unreachable"
    assert result.metrics["answer"].score == 1.0


def test_an_invalid_component_of_weight_0_is_a_metric_and_leaves_the_total_valid() -> None:
    result = combine([answer, broken], weights=[1.0, 0.0])(messages=CHAT, ground_truth="4")
    assert (result.score, result.is_score_valid, result.error) == (1.0, True, None)
    assert result.metrics["broken"].is_score_valid is False
    assert result.reason == (
        "weighted_sum: answer=1, broken=invalid (weight 0: RuntimeError: judge unreachable)"
    )
    # min and product ignore the weights: there every component counts.
    least = combine([answer, broken], weights=[1.0, 0.0], method="min")
    assert least(messages=CHAT, ground_truth="4").is_score_valid is False


def test_async_components_make_an_async_reward() -> None:
    @reward_function
    async def slow(messages: Any) -> float:
        await asyncio.sleep(0.01)
        return 1.0

    reward = combine([slow, answer])
    assert reward.reward_spec.is_async
    result = asyncio.run(reward(messages=CHAT, ground_truth="4"))  # type: ignore[arg-type]
    assert result.score == 2.0


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError, match=re.escape("got 1 weights for 2 rewards")):
        combine([answer, safety], weights=[1.0])
    with pytest.raises(ConfigError, match="which are not components"):
        combine({"a": answer}, weights={"b": 1.0})
    with pytest.raises(ConfigError, match="unknown combine method 'max'"):
        combine([answer], method="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="two components are named 'answer'"):
        combine([answer, answer])
    with pytest.raises(ConfigError, match="at least one reward"):
        combine([])
    with pytest.raises(ConfigError, match="do not sum to zero"):
        combine([answer, safety], weights=[1.0, -1.0], method="mean")
