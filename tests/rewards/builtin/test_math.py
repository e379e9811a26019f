"""Tests for the ``math`` reward: answer extraction, comparison, and the reward's results."""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
import threading
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

import rk_agent.rewards.builtin.math as math_module
from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.math import answers_match, extract_answer, math_reward
from rk_agent.types import EvaluateResult

GSM8K_SOLUTION = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"
)


def chat(answer: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": "How many clips did Natalia sell?"},
        {"role": "assistant", "content": answer},
    ]


def score(answer: str, ground_truth: Any, **options: Any) -> EvaluateResult:
    return math_reward(messages=chat(answer), ground_truth=ground_truth, **options)


# --------------------------------------------------------------------------------------------
# extract_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She sold 48 + 24 = 72 clips.\n#### 72", "72"),
        ("#### 1,234", "1,234"),
        ("#### $18.", "$18"),
        ("#### The total is 72 apples", "72"),
        ("#### x^2+1", "x^2+1"),
        ("So $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
        ("\\boxed{\\frac{\\sqrt{2}}{\\sqrt{3}}}", "\\frac{\\sqrt{2}}{\\sqrt{3}}"),
        ("first \\boxed{3}, then \\boxed{5}", "5"),
        ("\\boxed{7} ... and finally\n#### 8", "8"),
        ("#### 8 but the final answer is \\boxed{9}", "9"),
        ("\\boxed 5", "5"),
        ("The answer is 42.", "42"),
        ("The answer is 42, no wait 24.", "24"),
        ("The answer is -5.", "-5"),
        ("x=-5", "-5"),
        ("The range 5-10 gives 10-3 = 7", "7"),
        ("The answer is 0.50.", "0.50"),
        ("It costs $18.", "$18"),
        ("It costs \\$18.", "\\$18"),
        ("Prices went up by 25%.", "25%"),
        ("so it's $\\frac{3}{4}$.", "\\frac{3}{4}"),
        ("so it's 3/4 of a cup", "3/4"),
        ("The answer is $x = 5$.", "5"),
        ("The answer is $x^2+1$.", "x^2+1"),
        ("答案是 42。", "42"),
        ("答案是４２", "42"),  # full-width digits
        ("\u22127 degrees", "-7"),  # Unicode minus sign
        ("<think>Maybe 42?</think> The answer is 24.", "24"),
    ],
)
def test_extract_answer(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I don't know.",
        "\\boxed{}",
        "The answer is\n####",
        "<think>It is probably 42, let me check",  # the model never stopped thinking
    ],
)
def test_extract_answer_finds_nothing(text: str) -> None:
    assert extract_answer(text) is None


def test_extract_answer_reads_only_the_tail_of_a_huge_response() -> None:
    text = "7 " + "filler " * 5_000 + "The answer is 9."
    assert len(text) > math_module.MAX_SCAN_CHARS
    assert extract_answer(text) == "9"
    assert extract_answer("12 " + "x" * math_module.MAX_SCAN_CHARS) is None


# --------------------------------------------------------------------------------------------
# answers_match


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("72", "#### 72"),
        ("72", GSM8K_SOLUTION),
        ("3/4", "0.75"),
        ("0.75", "\\frac{3}{4}"),
        ("\\dfrac{3}{4}", "3/4"),
        ("1,234", "1234"),
        ("$1,234.00", "1234"),
        ("$18", "18"),
        ("18 dollars", "18"),
        ("18\\text{ dollars}", "18"),
        ("\\$18", "18"),
        ("1{,}234", "1234"),
        ("1\\,234", "1234"),
        ("42.0", "42"),
        ("0.50", "1/2"),
        ("-0.5", "-\\frac{1}{2}"),
        ("25%", "0.25"),
        ("25\\%", "25"),
        ("12.5%", "12.50"),  # one-sided percent: its bare number counts too
        ("0.333333", "1/3"),
        ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),  # math-verify
        ("x^2+3x", "x(x+3)"),
        ("(1, 4]", "(1,4]"),
        ("x = 5", "5"),
        ("2^{10}", "1024"),
    ],
)
def test_answers_match(predicted: str, gold: str) -> None:
    assert answers_match(predicted, gold)


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("24", "42"),
        ("-5", "5"),
        ("41.9999999", "42"),  # a decimal against a whole number must be exact
        ("0.33", "1/3"),
        ("25%", "0.025"),
        ("25%", "25%0"),
        ("1,234", "1.234"),
        ("\\frac{4\\pi}{3}", "\\frac{3}{4}\\pi"),
        ("[1, 4]", "(1, 4]"),
        ("42 or 43", "42"),  # hedging between answers is wrong
        ("42, 43", "42"),
    ],
)
def test_answers_do_not_match(predicted: str, gold: str) -> None:
    assert not answers_match(predicted, gold)


