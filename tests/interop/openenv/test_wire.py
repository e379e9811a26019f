"""How rk-agent reads OpenEnv's wire format: the payloads below are what openenv 0.10.0's own
server sent (``create_app`` serving `openenv_envs.py`'s games), recorded as they came."""

from __future__ import annotations

import re

import pytest

from rk_agent.errors import ConfigError
from rk_agent.interop.openenv.answers import SCHEMA
from rk_agent.interop.openenv.wire import (
    ActionSchema,
    endpoints,
    listed_tools,
    observation_messages,
    read_action_schema,
    reward_of,
    tool_result,
    tool_schemas,
)
from rk_agent.types import Message

METADATA = {"additionalProperties": True, "type": "object", "title": "Metadata"}
CALL_TOOL_ACTION = {  # MCPEnvironment served with action_cls=CallToolAction
    "properties": {
        "metadata": METADATA,
        "type": {"const": "call_tool", "default": "call_tool", "type": "string"},
        "tool_name": {"type": "string"}, "arguments": {"type": "object"},
    },
    "required": ["tool_name"], "title": "CallToolAction", "type": "object",
}  # fmt: skip
WORD_ACTION = {  # a TextArena-style action
    "properties": {"metadata": METADATA, "message": {"title": "Message", "type": "string"}},
    "required": ["message"], "title": "WordAction", "type": "object",
}  # fmt: skip
BARE_ACTION = {"properties": {"metadata": METADATA}, "title": "Action", "type": "object"}


