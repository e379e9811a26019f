"""The format registry, and what every registered format promises (render -> parse round trip)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from rk_agent.errors import ConfigError, UnknownNameError
from rk_agent.tool_calls import (
    DEFAULT_TOOL_CALL_FORMAT,
    HERMES,
    LLAMA3_JSON,
    ParsedReply,
    ToolCallFormat,
    get_tool_call_format,
    register_tool_call_format,
    registry,
    tool_call_format_names,
)
from rk_agent.types import FunctionCall, Message, ToolCall

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {}}}]


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_FORMATS", dict(registry._FORMATS))


def test_formats_by_name_and_the_default() -> None:
    assert tool_call_format_names() == ["hermes", "llama3_json"]
    assert get_tool_call_format("hermes") is HERMES
    assert get_tool_call_format("llama3_json") is LLAMA3_JSON
    assert get_tool_call_format() is HERMES and DEFAULT_TOOL_CALL_FORMAT == "hermes"
    assert get_tool_call_format(LLAMA3_JSON) is LLAMA3_JSON  # a format passes through


def test_an_unknown_name_suggests_the_closest() -> None:
    message = (
        "unknown tool-call format 'llama3'. Did you mean 'llama3_json'? "
        "Known tool-call formats: hermes, llama3_json."
    )
    with pytest.raises(UnknownNameError, match=f"^{re.escape(message)}$"):
        get_tool_call_format("llama3")
    with pytest.raises(ConfigError, match=re.escape("unknown tool-call format 'xml'. Known")):
        get_tool_call_format("xml")


class _Bracket:
    """A toy format: ``[[name]]`` calls a tool without arguments."""

    name = "bracket"

    def render_tools_prompt(self, tools: Sequence[dict[str, Any]]) -> str:
        return "Call a tool with [[name]]."

    def render_messages(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.text} for m in messages]

    def parse(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> ParsedReply:
        if text.startswith("[[") and text.endswith("]]"):
            call = ToolCall(id="c", function=FunctionCall(name=text[2:-2]))
            return ParsedReply(Message(role="assistant", tool_calls=[call]))
        return ParsedReply(Message(role="assistant", content=text))

    def render_call(self, call: ToolCall) -> str:
        return f"[[{call.function.name}]]"

    def feedback(self, parse_error: str) -> str:
        return parse_error


def test_a_registered_format_is_found_by_name() -> None:
    register_tool_call_format(_Bracket())
    assert tool_call_format_names() == ["bracket", "hermes", "llama3_json"]
    assert get_tool_call_format("bracket").parse("[[add]]").message.tool_calls


def test_registering_a_taken_name_or_a_non_format_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("'hermes' is already registered; pass")):
        register_tool_call_format(HERMES)
    register_tool_call_format(HERMES, overwrite=True)
    with pytest.raises(ConfigError, match=re.escape("a tool-call format needs a `name` and")):
        register_tool_call_format(object())  # type: ignore[arg-type]  # the point of the test


# -- every built-in format --------------------------------------------------------------------

FORMATS = [HERMES, LLAMA3_JSON]


@pytest.mark.parametrize("tool_format", FORMATS, ids=lambda f: f.name)
def test_is_a_tool_call_format(tool_format: ToolCallFormat) -> None:
    assert isinstance(tool_format, ToolCallFormat)


@pytest.mark.parametrize("tool_format", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize(
    "arguments",
    [{}, {"a": 1}, {"a": 1.5, "b": [1, {"c": "d"}], "t": 'Zürich 東京\n"q"', "n": None}],
)
def test_rendered_calls_parse_back_to_the_same_calls(
    tool_format: ToolCallFormat, arguments: dict[str, Any]
) -> None:
    calls = [
        ToolCall(id="a", function=FunctionCall(name="add", arguments=arguments)),
        ToolCall(id="b", function=FunctionCall(name="add", arguments={"x": 2})),
    ]
    for content in (None, "Let me add."):
        message = Message(role="assistant", content=content, tool_calls=calls)
        (turn,) = tool_format.render_messages([message], None)
        reply = tool_format.parse(turn["content"], TOOLS)
        assert reply.parse_error is None, reply.parse_error
        assert reply.message.content == content
        parsed = [
            (c.function.name, c.function.parsed_arguments()) for c in reply.message.tool_calls or []
        ]
        assert parsed == [("add", arguments), ("add", {"x": 2})]
        one = tool_format.parse(tool_format.render_call(calls[0]), TOOLS)
        assert [c.function.parsed_arguments() for c in one.message.tool_calls or []] == [arguments]


@pytest.mark.parametrize("tool_format", FORMATS, ids=lambda f: f.name)
def test_tools_go_into_the_system_prompt(tool_format: ToolCallFormat) -> None:
    out = tool_format.render_messages([Message(role="user", content="Hi")], TOOLS)
    assert out[0] == {"role": "system", "content": tool_format.render_tools_prompt(TOOLS)}
    assert out[1] == {"role": "user", "content": "Hi"}
    assert tool_format.render_messages([Message(role="user", content="Hi")], None) == [
        {"role": "user", "content": "Hi"}
    ]


@pytest.mark.parametrize("tool_format", FORMATS, ids=lambda f: f.name)
def test_feedback_quotes_the_parse_error(tool_format: ToolCallFormat) -> None:
    error = tool_format.parse("<|python_tag|><tool_call>{oops", TOOLS).parse_error
    assert error is not None
    assert error in tool_format.feedback(error)


@pytest.mark.parametrize("module", ["", ".base", ".hermes", ".llama", ".registry"])
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(f"rk_agent.tool_calls{module}"))
    assert failures == 0 and tried > 0