def test_answers_match_takes_numbers_as_gold() -> None:
    assert answers_match("72", 72)
    assert answers_match("0.5", Fraction(1, 2))
    assert answers_match("12.50", Decimal("12.5"))
    assert answers_match("0.00001", 1e-05)  # not written "1e-05"
    assert not answers_match("73", 72)


def test_answers_match_rejects_missing_gold() -> None:
    with pytest.raises(ConfigError, match=re.escape("ground_truth is required")):
        answers_match("42", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape("ground_truth has no answer in it: '  '")):
        answers_match("42", "  ")


# Plain-number pairs (predicted, gold): the exact fast path must give math-verify's verdict.
NUMERIC_PAIRS = [
    ("42", "42"),
    ("42.0", "42"),
    ("42", "42.0"),
    ("41.9999999", "42"),
    ("99.9999999", "100"),
    ("2.999999", "3"),
    ("3.0", "3"),
    ("0.5", "1/2"),
    ("0.50", "1/2"),
    ("0.333333", "1/3"),
    ("1/3", "0.3333333"),
    ("2/3", "0.666667"),
    ("0.33", "1/3"),
    ("0.75", "3/5"),
    ("3/4", "0.75"),
    ("-3/4", "-0.75"),
    ("-0.5", "-1/2"),
    ("5/2", "2.5"),
    ("1/2", "2/4"),
    ("4/2", "2"),
    ("4/2", "2.0"),
    ("-5", "-5.0"),
    ("-5", "5"),
    ("0", "0.0"),
    ("-0", "0"),
    ("0.0000004", "0"),
    ("1.0000004", "1"),
    (".5", "0.5"),
    ("007", "7"),
    ("2.50", "2.5"),
    ("3.14", "3.14159"),
    ("0.1234565", "0.123456"),
    ("1,234", "1234"),
    ("1,234.5", "1234.5"),
    ("1,234,567", "1234567"),
    ("1000000", "1,000,000"),
    ("1,000", "1"),
    ("$18", "18"),
    ("$18.00", "18"),
    ("£1,250", "1250"),
    ("€7.5", "7.50"),
    ("18 dollars", "18"),
    ("12 apples", "12"),
    ("25%", "0.25"),
    ("25%", "25"),
    ("9%", "9/100"),
    ("50%", "1/2"),
    ("10%", "0.1"),
    ("10%", "0.01"),
    ("12.5%", "0.125"),
    ("7 percent", "0.07"),
    ("\\frac{3}{4}", "0.75"),
    ("\\frac{-1}{2}", "-0.5"),
    ("123456789012345678901234567890", "123456789012345678901234567890"),
    ("123456789012345678901234567891", "123456789012345678901234567890"),
]


def test_fast_path_agrees_with_math_verify() -> None:
    from math_verify import parse, verify

    for predicted, gold in NUMERIC_PAIRS:
        verdict = math_module._compare(predicted, gold)
        assert verdict.method == "exact", (predicted, gold)
        expected = verify(parse(gold), parse(predicted))
        assert verdict.match == expected, (predicted, gold, expected)


@pytest.mark.timeout(60, method="thread")  # math-verify's signal.alarm cancels the default one
@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("9^{9^{9^{9}}}", "a nested power"),
        ("10^{10^{10}}", "a nested power"),
        ("2**(10**10)", "a nested power"),
        ("((10^{999})^{999})^{999}", "a power too large to evaluate"),
        ("2^{999999999}", "a power too large to evaluate"),
        ("100000!", "a factorial, binomial, sum or product of large numbers"),
        ("\\binom{10^{9}}{10^{8}}", "a factorial, binomial, sum or product of large numbers"),
        ("x+" + "1" * 60, "a number with more than 50 digits"),
        ("x+" * 200 + "1", "longer than 300 characters"),
    ],
)
def test_hostile_answers_never_reach_sympy(answer: str, why: str) -> None:
    result = score(f"The answer is $\\boxed{{{answer}}}$", "1")
    assert result.score == 0.0
    assert result.is_score_valid
    assert f"the answer was not checked: {why}" in (result.reason or "")


