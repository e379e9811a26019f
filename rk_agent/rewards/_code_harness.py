"""The program that runs call-style test cases inside the sandbox (stdlib only, never imported).

`rk_agent.rewards.code_execution` sends this file's source to `run_python` as the program, and on
stdin a random token line, then one JSON line: ``{"source", "specs", "start", "timeout",
"tolerance"}``. It loads the solution as module ``solution``, runs ``specs[start:]`` one by
one, each under its own time limit, and writes one line per result to fd 1:
``<token>[index, passed, reason]`` (``index`` is ``"loaded"`` or ``"load"`` for loading the
solution). A case that kills the process leaves its line unwritten; the parent blames it and
runs the rest in a fresh process.

Specs: ``{"exec": code}`` passes when the statements raise nothing (``==`` in them is strict,
see `strict_eq`); ``{"eval": expr, "expected": v, "unwrap": b}`` and ``{"fn": name, "args":
[...], "expected": v, "unwrap": b}`` pass when the value is plain data equal to ``v`` (or to
``v[0]`` when ``unwrap`` and ``v`` is a one-item list).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import json
import math
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

EQ_NAME = "_rk_strict_eq_"
"""The name test code's ``==`` is rewritten to call."""

WATCHDOG_EXIT = 124
"""The exit status of a harness killed by its watchdog: the running case timed out."""

_deadline = [0.0]  # monotonic time after which the running case is killed; 0.0: none running


class CaseTimeout(BaseException):
    """Raised by SIGALRM in a case that ran past its time limit (not an `Exception`, so a
    solution's ``except Exception`` cannot swallow it)."""


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
    that always answers True, a known reward hack) equals nothing."""
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
    """Compile test statements with every single ``a == b`` routed through `strict_eq`; a
    lone comparison (``"f(1) == 2"``) is asserted."""
    tree = ast.parse(code, "<test>")
    only = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(only, ast.Expr) and isinstance(only.value, ast.Compare):
        tree.body[0] = ast.copy_location(ast.Assert(only.value), only)
    tree = ast.fix_missing_locations(_StrictEq().visit(tree))
    return compile(tree, "<test>", "exec")


def same(got: Any, want: Any, tol: float | None) -> bool:
    """Whether ``got`` is plain data equal to the JSON value ``want`` (tuples count as lists)."""
    kind = type(got)
    if kind in (list, tuple):
        return (
            type(want) is list
            and len(got) == len(want)
            and all(same(g, w, tol) for g, w in zip(got, want, strict=True))
        )
    if kind is dict:
        return (
            type(want) is dict
            and all(type(k) is str for k in got)
            and got.keys() == want.keys()
            and all(same(got[k], want[k], tol) for k in got)
        )
    if kind in (int, float) and type(want) in (int, float):
        if got == want:
            return True
        return tol is not None and math.isclose(got, want, rel_tol=tol, abs_tol=tol)
    return kind in (type(None), bool, str) and type(want) is kind and got == want


def run_case(spec: dict[str, Any], ns: dict[str, Any], tol: float | None) -> tuple[bool, str]:
    """Run one spec in the solution's namespace."""
    if "exec" in spec:
        code = compile_test(spec["exec"])
        ns[EQ_NAME] = strict_eq
        exec(code, ns)
        return True, ""
    if "fn" in spec:
        fn = ns.get(spec["fn"])
        if fn is None and isinstance(ns.get("Solution"), type):
            fn = getattr(ns["Solution"](), spec["fn"], None)  # LeetCode style
        if not callable(fn):
            return False, f"the solution defines no function {spec['fn']!r}"
        got = fn(*copy.deepcopy(spec["args"]))
    else:
        got = eval(compile(spec["eval"], "<test>", "eval"), ns)
    if "expected" not in spec:
        return True, ""
    want = spec["expected"]
    if same(got, want, tol):
        return True, ""
    if spec.get("unwrap") and type(want) is list and len(want) == 1 and same(got, want[0], tol):
        return True, ""
    return False, f"expected {short(want)}, got {short(got)}"


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
    """Kill the process when a case outlives its deadline (its code swallowed the alarm)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the alarm is the main thread's
    while True:
        time.sleep(0.05)
        if _deadline[0] and time.monotonic() > _deadline[0]:
            os._exit(WATCHDOG_EXIT)


def guarded(timeout: float, run: Callable[..., tuple[bool, str]], *args: Any) -> tuple[bool, str]:
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
        return False, f"timed out after {timeout:g} s"
    except MemoryError:
        return False, "memory limit exceeded (MemoryError)"
    except AssertionError as exc:
        if exc.args:
            return False, f"assertion failed: {short(exc.args[0])}"
        if _last_compared:
            left, right = _last_compared
            return False, f"assertion failed: {short(left)} != {short(right)}"
        return False, "assertion failed"
    except SystemExit as exc:
        return False, f"the code called exit({exc.code!r})"
    except BaseException as exc:
        return False, f"{type(exc).__name__}: {exc}"[:300]


def _load(source: str, ns: dict[str, Any]) -> tuple[bool, str]:
    exec(compile(source, "solution.py", "exec"), ns)
    return True, ""


def _flush() -> None:
    # The solution may have broken its own stdout; reports go to fd 1 directly anyway.
    with contextlib.suppress(BaseException):
        sys.stdout.flush()


def main() -> None:
    """Read the token and the job from stdin, run the cases, report each one."""
    token = sys.stdin.readline().strip()
    job = json.loads(sys.stdin.readline())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the solution reads an empty stdin
    os.close(null)
    owner = os.getpid()

    def report(*record: Any) -> None:
        if os.getpid() != owner:
            os._exit(0)  # a process forked by the solution never reports
        data = ("\n" + token + json.dumps(record) + "\n").encode()
        while data:
            data = data[os.write(1, data) :]

    ns: dict[str, Any] = {"__name__": "solution", "__builtins__": builtins}
    signal.signal(signal.SIGALRM, _alarm)
    threading.Thread(target=_watchdog, name="rk-watchdog", daemon=True).start()
    timeout, tol = job["timeout"], job["tolerance"]
    ok, why = guarded(timeout, _load, job["source"], ns)
    _flush()
    if not ok:
        report("load", False, why)
        return
    report("loaded", True, "")
    specs = job["specs"]
    for index in range(job["start"], len(specs)):
        ok, why = guarded(timeout, run_case, specs[index], ns, tol)
        _flush()
        report(index, ok, why)


if __name__ == "__main__":
    main()
