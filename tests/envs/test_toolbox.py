"""The tools of the ``tools`` environment: safe arithmetic, units, dates, the knowledge table."""

from __future__ import annotations

import re

import pytest

from rk_agent.envs.toolbox import (
    add_days,
    calculator,
    convert_units,
    days_between,
    evaluate_arithmetic,
    knowledge_table,
    lookup,
    weekday,
)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("0.1 + 0.2", 0.3),  # float noise is rounded away
        ("(2 + 3) ** 2 // 4 % 5", 1),
        ("-3 + +4", 1),
        ("round(68170000 / 84480000, 2)", 0.81),
        ("sqrt(16) + abs(-2) + min(3, 4) + max(1, 2) + floor(2.5) + ceil(2.5)", 16),
        ("10 / 4", 2.5),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("1/0", "division by zero"),
        ("9**9**9", "the power is too large"),
        ("10**99 * 10**99", "the result is too large"),
        ("__import__('os')", "unknown function '__import__'"),
        ("(1).real", "unsupported syntax: '1 .real'"),
        ("open('x')", "unknown function 'open'"),
        ("x + 1", "unknown name 'x': use numbers only"),
        ("[1, 2]", "unsupported syntax: '[1, 2]'"),
        ("(-8) ** 0.5", "a negative number to a fractional power is not a real number"),
        ("True + 1", "use numbers, not True/False"),
        ("1 +", "not a valid expression"),
        ("1" * 501, "the expression is longer than 500 characters"),
    ],
)
def test_calculator_refuses_what_is_not_plain_arithmetic(expression: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        evaluate_arithmetic(expression)
    result = calculator.run({"expression": expression})
    assert not result.ok and result.error_kind == "exception" and error in result.content


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (1, "km", "m", 1000),
        (1, "mi", "km", 1.609344),
        (100, "kilometers", "miles", 62.1371192237),
        (2.5, "kg", "lb", 5.51155655463),
        (212, "F", "C", 100),
        (0, "celsius", "kelvin", 273.15),
        (1, "km2", "ha", 100),
        (36, "km/h", "m/s", 10),
        (3, "weeks", "days", 21),
    ],
)
def test_convert_units(value: float, source: str, target: str, expected: float) -> None:
    assert convert_units(value, source, target) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("source", "target", "error"),
    [
        ("kg", "km", "cannot convert mass (kg) to length (km)"),
        ("klm", "m", "unknown unit 'klm'. Did you mean 'km'?"),
    ],
)
def test_convert_units_errors(source: str, target: str, error: str) -> None:
    result = convert_units.run({"value": 1, "from_unit": source, "to_unit": target})
    assert not result.ok and error in result.content


def test_date_tools() -> None:
    assert days_between.run({"start": "2024-01-01", "end": "2024-03-01"}).content == "60"
    assert days_between.run({"start": "2024-03-01", "end": "2024-01-01"}).content == "-60"
    assert add_days.run({"date": "2024-02-28", "days": 2}).content == "2024-03-01"
    assert weekday.run({"date": "2024-01-01"}).content == "Monday"
    bad = days_between.run({"start": "2024-01-01", "end": "March 1"})
    assert not bad.ok and bad.error_kind == "bad_arguments" and "end:" in bad.content
    far = add_days.run({"date": "9999-12-31", "days": 1})
    assert not far.ok and "out of range" in far.content


def test_lookup() -> None:
    assert lookup.run({"name": "france", "attribute": "capital"}).content == "Paris"
    assert lookup.run({"name": "Fe", "attribute": "atomic mass"}).content == "55.845"
    unknown = lookup.run({"name": "Frnace", "attribute": "capital"})
    assert not unknown.ok and "'Frnace' is not in the knowledge table. Did you mean 'France'?" in (
        unknown.content
    )
    field = lookup.run({"name": "France", "attribute": "capitol"})
    assert "France has no attribute 'capitol'. Did you mean 'capital'?" in field.content


def test_knowledge_table_is_bundled_and_complete() -> None:
    table = knowledge_table()
    assert len(table["countries"]) >= 30 and len(table["elements"]) >= 30
    for record in table["countries"].values():
        assert set(record) == {"capital", "population", "area_km2", "continent"}
    for record in table["elements"].values():
        assert set(record) == {"symbol", "atomic_number", "atomic_mass"}
