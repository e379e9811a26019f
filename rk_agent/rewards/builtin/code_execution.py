"""Code-execution reward: run the Python code in a response against test cases, in the sandbox.

Main names:
    code_execution_reward: ``"code_execution"``, the fraction of test cases the code passes.
    extract_code: the Python program in a response, by the rule below.
    CodeTestCase: one test case; `parse_test_cases` reads every accepted shape into a list.

**Which code runs** (`extract_code`), from the last assistant message after any closed
``<think>...</think>`` blocks are removed:

1. the **last** fenced block tagged ``python`` / ``py`` / ``python3`` that is valid Python; if none
   is valid, the last such block (so its syntax error is reported);
2. otherwise the **longest** valid fenced block with another tag or none (an
   untagged ```` ``` ```` block after the solution is often its output, hence longest, not last);
3. otherwise the whole text, when it is valid Python with at least one statement or call
   (so prose such as ``"Yes"`` does not count as code).

**Test cases** come in ``ground_truth`` or the ``test_cases=`` keyword, as a list, or as a JSON
string of one (datasets often store them so). Each item is one of:

* ``{"input": "1 2\\n", "expected_output": "3"}``: stdin/stdout. The program runs once per case;
  it passes when it exits with status 0 and its output equals the expected one up to
  whitespace (lines are stripped, runs of spaces collapsed, blank lines at either end ignored;
  with ``float_tolerance`` numbers also match within that tolerance). ``output`` is accepted
  for ``expected_output``.
* ``{"call": "assert add(1, 2) == 3"}`` or a plain string ``"assert add(1, 2) == 3"``:
  statements run after the solution is loaded; the case passes when they raise nothing. A
  bare comparison (``"add(1, 2) == 3"``) is asserted.
* ``{"call": "add(1, 2)", "expected": 3}``: the expression's value must equal ``expected``.
* ``{"fn_name": "add", "args": [1, 2], "expected": 3}``: the same, JSON-friendly; a method of a
  LeetCode-style ``Solution`` class is found too.
* APPS/TACO's ``{"inputs": [...], "outputs": [...]}``, with ``"fn_name"`` for call-based tasks.

Values compared with ``expected`` must be plain data (``None``, bool, int, float, str, list,
tuple, dict with str keys): an object whose ``__eq__`` always returns ``True`` does not pass.

**How call-style cases run.** One sandboxed process loads the solution (as module ``solution``,
so ``if __name__ == "__main__":`` blocks do not run) and runs the cases one after another, each
with its own time limit (``limits.timeout_s``), reporting each result on stdout tagged with a
random token sent on stdin (so a program that prints fake results, or exits early, passes
nothing). When a case kills the process (a crash, the output cap, code that swallows its
timeout or hangs in C), it fails with that reason and a fresh process runs the remaining
cases, so one bad case never hides the others. Stdin/stdout cases run one process each. This
guards against reward hacking by accident or simple tricks, not against code that inspects
the harness's memory.

Example:
    >>> messages = [
    ...     {"role": "user", "content": "Write add(a, b)."},
    ...     {"role": "assistant", "content": "```python\\ndef add(a, b):\\n    return a + b\\n```"},
    ... ]
    >>> code_execution_reward(messages, ground_truth=["assert add(1, 2) == 3"]).score
    1.0
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import textwrap
import threading
import warnings
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._code_cases import CodeTestCase, parse_test_cases
from rk_agent.rewards.builtin._code_harness import WATCHDOG_EXIT
from rk_agent.rewards.builtin._code_judge import BadValue, Check, Probe, decode, plan_case
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.sandbox import (
    SandboxLimits,
    SandboxMode,
    SandboxResult,
    SandboxStatus,
    run_python,
    sandbox_mode,
)
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = [
    "CodeTestCase",
    "ExtractedCode",
    "code_execution_reward",
    "extract_code",
    "parse_test_cases",
]

DEFAULT_LIMITS = SandboxLimits(timeout_s=5.0)
"""Per-test-case limits used when the reward is given none."""

_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w.+#-]*)")
_warnings_lock = threading.Lock()


# --------------------------------------------------------------------------------------------
# Finding the code


@dataclass(frozen=True)
class ExtractedCode:
    """The program found in a response.

    Attributes:
        code: the source.
        origin: where it came from, e.g. ``"python block 2 of 2"`` or ``"the whole response"``.
        syntax_error: the parse error (``"SyntaxError: ... (line 3)"``), or ``None``.
    """

    code: str
    origin: str
    syntax_error: str | None = None


def extract_code(text: str) -> ExtractedCode | None:
    """The Python program in a response, or ``None`` when there is none (see the module docs).

    Example:
        >>> extract_code("Try:\\n```python\\nprint(1)\\n```\\nthen\\n```py\\nprint(2)\\n```").code
        'print(2)'
    """
    text = _THINK.sub("", text)
    blocks = _fenced_blocks(text)
    python = [code for tag, code in blocks if tag in _PYTHON_TAGS]
    for index in reversed(range(len(python))):
        if _syntax_error(python[index]) is None:
            return ExtractedCode(python[index], f"python block {index + 1} of {len(python)}")
    if python:
        return ExtractedCode(python[-1], "the last python block", _syntax_error(python[-1]))
    others = [code for tag, code in blocks if tag not in _PYTHON_TAGS and code.strip()]
    valid = [code for code in others if _syntax_error(code) is None]
    if valid:
        return ExtractedCode(max(valid, key=len), "the longest untagged fenced block")
    stripped = text.strip()
    if stripped and _syntax_error(stripped) is None and _looks_like_code(stripped):
        return ExtractedCode(stripped, "the whole response")
    return None


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(tag, code)`` of each fenced block; an unclosed last block runs to the end."""
    blocks: list[tuple[str, str]] = []
    tag: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if tag is None:
            if fence:
                tag, lines = fence.group(1).lower(), []
        elif fence and not fence.group(1) and line.strip() == "```":
            blocks.append((tag, _dedent(lines)))
            tag = None
        else:
            lines.append(line)
    if tag is not None:
        blocks.append((tag, _dedent(lines)))
    return blocks


