"""Tests for rk_agent.rewards.builtin.format: the tag and regex structure checks."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.format import format_reward
from rk_agent.types import EvaluateResult

USER = {"role": "user", "content": "What is 6 * 7?"}


def score(content: Any, **kwargs: Any) -> EvaluateResult:
    return format_reward([USER, {"role": "assistant", "content": content}], **kwargs)


def test_registered_name() -> None:
    assert format_reward.reward_spec.name == "format"


def test_default_think_then_answer_with_surrounding_whitespace() -> None:
    result = score("\n  <think>6 * 7 = 42</think>\n\n<answer>42</answer>\n")
    assert result.score == 1.0
    assert result.reason == "<think><answer>: well-formed"
    assert set(result.metrics) == {"think_tag", "answer_tag", "order", "outside_text"}
    assert all(m.success for m in result.metrics.values())


def test_multiline_content() -> None:
    assert score("<think>line 1\nline 2\n</think><answer>\n42\n</answer>").score == 1.0


def test_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "<think>x</think>"}, {"type": "text", "text": "<answer>4"}]
    parts.append({"type": "text", "text": "2</answer>"})
    assert score(parts).score == 1.0


@pytest.mark.parametrize(
    ("content", "metric", "reason"),
    [
        ("<answer>42</answer><think>x</think>", "order", "<answer> comes before <think>"),
        ("<think>x <answer>42</answer></think>", "order", "<answer> is inside <think>"),
        ("<think>x</think><answer>1</answer><answer>42</answer>", "answer_tag",
         "<answer> appears 2 times"),
        ("<think>I will use <answer> tags</think><answer>42</answer>", "answer_tag",
         "<answer> appears 2 times"),
        ("<think>x</think><answer>42", "answer_tag", "<answer> is not closed"),
        ("<think>x</think><answer>42</answer></answer>", "answer_tag",
         "</answer> appears 2 times"),
        ("<think>x</think></answer>42<answer>", "answer_tag", "</answer> comes before <answer>"),
        ("<think>x</think><answer>  \n </answer>", "answer_tag", "<answer> is empty"),
        ("<think>x</think>", "answer_tag", "<answer> is missing"),
        ("<THINK>x</THINK><answer>42</answer>", "think_tag", "<think> is missing"),
        ("<think>x</think><answer>42</answer> Hope that helps!", "outside_text",
         "text outside the tags: 'Hope that helps!'"),
        ("Sure! <think>x</think><answer>42</answer>", "outside_text",
         "text outside the tags: 'Sure!'"),
        ("<think>x</think> so <answer>42</answer>", "outside_text",
         "text outside the tags: 'so'"),
    ],
)  # fmt: skip
def test_malformed_structures_score_zero(content: str, metric: str, reason: str) -> None:
    result = score(content)
    assert result.score == 0.0
    assert result.is_score_valid
    assert result.metrics[metric].success is False
    assert result.metrics[metric].reason == reason


def test_allow_outside_text() -> None:
    content = "Let me think. <think>x</think> So: <answer>42</answer> Done."
    assert score(content).score == 0.0
    result = score(content, allow_outside_text=True)
    assert result.score == 1.0
    assert "outside_text" not in result.metrics


def test_partial_credit_is_the_fraction_of_checks_passed() -> None:
    only_answer = score("<answer>42</answer>", partial_credit=True)
    # think missing, answer fine, order fails (not every tag well-formed), nothing outside.
    assert only_answer.score == 0.5
    swapped = score("<answer>42</answer><think>x</think>", partial_credit=True)
    assert swapped.score == 0.75
    assert score("<think>x</think><answer>42</answer>", partial_credit=True).score == 1.0
    assert score("plain text", partial_credit=True).score == 0.0


def test_custom_tags() -> None:
    content = "<reasoning>r</reasoning><code>print(1)</code><explanation>e</explanation>"
    result = score(content, tags=["reasoning", "code", "explanation"])
    assert result.score == 1.0
    assert set(result.metrics) == {
        "reasoning_tag",
        "code_tag",
        "explanation_tag",
        "order",
        "outside_text",
    }
    assert score("<answer>4</answer>", tags=["answer"]).score == 1.0
    assert score("<answer>4</answer>", tags=("answer", "think")).score == 0.0


@pytest.mark.parametrize(
    ("pattern", "content", "expected"),
    [
        (r"Answer: \d+", "Answer: 42", 1.0),
        (r"Answer: \d+", "Answer: 42 (I think)", 0.0),  # fullmatch, not search
        (r"Answer: \d+", "So... Answer: 42", 0.0),
        (r".*Answer: \d+", "step 1\nstep 2\nAnswer: 42", 1.0),  # DOTALL crosses newlines
        (r"(?i)answer: \d+", "ANSWER: 42", 1.0),
    ],
)
def test_pattern_is_a_fullmatch_with_dotall(pattern: str, content: str, expected: float) -> None:
    result = score(content, pattern=pattern)
    assert result.score == expected
    assert list(result.metrics) == ["pattern"]


def test_compiled_pattern_keeps_its_flags() -> None:
    assert score("a\nb", pattern=re.compile(r"a.b")).score == 0.0
    assert score("a\nb", pattern=re.compile(r"a.b", re.DOTALL)).score == 1.0


def test_invalid_regex_raises_a_config_error_with_the_regex_error() -> None:
    message = (
        "format reward: pattern '(<answer>' is not a valid regular expression: missing ), "
        "unterminated subpattern at position 0"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        score("<answer>1</answer>", pattern="(<answer>")
    with pytest.raises(ConfigError, match=re.escape(message)):  # even with no reply to check
        format_reward([USER], pattern="(<answer>")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pattern": "x", "tags": ["answer"]}, "format reward: give pattern or tags, not both"),
        ({"tags": "answer"}, "format reward: tags must be a list of tag names such as ['think', "
         "'answer'], got 'answer'"),
        ({"tags": []}, "format reward: tags is empty; give at least one tag name"),
        ({"tags": ["<answer>"]}, "format reward: '<answer>' is not a tag name; give names "
         "without angle brackets, e.g. 'answer' for <answer>...</answer>"),
        ({"tags": ["a", "a"]}, "format reward: tags has duplicates: ['a', 'a']"),
    ],
)  # fmt: skip
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        score("<answer>1</answer>", **options)


def test_no_assistant_message_is_invalid() -> None:
    result = format_reward([USER])
    assert not result.is_score_valid
    assert result.error == (
        "reward 'format' scores the last assistant message, but the conversation has none"
    )


def test_megabyte_inputs_finish() -> None:
    # Each of these makes a backtracking <think>.*?</think>\s*<answer>.*?</answer> regex
    # quadratic; the substring checks stay linear.
    adversarial = "<think>" + "</think><answer>" * 70_000
    assert len(adversarial) > 1_000_000
    assert score(adversarial).score == 0.0
    assert score("<think>" + "x" * 1_000_000).score == 0.0
    big = "<think>" + "x " * 500_000 + "</think><answer>42</answer>"
    assert score(big).score == 1.0
    assert score(big + " trailing", partial_credit=True).score == 0.75
