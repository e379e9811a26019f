"""The tools of the ``tools`` environment, usable in any environment of your own.

Each is a `Tool` (see `rk_agent.envs.tool`): typed, documented, and never raising at the caller;
a mistake (``1/0``, an unknown unit, a country not in the table) becomes an error message the
model can read and correct.

Main names:
    calculator: arithmetic on numbers (``+ - * / // % **``, ``round``, ``sqrt``, ...), evaluated
        from the syntax tree (never ``eval``), with bounds on sizes so no input can hang it.
    convert_units: length, mass, volume, area, time, speed and temperature units.
    days_between, add_days, weekday: date arithmetic on ISO dates (``YYYY-MM-DD``).
    lookup: a fact from the bundled knowledge table (countries and chemical elements).
    evaluate_arithmetic, knowledge_table: the plain functions behind them.

Example:
    >>> calculator.run({"expression": "round(68170000 / 84480000, 2)"}).content
    '0.81'
    >>> lookup.run({"name": "france", "attribute": "capital"}).content
    'Paris'
    >>> calculator.run({"expression": "1/0"}).ok
    False
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import operator
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from rk_agent.envs.tool import tool
from rk_agent.errors import did_you_mean

__all__ = [
    "add_days",
    "calculator",
    "convert_units",
    "days_between",
    "evaluate_arithmetic",
    "knowledge_table",
    "lookup",
    "weekday",
]

_MAX_EXPRESSION_CHARS = 500
_MAX_MAGNITUDE = 1e100  # larger intermediate results are refused (no 9**9**9 hangs)
_SIGNIFICANT_DIGITS = 12  # results are rounded to this, hiding float noise (0.1 + 0.2)

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "round": round,
    "abs": abs,
    "sqrt": math.sqrt,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
}


def _tidy(value: Number) -> Number:
    """An integer when the value is whole, else the float rounded to 12 significant digits."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("the result is not a finite number")
        value = float(f"{value:.{_SIGNIFICANT_DIGITS}g}")
        if value.is_integer() and abs(value) < 1e15:
            return int(value)
    return value


def evaluate_arithmetic(expression: str) -> Number:
    """Evaluate an arithmetic expression safely (numbers, operators and a few functions only).

    Raises:
        ValueError: the expression is not plain arithmetic, divides by zero, or is too large.

    Example:
        >>> evaluate_arithmetic("2 * (3 + 4) ** 2 / 7")
        14
    """
    if len(expression) > _MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {_MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a valid expression: {exc.msg}") from exc
    return _tidy(_evaluate(tree.body))


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool):
            raise ValueError("use numbers, not True/False")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise ValueError("division by zero")
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except (ZeroDivisionError, OverflowError) as exc:
            raise ValueError(str(exc)) from exc
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        function = _FUNCTIONS.get(node.func.id)
        if function is None:
            raise ValueError(
                f"unknown function {node.func.id!r}; available: {', '.join(sorted(_FUNCTIONS))}"
            )
        args = [_evaluate(a) for a in node.args]
        if node.func.id == "round" and len(args) == 2:
            args[1] = int(args[1])
        try:
            return _bounded(function(*args))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{node.func.id}(): {exc}") from exc
    if isinstance(node, ast.Name):
        raise ValueError(f"unknown name {node.id!r}: use numbers only")
    raise ValueError(f"unsupported syntax: {ast.unparse(node)!r}")


def _check_power(base: Number, exponent: Number) -> None:
    if abs(base) > 1 and abs(exponent) * math.log10(abs(base)) > 100:
        raise ValueError("the power is too large")
    if isinstance(base, (int, float)) and base < 0 and not float(exponent).is_integer():
        raise ValueError("a negative number to a fractional power is not a real number")


def _bounded(value: Any) -> Number:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if abs(value) > _MAX_MAGNITUDE:
        raise ValueError("the result is too large")
    return value


@tool(inline=True)  # quick, pure Python: it never blocks
def calculator(expression: str) -> Number:
    """Evaluate an arithmetic expression and return the number.

    Supports + - * / // % ** and parentheses, and the functions round(x, digits), abs, sqrt,
    min, max, floor and ceil. Numbers only: no variables or units.

    Args:
        expression: the expression, e.g. "round(84480000 / 357588, 1)".
    """
    return evaluate_arithmetic(expression)


# --------------------------------------------------------------------------------------------
# Units: (dimension, factor to the base unit). Temperatures are affine and handled apart.

_UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "yd": ("length", 0.9144),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "mg": ("mass", 1e-6),
    "t": ("mass", 1000.0),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "m3": ("volume", 1000.0),
    "gal": ("volume", 3.785411784),
    "m2": ("area", 1.0),
    "km2": ("area", 1e6),
    "ha": ("area", 1e4),
    "mi2": ("area", 2589988.110336),
    "acre": ("area", 4046.8564224),
    "ft2": ("area", 0.09290304),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "week": ("time", 604800.0),
    "m/s": ("speed", 1.0),
    "km/h": ("speed", 1 / 3.6),
    "mph": ("speed", 0.44704),
    "c": ("temperature", 1.0),
    "f": ("temperature", 1.0),
    "k": ("temperature", 1.0),
}
_ALIASES: dict[str, str] = {
    "meter": "m", "metre": "m", "kilometer": "km", "kilometre": "km", "centimeter": "cm",
    "centimetre": "cm", "millimeter": "mm", "millimetre": "mm", "mile": "mi", "yard": "yd",
    "foot": "ft", "feet": "ft", "inch": "in", "inches": "in", "kilogram": "kg", "gram": "g",
    "milligram": "mg", "tonne": "t", "pound": "lb", "lbs": "lb", "ounce": "oz", "liter": "l",
    "litre": "l", "milliliter": "ml", "millilitre": "ml", "gallon": "gal", "hectare": "ha",
    "km²": "km2", "km^2": "km2", "sq km": "km2", "square kilometer": "km2",
    "square kilometre": "km2", "mi²": "mi2", "mi^2": "mi2", "sq mi": "mi2",
    "square mile": "mi2", "m²": "m2", "m^2": "m2", "square meter": "m2", "square metre": "m2",
    "ft²": "ft2", "sq ft": "ft2", "square foot": "ft2", "square feet": "ft2", "m³": "m3",
    "second": "s", "sec": "s", "minute": "min", "hour": "h", "hr": "h", "days": "day",
    "d": "day", "weeks": "week", "kph": "km/h", "kmh": "km/h", "miles per hour": "mph",
    "celsius": "c", "°c": "c", "fahrenheit": "f", "°f": "f", "kelvin": "k",
}  # fmt: skip


