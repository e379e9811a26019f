"""The code-execution reward: extraction, test-case shapes, scoring, attacks and reward hacks."""

from __future__ import annotations

import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.code_execution import (
    CodeTestCase,
    code_execution_reward,
    extract_code,
    parse_test_cases,
)
from rk_agent.rewards.registry import get_reward_function
from rk_agent.sandbox import SandboxLimits, process_limit_backend
from rk_agent.sandbox._launch import spare_pids
from rk_agent.types import EvaluateResult
from tests.sandbox.support import needs_bwrap

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux"),
    needs_bwrap,
]

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


def test_reveal_expected_false_keeps_expected_values_out_of_the_reason() -> None:
    wrong = "def add(a, b):\n    return 3"
    assert _score(wrong, ADD_TESTS, reveal_expected=False).reason == (
        "2/4 test cases passed; first failure: test 1: returned 3"
    )
    calls = [{"fn_name": "add", "args": [2, 2], "expected": 4}]
    assert _score(wrong, calls, reveal_expected=False).reason == (
        "0/1 test cases passed; first failure: test 0 (add(*[2, 2])): returned 3"
    )
    stdio = [{"input": "1 2", "expected_output": "3"}]
    assert _score("print(0)", stdio, reveal_expected=False).reason == (
        "0/1 test cases passed; first failure: test 0 (input '1 2'): printed '0\\n'"
    )
    inside = ["assert all(add(i, 1) == i + 1 for i in range(3))"]
    assert _score(wrong, inside, reveal_expected=False).reason == (
        "0/1 test cases passed; first failure: test 0: assertion failed"
    )


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        ("[object(), 10**5000]", "the value is not plain data (<a list whose repr failed: "
         "ValueError>)"),
        ("10**5000", "expected 3, got <an int of about 5001 digits>"),
    ],
)  # fmt: skip
def test_values_that_cannot_be_printed_are_judged_in_one_line(
    returned: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    result = _score(f"def f(x):\n    return {returned}", [{"fn_name": "f", "args": [1],
                                                          "expected": 3}])  # fmt: skip
    assert result.is_score_valid and result.score == 0.0
    assert result.reason == f"0/1 test cases passed; first failure: test 0 (f(*[1])): {said}"
    assert [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []


def test_no_code_scores_zero_with_reason() -> None:
    result = code_execution_reward(_chat("I am not sure how to do this."), ground_truth=ADD_TESTS)
    assert (result.score, result.is_score_valid) == (0.0, True)
    assert result.reason == "no Python code found in the response"
    assert result.metrics["extracted"].score == 0.0


def test_syntax_error_scores_zero_without_running_anything() -> None:
    result = _score("def add(a, b):\n    return (a + b", ADD_TESTS)
    assert (result.score, result.is_score_valid) == (0.0, True)
    assert result.reason.startswith("the code does not parse: SyntaxError: ")
    assert result.metrics["extracted"].score == 1.0


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
    result = _score(code, ["assert add(2, 2) == 4", "assert add(1, 2) == 3", "add(3, 3) == 6"])
    assert result.score == pytest.approx(2 / 3)
    assert result.reason == (
        f"2/3 test cases passed; first failure: test 1 ('assert add(1, 2) == 3'): {reason}"
    )


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
    result = _score("while True:\n    pass\ndef add(a, b):\n    return a + b", ADD_TESTS)
    assert result.score == 0.0
    assert result.reason.endswith("the solution failed to load: timed out after 1.5 s")


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


# --------------------------------------------------------------------------------------------
# Judge attacks: the verdict is made outside the sandbox, so none of these may score above an
# honest wrong answer (which scores 0 on every test set here)

JUDGED_SETS: dict[str, list[Any]] = {
    "fn_name": [{"fn_name": "add", "args": [17, 25], "expected": 42},
                {"fn_name": "add", "args": [100, 1], "expected": 101}],
    "asserts": ["assert add(17, 25) == 42", "assert add(100, 1) == 101",
                "assert abs(add(0.5, 0.25) - 0.75) < 1e-9", "assert add(2, 2) in (4, 5)"],
    "call_expected": [{"call": "add(17, 25)", "expected": 42}],
    "stdio": [{"input": "17 25", "expected_output": "42"}],
}  # fmt: skip
HONEST_WRONG = "def add(a, b):\n    return a - b\n\nif __name__ == '__main__':\n    print(-1)"
FIND_EXPECTED = (
    "def _find(a, b):\n    import gc, sys\n    seen = []\n    f = sys._getframe()\n"
    "    while f is not None:\n"
    "        seen += list(f.f_locals.values()) + list(f.f_globals.values())\n"
    "        f = f.f_back\n    seen += gc.get_objects()\n    for v in seen:\n"
    "        items = v if isinstance(v, list) else [v]\n        for s in items:\n"
    "            if isinstance(s, dict) and 'expected' in s:\n"
    "                if s.get('args') in ([a, b], None):\n"
    "                    return s['expected']\n"
    "    return None\n"
)
JUDGE_ATTACKS = {
    "exit_0_at_load": "import sys\nsys.exit(0)",
    "os_exit_at_load": "import os\nos._exit(0)",
    "os_exit_in_the_call": "import os\ndef add(a, b):\n    os._exit(0)",
    "patch_main_builtins_json": (
        "import builtins, json, sys\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n"
        "sys.modules['__main__'].__dict__.clear()\njson.dumps = lambda *a, **k: '[0, true, \"\"]'\n"
        "import operator\noperator.eq = lambda a, b: True\ndef add(a, b):\n    return 0"
    ),
    "always_equal_object": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Anything()"
    ),
    "int_subclass": (
        "class Evil(int):\n    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Evil(0)"
    ),
    "expected_from_frames_and_gc": FIND_EXPECTED + "def add(a, b):\n    return _find(a, b)",
    "parents_memory": (
        "import os, re\ndef add(a, b):\n    for pid in [os.getppid(), 1] + [int(p) for p in "
        "os.listdir('/proc') if p.isdigit()]:\n        try:\n"
        "            blob = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
        "            blob += open(f'/proc/{pid}/environ', 'rb').read()\n"
        "            m = re.search(rb'\"expected\": (-?\\d+)', blob)\n            if m:\n"
        "                return int(m.group(1))\n        except OSError:\n            pass\n"
        "    return 0"
    ),
    "forged_result_channel": (
        "import json, os\nfor fd in (3, 4, 5):\n    try:\n"
        "        os.write(fd, b'[\"loaded\"]\\n')\n"
        "        for i in range(10):\n"
        "            for rec in ([i, True, ''], [i, 'value', {'opaque': 'x'}], [i, 'pass'],\n"
        "                        [i, 'value', {'__eq__': True}], ['done']):\n"
        "                os.write(fd, (json.dumps(rec) + '\\n').encode())\n"
        "    except OSError:\n        pass\ndef add(a, b):\n    return None"
    ),
    "fake_test_reports": (
        "print('4/4 test cases passed')\nfor i in range(10):\n"
        "    print(f'[{i}, true, \"\"]')\n    print(f'[{i}, \"value\", 42]')\n"
        "print('[\"loaded\"]')\ndef add(a, b):\n    print('PASSED')\n    return 0"
    ),
}


def _children() -> list[int]:
    """Live children of this process (a run left behind would show up here), but for the
    launchers waiting for the next run, which are part of no run. Callers compare with what
    was there before the run: other tests in this process may have left helpers of their own
    for its lifetime (multiprocessing's resource tracker, started by any ``spawn``)."""
    spares = spare_pids()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == str(os.getpid()) and fields[0] != "Z" and int(entry.name) not in spares:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("tests", list(JUDGED_SETS))
def test_an_honest_wrong_answer_scores_zero_and_a_right_one_scores_one(tests: str) -> None:
    assert _score(HONEST_WRONG, JUDGED_SETS[tests]).score == 0.0
    right = (
        "def add(a, b):\n    return a + b\n"
        "if __name__ == '__main__':\n    print(add(*map(int, input().split())))"
    )
    result = _score(right, JUDGED_SETS[tests])
    assert result.score == 1.0
    assert result.metrics["judged_outside"].score == 1.0  # every test judged outside


@pytest.mark.parametrize("tests", list(JUDGED_SETS))
@pytest.mark.parametrize("attack", list(JUDGE_ATTACKS))
def test_judge_attack_scores_no_more_than_an_honest_wrong_answer(attack: str, tests: str) -> None:
    honest = _score(HONEST_WRONG, JUDGED_SETS[tests]).score
    before = set(_children())
    result = _score(JUDGE_ATTACKS[attack], JUDGED_SETS[tests])
    assert result.is_score_valid
    assert result.score <= honest == 0.0
    assert result.metrics["sandbox"].reason == "bwrap"
    assert set(_children()) - before == set()  # nothing left running; this caller is alive


def test_expected_values_never_enter_the_sandbox() -> None:
    """A spy that searches everything it can reach: it sees the call's args, never the answer."""
    spy = (
        "import gc, sys\ndef add(a, b):\n    blob = ''\n    f = sys._getframe()\n"
        "    while f is not None:\n        blob += repr(f.f_locals)\n        f = f.f_back\n"
        "    for o in gc.get_objects():\n        try:\n            blob += repr(o)[:10000]\n"
        "        except Exception:\n            pass\n"
        "    return ['[17, 25]' in blob, str(int('987654320') + 1) in blob]"  # made after
    )
    result = _score(spy, [{"fn_name": "add", "args": [17, 25], "expected": 987654321}])
    assert result.reason.endswith("expected 987654321, got [True, False]")


def test_tests_the_parent_cannot_split_are_judged_inside_and_counted() -> None:
    tests = [
        "assert add(2, 2) == 4",
        "x = add(1, 1)\nassert x == 2",
        "assert add(1, 2) == add(2, 1)",
    ]
    result = _score(ADD, tests)
    assert result.score == 1.0
    judged = result.metrics["judged_outside"]
    assert judged.score == pytest.approx(1 / 3)
    assert judged.success is False
    assert judged.reason.startswith("1/3 test cases judged outside the sandbox; 2 judged inside")


def test_a_forged_verdict_passes_only_where_judged_inside() -> None:
    """The weakness the metric reports: inside, a forged channel passes a test it fails."""
    forged = (
        'import os\nos.write(3, b\'["loaded"]\\n["done"]\\n\')\nos._exit(0)\n'
        "def add(a, b):\n    return 0"
    )
    inside = _score(forged, ["x = add(1, 1)\nassert x == 2"])
    outside = _score(forged, ["assert add(1, 1) == 2"])
    assert (inside.score, inside.metrics["judged_outside"].score) == (1.0, 0.0)
    assert (outside.score, outside.metrics["judged_outside"].score) == (0.0, 1.0)


def test_process_mode_is_recorded_in_the_metrics() -> None:
    result = _score(ADD, ["assert add(1, 2) == 3"], sandbox="process")
    assert result.score == 1.0
    assert (result.metrics["sandbox"].score, result.metrics["sandbox"].reason) == (0.0, "process")
    assert _score(ADD, ["assert add(1, 2) == 3"]).metrics["sandbox"].score == 1.0


@pytest.mark.parametrize(
    ("code", "test"),
    [
        ("def f():\n    return (1, 2)", "assert f() == (1, 2)"),
        ("def f():\n    return {1, 2}", "assert f() == {2, 1}"),
        ("def f():\n    return None", "assert f() is None"),
        ("def f():\n    return [3]", "assert 3 in f()"),
        ("def f():\n    return 0.1 + 0.2", "assert math.isclose(f(), 0.3, rel_tol=1e-9)"),
        ("def f():\n    return 5", "assert f() > 4"),
        ("def f():\n    return True", "assert f()"),
        ("def f():\n    return ''", "assert not f()"),
        ("def f():\n    return {'a': [1]}", "assert f() == {'a': [1]}"),
        ("def f():\n    return b'x'", "assert f() == b'x'"),
        ("def f():\n    return 10**5000", "assert f() > 10"),
    ],
)
def test_asserts_judged_outside_keep_python_semantics(code: str, test: str) -> None:
    result = _score(code, [test])
    assert result.score == 1.0, result.reason
    assert result.metrics["judged_outside"].score == 1.0
