"""Tests for `rk_agent.rewards.builtin.length`: the ``length`` and ``cosine_length`` rewards."""

from __future__ import annotations

import math
import re

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.length import (
    cosine_length_reward,
    count_length,
    credited_working,
    length_reward,
)


def convo(response: str | None, **extra: object) -> list[dict[str, object]]:
    return [
        {"role": "user", "content": "Explain photosynthesis briefly."},
        {"role": "assistant", "content": response, **extra},
    ]


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


# ---------------------------------------------------------------------------------------------
# count_length


def test_count_length_counts_whitespace_tokens_and_stripped_characters() -> None:
    assert count_length("  The answer\n\tis 42.  ") == 4
    assert count_length("  The answer is 42.  ", "chars") == 17
    assert count_length("") == 0
    assert count_length("   ", "chars") == 0


def test_count_length_treats_text_without_spaces_as_one_token() -> None:
    # Documented: Chinese has no spaces, so measure it in characters.
    assert count_length("光合作用把光能变成化学能") == 1
    assert count_length("光合作用把光能变成化学能", "chars") == 12


def test_count_length_rejects_an_unknown_unit() -> None:
    with pytest.raises(ConfigError, match=re.escape("unit must be one of ('tokens', 'chars')")):
        count_length("abc", "bpe")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# length_reward


@pytest.mark.parametrize(
    ("n", "expected"),
    [(10, 1.0), (5, 0.5), (0, 0.0), (12, 0.8), (15, 0.5), (20, 0.0), (500, 0.0)],
)
def test_linear_falloff_around_a_token_target(n: int, expected: float) -> None:
    result = length_reward(convo(words(n)), target_tokens=10)
    assert result.is_score_valid
    assert result.score == pytest.approx(expected)
    assert result.metrics["length"].score == pytest.approx(expected)
    assert f"{n} tokens (target 10 tokens)" in (result.reason or "")


@pytest.mark.parametrize(("n", "expected"), [(10, 1.0), (15, 0.5), (19, 0.1), (20, 0.0), (40, 0.0)])
def test_max_length_sets_where_a_long_response_reaches_zero(n: int, expected: float) -> None:
    result = length_reward(convo(words(n)), target_tokens=10, max_length=20)
    assert result.score == pytest.approx(expected)


def test_smooth_falloff_is_flat_near_the_target_and_reaches_zero_at_the_same_place() -> None:
    near = length_reward(convo(words(12)), target_tokens=10, max_length=18, falloff="smooth")
    assert near.score == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.25)))  # 0.854 > 0.75
    half = length_reward(convo(words(14)), target_tokens=10, max_length=18, falloff="smooth")
    assert half.score == pytest.approx(0.5)
    far = length_reward(convo(words(18)), target_tokens=10, max_length=18, falloff="smooth")
    assert far.score == pytest.approx(0.0)


def test_only_max_length_scores_one_up_to_the_limit_then_falls() -> None:
    assert length_reward(convo(words(1)), max_length=10).score == 1.0
    assert length_reward(convo(words(10)), max_length=10).score == 1.0
    assert length_reward(convo(words(15)), max_length=10).score == pytest.approx(0.5)
    assert length_reward(convo(words(25)), max_length=10).score == 0.0
    assert length_reward(convo("x" * 15), max_length=10, unit="chars").score == pytest.approx(0.5)


def test_character_target_ignores_surrounding_whitespace() -> None:
    assert length_reward(convo("  hello \n"), target_chars=5).score == 1.0
    assert length_reward(convo("hello world"), target_chars=5).score == 0.0  # 11 > 2 * 5


def test_empty_and_tool_call_only_responses_are_valid_zeros() -> None:
    empty = length_reward(convo(""), target_tokens=10)
    assert (empty.score, empty.is_score_valid) == (0.0, True)
    tool_call = {"id": "c1", "function": {"name": "search", "arguments": "{}"}}
    only_tools = length_reward(convo(None, tool_calls=[tool_call]), target_tokens=10)
    assert (only_tools.score, only_tools.is_score_valid) == (0.0, True)


def test_the_last_assistant_message_is_scored_not_a_later_tool_message() -> None:
    messages = [*convo(words(10)), {"role": "tool", "tool_call_id": "c1", "content": words(99)}]
    assert length_reward(messages, target_tokens=10).score == 1.0