@pytest.mark.timeout(60, method="thread")
def test_huge_responses_are_bounded() -> None:
    assert score("9" * 1_000_000, "42").score == 0.0
    assert score("(" * 100_000 + "\\boxed{" * 1000, "42").score == 0.0
    assert score("1 " * 500_000 + "#### 42", "42").score == 1.0


def test_symbolic_check_works_off_the_main_thread() -> None:
    # signal.alarm only works in the main thread; there math-verify runs without it.
    results: list[EvaluateResult] = []
    math_module._symbolic.cache_clear()  # make the thread parse with math-verify itself
    answer = "$\\boxed{\\frac{3\\pi}{4}}$"
    thread = threading.Thread(target=lambda: results.append(score(answer, "\\frac{3}{4}\\pi")))
    thread.start()
    thread.join(timeout=60)
    assert results
    assert results[0].error is None
    assert results[0].score == 1.0


# --------------------------------------------------------------------------------------------
# The reward


def test_correct_gsm8k_answer_against_a_gsm8k_solution() -> None:
    result = score("48/2 = 24 in May, 48 + 24 = 72 in all.\n#### 72", GSM8K_SOLUTION)
    assert result.score == 1.0
    assert result.is_score_valid
    assert {k: m.score for k, m in result.metrics.items()} == {
        "answer_found": 1.0,
        "correct": 1.0,
        "format": 1.0,
    }
    assert result.reason == "answer '72' (####, exact) equals expected '72'"


def test_free_text_answer_scores_without_format() -> None:
    result = score("So she sold 72 clips. The answer is 72.", 72)
    assert result.score == 1.0
    assert result.metrics["format"].score == 0.0
    assert result.metrics["answer_found"].reason == "source: last number"


def test_last_number_wins() -> None:
    result = score("The answer is 42, no wait 24", 42)
    assert result.score == 0.0
    assert result.is_score_valid
    assert result.reason == "answer '24' (last number, exact) differs from expected '42'"


def test_listing_many_numbers_does_not_earn_reward() -> None:
    spray = "Candidates: " + ", ".join(str(n) for n in range(100)) + ", 1000"
    assert score(spray, 72).score == 0.0
    assert score(spray, 72, partial_credit=True).score == 0.0  # too many numbers for credit
    assert score("\\boxed{72} \\boxed{73}", 72).score == 0.0


@pytest.mark.parametrize(
    "response",
    [
        "#### 72 73",
        "#### 72 or 73",
        "The answer is 72 73",
        "\\boxed{\\{72, 73\\}}",
        "\\boxed{72 \\text{ or } 73}",
        "\\boxed{72 \\pm 1}",
        "\\boxed{[72, 73]}",
        "\\boxed{72}\\boxed{}",
    ],
)
def test_hedged_answers_score_zero(response: str) -> None:
    result = score(response, 72)
    assert result.score == 0.0
    assert result.is_score_valid


@pytest.mark.parametrize("response", ["", "I have no idea.", "<think>72 maybe"])
def test_missing_answer_is_a_valid_zero(response: str) -> None:
    result = score(response, 72)
    assert result.score == 0.0
    assert result.is_score_valid
    assert result.metrics["answer_found"].score == 0.0
    assert result.reason is not None
    assert result.reason.startswith("no final answer (")
    assert result.reason.endswith("); expected '72'")


@pytest.mark.parametrize("ground_truth", [None, "", "####  "])
def test_missing_ground_truth_is_invalid(ground_truth: Any) -> None:
    result = score("#### 72", ground_truth)
    assert not result.is_score_valid
    assert result.score == 0.0
    assert result.error is not None
    if ground_truth is None:
        assert result.error.startswith("ConfigError: ground_truth is required:")
    else:
        assert result.error.startswith("ConfigError: ground_truth has no answer in it:")


def test_missing_ground_truth_keyword_is_invalid() -> None:
    result = math_reward(messages=chat("#### 72"))
    assert not result.is_score_valid
    assert "ground_truth is required" in (result.error or "")


