"""Tool methods whose signatures and docstrings give back an environment tool's schema.

TRL offers the public methods of an ``environment_factory`` class as tools, and renders their
schemas with transformers' ``get_json_schema``, which reads the signature's type hints and the
Google-style docstring. `tool_method` writes a method from an OpenAI tool schema (an item of
``ChatEnv.tool_schemas``) so that ``get_json_schema`` derives that schema again; the method
takes the arguments as keywords and hands them to ``self._call_tool(name, arguments)``, so that
the environment, not Python, judges them (missing, extra or mistyped arguments get the
environment's error message, as in rk-agent's loop). `trl_tool_schema` is the schema TRL shows.

Main names: `tool_method`, `trl_tool_schema`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal

__all__ = ["tool_method", "trl_tool_schema"]


def _hint(schema: Mapping[str, Any]) -> Any:
    """A type hint that transformers' ``get_json_schema`` turns back into ``schema``."""
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if "anyOf" in schema:
        options = [_hint(option) for option in schema["anyOf"]]
        return _union(options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([_hint({"type": k}) for k in kind])
    if kind == "array":
        return list[_hint(schema["items"])] if "items" in schema else list  # type: ignore[misc]
    if kind == "object":
        values = schema.get("additionalProperties")
        return dict[str, _hint(values)] if isinstance(values, Mapping) else dict  # type: ignore[misc]
    plain: dict[str, Any] = {
        "string": str, "number": float, "integer": int, "boolean": bool, "null": type(None),
    }  # fmt: skip
    return plain.get(str(kind), Any)


def _union(options: list[Any]) -> Any:
    result = options[0]
    for option in options[1:]:
        result = result | option
    return result


def _one_line(text: str) -> str:
    return " ".join(text.split())


def tool_method(schema: Mapping[str, Any]) -> Callable[..., str]:
    """A method named like the tool whose signature and docstring give back its schema."""
    function = schema["function"]
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())

    def method(self: Any, **arguments: Any) -> str:
        return str(self._call_tool(name, arguments))

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = [_one_line(str(function.get("description") or name))]
    if properties:
        lines += ["", "Args:"]
    for argument, prop in properties.items():
        annotations[argument] = _hint(prop)
        default = inspect.Parameter.empty if argument in required else prop.get("default")
        signature.append(
            inspect.Parameter(
                argument,
                inspect.Parameter.KEYWORD_ONLY,  # any order of defaults; TRL passes keywords
                default=default,
                annotation=annotations[argument],
            )
        )
        lines.append(f"    {argument}: {_one_line(str(prop.get('description') or ''))}")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines) + "\n"
    method.__annotations__ = annotations  # no return hint: transformers would add it to the schema
    method.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    return method


def trl_tool_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema TRL shows the model for an environment tool (``env.tool_schemas`` item).

    It is what transformers' ``get_json_schema`` derives from the tool's method (the way TRL
    renders ``environment_factory`` tools): the same name, description, parameter types, enums,
    items, descriptions and required parameters, without what ``get_json_schema`` cannot write:
    ``additionalProperties: false``, ``format`` (e.g. ``"date"``) and ``default``; an optional
    parameter is written ``"nullable": true`` instead of ``anyOf [..., null]``. The environment
    still checks every call against its full schema when it runs it, as in rk-agent's loop.

    Example:
        >>> from rk_agent.envs.toolbox import weekday
        >>> trl_tool_schema(weekday.schema)["function"]["parameters"]["properties"]
        {'date': {'type': 'string', 'description': 'the date, as YYYY-MM-DD.'}}
    """
    from transformers.utils import get_json_schema

    return get_json_schema(tool_method(schema))
