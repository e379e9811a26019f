"""The judge of call-style test cases, in the parent: expected values never enter the sandbox.

Main names:
    plan_case: split a test case into probes (expressions the sandbox computes) and the checks
        the parent applies to their values; ``None`` for test code it cannot split.
    Probe, Check: one expression to compute, one comparison to make.
    decode: the plain-data value the sandbox reported (see ``_code_harness.encode``).

What the parent judges:

* ``{"fn_name", "args", "expected"}`` and ``{"call": expr, "expected"}``: the value must be plain
  data equal to ``expected`` (tuples count as lists; ``unwrap`` and ``float_tolerance`` apply).
* Asserts of the usual forms, each statement of the test one of them: ``assert X == v``
  (``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``, either side), ``assert X is None``
  (``True``, ``False``, ``is not``), ``assert abs(X - v) < tol``, ``assert math.isclose(X, v,
  ...)``, ``assert X`` and ``assert not X``, where ``v`` and ``tol`` are literals and ``X`` is
  an expression without comparisons of its own. ``X`` is computed in the sandbox; the literal
  stays here and Python compares the two plain values.

Anything else is run in the sandbox, one process per test, and counted as judged inside.
"""

from __future__ import annotations

import ast
import decimal
import fractions
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rk_agent.rewards.builtin._code_cases import CodeTestCase

__all__ = ["BadValue", "Check", "Opaque", "Probe", "decode", "plan_case", "same"]


@dataclass(frozen=True)
class Probe:
    """An expression for the sandbox to compute: ``{"fn": name, "args": [...]}`` or
    ``{"eval": expr}`` (the harness's spec)."""

    spec: dict[str, Any]


@dataclass(frozen=True)
class Check:
    """One comparison of a probe's value, made in the parent.

    ``kind``: ``"same"`` (plain-data equality with ``expected``, see `same`), ``"ran"`` (any
    value), ``"op"`` (``op`` applied as ``op(value, expected)``), ``"close"``
    (``math.isclose(value, expected, **tolerances)``), ``"abs"`` (``abs(value - expected)``
    compared with ``op`` to ``tol``).
    """

    kind: str
    expected: Any = None
    op: str = ""
    unwrap: bool = False
    tol: Any = None
    text: str = ""

    def judge(self, value: Any, tolerance: float | None) -> tuple[bool, str]:
        """``(passed, reason)`` for the decoded ``value``."""
        if self.kind == "ran":
            return True, ""
        if contains_opaque(value):
            return False, f"the value is not plain data ({_short(value)})"
        try:
            return self._judge(value, tolerance)
        except (TypeError, ValueError, ArithmeticError) as exc:
            return False, f"assertion failed: {type(exc).__name__}: {exc}"[:300]

    def _judge(self, value: Any, tolerance: float | None) -> tuple[bool, str]:
        want = self.expected
        if self.kind == "same":
            if same(value, want, tolerance):
                return True, ""
            unwrapped = self.unwrap and type(want) is list and len(want) == 1
            if unwrapped and same(value, want[0], tolerance):
                return True, ""
            return False, f"expected {_short(want)}, got {_short(value)}"
        if self.kind == "close":
            ok = math.isclose(value, want, **self.tol)
            return ok, "" if ok else f"assertion failed: {self.text} (got {_short(value)})"
        if self.kind == "abs":
            ok = _OPS[self.op](abs(value - want), self.tol)
            return ok, "" if ok else f"assertion failed: {self.text} (got {_short(value)})"
        ok = bool(_OPS[self.op](value, want))
        if ok:
            return True, ""
        if self.op == "==":
            return False, f"assertion failed: {_short(value)} != {_short(want)}"
        return False, f"assertion failed: {self.text} (got {_short(value)})"


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
    "in": lambda v, w: v in w, "not in": lambda v, w: v not in w,
    "contains": lambda v, w: w in v, "not contains": lambda v, w: w not in v,
    "truthy": lambda v, w: bool(v), "falsy": lambda v, w: not v,
}  # fmt: skip
_AST_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
            ast.NotIn: "not in"}  # fmt: skip
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!=",
            "in": "contains", "not in": "not contains"}  # fmt: skip
