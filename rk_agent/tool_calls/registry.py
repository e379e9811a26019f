"""Tool-call formats by name: the built-in ones, and the ones users register.

Main names:
    get_tool_call_format: a name (or a format) -> the `ToolCallFormat`.
    register_tool_call_format: add a format under its ``name``.
    tool_call_format_names: the registered names.
    DEFAULT_TOOL_CALL_FORMAT: ``"hermes"``, what policies, trainers and rewards use unless
        told otherwise (and an environment's feedback when no loop names a format).

Example:
    >>> get_tool_call_format("llama3_json")
    Llama3JsonFormat()
"""

from __future__ import annotations

from rk_agent.errors import ConfigError, UnknownNameError
from rk_agent.tool_calls.base import ToolCallFormat
from rk_agent.tool_calls.hermes import HERMES
from rk_agent.tool_calls.llama import LLAMA3_JSON

__all__ = [
    "DEFAULT_TOOL_CALL_FORMAT",
    "get_tool_call_format",
    "register_tool_call_format",
    "tool_call_format_names",
]

DEFAULT_TOOL_CALL_FORMAT = "hermes"
"""The format used when none is chosen: Hermes-style ``<tool_call>`` blocks."""

_FORMATS: dict[str, ToolCallFormat] = {HERMES.name: HERMES, LLAMA3_JSON.name: LLAMA3_JSON}


def get_tool_call_format(name: str | ToolCallFormat | None = None) -> ToolCallFormat:
    """The tool-call format called ``name``; a format passes through; ``None``: the default.

    Raises:
        UnknownNameError: no format has that name (the message suggests the closest one).

    Example:
        >>> get_tool_call_format().name
        'hermes'
        >>> get_tool_call_format("hermess")
        Traceback (most recent call last):
        ...
        rk_agent.errors.UnknownNameError: unknown tool-call format 'hermess'. Did you mean 'hermes'? Known tool-call formats: hermes, llama3_json.
    """  # noqa: E501  # a doctest's expected output is one line
    if name is None:
        name = DEFAULT_TOOL_CALL_FORMAT
    if not isinstance(name, str):
        return name
    try:
        return _FORMATS[name]
    except KeyError:
        raise UnknownNameError("tool-call format", name, _FORMATS) from None


def register_tool_call_format(tool_format: ToolCallFormat, *, overwrite: bool = False) -> None:
    """Make ``tool_format`` available under its ``name``.

    Raises:
        ConfigError: the object is not a `ToolCallFormat`, or the name is taken (pass
            ``overwrite=True`` to replace it).
    """
    if not isinstance(tool_format, ToolCallFormat) or not isinstance(tool_format.name, str):
        raise ConfigError(
            "a tool-call format needs a `name` and the methods render_tools_prompt, "
            f"render_messages, parse, render_call and feedback; got {tool_format!r}."
        )
    if tool_format.name in _FORMATS and not overwrite:
        raise ConfigError(
            f"a tool-call format named {tool_format.name!r} is already registered; "
            "pass overwrite=True to replace it."
        )
    _FORMATS[tool_format.name] = tool_format


def tool_call_format_names() -> list[str]:
    """The registered format names, sorted."""
    return sorted(_FORMATS)