def _dedent(lines: list[str]) -> str:
    return textwrap.dedent("\n".join(lines)).strip("\n")


def _parse(code: str) -> ast.Module:
    # The compiler may warn (invalid escapes); those warnings are not ours to show, and under
    # ``-W error`` they would turn valid code into a SyntaxError. The lock keeps concurrent
    # callers from restoring each other's filters.
    with _warnings_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code, "solution.py")


def _syntax_error(code: str) -> str | None:
    try:
        _parse(code)
    except SyntaxError as exc:
        return f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return f"{type(exc).__name__}: {exc}"
    return None


def _looks_like_code(code: str) -> bool:
    body = _parse(code).body
    return any(not isinstance(s, ast.Expr) or isinstance(s.value, ast.Call) for s in body)


# --------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class _Outcome:
    passed: bool
    reason: str = ""
    inside: bool = False  # judged inside the sandbox (by test code the parent cannot split)


@dataclass(frozen=True)
class _Run:
    """How the code is run: the limits per test and the sandbox mode."""

    limits: SandboxLimits
    mode: SandboxMode
    tol: float | None
    reveal: bool = True  # name expected values in failure reasons


def _run_stdio(code: str, case: CodeTestCase, run: _Run) -> _Outcome:
    result = run_python(code, stdin=case.input or "", limits=run.limits, sandbox=run.mode)
    if not result.ok:
        return _Outcome(False, _failure(result))
    expected = case.expected_output or ""
    if _same_output(result.stdout, expected, run.tol):
        return _Outcome(True)
    if not run.reveal:
        return _Outcome(False, f"printed {_short(result.stdout)}")
    return _Outcome(False, f"expected {_short(expected)}, got {_short(result.stdout)}")