# Calls whose result is itself a verdict computed inside: such probes are not judged here.
_VERDICT_CALLS = frozenset({"all", "any", "isinstance", "issubclass", "callable", "hasattr",
                            "eval", "exec", "compile", "bool", "getattr", "setattr",
                            "vars"})  # fmt: skip
_PROBE_NODES = (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.List,
                ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp, ast.BinOp, ast.keyword, ast.Starred,
                ast.Slice, ast.Load, ast.expr_context, ast.operator, ast.unaryop)  # fmt: skip


def plan_case(case: CodeTestCase) -> list[tuple[Probe, Check]] | None:
    """The probes and checks of a call-style case, or ``None`` when it must be judged inside."""
    if case.fn_name is not None:
        probe = Probe({"fn": case.fn_name, "args": case.args or []})
        if not case.has_expected:
            return [(probe, Check("ran"))]
        return [(probe, Check("same", case.expected, unwrap=case.unwrap))]
    code = case.call or ""
    if case.has_expected:
        if not _is_probe_text(code):
            return None
        return [(Probe({"eval": code}), Check("same", case.expected, unwrap=case.unwrap))]
    return _plan_asserts(code)


def _is_probe_text(code: str) -> bool:
    try:
        tree = ast.parse(code, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return _is_probe(tree.body)


def _plan_asserts(code: str) -> list[tuple[Probe, Check]] | None:
    try:
        body = ast.parse(code, "<test>").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Compare):
        body = [ast.Assert(body[0].value)]  # a lone comparison is asserted
    planned: list[tuple[Probe, Check]] = []
    for statement in body:
        if not isinstance(statement, ast.Assert):
            return None
        one = _plan_test(statement.test)
        if one is None:
            return None
        planned.append(one)
    return planned or None


def _plan_test(node: ast.expr) -> tuple[Probe, Check] | None:
    text = ast.unparse(node)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _plan_compare(node.left, node.ops[0], node.comparators[0], text)
    if isinstance(node, ast.Call) and _is_isclose(node):
        return _plan_isclose(node, text)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _probe_check(node.operand, Check("op", None, "falsy", text=text))
    if _literal(node) is _NO:
        return _probe_check(node, Check("op", None, "truthy", text=text))
    return None


def _plan_compare(
    left: ast.expr, op_node: ast.cmpop, right: ast.expr, text: str
) -> tuple[Probe, Check] | None:
    op = _AST_OPS.get(type(op_node))
    if op is None:
        return None
    abs_check = _plan_abs(left, op, right, text)
    if abs_check is not None:
        return abs_check
    lit_left, lit_right = _literal(left), _literal(right)
    if (lit_left is _NO) == (lit_right is _NO):
        return None  # both computed (a verdict inside) or both literal
    if lit_right is _NO:  # the literal is on the left: flip ``v < X`` into ``X > v``
        left, right, lit_right = right, left, lit_left
        if op not in _FLIPPED:
            return None
        op = _FLIPPED[op]
    if op in ("is", "is not") and lit_right not in (None, True, False):
        return None
    return _probe_check(left, Check("op", lit_right, op, text=text))


def _plan_abs(left: ast.expr, op: str, right: ast.expr, text: str) -> tuple[Probe, Check] | None:
    """``abs(X - v) < tol`` (or ``<=``, or ``tol > abs(v - X)``)."""
    if op in (">", ">="):
        left, right, op = right, left, _FLIPPED[op]
    if op not in ("<", "<=") or not (
        isinstance(left, ast.Call)
        and isinstance(left.func, ast.Name)
        and left.func.id == "abs"
        and len(left.args) == 1
        and not left.keywords
        and isinstance(left.args[0], ast.BinOp)
        and isinstance(left.args[0].op, ast.Sub)
    ):
        return None
    tol = _literal(right)
    a, b = left.args[0].left, left.args[0].right
    value = _literal(b)
    computed = a
    if value is _NO:
        value, computed = _literal(a), b
    if not _number(tol) or not _number(value):
        return None
    return _probe_check(computed, Check("abs", value, op, tol=tol, text=text))