@pytest.mark.parametrize(
    ("schema", "read"),
    [
        (CALL_TOOL_ACTION, ActionSchema(text_field=None, tools=True)),
        (WORD_ACTION, ActionSchema(text_field="message", tools=False)),
        (BARE_ACTION, ActionSchema(text_field=None, tools=True)),
        (SCHEMA["action"], ActionSchema(text_field="message", tools=True)),  # rk-agent's server
        ({"properties": {"code": {"type": "string"}, "lang": {"type": "string"}},
          "required": ["code"]}, ActionSchema(text_field="code", tools=False)),
        ({"properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
         ActionSchema(text_field=None, tools=False)),
        ({"$defs": {"W": WORD_ACTION}, "oneOf": [{"$ref": "#/$defs/W"}, CALL_TOOL_ACTION]},
         ActionSchema(text_field="message", tools=True)),
    ],
)  # fmt: skip
def test_the_action_schema_says_whether_it_takes_tools_and_which_field_is_text(
    schema: dict, read: ActionSchema
) -> None:
    assert read_action_schema(schema) == read


def test_a_named_text_field_must_be_a_string_field() -> None:
    two = {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert read_action_schema(two, "b") == ActionSchema(text_field="b", tools=False)
    message = (
        "action_field 'c' is not a string field of the server's action (its string fields: a, b)."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        read_action_schema(two, "c")


def test_observations_as_messages() -> None:
    guess_reset = {"observation": {"metadata": {"prompt": "Find the secret number."}},
                   "reward": None, "done": False,
                   "metadata": {"prompt": "Find the secret number."}}  # fmt: skip
    assert observation_messages(guess_reset) == [
        Message(role="user", content="Find the secret number.")
    ]
    prompt = "Guess the five-letter word."
    words_reset = {"observation": {"metadata": {}, "prompt": prompt, "messages": [
        {"sender_id": -1, "content": prompt, "category": "PROMPT"}]}}  # fmt: skip
    assert observation_messages(words_reset) == [Message(role="user", content=prompt)]
    said = {"sender_id": -1, "content": "crane: XXGYX", "category": "FEEDBACK"}
    feedback = {"observation": {"metadata": {}, "prompt": "", "messages": [said]}, "reward": 0.2}
    assert observation_messages(feedback)[0].text == "crane: XXGYX"
    textarena_start = {"observation": {"prompt": "Rules.", "messages": [{"content": "Turn 1"}]}}
    assert observation_messages(textarena_start)[0].text == "Rules.\nTurn 1"
    chat = {"observation": {"messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "2+2?"}]}}  # fmt: skip
    assert observation_messages(chat) == [Message(role="system", content="Be brief."),
                                          Message(role="user", content="2+2?")]  # fmt: skip
    echo = {"observation": {"echoed_message": "hi", "message_length": 2, "metadata": {}}}
    assert observation_messages(echo)[0].text == '{"echoed_message": "hi", "message_length": 2}'
    assert observation_messages(echo, "echoed_message")[0].text == "hi"
    assert observation_messages({"observation": {}})[0].text == "(the environment sent no text)"


def test_tool_lists_and_results() -> None:
    listed = {"observation": {"metadata": {}, "tools": [
        {"name": "guess", "description": "Guess the secret number (1 to 100).",
         "input_schema": {"additionalProperties": False, "properties": {"n": {"type": "integer"}},
                          "required": ["n"], "type": "object"}}]}}  # fmt: skip
    assert tool_schemas(listed) == [{"type": "function", "function": {
        "name": "guess", "description": "Guess the secret number (1 to 100).",
        "parameters": {"additionalProperties": False, "properties": {"n": {"type": "integer"}},
                       "required": ["n"], "type": "object"}}}]  # fmt: skip
    result = {
        "content": [{"type": "text", "text": "lower", "annotations": None, "meta": None}],
        "structured_content": {"result": "lower"}, "meta": {"fastmcp": {"wrap_result": True}},
        "data": "lower", "is_error": False,
    }  # fmt: skip
    ok = {"observation": {"metadata": {}, "tool_name": "guess", "result": result, "error": None},
          "reward": -0.1, "done": False}  # fmt: skip
    assert (tool_result(ok).content, tool_result(ok).ok) == ("lower", True)
    assert reward_of(ok) == -0.1 and reward_of({"reward": True}) == 1.0
    assert reward_of({"reward": None}) is None and reward_of({"reward": "1"}) is None
    missing = {"observation": {"tool_name": "nope", "result": None, "error": {
        "error_type": "tool_not_found", "message": "Unknown tool: 'nope'"}}}  # fmt: skip
    result = tool_result(missing)
    assert (result.content, result.ok, result.error_kind) == (
        "Error: Unknown tool: 'nope'", False, "unknown_tool")  # fmt: skip
    failed = {"observation": {"result": {"content": [{"type": "text", "text": "boom"}],
                                         "is_error": True}}}  # fmt: skip
    assert (tool_result(failed).content, tool_result(failed).ok) == ("boom", False)


@pytest.mark.parametrize(
    ("url", "ws", "http"),
    [
        ("ws://127.0.0.1:8000", "ws://127.0.0.1:8000/ws", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "ws://127.0.0.1:8000/ws", "http://127.0.0.1:8000"),
        ("https://me-env.hf.space/ws", "wss://me-env.hf.space/ws", "https://me-env.hf.space"),
        ("wss://host/prefix", "wss://host/prefix/ws", "https://host/prefix"),
    ],
)
def test_endpoints(url: str, ws: str, http: str) -> None:
    ends = endpoints(url)
    assert (ends.ws, ends.http) == (ws, http)


def test_tools_listed_by_a_reset_are_read_when_they_have_list_tools_shape() -> None:
    listed = {"observation": {"episode_tools": [
        {"name": "guess", "description": "Guess.", "input_schema": {"type": "object"}},
        {"name": "parity", "inputSchema": {"type": "object", "properties": {}}},
    ]}}  # fmt: skip
    assert listed_tools(listed) == [
        {"type": "function", "function": {"name": "guess", "description": "Guess.",
                                          "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "parity", "description": "",
                                          "parameters": {"type": "object", "properties": {}}}},
    ]  # fmt: skip
    assert listed_tools({"observation": {"episode_tools": []}}) == []
    # Anything else is not a listing: the client asks with a list_tools step.
    others = [{}, {"tools": []}, {"episode_tools": ["guess"]}, {"episode_tools": "guess"},
              {"episode_tools": [{"name": "guess"}]}]  # fmt: skip
    for observation in others:
        assert listed_tools({"observation": observation}) is None