def _same_output(got: str, expected: str, tol: float | None) -> bool:
    a, b = _tokens(got), _tokens(expected)
    if a == b:
        return True
    if tol is None or [len(line) for line in a] != [len(line) for line in b]:
        return False
    pairs = (pair for la, lb in zip(a, b, strict=True) for pair in zip(la, lb, strict=True))
    return all(_close(x, y, tol) for x, y in pairs)


def _tokens(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def _close(a: str, b: str, tol: float) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def _failure(result: SandboxResult) -> str:
    if result.status is SandboxStatus.ERROR and result.stderr_truncated:
        return f"{result.reason} (stderr truncated)"
    return result.reason


def _harness(job: dict[str, Any], run: _Run, budget_cases: int) -> SandboxResult:
    budget = run.limits.timeout_s * (budget_cases + 1) + 1.0
    limits = run.limits.model_copy(update={"timeout_s": budget, "cpu_time_s": budget})
    return run_python(
        _harness_source(),
        stdin=json.dumps(job) + "\n",
        limits=limits,
        sandbox=run.mode,
        data_channel=True,
    )


def _run_probes(code: str, probes: list[Probe], run: _Run) -> list[tuple[str, Any]]:
    """Each probe's ``("value", decoded)`` or ``("error", reason)``, computed in the sandbox."""
    specs = [p.spec for p in probes]
    results: list[tuple[str, Any] | None] = [None] * len(probes)
    start = 0
    while start < len(probes):
        job = {"source": code, "probes": specs, "start": start, "timeout": run.limits.timeout_s}
        result = _harness(job, run, len(probes) - start)
        loaded, load_error = _read_records(result.data, results)
        if not loaded:
            reason = f"the solution failed to load: {load_error or _crash(result, loading=True)}"
            return [r or ("error", reason) for r in results]
        missing = next((i for i in range(start, len(probes)) if results[i] is None), None)
        if missing is None:
            break
        results[missing] = ("error", _crash(result))
        start = missing + 1
    return [r or ("error", "not run") for r in results]


def _read_records(data: str, results: list[tuple[str, Any] | None]) -> tuple[bool, str | None]:
    """Record the harness's reports, the first one per probe; ``(loaded, load error)``."""
    loaded, load_error = False, None
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, list) or not record:
            continue
        if record == ["loaded"]:
            loaded = True
        elif record[0] == "load" and len(record) == 2:
            load_error = str(record[1])[:300]
        elif len(record) == 3 and type(record[0]) is int and 0 <= record[0] < len(results):
            index, kind, payload = record
            if results[index] is None:
                results[index] = _reported(kind, payload)
    return loaded, load_error


def _reported(kind: Any, payload: Any) -> tuple[str, Any]:
    if kind == "value":
        try:
            return "value", decode(payload)
        except (BadValue, RecursionError) as exc:
            return "error", f"the sandbox reported a malformed value ({exc})"[:300]
    return "error", str(payload)[:300]


def _run_inside(code: str, case: CodeTestCase, run: _Run) -> _Outcome:
    """A test the parent cannot judge: its own process; the verdict comes from inside."""
    job = {"source": code, "exec": case.call or "", "timeout": run.limits.timeout_s}
    result = _harness(job, run, 1)
    records = [json.loads(line) for line in result.data.splitlines() if _is_json(line)]
    first = records[0] if records else None
    if isinstance(first, list) and len(first) == 2 and first[0] == "load":
        return _Outcome(False, f"the solution failed to load: {str(first[1])[:300]}", True)
    verdict = records[1] if len(records) > 1 else None
    if verdict == ["done"] and result.ok:
        return _Outcome(True, inside=True)
    if isinstance(verdict, list) and len(verdict) == 2 and verdict[0] == "failed":
        reason = str(verdict[1])[:300]
        # The test code holds the expected values: only the kind of failure goes out hidden.
        return _Outcome(False, reason if run.reveal else reason.split(":", 1)[0], True)
    return _Outcome(False, _crash(result), True)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


