"""`ChatEnv.tool_call_format`: the text format whose feedback follows a malformed call."""

from __future__ import annotations

import re

import pytest

from rk_agent.errors import UnknownNameError
from rk_agent.tool_calls import HERMES, LLAMA3_JSON
from tests.rollouts.toy import AddEnv


class LlamaAddEnv(AddEnv):
    tool_call_format = "llama3_json"


class MisspeltAddEnv(AddEnv):
    tool_call_format = "llama"


def test_the_default_feedback_is_hermes() -> None:
    env = AddEnv()
    env.reset(seed=0)
    result = env.reject_turn({"role": "assistant", "content": "<tool_call>{"}, "invalid JSON")
    assert result.messages[0].text == HERMES.feedback("invalid JSON")


def test_an_env_in_another_format_gives_that_formats_feedback() -> None:
    env = LlamaAddEnv()
    env.reset(seed=0)
    error = LLAMA3_JSON.parse('{"name": "add", "parameters": {', env.tool_schemas).parse_error
    assert error is not None
    result = env.reject_turn({"role": "assistant", "content": "{"}, error)
    assert result.messages[0].text == LLAMA3_JSON.feedback(error)
    assert result.messages[0].text.startswith("Your function call could not be read: tool call 1")


def test_a_misspelt_format_fails_with_a_suggestion() -> None:
    env = MisspeltAddEnv()
    env.reset(seed=0)
    message = "unknown tool-call format 'llama'. Did you mean 'llama3_json'?"
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        env.reject_turn({"role": "assistant", "content": "{"}, "bad")
