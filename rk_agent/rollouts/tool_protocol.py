"""Deprecated: the text tool-call protocol moved to `rk_agent.tool_calls`.

The ``<tool_call>`` format is now one `rk_agent.tool_calls.ToolCallFormat` among others,
`rk_agent.tool_calls.HERMES`; this module keeps the old names working and warns on import.

Old name -> new one:
    parse_tool_calls(text, tools) -> ``HERMES.parse(text, tools)``
    render_tools_prompt(tools) -> ``HERMES.render_tools_prompt(tools)``
    to_text_messages(messages, tools) -> ``HERMES.render_messages(messages, tools)``
    render_tool_call(call) -> ``HERMES.render_call(call)``
    render_tool_response(message) -> ``HERMES.render_result(message)``
    parse_error_feedback(error) -> ``HERMES.feedback(error)``
    ParsedReply, tool_names, TOOL_CALL_OPEN, TOOL_CALL_CLOSE -> `rk_agent.tool_calls`
"""

from __future__ import annotations

import warnings

from rk_agent.tool_calls.base import ParsedReply, tool_names
from rk_agent.tool_calls.hermes import HERMES, TOOL_CALL_CLOSE, TOOL_CALL_OPEN

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "ParsedReply",
    "parse_error_feedback",
    "parse_tool_calls",
    "render_tool_call",
    "render_tool_response",
    "render_tools_prompt",
    "to_text_messages",
    "tool_names",
]

warnings.warn(
    "rk_agent.rollouts.tool_protocol is deprecated; use rk_agent.tool_calls "
    '(get_tool_call_format("hermes") or HERMES: .parse, .render_messages, .render_call, '
    ".feedback).",
    DeprecationWarning,
    stacklevel=2,
)

parse_tool_calls = HERMES.parse
render_tools_prompt = HERMES.render_tools_prompt
to_text_messages = HERMES.render_messages
render_tool_call = HERMES.render_call
render_tool_response = HERMES.render_result
parse_error_feedback = HERMES.feedback
