"""The code-execution reward: extraction, test-case shapes, scoring, attacks and reward hacks."""

from __future__ import annotations

import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.code_execution import (
    CodeTestCase,
    code_execution_reward,
    extract_code,
    parse_test_cases,
)
from rk_agent.rewards.registry import get_reward_function
from rk_agent.rewards.sandbox import SandboxLimits, process_limit_backend
from rk_agent.types import EvaluateResult

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux")

FAST = SandboxLimits(timeout_s=1.5, memory_mb=256)
ADD_TESTS: list[Any] = [
    "assert add(1, 2) == 3",
    {"call": "add(2, 2)", "expected": 4},
    {"fn_name": "add", "args": [5, 5], "expected": 10},
    "add(0, 3) == 3",
]


def _chat(reply: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "Solve it."}, {"role": "assistant", "content": reply}]


def _py(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}\n```\nIt is correct."


def _score(code: str, tests: Any, **kwargs: Any) -> EvaluateResult:
    kwargs.setdefault("limits", FAST)
    return code_execution_reward(_chat(_py(code)), ground_truth=tests, **kwargs)


ADD = "def add(a, b):\n    return a + b"


# --------------------------------------------------------------------------------------------
# Scores


def test_correct_solution_scores_one() -> None:
    result = _score(ADD, ADD_TESTS)
    assert result.score == 1.0
    assert result.is_score_valid
    assert result.reason == "4/4 test cases passed"
    assert result.metrics["pass_rate"].score == 1.0
    assert result.metrics["pass_rate"].success is True
    assert result.metrics["extracted"].score == 1.0
    assert result.metrics["extracted"].reason == "python block 1 of 1"


def test_half_correct_scores_half_and_names_the_first_failure() -> None:
    result = _score("def add(a, b):\n    return 3", ADD_TESTS)
    assert result.score == 0.5
    assert result.metrics["pass_rate"].success is False
    assert result.reason == (
        "2/4 test cases passed; first failure: test 1 ('add(2, 2)'): expected 4, got 3"
    )


def test_failed_assert_shows_both_sides() -> None:
    result = _score("def add(a, b):\n    return a - b", ["assert add(1, 2) == 3"])
    assert result.score == 0.0
    assert result.reason.endswith("assertion failed: -1 != 3")


def test_no_code_scores_zero_with_reason() -> None:
    result = code_execution_reward(_chat("I am not sure how to do this."), ground_truth=ADD_TESTS)
    assert (result.score, result.is_score_valid) == (0.0, True)
    assert result.reason == "no Python code found in the response"
    assert result.metrics["extracted"].score == 0.0


def test_syntax_error_scores_zero_without_running_anything() -> None:
    started = time.monotonic()
    result = _score("def add(a, b):\n    return (a + b", ADD_TESTS)
    assert (result.score, result.is_score_valid) == (0.0, True)
    assert result.reason.startswith("the code does not parse: SyntaxError: ")
    assert result.metrics["extracted"].score == 1.0
    assert time.monotonic() - started < 0.5


def test_stdin_stdout_cases_compare_whitespace_normalised() -> None:
    code = "n = int(input())\nfor i in range(n):\n    print(i, ' ', i * i, '  ')"
    tests = [
        {"input": "3\n", "expected_output": "0 0\n1 1\n2 4\n"},
        {"input": "2", "expected_output": "\n0   0\r\n1 1\n\n"},
        {"input": "1", "expected_output": "0 1"},
    ]
    result = _score(code, tests)
    assert result.score == pytest.approx(2 / 3)
    assert result.reason.endswith(
        "first failure: test 2 (input '1'): expected '0 1', got '0   0   \\n'"
    )


def test_stdin_program_that_crashes_or_exits_nonzero_fails() -> None:
    tests = [{"input": "", "expected_output": ""}, {"input": "x", "expected_output": "x"}]
    result = _score("print(input())\nimport sys\nsys.exit(2)", tests)
    assert result.score == 0.0
    assert "exit code 1: EOFError" in result.reason


def test_float_tolerance() -> None:
    code = "print(1 / 3)\nprint(2.0000001)"
    tests = [{"input": "", "expected_output": "0.333333\n2"}]
    assert _score(code, tests).score == 0.0
    assert _score(code, tests, float_tolerance=1e-6).score == 1.0
    value = [{"call": "1 / 3", "expected": 0.333333}]
    assert _score("", value).score == 0.0
    assert _score("", value, float_tolerance=1e-6).score == 1.0


def test_mixed_styles_in_one_list() -> None:
    code = (
        "def double(x):\n    return 2 * x\n\n"
        "if __name__ == '__main__':\n    print(double(int(input())))"
    )
    tests = [{"input": "21", "expected_output": "42"}, "assert double(4) == 8"]
    assert _score(code, tests).score == 1.0


def test_main_block_does_not_run_for_call_style_cases() -> None:
    code = "def f():\n    return 1\n\nif __name__ == '__main__':\n    raise SystemExit(input())"
    assert _score(code, ["assert f() == 1"]).score == 1.0


def test_leetcode_solution_class() -> None:
    code = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]"
    tests = [{"fn_name": "twoSum", "args": [[2, 7, 11], 9], "expected": [0, 1]}]
    assert _score(code, tests).score == 1.0
    missing = _score(code, [{"fn_name": "threeSum", "args": [], "expected": 1}])
    assert missing.reason.endswith("the solution defines no function 'threeSum'")


def test_tuples_compare_as_lists_and_types_matter() -> None:
    code = "def f():\n    return (1, 2)\n\ndef g():\n    return True"
    tests = [
        {"call": "f()", "expected": [1, 2]},
        {"call": "g()", "expected": True},
        {"call": "g()", "expected": 1},
    ]
    assert _score(code, tests).score == pytest.approx(2 / 3)


# --------------------------------------------------------------------------------------------
# Test-case shapes


def test_ground_truth_as_a_json_string() -> None:
    tests = json.dumps([{"input": "4", "expected_output": "16"}, "assert sq(3) == 9"])
    code = "def sq(x):\n    return x * x\nif __name__ == '__main__':\n    print(sq(int(input())))"
    assert _score(code, tests).score == 1.0


def test_apps_style_ground_truth() -> None:
    stdio = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    assert _score("print(sum(map(int, input().split())))", stdio).score == 1.0
    calls = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], 7]}
    assert _score(ADD, calls).score == 1.0  # APPS wraps some expected values in a list


def test_test_cases_keyword_takes_precedence() -> None:
    result = code_execution_reward(
        _chat(_py(ADD)),
        ground_truth="the answer column of another reward",
        test_cases=["assert add(2, 3) == 5"],
        limits=FAST,
    )
    assert result.score == 1.0


def test_missing_test_cases_make_an_invalid_result() -> None:
    for missing in (None, [], ""):
        result = code_execution_reward(_chat(_py(ADD)), ground_truth=missing)
        assert result.is_score_valid is False
        assert result.error is not None
        assert result.error.startswith("code_execution needs test cases")


def test_malformed_test_cases_make_an_invalid_result() -> None:
    bad = [{"input": "1", "expected_output": "1"}, {"input": "1"}]
    result = code_execution_reward(_chat(_py(ADD)), ground_truth=bad)
    assert result.is_score_valid is False
    assert result.error == (
        "ConfigError: test case 1 ({'input': '1'}) is not valid: Value error, a test case needs "
        "exactly one of expected_output (with input, stdin style), call, or fn_name (with args)"
    )


def test_parse_test_cases_shapes() -> None:
    cases = parse_test_cases(
        [
            "assert f() == 1",
            {"input": 5, "output": 25},
            {"input": ["1", "2"], "expected_output": ["3"]},
            {"call": "f()", "expected": None},
            CodeTestCase(fn_name="f", args=[1]),
        ]
    )
    assert cases[0].call == "assert f() == 1"
    assert (cases[1].input, cases[1].expected_output, cases[1].is_stdio) == ("5", "25", True)
    assert cases[2].input == "1\n2"
    assert cases[3].has_expected
    assert cases[3].expected is None
    assert not cases[4].has_expected
    with pytest.raises(ConfigError, match=re.escape("test cases must be a non-empty list")):
        parse_test_cases(42)
    message = "APPS-style test cases need 'inputs' and 'outputs' lists of one length"
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_test_cases({"inputs": ["1"], "outputs": []})


def test_bad_option_raises() -> None:
    message = "float_tolerance must be >= 0 or None, got -1.0"
    with pytest.raises(ConfigError, match=re.escape(message)):
        _score(ADD, ADD_TESTS, float_tolerance=-1.0)


def test_no_assistant_message_is_invalid() -> None:
    result = code_execution_reward([{"role": "user", "content": "hi"}], ground_truth=ADD_TESTS)
    assert not result.is_score_valid
    assert result.error == (
        "reward 'code_execution' scores the last assistant message, but the conversation has none"
    )


# --------------------------------------------------------------------------------------------
# Attacks: each fails its own test case with a reason; the other cases still count


ATTACKS = {
    "infinite_loop": ("while True:\n            pass", "timed out after 1.5 s"),
    "swallowed_timeout": (
        "while True:\n            try:\n                time.sleep(10)\n"
        "            except BaseException:\n                pass",
        "timed out, and the code would not stop",
    ),
    "memory_bomb": (
        "blocks = []\n        while True:\n            blocks.append(bytearray(10**7))",
        "memory limit exceeded (MemoryError)",
    ),
    "print_1gb": (
        "for _ in range(10**6):\n            print('x' * 1000)",
        "output limit: wrote more than 1048576 bytes to stdout",
    ),
    "crash": ("os.kill(os.getpid(), signal.SIGSEGV)", "killed by SIGSEGV"),
}


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_attack_in_one_call_case_fails_only_that_case(attack: str) -> None:
    body, reason = ATTACKS[attack]
    code = (
        "import os, signal, time\n\ndef add(a, b):\n    if a == 1:\n"
        f"        {body}\n    return a + b"
    )
    started = time.monotonic()
    result = _score(code, ["assert add(2, 2) == 4", "assert add(1, 2) == 3", "add(3, 3) == 6"])
    assert result.score == pytest.approx(2 / 3)
    assert result.reason == (
        f"2/3 test cases passed; first failure: test 1 ('assert add(1, 2) == 3'): {reason}"
    )
    assert time.monotonic() - started < 5


@pytest.mark.skipif(process_limit_backend() == "none", reason="no process limit works here")
def test_fork_bomb_in_a_call_case() -> None:
    code = (
        "import os\n\ndef add(a, b):\n    if a == 1:\n"
        "        while True:\n            os.fork()\n    return a + b"
    )
    result = _score(code, ["assert add(1, 2) == 3", "assert add(2, 2) == 4"])
    assert result.score == 0.5
    assert result.reason.startswith("1/2 test cases passed; first failure: test 0")


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("while True:\n    pass", "timed out after 1.5 s (wall clock)"),
        ("x = []\nwhile True:\n    x.append(bytearray(10**7))", "memory limit of 256 MiB"),
        ("while True:\n    print('x' * 10000)", "output limit: wrote more than"),
    ],
    ids=["loop", "memory", "print"],
)
def test_attack_in_a_stdin_program(program: str, reason: str) -> None:
    result = _score(program, [{"input": "1", "expected_output": "1"}])
    assert result.score == 0.0
    assert reason in result.reason


@pytest.mark.skipif(process_limit_backend() == "none", reason="no process limit works here")
def test_fork_bomb_in_a_stdin_program() -> None:
    program = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    result = _score(program, [{"input": "", "expected_output": "1"}])
    assert result.score == 0.0
    assert "timed out" in result.reason


def test_code_hanging_at_load_fails_every_case_once() -> None:
    started = time.monotonic()
    result = _score("while True:\n    pass\ndef add(a, b):\n    return a + b", ADD_TESTS)
    assert result.score == 0.0
    assert result.reason.endswith("the solution failed to load: timed out after 1.5 s")
    assert time.monotonic() - started < 4


# --------------------------------------------------------------------------------------------
# Reward hacks that must not pay


def test_exiting_early_passes_nothing() -> None:
    assert _score("import os\nos._exit(0)", ADD_TESTS).score == 0.0
    exits = _score("import sys\ndef add(a, b):\n    sys.exit(0)", ADD_TESTS)
    assert exits.score == 0.0
    assert "the code called exit(0)" in exits.reason


def test_printing_fake_results_passes_nothing() -> None:
    code = (
        "import sys\nleaked = sys.stdin.read()\nfor i in range(4):\n"
        "    print(leaked + f'[{i}, true, \"\"]')\n    print(f'[{i}, true, \"\"]')\n"
        'print(\'["loaded", true, ""]\')\ndef add(a, b):\n    return 0'
    )
    assert _score(code, ADD_TESTS).score == 0.0


def test_always_equal_object_passes_nothing() -> None:
    code = (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n\ndef add(a, b):\n    return Anything()"
    )
    result = _score(code, [*ADD_TESTS, "assert all(add(i, i) == 2 * i for i in range(3))"])
    assert result.score == 0.0


def test_strict_equality_keeps_legitimate_comparisons() -> None:
    code = "from fractions import Fraction\ndef half():\n    return Fraction(1, 2)"
    assert _score(code, ["assert half() == 0.5", "assert [half()] == [Fraction(1, 2)]"]).score == 1


# --------------------------------------------------------------------------------------------
# Extraction


def test_extract_last_valid_python_block() -> None:
    text = (
        "First try:\n```python\nprint(1)\n```\nBetter:\n```py\nprint(2)\n```\n"
        "```python\nprint(\n```"
    )
    found = extract_code(text)
    assert found is not None
    assert (found.code, found.origin, found.syntax_error) == (
        "print(2)",
        "python block 2 of 3",
        None,
    )


def test_extract_reports_the_last_python_block_when_none_parses() -> None:
    found = extract_code("```python\ndef f(:\n```")
    assert found is not None
    assert found.syntax_error == "SyntaxError: invalid syntax (line 1)"


def test_extract_longest_untagged_block_then_raw_text() -> None:
    text = "```\nx = 2\nprint(x * 21)\n```\nOutput:\n```\n42\n```"
    found = extract_code(text)
    assert found is not None
    assert found.code == "x = 2\nprint(x * 21)"
    raw = extract_code("import math\nprint(math.pi)")
    assert raw is not None
    assert raw.origin == "the whole response"
    assert extract_code("Yes") is None
    assert extract_code("The answer is 42.") is None
    assert extract_code("") is None


def test_extract_ignores_thinking_and_handles_odd_fences() -> None:
    text = "<think>\n```python\nprint('draft')\n```\n</think>\n  ```Python\n  print('final')\n  ```"
    found = extract_code(text)
    assert found is not None
    assert found.code == "print('final')"
    truncated = extract_code("```python\nprint('cut off')")
    assert truncated is not None
    assert truncated.code == "print('cut off')"


def test_extract_does_not_warn_on_invalid_escapes() -> None:
    found = extract_code('```python\nimport re\nprint(re.findall("\\d+", "a1b22"))\n```')
    assert found is not None
    assert found.syntax_error is None  # under filterwarnings=error this would fail if warned


# --------------------------------------------------------------------------------------------
# Concurrency and registration


def test_safe_to_call_from_threads() -> None:
    solutions = [ADD, "def add(a, b):\n    return 3", "def add(a, b):\n    return a * b"] * 2

    def score(code: str) -> float:
        return _score(code, ADD_TESTS).score

    with ThreadPoolExecutor(max_workers=6) as pool:
        scores = list(pool.map(score, solutions))
    assert scores == [1.0, 0.5, 0.25] * 2


def test_registered_as_code_execution() -> None:
    reward = get_reward_function("code_execution")
    assert reward.reward_spec.name == "code_execution"
    assert reward is code_execution_reward
