"""Wire formats: construction, coercion and JSON round-trips."""

from __future__ import annotations

import json
import math
from types import MappingProxyType

import pytest
from openai.types.chat import ChatCompletionMessage
from pydantic import BaseModel, ValidationError

from rk_agent import (
    EvaluateResult,
    Message,
    MetricResult,
    MetricRewardOutput,
    RewardOutput,
    StepOutput,
    ToolCall,
)


def test_message_round_trips_through_json() -> None:
    message = Message(
        role="assistant",
        content=None,
        tool_calls=[{"id": "c1", "function": {"name": "add", "arguments": {"a": 1}}}],
        reasoning_content="thinking",
    )
    again = Message.model_validate_json(message.model_dump_json())
    assert again == message
    assert again.tool_calls[0].function.parsed_arguments() == {"a": 1}


def test_to_openai_drops_nulls_and_keeps_tool_calls() -> None:
    message = Message.model_validate(
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    )  # fmt: skip
    assert message.to_openai() == {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def test_message_from_openai_sdk_object() -> None:
    sdk = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": "hi", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "g", "arguments": "{\"q\": 2}"}}]}
    )  # fmt: skip
    message = Message.model_validate(sdk)
    assert message.text == "hi"
    assert message.tool_calls == [
        ToolCall(id="x", function={"name": "g", "arguments": '{"q": 2}'})  # type: ignore[arg-type]
    ]


def test_content_parts_give_text_and_unknown_fields_are_kept() -> None:
    message = Message.model_validate(
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
         "cache_control": {"type": "ephemeral"}}
    )  # fmt: skip
    assert message.text == "ab"
    assert message.to_openai()["cache_control"] == {"type": "ephemeral"}


def test_unknown_role_is_rejected_with_the_allowed_roles() -> None:
    with pytest.raises(ValidationError, match="'system', 'developer', 'user', 'assistant'"):
        Message.model_validate({"role": "bot", "content": "x"})


def test_broken_tool_arguments_fail_only_when_parsed() -> None:
    call = ToolCall.model_validate({"id": "1", "function": {"name": "f", "arguments": "{oops"}})
    with pytest.raises(ValueError):
        call.function.parsed_arguments()
    call = ToolCall.model_validate({"id": "1", "function": {"name": "f", "arguments": "[1]"}})
    with pytest.raises(ValueError, match="must be a JSON object"):
        call.function.parsed_arguments()


def test_evaluate_result_accepts_loose_metrics_and_round_trips() -> None:
    result = EvaluateResult(
        score=0.5,
        reason="half",
        metrics={"format": True, "answer": 0.0, "judge": {"score": 0.7, "reason": "ok"}},
        step_outputs=[{"step_index": 0, "base_reward": 0.1, "metrics": {"tool_ok": 1}}],
    )
    assert result.metrics["format"] == MetricResult(score=1.0, success=True)
    assert result.step_outputs == [
        StepOutput(step_index=0, reward=0.1, metrics={"tool_ok": MetricResult(score=1.0)})
    ]
    assert EvaluateResult.model_validate_json(result.model_dump_json()) == result
    assert json.loads(result.model_dump_json())["metrics"]["judge"]["reason"] == "ok"


class _OtherStep(BaseModel):
    """Another library's step result: a pydantic object, not one of rk-agent's models."""

    step_index: int
    base_reward: float
    reason: str | None = None


def test_an_object_that_is_not_a_dict_is_read_as_the_dict_it_holds() -> None:
    # The wire models' SDK-object validator passes a dict without a call; everything else
    # (another library's pydantic object, a read-only mapping) is still read as its dict.
    other = _OtherStep(step_index=1, base_reward=0.5)
    assert StepOutput.model_validate(other) == StepOutput(step_index=1, reward=0.5)
    loose = MappingProxyType({"step_index": 1, "base_reward": 0.5, "metrics": {"ok": 1}})
    assert StepOutput.model_validate(loose) == StepOutput(
        step_index=1, reward=0.5, metrics={"ok": MetricResult(score=1.0)}
    )
    assert MetricResult.model_validate(MappingProxyType({"score": 1.0})) == MetricResult(score=1.0)


def test_non_finite_scores_are_rejected() -> None:
    with pytest.raises(ValidationError, match="finite"):
        EvaluateResult(score=math.nan)
    with pytest.raises(ValidationError, match="finite"):
        MetricResult(score=math.inf)


def test_invalid_result_and_dict_access() -> None:
    result = EvaluateResult.invalid("ValueError: boom")
    assert (result.score, result.is_score_valid, result.error) == (0.0, False, "ValueError: boom")
    assert result["score"] == 0.0
    with pytest.raises(KeyError):
        result["nope"]


def test_a_result_with_an_error_is_invalid_unless_said_otherwise() -> None:
    reward_kit_way = EvaluateResult(score=0.0, error="judge endpoint timed out")
    assert not reward_kit_way.is_score_valid
    from_json = EvaluateResult.model_validate_json('{"score": 0.0, "error": "boom"}')
    assert not from_json.is_score_valid
    explicit = EvaluateResult(score=0.5, error="one judge of three timed out", is_score_valid=True)
    assert explicit.is_score_valid
    assert EvaluateResult(score=0.0).is_score_valid  # no error: a real 0.0
    assert EvaluateResult(score=0.0, error="").is_score_valid
    # A round trip keeps what was decided.
    assert EvaluateResult.model_validate_json(explicit.model_dump_json()).is_score_valid


def test_an_error_in_a_read_only_mapping_is_not_a_score_either() -> None:
    from types import MappingProxyType

    result = EvaluateResult.model_validate(MappingProxyType({"score": 0.0, "error": "timed out"}))
    assert (result.is_score_valid, result.error) == (False, "timed out")


def test_old_names_are_aliases() -> None:
    assert RewardOutput is EvaluateResult
    assert MetricRewardOutput is MetricResult