@pytest.mark.parametrize(
    ("ground_truth", "kind"),
    [(True, "bool True"), ([72], "list [72]"), (float("nan"), None)],
)
def test_unusable_ground_truth_is_invalid(ground_truth: Any, kind: str | None) -> None:
    result = score("#### 72", ground_truth)
    assert not result.is_score_valid
    if kind is None:
        assert result.error == "ConfigError: ground_truth must be a finite number, got nan"
    else:
        assert result.error == f"ConfigError: ground_truth must be a string or a number, got {kind}"


def test_conversation_without_assistant_message_is_invalid() -> None:
    result = math_reward(messages=[{"role": "user", "content": "2+2?"}], ground_truth="4")
    assert not result.is_score_valid
    assert result.error == (
        "reward 'math' scores the last assistant message, but the conversation has none"
    )


def test_only_the_last_assistant_message_counts() -> None:
    messages = [*chat("#### 72"), {"role": "user", "content": "Sure?"}]
    messages.append({"role": "assistant", "content": "Sorry, it is 70."})
    assert math_reward(messages=messages, ground_truth=72).score == 0.0


@pytest.mark.parametrize(
    ("response", "ground_truth"),
    [
        ("So $\\boxed{\\frac{1}{2}}$", "0.5"),
        ("The answer is \\boxed{-3}.", -3),
        ("The answer is 0.50", "1/2"),
        ("It costs $18.", 18),
        ("Total: 1,234 marbles", "#### 1234"),
        ("答案是 42。", "42"),
        ("The answer is 42.0", 42),
        ("The answer is $\\boxed{\\dfrac{3\\pi}{4}}$", "\\frac{3}{4}\\pi"),
    ],
)
def test_equivalent_forms_score_one(response: str, ground_truth: Any) -> None:
    assert score(response, ground_truth).score == 1.0


def test_partial_credit() -> None:
    working = "In May she sold 24, so in all 72... no, I think it is 70.\n#### 70"
    assert score(working, 72).score == 0.0
    result = score(working, 72, partial_credit=True)
    assert result.score == math_module.PARTIAL_CREDIT
    assert result.metrics["partial"].score == math_module.PARTIAL_CREDIT
    assert result.reason is not None
    assert result.reason.endswith("; the expected number appears in the working")
    right = score("#### 72", 72, partial_credit=True)
    assert right.score == 1.0
    assert right.metrics["partial"].score == 0.0
    assert score("Sold 24.\n#### 70", 72, partial_credit=True).score == 0.0
    assert score("No idea.", 72, partial_credit=True).metrics["partial"].score == 0.0


def test_partial_credit_must_be_a_bool() -> None:
    # A wrong option is the caller's bug (every sample would fail alike): it is raised.
    message = "math reward: partial_credit must be True or False, got 'yes'"
    with pytest.raises(ConfigError, match=re.escape(message)):
        score("#### 72", 72, partial_credit="yes")


def test_registration_and_result_round_trip() -> None:
    assert math_reward.reward_spec.name == "math"
    assert math_reward.reward_spec.requirements == ("math-verify",)
    result = score("#### 72", GSM8K_SOLUTION, partial_credit=True)
    assert EvaluateResult.model_validate_json(result.model_dump_json()) == result


def test_import_does_not_load_sympy() -> None:
    code = (
        "import sys, rk_agent.rewards.builtin.math as m\n"
        "m.math_reward(messages=[{'role': 'assistant', 'content': '#### 72'}], ground_truth=72)\n"
        "print(sorted(k for k in ('sympy', 'math_verify') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(math_module)
    assert tried >= 5
    assert failures == 0


def test_the_first_symbolic_comparison_of_a_process_is_not_cut_by_its_time_limit() -> None:
    # It loads sympy's lazily imported parts (seconds on a busy machine): a warm-up without the
    # short limit comes first, once, so a right answer at a process's start is not scored wrong.
    code = (
        "from rk_agent.rewards.builtin import math as m\n"
        "m._TIMEOUT_S = 1\n"
        "print(m.answers_match('x^2+2x+1', '(x+1)^2'), m.answers_match('2x+2', '2(x+1)'),\n"
        "      m._warm_up.cache_info().misses)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True", "1"]
