"""The program that runs a solution's probes inside the sandbox (stdlib only, never imported).

`rk_agent.rewards.builtin.code_execution` sends this file's source to `run_python` as the
program, with ``data_channel=True``, and on stdin one JSON line, the job. The harness holds
**no expected value and no verdict**: it computes values and reports them; the parent judges.

Two kinds of job:

* ``{"source", "probes", "start", "timeout"}``: load the solution as module ``solution``, then
  for each probe from ``start`` on (``{"fn": name, "args": [...]}`` or ``{"eval": expr}``), each
  under its own time limit, report ``[index, "value", <encoded value>]`` or
  ``[index, "error", reason]``. A probe that kills the process leaves its record unwritten;
  the parent blames it and runs the rest in a fresh process.
* ``{"source", "exec", "timeout"}``: a test the parent cannot judge: run its statements after
  loading the solution; report ``["done"]`` when they raise nothing, else
  ``["failed", reason]``. This verdict comes from inside the sandbox, so the code under test
  could forge it; the parent counts such tests as judged inside.

Records go to fd 3 (the data channel) as JSON lines, after ``["loaded"]`` or
``["load", reason]``. Values are encoded as plain data (`encode`): an object's own ``__eq__``
never reaches the parent, only the numbers, strings and containers it is made of.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import decimal
import fractions
import json
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

CHANNEL_FD = 3
WATCHDOG_EXIT = 124
"""The exit status of a harness killed by its watchdog: the running probe timed out."""

EQ_NAME = "_rk_strict_eq_"
_MAX_DEPTH = 100
_deadline = [0.0]  # monotonic time after which the running probe is killed; 0.0: none running


class CaseTimeout(BaseException):
    """Raised by SIGALRM in a probe that ran past its time limit (not an `Exception`, so a
    solution's ``except Exception`` cannot swallow it)."""


# --------------------------------------------------------------------------------------------
# Values as plain data


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able plain data; containers and numbers read through their base types'
    own methods (an ``int`` subclass counts as the int it holds), anything else is opaque."""
    if depth > _MAX_DEPTH:
        return {"opaque": "a value nested too deeply"}
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        number = int.__index__(value)
        return number if abs(number) < 10**4000 else {"int": hex(number)}
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        return {"complex": [complex.__complex__(value).real, complex.__complex__(value).imag]}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, depth + 1) for v in tuple.__iter__(value)]}
    if isinstance(value, dict):
        items = dict.items(value)
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items]}
    if isinstance(value, (set, frozenset)):
        members = set.__iter__(value) if isinstance(value, set) else frozenset.__iter__(value)
        return {"set": [encode(v, depth + 1) for v in members]}
    if type(value) is fractions.Fraction:
        return {"fraction": [value.numerator, value.denominator]}
    if type(value) is decimal.Decimal:
        return {"decimal": str(value)}
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return encode(value.tolist(), depth + 1)
    return {"opaque": type(value).__name__}


# --------------------------------------------------------------------------------------------
# Test statements judged inside (``exec`` jobs)


class _Unique:
    """Instances equal nothing but themselves."""


_UNIQUE = _Unique()
_last_compared: list[Any] = []


def _truthy(value: Any) -> bool:
    try:
        return bool(value)
    except BaseException:  # e.g. a numpy array of several booleans
        return False


def strict_eq(left: Any, right: Any) -> Any:
    """``left == right``, except that an object equal to a brand-new object (an ``__eq__``
    that always answers True) equals nothing."""
    _last_compared[:] = [left, right]
    result = left == right
    if _truthy(result) and (_truthy(left == _UNIQUE) or _truthy(right == _UNIQUE)):
        return False
    return result


class _StrictEq(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq):
            return node
        call = ast.Call(ast.Name(EQ_NAME, ast.Load()), [node.left, node.comparators[0]], [])
        return ast.copy_location(call, node)


def compile_test(code: str) -> types.CodeType:
    """Test statements with every ``a == b`` routed through `strict_eq`; a lone comparison
    (``"f(1) == 2"``) is asserted."""
    tree = ast.parse(code, "<test>")
    only = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(only, ast.Expr) and isinstance(only.value, ast.Compare):
        tree.body[0] = ast.copy_location(ast.Assert(only.value), only)
    tree = ast.fix_missing_locations(_StrictEq().visit(tree))
    return compile(tree, "<test>", "exec")


# --------------------------------------------------------------------------------------------
# Running one probe or test


def probe(spec: dict[str, Any], ns: dict[str, Any]) -> tuple[str, Any]:
    """Compute one probe's value in the solution's namespace."""
    if "fn" in spec:
        fn = ns.get(spec["fn"])
        if fn is None and isinstance(ns.get("Solution"), type):
            fn = getattr(ns["Solution"](), spec["fn"], None)  # LeetCode style
        if not callable(fn):
            return "error", f"the solution defines no function {spec['fn']!r}"
        got = fn(*copy.deepcopy(spec["args"]))
    else:
        got = eval(compile(spec["eval"], "<test>", "eval"), ns)
    return "value", encode(got)


def run_test(code: str, ns: dict[str, Any]) -> tuple[str, Any]:
    """Run test statements judged inside; ``("done", None)`` when they raise nothing."""
    ns[EQ_NAME] = strict_eq
    exec(compile_test(code), ns)
    return "done", None


def short(value: Any) -> str:
    """``repr(value)`` cut to 80 characters, whatever ``__repr__`` does."""
    try:
        text = repr(value)
    except BaseException:
        text = f"<unprintable {type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def _watchdog() -> None:
    """Kill the process when a probe outlives its deadline (its code swallowed the alarm)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the alarm is the main thread's
    while True:
        time.sleep(0.05)
        if _deadline[0] and time.monotonic() > _deadline[0]:
            os._exit(WATCHDOG_EXIT)


def guarded(timeout: float, run: Callable[..., tuple[str, Any]], *args: Any) -> tuple[str, Any]:
    """``run(*args)`` under a wall-clock limit (SIGALRM raises `CaseTimeout`), with two
    backstops that kill the process: the watchdog thread half a second later, and SIGPROF
    after ``timeout + 1`` CPU seconds (C code that holds the GIL stops both the others)."""
    _last_compared[:] = []
    _deadline[0] = time.monotonic() + timeout + 0.5
    signal.setitimer(signal.ITIMER_REAL, timeout)
    signal.setitimer(signal.ITIMER_PROF, timeout + 1.0)
    try:
        try:
            return run(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            _deadline[0] = 0.0
    except CaseTimeout:
        return "error", f"timed out after {timeout:g} s"
    except MemoryError:
        return "error", "memory limit exceeded (MemoryError)"
    except AssertionError as exc:
        if exc.args:
            return "error", f"assertion failed: {short(exc.args[0])}"
        if _last_compared:
            left, right = _last_compared
            return "error", f"assertion failed: {short(left)} != {short(right)}"
        return "error", "assertion failed"
    except SystemExit as exc:
        return "error", f"the code called exit({exc.code!r})"
    except BaseException as exc:
        return "error", f"{type(exc).__name__}: {exc}"[:300]


def _load(source: str, ns: dict[str, Any]) -> tuple[str, Any]:
    exec(compile(source, "solution.py", "exec"), ns)
    return "loaded", None


def _flush() -> None:
    with contextlib.suppress(BaseException):
        sys.stdout.flush()


def main() -> None:
    """Read the job from stdin, run it, report each result on the data channel."""
    job = json.loads(sys.stdin.readline())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the solution reads an empty stdin
    os.close(null)
    owner, write, dumps, exit_now = os.getpid(), os.write, json.dumps, os._exit

    def report(*record: Any) -> None:
        if os.getpid() != owner:
            exit_now(0)  # a process forked by the solution never reports
        data = (dumps(record) + "\n").encode()
        while data:
            data = data[write(CHANNEL_FD, data) :]

    ns: dict[str, Any] = {"__name__": "solution", "__builtins__": builtins}
    signal.signal(signal.SIGALRM, _alarm)
    threading.Thread(target=_watchdog, name="rk-watchdog", daemon=True).start()
    timeout = job["timeout"]
    kind, why = guarded(timeout, _load, job["source"], ns)
    _flush()
    if kind != "loaded":
        report("load", why)
        return
    report("loaded")
    if "exec" in job:
        kind, why = guarded(timeout, run_test, job["exec"], ns)
        _flush()
        report("done") if kind == "done" else report("failed", why)
        exit_now(0)  # no exit hooks of the solution run after the verdict
    probes = job["probes"]
    for index in range(job["start"], len(probes)):
        kind, value = guarded(timeout, probe, probes[index], ns)
        _flush()
        report(index, kind, value)


if __name__ == "__main__":
    main()
