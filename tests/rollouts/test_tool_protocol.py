"""The deprecated `rk_agent.rollouts.tool_protocol`: it warns, and its old names still work."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from rk_agent.tool_calls import HERMES
from rk_agent.types import FunctionCall, Message, ToolCall

CALL = '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'


def test_importing_the_old_module_warns_and_the_old_names_behave_as_hermes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "rk_agent.rollouts.tool_protocol", raising=False)
    message = (
        "rk_agent.rollouts.tool_protocol is deprecated; use rk_agent.tool_calls "
        '(get_tool_call_format("hermes") or HERMES: .parse, .render_messages, .render_call, '
        ".feedback)."
    )
    with pytest.warns(DeprecationWarning, match=re.escape(message)):
        old = importlib.import_module("rk_agent.rollouts.tool_protocol")
    reply = old.parse_tool_calls(CALL, None)
    assert isinstance(reply, old.ParsedReply)
    assert [c.function.name for c in reply.message.tool_calls or []] == ["add"]
    call = ToolCall(id="c", function=FunctionCall(name="add", arguments={"a": 1}))
    assert old.render_tool_call(call) == HERMES.render_call(call)
    history = [Message(role="user", content="1+1?")]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    assert old.to_text_messages(history, tools) == HERMES.render_messages(history, tools)
    assert old.render_tools_prompt(tools) == HERMES.render_tools_prompt(tools)
    assert old.parse_error_feedback("x") == HERMES.feedback("x")
    assert old.render_tool_response(Message(role="tool", content="2")) == (
        "<tool_response>\n2\n</tool_response>"
    )
    assert (old.TOOL_CALL_OPEN, old.TOOL_CALL_CLOSE) == ("<tool_call>", "</tool_call>")
    assert old.tool_names(tools) == ["add"]
