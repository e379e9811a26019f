"""`ChatEnv.reject_turn`'s ``tool_format``: the feedback after a malformed call is the note of
the format the policy read the reply with; the environment has no format of its own."""

from __future__ import annotations

import re

import pytest

from rk_agent.errors import UnknownNameError
from rk_agent.tool_calls import HERMES, LLAMA3_JSON, ToolCallFormat
from tests.rollouts.toy import AddEnv


def test_without_a_format_the_feedback_is_the_default_formats() -> None:
    env = AddEnv()
    env.reset(seed=0)
    result = env.reject_turn({"role": "assistant", "content": "<tool_call>{"}, "invalid JSON")
    assert result.messages[0].text == HERMES.feedback("invalid JSON")


@pytest.mark.parametrize("tool_format", [LLAMA3_JSON, "llama3_json"])
def test_the_feedback_is_the_note_of_the_format_the_reply_was_read_with(
    tool_format: str | ToolCallFormat,
) -> None:
    env = AddEnv()
    env.reset(seed=0)
    error = LLAMA3_JSON.parse('{"name": "add", "parameters": {', env.tool_schemas).parse_error
    assert error is not None
    result = env.reject_turn({"role": "assistant", "content": "{"}, error, tool_format=tool_format)
    assert result.messages[0].text == LLAMA3_JSON.feedback(error)
    assert result.messages[0].text.startswith("Your function call could not be read: tool call 1")


def test_the_gymnasium_wrapper_takes_the_format_too() -> None:
    env = AddEnv()
    env.reset(seed=0)
    env.reject({"role": "assistant", "content": "{"}, "bad", tool_format="llama3_json")
    assert env.conversation[-1].text == LLAMA3_JSON.feedback("bad")


def test_a_misspelt_format_fails_with_a_suggestion() -> None:
    env = AddEnv()
    env.reset(seed=0)
    message = "unknown tool-call format 'llama'. Did you mean 'llama3_json'?"
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        env.reject_turn({"role": "assistant", "content": "{"}, "bad", tool_format="llama")