def _unit(name: str) -> str:
    key = " ".join(name.strip().lower().split())
    if key in _UNITS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    if key.endswith("s") and key[:-1] in _ALIASES:
        return _ALIASES[key[:-1]]
    if key.endswith("s") and key[:-1] in _UNITS:
        return key[:-1]
    known = sorted(_UNITS)
    raise ValueError(
        f"unknown unit {name!r}.{did_you_mean(key, known)} Known units: {', '.join(known)}."
    )


def _to_kelvin(value: float, unit: str) -> float:
    return {"c": value + 273.15, "f": (value - 32) * 5 / 9 + 273.15, "k": value}[unit]


def _from_kelvin(value: float, unit: str) -> float:
    return {"c": value - 273.15, "f": (value - 273.15) * 9 / 5 + 32, "k": value}[unit]


@tool(inline=True)  # quick, pure Python: it never blocks
def convert_units(value: float, from_unit: str, to_unit: str) -> Number:
    """Convert a quantity from one unit to another of the same kind.

    Units: length m km cm mm mi yd ft in; mass kg g mg t lb oz; volume l ml m3 gal; area m2 km2
    ha mi2 acre ft2; time s min h day week; speed m/s km/h mph; temperature C F K.

    Args:
        value: the quantity in from_unit.
        from_unit: the unit of value, e.g. "km".
        to_unit: the unit wanted, e.g. "mi".
    """
    source, target = _unit(from_unit), _unit(to_unit)
    (kind, factor), (target_kind, target_factor) = _UNITS[source], _UNITS[target]
    if kind != target_kind:
        raise ValueError(f"cannot convert {kind} ({from_unit}) to {target_kind} ({to_unit})")
    if kind == "temperature":
        return _tidy(_from_kelvin(_to_kelvin(value, source), target))
    return _tidy(value * factor / target_factor)


# --------------------------------------------------------------------------------------------
# Dates


@tool(inline=True)  # quick, pure Python: it never blocks
def days_between(start: dt.date, end: dt.date) -> int:
    """Count the days from start to end (negative when end is earlier).

    Args:
        start: the first date, as YYYY-MM-DD.
        end: the second date, as YYYY-MM-DD.
    """
    return (end - start).days


@tool(inline=True)  # quick, pure Python: it never blocks
def add_days(date: dt.date, days: int) -> str:
    """Add a number of days (negative to go back) to a date; returns the date as YYYY-MM-DD.

    Args:
        date: the date, as YYYY-MM-DD.
        days: how many days to add.
    """
    try:
        return (date + dt.timedelta(days=days)).isoformat()
    except OverflowError as exc:
        raise ValueError("the resulting date is out of range (years 1 to 9999)") from exc


@tool(inline=True)  # quick, pure Python: it never blocks
def weekday(date: dt.date) -> str:
    """The day of the week of a date, e.g. "Tuesday".

    Args:
        date: the date, as YYYY-MM-DD.
    """
    return date.strftime("%A")


# --------------------------------------------------------------------------------------------
# The knowledge table


@cache
def knowledge_table() -> dict[str, dict[str, dict[str, Any]]]:
    """The bundled table: ``{"countries": {name: {...}}, "elements": {name: {...}}}``."""
    path = resources.files("rk_agent.envs").joinpath("data/knowledge.json")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


@cache
def _entities() -> dict[str, tuple[str, dict[str, Any]]]:
    """Lower-cased name (and element symbol) -> (proper name, record)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for table in knowledge_table().values():
        for name, record in table.items():
            out[name.lower()] = (name, record)
            if "symbol" in record:
                out.setdefault(record["symbol"].lower(), (name, record))
    return out


@tool(inline=True)  # quick, pure Python: it never blocks
def lookup(name: str, attribute: str) -> Any:
    """Look up a fact about a country or a chemical element in the knowledge table.

    Countries have: capital, population, area_km2, continent. Elements have: symbol,
    atomic_number, atomic_mass.

    Args:
        name: a country (e.g. "France") or an element (e.g. "Iron" or "Fe").
        attribute: the fact wanted, e.g. "population".
    """
    entities = _entities()
    key = " ".join(name.strip().lower().split())
    if key not in entities:
        proper = sorted({n for n, _ in entities.values()})
        hint = did_you_mean(name.strip().title(), proper)
        raise ValueError(f"{name!r} is not in the knowledge table.{hint}")
    proper_name, record = entities[key]
    field = attribute.strip().lower().replace(" ", "_")
    if field not in record:
        raise ValueError(
            f"{proper_name} has no attribute {attribute!r}.{did_you_mean(field, record)} "
            f"Available: {', '.join(record)}."
        )
    return record[field]
