"""The Hermes format (``<tool_call>`` blocks): rendering, parsing, round trips, malformed calls.

These began as the tests of the module the format came from, unchanged but for the names:
the format must behave byte for byte as that module did.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rk_agent.policies.function_policy import tool_call
from rk_agent.tool_calls import HERMES, ParsedReply, tool_names
from rk_agent.types import FunctionCall, Message, ToolCall


def _schema(name: str, **properties: str) -> dict[str, Any]:
    props = {key: {"type": kind} for key, kind in properties.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": props, "required": list(props)},
        },
    }


TOOLS = [_schema("add", a="number", b="number"), _schema("lookup", key="string")]


def _calls(reply: ParsedReply) -> list[tuple[str, dict[str, Any]]]:
    assert reply.parse_error is None, reply.parse_error
    assert reply.message.tool_calls
    return [(c.function.name, c.function.parsed_arguments()) for c in reply.message.tool_calls]


# -- parsing what should parse ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>',
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
        '  \n<tool_call>   {"name":"add","arguments":{"a":1,"b":2}}   </tool_call>\n\n',
        '<tool_call>\n```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```\n</tool_call>',
        '<tool_call>```\n{"name": "add", "arguments": {"a": 1, "b": 2}}```</tool_call>',
        '```\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n```',
        '<tool_call>{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}</tool_call>',
        '<tool_call>{"name": "add", "parameters": {"a": 1, "b": 2}}</tool_call>',
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}',  # stopped before the tag
    ],
    ids=["plain", "newlines", "spaces", "fence-json", "fence-bare", "fence-outside",
         "string-args", "parameters", "unterminated"],
)  # fmt: skip
def test_one_call_parses_in_many_shapes(text: str) -> None:
    reply = HERMES.parse(text, TOOLS)
    assert _calls(reply) == [("add", {"a": 1, "b": 2})]
    assert reply.message.role == "assistant"
    assert reply.message.content is None


def test_several_calls_keep_their_order_and_get_distinct_ids() -> None:
    text = (
        "I will look it up and add.\n"
        '<tool_call>{"name": "lookup", "arguments": {"key": "x"}}</tool_call>\n'
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    )
    reply = HERMES.parse(text, TOOLS)
    assert _calls(reply) == [("lookup", {"key": "x"}), ("add", {"a": 1, "b": 2})]
    assert reply.message.content == "I will look it up and add."
    ids = [c.id for c in reply.message.tool_calls or []]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


def test_a_json_list_of_calls_in_one_block() -> None:
    text = '<tool_call>[{"name": "add", "arguments": {}}, {"name": "lookup"}]</tool_call>'
    assert _calls(HERMES.parse(text)) == [("add", {}), ("lookup", {})]


def test_missing_or_null_arguments_mean_no_arguments() -> None:
    assert _calls(HERMES.parse('<tool_call>{"name": "add"}</tool_call>')) == [("add", {})]
    text = '<tool_call>{"name": "add", "arguments": null}</tool_call>'
    assert _calls(HERMES.parse(text)) == [("add", {})]


def test_text_around_calls_becomes_the_content() -> None:
    text = 'Before.<tool_call>{"name": "add", "arguments": {}}</tool_call>After.'
    assert HERMES.parse(text).message.content == "Before.After."


def test_unicode_arguments_survive() -> None:
    text = '<tool_call>{"name": "lookup", "arguments": {"key": "Zürich 東京"}}</tool_call>'
    assert _calls(HERMES.parse(text, TOOLS)) == [("lookup", {"key": "Zürich 東京"})]


@pytest.mark.parametrize(
    "text",
    ["The answer is 42.", "", '{"name": "add", "arguments": {}}', "I could call <tool> now."],
)
def test_text_without_tool_call_tags_is_a_plain_answer(text: str) -> None:
    reply = HERMES.parse(text, TOOLS)
    assert reply.parse_error is None
    assert reply.message.tool_calls is None
    assert reply.message.content == text


def test_without_tools_any_name_is_accepted() -> None:
    reply = HERMES.parse('<tool_call>{"name": "anything", "arguments": {}}</tool_call>')
    assert _calls(reply) == [("anything", {})]


# -- malformed calls: a parse error, the raw text kept, never an exception -----------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<tool_call>{'name': 'add'}</tool_call>",
         "tool call 1: invalid JSON at char 1 (Expecting property name enclosed in double quotes)"),
        ('<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>',
         "tool call 1: invalid JSON at char 37 (Expecting property name enclosed in double"),
        ('<tool_call>{"name": "add", "arguments": {"a": 1}</tool_call>',
         "tool call 1: invalid JSON at char 37 (Expecting ',' delimiter)"),
        ('<tool_call>{"name": "add"} and more</tool_call>',
         "tool call 1: unexpected text after the JSON at char 15: ' and more'"),
        ("<tool_call></tool_call>", "tool call 1: empty <tool_call></tool_call> block"),
        ("<tool_call>  \n </tool_call>", "tool call 1: empty <tool_call></tool_call> block"),
        ("<tool_call>[]</tool_call>", "tool call 1: an empty list of calls"),
        ('<tool_call>"add"</tool_call>',
         'tool call 1: expected a JSON object {"name": ..., "arguments": {...}}, got a string'),
        ("<tool_call>42</tool_call>",
         'tool call 1: expected a JSON object {"name": ..., "arguments": {...}}, got a number'),
        ('<tool_call>{"arguments": {"a": 1}}</tool_call>',
         'tool call 1: missing "name" (a non-empty string) in {"arguments": {"a": 1}}'),
        ('<tool_call>{"name": "", "arguments": {}}</tool_call>',
         'tool call 1: missing "name" (a non-empty string) in {"name": "", "arguments": {}}'),
        ('<tool_call>{"name": 3}</tool_call>',
         'tool call 1: missing "name" (a non-empty string) in {"name": 3}'),
        ('<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>',
         'tool call 1: "arguments" must be a JSON object, got a list'),
        ('<tool_call>{"name": "add", "arguments": 5}</tool_call>',
         'tool call 1: "arguments" must be a JSON object, got a number'),
        ('<tool_call>{"name": "add", "arguments": "a=1"}</tool_call>',
         'tool call 1: "arguments" is a string that is not JSON (char 0: Expecting value)'),
        ('<tool_call>{"name": "ad", "arguments": {}}</tool_call>',
         "tool call 1: unknown tool 'ad'. Did you mean 'add'? Available: add, lookup."),
        ('<tool_call>{"name": "multiply", "arguments": {}}</tool_call>',
         "tool call 1: unknown tool 'multiply'. Available: add, lookup."),
        ('<tool_call>{"name": "add"}</tool_call><tool_call>{"name": "nope"}</tool_call>',
         "tool call 2: unknown tool 'nope'. Available: add, lookup."),
        ('<tool_call><tool_call>{"name": "add"}</tool_call>',
         "<tool_call> at char 11 opens inside another block"),
        ('{"name": "add"}</tool_call>', "</tool_call> at char 15 closes no <tool_call>"),
        ("<tool_call>", "tool call 1: empty <tool_call></tool_call> block"),
        ('<tool_call>{"name": "add", "arguments": {"a": 1', "tool call 1: invalid JSON at char 36"
         " (Expecting ',' delimiter)"),
    ],
)  # fmt: skip
def test_malformed_calls_give_a_precise_parse_error(text: str, error: str) -> None:
    reply = HERMES.parse(text, TOOLS)
    assert reply.parse_error is not None
    assert reply.parse_error.startswith(error), reply.parse_error
    assert reply.message.tool_calls is None  # all or nothing
    assert reply.message.content == text  # the raw text is kept


def test_one_bad_call_among_good_ones_drops_them_all() -> None:
    text = (
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"a": </tool_call>'
    )
    reply = HERMES.parse(text, TOOLS)
    assert reply.parse_error is not None and reply.parse_error.startswith("tool call 2: invalid")
    assert reply.message.tool_calls is None


def test_invalid_json_error_shows_the_offending_text() -> None:
    reply = HERMES.parse("<tool_call>{name: add}</tool_call>")
    assert reply.parse_error == (
        "tool call 1: invalid JSON at char 1 (Expecting property name enclosed in double quotes) "
        "in '{name: add}'"
    )


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>" * 50,
        "</tool_call>" * 3,
        "<tool_call>" + "[" * 5000 + "</tool_call>",  # deep nesting
        "<tool_call>" + "x" * 100_000 + "</tool_call>",
        "<tool_call>\x00\x01\x02</tool_call>",
        '<tool_call>{"name": "add", "arguments": {"a": NaN}}</tool_call>extra',
        "<tool_call>null</tool_call>",
        "<tool_call>true</tool_call>",
    ],
)
def test_adversarial_input_never_raises(text: str) -> None:
    reply = HERMES.parse(text, TOOLS)
    assert isinstance(reply, ParsedReply)
    assert reply.message.role == "assistant"
    if reply.parse_error is not None:
        assert reply.message.tool_calls is None
        assert reply.message.content == text
        assert len(reply.parse_error) < 600  # errors stay short enough to feed back


def test_deep_nesting_is_a_parse_error_not_a_recursion_crash() -> None:
    text = "<tool_call>" + "[" * 100_000 + "</tool_call>"
    reply = HERMES.parse(text)
    assert reply.parse_error == "tool call 1: invalid JSON: nested too deeply"


# -- rendering ---------------------------------------------------------------------------------


def test_rendered_call_parses_back_to_the_same_call() -> None:
    original = tool_call("add", {"a": 1.5, "b": [1, {"c": "d"}]}, call_id="call_x")
    assert original.tool_calls is not None
    rendered = HERMES.render_call(original.tool_calls[0])
    assert rendered.startswith("<tool_call>\n") and rendered.endswith("\n</tool_call>")
    assert _calls(HERMES.parse(rendered, TOOLS)) == [("add", {"a": 1.5, "b": [1, {"c": "d"}]})]


def test_rendering_keeps_broken_arguments_as_a_string() -> None:
    call = ToolCall(id="c", function=FunctionCall(name="add", arguments="{oops"))
    body = json.loads(HERMES.render_call(call).split("\n")[1])
    assert body == {"name": "add", "arguments": "{oops"}


def test_round_trip_of_a_whole_assistant_turn() -> None:
    message = Message(
        role="assistant",
        content="Let me compute.",
        tool_calls=[
            ToolCall(id="a", function=FunctionCall(name="add", arguments={"a": 1, "b": 2})),
            ToolCall(id="b", function=FunctionCall(name="lookup", arguments={"key": "k"})),
        ],
    )
    text = HERMES.render_messages([message], None)[0]["content"]
    reply = HERMES.parse(text, TOOLS)
    assert reply.message.content == "Let me compute."
    assert _calls(reply) == [("add", {"a": 1, "b": 2}), ("lookup", {"key": "k"})]


def test_tools_prompt_has_the_schemas_and_the_format() -> None:
    prompt = HERMES.render_tools_prompt(TOOLS)
    assert "<tools>" in prompt and "</tools>" in prompt
    for tool in TOOLS:
        assert json.dumps(tool) in prompt
    example = '{"name": "<tool-name>", "arguments": {"<argument-name>": <value>}}'
    assert f"<tool_call>\n{example}\n</tool_call>" in prompt
    assert "<tool_response>" in prompt


def test_text_messages_append_tools_to_the_system_prompt() -> None:
    messages = [Message(role="system", content="Be exact."), Message(role="user", content="Hi")]
    out = HERMES.render_messages(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user"]
    assert out[0]["content"].startswith("Be exact.\n\n# Tools\n")
    assert out[1] == {"role": "user", "content": "Hi"}


def test_text_messages_add_a_system_prompt_when_there_is_none() -> None:
    out = HERMES.render_messages([Message(role="user", content="Hi")], TOOLS)
    assert out[0]["role"] == "system" and out[0]["content"].startswith("# Tools\n")
    assert HERMES.render_messages([Message(role="user", content="Hi")], None) == [
        {"role": "user", "content": "Hi"}
    ]


def test_text_messages_turn_calls_and_results_into_plain_turns() -> None:
    messages = [
        Message(role="developer", content="Rules."),
        Message(role="user", content="1+2 and k?"),
        Message(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(id="a", function=FunctionCall(name="add", arguments={"a": 1, "b": 2})),
                ToolCall(id="b", function=FunctionCall(name="lookup", arguments={"key": "k"})),
            ],
        ),
        Message(role="tool", content="3", tool_call_id="a"),
        Message(role="tool", content="v", tool_call_id="b"),
        Message(role="assistant", content="3 and v."),
    ]
    out = HERMES.render_messages(messages, None)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[2]["content"] == (
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
        '<tool_call>\n{"name": "lookup", "arguments": {"key": "k"}}\n</tool_call>'
    )
    assert out[3]["content"] == (
        "<tool_response>\n3\n</tool_response>\n<tool_response>\nv\n</tool_response>"
    )
    assert out[4] == {"role": "assistant", "content": "3 and v."}


def test_tool_names_reads_openai_and_bare_schemas() -> None:
    assert tool_names(TOOLS) == ["add", "lookup"]
    assert tool_names([{"name": "bare"}, {"type": "function"}]) == ["bare"]
    assert tool_names(None) == []


def test_parse_error_feedback_names_the_error_and_the_format() -> None:
    feedback = HERMES.feedback('tool call 1: missing "name"')
    assert feedback.startswith('Your tool call could not be read: tool call 1: missing "name"\n')
    assert '<tool_call>{"name": "<tool-name>", "arguments": {...}}</tool_call>' in feedback