def _is_isclose(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "isclose" and isinstance(func.value, ast.Name)
    return isinstance(func, ast.Name) and func.id == "isclose"


def _plan_isclose(node: ast.Call, text: str) -> tuple[Probe, Check] | None:
    if len(node.args) != 2 or any(k.arg not in ("rel_tol", "abs_tol") for k in node.keywords):
        return None
    tolerances = {k.arg: _literal(k.value) for k in node.keywords if k.arg}
    if not all(_number(v) for v in tolerances.values()):
        return None
    a, b = node.args
    value, computed = _literal(b), a
    if value is _NO:
        value, computed = _literal(a), b
    if not _number(value):
        return None
    return _probe_check(computed, Check("close", value, tol=tolerances, text=text))


def _probe_check(node: ast.expr, check: Check) -> tuple[Probe, Check] | None:
    if not _is_probe(node):
        return None
    return Probe({"eval": ast.unparse(node)}), check


def _is_probe(node: ast.expr) -> bool:
    """Whether ``node`` computes a value without deciding anything itself (no comparisons,
    no boolean logic, no calls whose result is a verdict)."""
    for child in ast.walk(node):
        if not isinstance(child, _PROBE_NODES):
            return False
        if isinstance(child, ast.Call):
            name = child.func.id if isinstance(child.func, ast.Name) else None
            if name in _VERDICT_CALLS:
                return False
    return True


class _No:
    """Marks "not a literal" (``None`` is a literal)."""


_NO: Any = _No()


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO


def _number(value: Any) -> bool:
    return type(value) in (int, float)


# --------------------------------------------------------------------------------------------
# Values


class BadValue(ValueError):
    """The sandbox reported something that is not an encoded value."""


class Opaque:
    """A value that was not plain data inside (an object of the solution's own class): it
    equals nothing and fails every check."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def decode(data: Any) -> Any:
    """The plain value of the harness's encoding (see ``_code_harness.encode``).

    Raises:
        BadValue: ``data`` is not such an encoding.
    """
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict) or len(data) != 1:
        raise BadValue(f"not an encoded value: {_short(data)}")
    ((tag, body),) = data.items()
    try:
        return _DECODERS[tag](body)
    except (KeyError, TypeError, ValueError, ArithmeticError, decimal.DecimalException) as exc:
        raise BadValue(f"not an encoded value: {_short(data)}") from exc


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "tuple": lambda body: tuple(decode(v) for v in _list(body)),
    "dict": lambda body: {decode(k): decode(v) for k, v in _list(body)},
    "set": lambda body: frozenset(decode(v) for v in _list(body)),
    "int": lambda body: int(body, 16),
    "complex": lambda body: complex(*(float(x) for x in _list(body))),
    "bytes": lambda body: bytes.fromhex(body),
    "fraction": lambda body: fractions.Fraction(*(int(x) for x in _list(body))),
    "decimal": lambda body: decimal.Decimal(str(body)),
    "opaque": lambda body: Opaque(str(body)),
}


def _list(body: Any) -> list[Any]:
    if not isinstance(body, list):
        raise TypeError("expected a list")
    return body


def contains_opaque(value: Any, depth: int = 0) -> bool:
    """Whether an `Opaque` value is anywhere in ``value``."""
    if isinstance(value, Opaque) or depth > 200:
        return True
    if isinstance(value, (list, tuple, frozenset)):
        return any(contains_opaque(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(contains_opaque(k, depth + 1) or contains_opaque(v, depth + 1)
                   for k, v in value.items())  # fmt: skip
    return False


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


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit``; never raises (a program's value may be an int past
    Python's digit limit, nested past the recursion limit, or an object whose repr fails)."""
    try:
        text = repr(value)
    except Exception as exc:  # any failure: describe the value instead
        if isinstance(value, int):
            text = f"<an int of about {int(value.bit_length() * 0.30103) + 1} digits>"
        else:
            text = f"<a {type(value).__name__} whose repr failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
