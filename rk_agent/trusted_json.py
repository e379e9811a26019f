"""Reading back JSON rk-agent wrote itself, without the validators that widen what models accept.

The wire models (`rk_agent.types`) accept more than their JSON form: ``openai`` SDK objects
wherever a dict goes, tool-call arguments as a dict, metrics as bare numbers, the older
``base_reward``. Each of those is a Python ``mode="before"`` validator, called on every message,
metric and step as a line is read: on a trajectory line of the ``tools`` environment about a
hundred Python calls that change nothing (the files rk-agent writes hold only the JSON form),
some 40 % of the time pydantic takes to validate the line.

A before-validator marked `widening` promises exactly that: it returns a value already in the
model's JSON form unchanged, and what it turns into that form (an SDK object, a dict of
arguments, a bare number) is something the model's schema alone refuses. `trusted_validator`
compiles a model's schema with the widening validators left out; a line it accepts validates to
the same model as through the model itself, and a line it refuses (an older file, a hand-written
one) is read through the model instead (`validate_trusted_json`). Validators that change valid
input (``EvaluateResult``'s "an error is not a score") are not widening and stay.

What it buys (issue 39, docs/development.md, "Hand-made machinery: what it buys"): about a tenth
of a rescore's CPU, reading the run, and 5 % of the reward server's CPU a request; a
`build_trusted` for the objects rk-agent builds on the rollout engine's hot path bought 3 % of
its CPU per turn, and went.

Main names: `widening`, `trusted_validator`, `validate_trusted_json`.

Example:
    >>> from rk_agent.types import Message
    >>> validate_trusted_json(Message, b'{"role": "user", "content": "hi"}').text
    'hi'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

__all__ = [
    "is_widening",
    "trusted_validator",
    "validate_trusted_json",
    "widening",
]

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound=BaseModel)

_MARK = "__rk_widening__"


def widening(fn: F) -> F:
    """Mark a ``mode="before"`` validator as widening (module docstring): the model's JSON form
    passes it unchanged, and every other form it accepts fails the model's schema without it.
    Put it under ``@classmethod``.
    """
    setattr(fn, _MARK, True)
    return fn


def is_widening(fn: Any) -> bool:
    """Whether a validator function (bound or not) is marked `widening`."""
    return bool(getattr(getattr(fn, "__func__", fn), _MARK, False))


_building = threading.Lock()  # one build at a time: each marks classes incomplete for a moment


@cache
def trusted_validator(model: type[BaseModel]) -> SchemaValidator:
    """``model``'s validator without its widening before-validators (built once per model)."""
    with _building:
        if not model.__pydantic_complete__:
            model.model_rebuild()
        schema = _without_widening(model.__pydantic_core_schema__)
        with _nested_models_rebuilt(schema):
            return SchemaValidator(schema)


def validate_trusted_json(model: type[M], data: str | bytes) -> M:
    """``model.model_validate_json(data)``, faster on JSON rk-agent wrote: through
    `trusted_validator` first, through the model when that refuses it.

    Raises:
        ValidationError: the model's own error, when the model refuses ``data`` too.
    """
    try:
        found: M = trusted_validator(model).validate_json(data)
    except ValidationError:
        return model.model_validate_json(data)
    return found


def _without_widening(node: Any) -> Any:
    """A copy of a core schema with every widening ``function-before`` node replaced by the
    schema it wraps."""
    if isinstance(node, dict):
        if node.get("type") == "function-before" and is_widening(node["function"]["function"]):
            return _without_widening(node["schema"])
        return {key: _without_widening(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_without_widening(value) for value in node]
    return node


@contextmanager
def _nested_models_rebuilt(schema: Any) -> Iterator[None]:
    """While a validator is compiled from ``schema``: pydantic-core reuses the validator a
    complete model class already has for each model nested in a schema (its widening
    validators included), so the classes are marked incomplete for that time, as pydantic's
    own ``model_rebuild`` marks a class it rebuilds."""
    classes = {
        node["cls"] for node in _nodes(schema) if node.get("type") == "model" and "cls" in node
    }
    marked = [cls for cls in classes if cls.__dict__.get("__pydantic_complete__")]
    for cls in marked:
        cls.__pydantic_complete__ = False
    try:
        yield
    finally:
        for cls in marked:
            cls.__pydantic_complete__ = True


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every dict of a core schema, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)