def test_no_assistant_message_is_an_invalid_result() -> None:
    result = length_reward([{"role": "user", "content": "hi"}], target_tokens=10)
    assert not result.is_score_valid
    assert result.error == (
        "reward 'length' scores the last assistant message, but the conversation has none"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "length reward needs target_tokens, target_chars or max_length"),
        (
            {"target_tokens": 5, "target_chars": 20},
            "length reward: give target_tokens or target_chars, not both",
        ),
        ({"target_tokens": 0}, "length reward: the target length must be a positive int, got 0"),
        (
            {"target_tokens": 10, "max_length": 10},
            "length reward: max_length (10) must be greater than the target (10)",
        ),
        ({"max_length": -3}, "length reward: max_length (-3) must be greater than zero"),
        (
            {"target_tokens": 10, "falloff": "cubic"},
            "length reward: falloff must be one of ('linear', 'smooth'), got 'cubic'",
        ),
        (
            {"target_chars": 10, "unit": "tokens"},
            "length reward: unit='tokens' contradicts target_chars=",
        ),
    ],
)
def test_bad_options_raise_a_config_error_naming_the_problem(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        length_reward(convo("some words"), **options)


# ---------------------------------------------------------------------------------------------
# cosine_length_reward


def test_correct_answers_score_more_when_shorter_from_max_to_min() -> None:
    scores = [
        cosine_length_reward(convo("x" * n), correct=True, max_len=100).score
        for n in (0, 25, 50, 75, 100)
    ]
    assert scores[0] == pytest.approx(1.0)
    assert scores[2] == pytest.approx(0.75)
    assert scores[-1] == pytest.approx(0.5)
    assert scores == sorted(scores, reverse=True)


def worked(n: int) -> str:
    """A wrong answer with ``n`` characters of distinct working before its marked answer."""
    working = " ".join(f"s{i:03d}" for i in range(n // 5 + 1))[:n]
    return working[:-1] + "x\n#### 5" if working.endswith(" ") else working + "\n#### 5"


def test_wrong_answers_are_penalised_less_when_they_work_longer() -> None:
    scores = [
        cosine_length_reward(convo(worked(n)), correct=False, max_len=100).score
        for n in (0, 25, 50, 75, 100)
    ]
    assert scores[0] == pytest.approx(-1.0)
    assert scores[2] == pytest.approx(-0.75)
    assert scores[-1] == pytest.approx(-0.5)
    assert scores == sorted(scores)


def test_a_wrong_answer_is_credited_only_for_the_working_before_its_one_marked_answer() -> None:
    def score(text: str) -> float:
        return cosine_length_reward(convo(text), correct=False, max_len=100).score

    # The cheats `rk-agent check reward cosine_length` plays, each at the floor.
    assert score("I'm sorry, but I can't help with that request. " * 3) == -1.0  # no answer
    assert score("#### 5\n" + " Let me double-check this." * 8) == -1.0  # padding after it
    assert score("#### 5\n" * 20) == -1.0  # several answers
    assert score("\\boxed{4} or \\boxed{5}") == -1.0
    assert score("#### 2, 3, 4, 5, 6 (that is 4 in other units)") == -1.0  # all in the slot
    # Thinking counts as working; a box on the #### line is the same answer.
    thought = cosine_length_reward(convo(f"<think>{worked(35)[:35]}</think>#### \\boxed{{5}}"),
                                   correct=False, max_len=100)  # fmt: skip
    assert thought.score == pytest.approx(-0.75)
    assert thought.metrics["length"].reason == (
        "50 chars of working before the answer, of a budget of 100"
    )
    assert score("<think>" + worked(50)) == -1.0  # never finished thinking


def test_repeated_working_earns_only_its_distinct_share() -> None:
    once = "Two and two make five, I think.\n"
    result = cosine_length_reward(convo(once * 12 + "#### 5"), correct=False, max_len=1000)
    n, why = credited_working(once * 12 + "#### 5")
    assert why == f"{n} chars of working before the answer (9% of its word trigrams distinct)"
    assert n == round(len((once * 12).strip()) * 7 / 82)  # 7 distinct trigrams of 82
    assert (
        result.score
        < cosine_length_reward(
            convo(worked(len((once * 12).strip()))), correct=False, max_len=1000
        ).score
    )


def test_lengths_past_max_len_are_clipped_instead_of_climbing_back_up() -> None:
    # Unclipped (as in open-r1) a correct answer of 2 * max_len would get the top reward again.
    at_budget = cosine_length_reward(convo("x" * 100), correct=True, max_len=100)
    double = cosine_length_reward(convo("x" * 200), correct=True, max_len=100)
    assert double.score == pytest.approx(at_budget.score) == pytest.approx(0.5)
    wrong_double = cosine_length_reward(convo(worked(200)), correct=False, max_len=100)
    assert wrong_double.score == pytest.approx(-0.5)


def test_a_correct_answer_always_beats_a_wrong_one_of_the_same_length() -> None:
    for n in range(0, 150, 7):
        right = cosine_length_reward(convo("y" * n), correct=True, max_len=100).score
        wrong = cosine_length_reward(convo("y" * n), correct=False, max_len=100).score
        assert right > wrong


def test_custom_values_and_token_unit() -> None:
    result = cosine_length_reward(
        convo(words(3)),
        correct=True,
        max_len=6,
        unit="tokens",
        min_value_correct=0.0,
        max_value_correct=2.0,
    )
    assert result.score == pytest.approx(1.0)  # halfway: c = 0.5
    assert result.metrics["length"].score == pytest.approx(0.5)
    assert result.metrics["correct"].score == 1.0
    assert result.metrics["correct"].success is True


def test_metrics_expose_length_factor_and_correctness() -> None:
    result = cosine_length_reward(convo(worked(100)), correct=False, max_len=100)
    assert result.metrics["length"].score == pytest.approx(0.0)
    assert result.metrics["correct"].score == 0.0
    assert result.metrics["correct"].success is False
    assert result.reason == (
        "wrong answer (given): 100 chars of working before the answer, of a budget of 100: -0.500"
    )


def test_unknown_correctness_is_invalid_not_a_silent_score() -> None:
    result = cosine_length_reward(convo("42"))
    assert not result.is_score_valid
    assert result.error == (
        "reward 'cosine_length' needs to know whether the answer is right: pass correct=True/"
        "False, or ground_truth= to check it with the math reward"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"min_value_correct": 1.0, "max_value_correct": 0.5},
            "cosine_length reward: need min_value_wrong <= max_value_wrong and "
            "min_value_correct <= max_value_correct, got wrong=(-1.0, -0.5), correct=(1.0, 0.5)",
        ),
        ({"max_len": 0}, "cosine_length reward: max_len must be a positive int, got 0"),
        (
            {"max_value_wrong": math.nan},
            "cosine_length reward: the min/max values must be finite, got (-1.0, nan, 0.5, 1.0)",
        ),
        (
            {"unit": "words"},
            "cosine_length reward: unit must be one of ('tokens', 'chars'), got 'words'",
        ),
    ],
)
def test_cosine_bad_options_raise_a_config_error(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        cosine_length_reward(convo("42"), correct=True, **options)


def test_correctness_from_ground_truth_uses_the_math_reward() -> None:
    right = cosine_length_reward(convo(r"2 + 2 = \boxed{4}"), ground_truth="4", max_len=100)
    wrong = cosine_length_reward(convo(r"2 + 2 = \boxed{5}"), ground_truth="4", max_len=100)
    assert right.is_score_valid, right.error
    assert wrong.is_score_valid, wrong.error
    assert right.metrics["correct"].success is True
    assert wrong.metrics["correct"].success is False
    assert right.score > 0.5 > -0.5 > wrong.score


def test_a_ground_truth_the_math_reward_cannot_use_makes_the_result_invalid() -> None:
    result = cosine_length_reward(convo(r"\boxed{4}"), ground_truth="")
    assert not result.is_score_valid
    assert result.error == (
        "the math reward could not check the answer: ConfigError: ground_truth has no answer "
        "in it: ''"
    )


def test_an_explicit_correct_flag_wins_over_ground_truth() -> None:
    result = cosine_length_reward(convo(r"\boxed{5}"), ground_truth="4", correct=True, max_len=10)
    assert result.metrics["correct"].success is True
    assert result.metrics["correct"].reason == "given"