@functools.cache
def _harness_source() -> str:
    return (
        resources.files("rk_agent.rewards.builtin").joinpath("_code_harness.py").read_text("utf-8")
    )


def _crash(result: SandboxResult, *, loading: bool = False) -> str:
    if result.signal == "SIGPROF":  # the harness's CPU backstop for a case stuck in C code
        return "timed out (CPU time)"
    if result.exit_code == WATCHDOG_EXIT:
        return "timed out, and the code would not stop"
    if result.status is SandboxStatus.OK:
        what = "loading" if loading else "this case"
        return f"the program exited (status 0) before {what} finished"
    return _failure(result)


def _run_all(code: str, cases: list[CodeTestCase], run: _Run) -> list[_Outcome]:
    outcomes: dict[int, _Outcome] = {}
    probes: list[Probe] = []
    planned: dict[int, list[tuple[int, Check]]] = {}
    for index, case in enumerate(cases):
        if case.is_stdio:
            continue
        plan = plan_case(case)
        if plan is None:
            outcomes[index] = _run_inside(code, case, run)
            continue
        planned[index] = [(len(probes) + i, check) for i, (_, check) in enumerate(plan)]
        probes += [probe for probe, _ in plan]
    values = _run_probes(code, probes, run) if probes else []
    for index, checks in planned.items():
        outcomes[index] = _judge(checks, values, run.tol, run.reveal)
    for index, case in enumerate(cases):
        if case.is_stdio:
            outcomes[index] = _run_stdio(code, case, run)
    return [outcomes[i] for i in range(len(cases))]


def _judge(
    checks: list[tuple[int, Check]],
    values: list[tuple[str, Any]],
    tol: float | None,
    reveal: bool = True,
) -> _Outcome:
    for probe, check in checks:
        kind, value = values[probe]
        if kind != "value":
            return _Outcome(False, str(value))
        passed, reason = check.judge(value, tol)
        if not passed:
            return _Outcome(False, reason if reveal else f"returned {_short(value)}")
    return _Outcome(True)


# --------------------------------------------------------------------------------------------
# The reward


@reward_function(
    name="code_execution",
    description="Run the Python code in the response against test cases; score = pass rate.",
)
def code_execution_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    test_cases: Any = None,
    limits: SandboxLimits | None = None,
    float_tolerance: float | None = None,
    sandbox: SandboxMode | str = SandboxMode.BWRAP,
    reveal_expected: bool = True,
    **kwargs: Any,
) -> EvaluateResult:
    """Score the code in the last assistant message by the fraction of test cases it passes.

    Args:
        messages: the conversation; the last assistant message holds the code.
        ground_truth: the test cases (see the module docs for the accepted shapes).
        test_cases: the test cases, taking precedence over ``ground_truth``.
        limits: sandbox limits for each test case (``DEFAULT_LIMITS``: 5 s, 1 GiB).
        float_tolerance: when set, numbers in outputs and values match within this absolute or
            relative tolerance.
        sandbox: ``"bwrap"`` (isolated, the default) or ``"process"`` (no isolation, opt-in);
            see `rk_agent.sandbox`.
        reveal_expected: name the expected value of a failed test in ``reason``. ``False``
            for feedback a policy reads (the ``code`` env's): the reason then names the failed
            test's input and what the code returned or printed, never the expected value nor
            test code that holds it, so a lookup table cannot be built from it.
        **kwargs: ignored (dataset columns passed along by trainers).

    Returns:
        ``score`` = pass rate; ``reason`` names the first failing case and why. Metrics:
        ``pass_rate``; ``extracted``; ``judged_outside`` (the fraction of test cases whose
        verdict was made outside the sandbox); ``sandbox`` (1.0 when the code ran isolated,
        ``bwrap``, 0.0 in mode ``process``; its reason names the mode). Missing or malformed
        test cases give an invalid result.

    Raises:
        SandboxError: isolation does not work here (names the cause and the fix).
        ConfigError: a bad ``float_tolerance`` or ``sandbox``.

    Example:
        >>> msgs = [{"role": "assistant", "content": "```python\\nprint(int(input()) + 1)\\n```"}]
        >>> r = code_execution_reward(msgs, ground_truth=[{"input": "1", "expected_output": "2"}])
        >>> r.score, r.metrics["extracted"].score
        (1.0, 1.0)
    """
    if float_tolerance is not None and not float_tolerance >= 0:
        raise ConfigError(f"float_tolerance must be >= 0 or None, got {float_tolerance!r}")
    mode = sandbox_mode(sandbox)
    raw = test_cases if test_cases is not None else ground_truth
    if raw is None or (isinstance(raw, (str, list, tuple)) and not raw):
        return EvaluateResult.invalid(
            "code_execution needs test cases: pass ground_truth=[...] or test_cases=[...], e.g. "
            '[{"input": "1 2", "expected_output": "3"}] or ["assert add(1, 2) == 3"]'
        )
    try:
        cases = parse_test_cases(raw)
    except ConfigError as exc:
        return EvaluateResult.invalid(f"ConfigError: {exc}")
    reply = last_reply(messages)
    if reply is None:
        return no_reply("code_execution")
    extracted = extract_code(reply.text)
    if extracted is None:
        return _zero("no Python code found in the response", mode, extracted=False)
    if extracted.syntax_error is not None:
        return _zero(f"the code does not parse: {extracted.syntax_error}", mode, extracted=True)
    run = _Run(limits or DEFAULT_LIMITS, mode, float_tolerance, reveal_expected)
    outcomes = _run_all(extracted.code, cases, run)
    passed = sum(o.passed for o in outcomes)
    rate = passed / len(outcomes)
    first = next(((i, o) for i, o in enumerate(outcomes) if not o.passed), None)
    reason = f"{passed}/{len(outcomes)} test cases passed"
    if first is not None:
        reason += (
            f"; first failure: test {first[0]}{_case_label(cases[first[0]], reveal_expected)}: "
            f"{first[1].reason}"
        )
    return EvaluateResult(
        score=rate,
        reason=reason,
        metrics={
            "pass_rate": MetricResult(score=rate, success=passed == len(outcomes), reason=reason),
            "extracted": MetricResult(score=1.0, success=True, reason=extracted.origin),
            "judged_outside": _judged_outside(outcomes),
            "sandbox": _sandbox_metric(mode),
        },
    )


def _judged_outside(outcomes: list[_Outcome]) -> MetricResult:
    inside = sum(o.inside for o in outcomes)
    outside = len(outcomes) - inside
    reason = f"{outside}/{len(outcomes)} test cases judged outside the sandbox"
    if inside:
        reason += (
            f"; {inside} judged inside it (test code that is not a plain comparison with a "
            "literal: the code under test could forge that verdict)"
        )
    return MetricResult(score=outside / len(outcomes), success=inside == 0, reason=reason)


def _sandbox_metric(mode: SandboxMode) -> MetricResult:
    isolated = mode is SandboxMode.BWRAP
    return MetricResult(score=float(isolated), success=isolated, reason=mode.value)


def _zero(reason: str, mode: SandboxMode, *, extracted: bool) -> EvaluateResult:
    return EvaluateResult(
        score=0.0,
        reason=reason,
        metrics={
            "pass_rate": MetricResult(score=0.0, success=False, reason=reason),
            "extracted": MetricResult(score=float(extracted), success=extracted, reason=reason),
            "sandbox": _sandbox_metric(mode),
        },
    )


def _case_label(case: CodeTestCase, reveal: bool = True) -> str:
    if case.is_stdio:
        return f" (input {_short(case.input or '')})"
    if case.fn_name is not None:
        return f" ({case.fn_name}(*{_short(case.args or [])}))"
    return f" ({_short(case.call)})" if reveal else ""  # test code holds the expected value


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
