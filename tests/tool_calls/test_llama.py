"""The Llama 3 JSON format: realistic Llama 3.x replies, malformed calls, rendering, round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rk_agent.tool_calls import LLAMA3_JSON, ParsedReply
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


TOOLS = [_schema("get_weather", city="string"), _schema("get_time", zone="string")]
PARIS = {"city": "Paris"}


def _calls(reply: ParsedReply) -> list[tuple[str, dict[str, Any]]]:
    assert reply.parse_error is None, reply.parse_error
    assert reply.message.tool_calls
    return [(c.function.name, c.function.parsed_arguments()) for c in reply.message.tool_calls]


# -- what Llama 3.x models write ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # Llama 3.1/3.3 Instruct with the JSON tool prompt: the call is the whole reply
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        # decoded without skipping special tokens: <|python_tag|> ... <|eom_id|>
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>',
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>',
        # Llama 3.2 1B/3B often put "type" first
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
        # pretty-printed over several lines
        '{\n    "name": "get_weather",\n    "parameters": {\n        "city": "Paris"\n    }\n}',
        # fenced, as chat-tuned fine-tunes like to
        '```json\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```',
        '```\n{"name": "get_weather", "parameters": {"city": "Paris"}}',  # fence never closed
        # OpenAI's key name, and arguments as a JSON string
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"name": "get_weather", "parameters": "{\\"city\\": \\"Paris\\"}"}',
        # a list of one
        '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        "  \n" + '{"name": "get_weather", "parameters": {"city": "Paris"}}' + "\n\n",
    ],
    ids=["plain", "python-tag-eom", "python-tag-eot", "type-first", "pretty", "fence",
         "fence-open", "arguments", "string-args", "list", "whitespace"],
)  # fmt: skip
def test_one_call_parses_in_the_shapes_llama_models_write(text: str) -> None:
    reply = LLAMA3_JSON.parse(text, TOOLS)
    assert _calls(reply) == [("get_weather", PARIS)]
    assert reply.message.role == "assistant" and reply.message.content is None


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "get_time", "parameters": {"zone": "CET"}}',  # vLLM's separator
        '{"name": "get_weather", "parameters": {"city": "Paris"}}\n'
        '{"name": "get_time", "parameters": {"zone": "CET"}}',  # what the prompt asks for
        '[{"name": "get_weather", "parameters": {"city": "Paris"}}, '
        '{"name": "get_time", "parameters": {"zone": "CET"}}]',
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'
        '<|python_tag|>{"name": "get_time", "parameters": {"zone": "CET"}}<|eom_id|>',
    ],
    ids=["semicolon", "lines", "list", "python-tags"],
)
def test_several_calls_keep_their_order_and_get_distinct_ids(text: str) -> None:
    reply = LLAMA3_JSON.parse(text, TOOLS)
    assert _calls(reply) == [("get_weather", PARIS), ("get_time", {"zone": "CET"})]
    ids = [c.id for c in reply.message.tool_calls or []]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


def test_text_before_the_call_becomes_the_content() -> None:
    text = 'I will check the weather.\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}'
    reply = LLAMA3_JSON.parse(text, TOOLS)
    assert _calls(reply) == [("get_weather", PARIS)]
    assert reply.message.content == "I will check the weather."
    tagged = LLAMA3_JSON.parse('Checking.<|python_tag|>{"name": "get_time"}', TOOLS)
    assert tagged.message.content == "Checking." and _calls(tagged) == [("get_time", {})]


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Paris is sunny, 21 °C.",
        "",
        '{"answer": 4}',  # JSON, but not a call: its first key is not "name"
        'Call it as {"name": "get_weather"} if you like.',  # not at the start of a line
        "The function name is get_weather.",
    ],
)
def test_text_without_a_call_is_a_plain_answer(text: str) -> None:
    reply = LLAMA3_JSON.parse(text, TOOLS)
    assert reply.parse_error is None
    assert reply.message.tool_calls is None
    assert reply.message.content == text


def test_without_tools_any_name_is_accepted() -> None:
    assert _calls(LLAMA3_JSON.parse('{"name": "anything"}')) == [("anything", {})]


# -- malformed calls ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"name": "get_weather", "parameters": {"city": "Paris"}',  # cut off by max_tokens
         "tool call 1: invalid JSON at char 55 (Expecting ',' delimiter)"),
        ("{'name': 'get_weather', 'parameters': {'city': 'Paris'}}",
         "tool call 1: invalid JSON at char 1 (Expecting property name enclosed in double quotes)"),
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}\nIt should be sunny.',
         "unexpected text after the call at char 57: 'It should be sunny.'; a reply that calls "
         "a function holds only the call(s)"),
        ('{"name": "get_weather"}; {"name": "get_time", "parameters": {"zone": 1',
         "tool call 2: invalid JSON at char 45 (Expecting ',' delimiter)"),
        ("<|python_tag|>", 'no call where one starts: expected {"name": ..., "parameters": {...}}'),
        ("<|python_tag|>[]", 'no call where one starts: expected {"name": ..., "parameters": '),
        ("<|python_tag|>get_weather(city='Paris')",
         "unexpected text after the call at char 0: \"get_weather(city='Paris')\""),
        ('<|python_tag|>"get_weather"',
         "unexpected text after the call at char 0: '\"get_weather\"'"),
        ("<|python_tag|>[42]",
         'tool call 1: expected a JSON object {"name": ..., "parameters": {...}}, got a number'),
        ('{"name": "", "parameters": {}}',
         'tool call 1: missing "name" (a non-empty string) in {"name": "", "parameters": {}}'),
        ('{"name": "get_weather", "parameters": ["Paris"]}',
         'tool call 1: "arguments" must be a JSON object, got a list'),
        ('{"name": "get_wether", "parameters": {"city": "Paris"}}',
         "tool call 1: unknown tool 'get_wether'. Did you mean 'get_weather'? Available: "
         "get_weather, get_time."),
        ('{"name": "get_weather"}\n{"name": "search"}',
         "tool call 2: unknown tool 'search'. Available: get_weather, get_time."),
    ],
)  # fmt: skip
def test_malformed_calls_give_a_precise_parse_error(text: str, error: str) -> None:
    reply = LLAMA3_JSON.parse(text, TOOLS)
    assert reply.parse_error is not None
    assert reply.parse_error.startswith(error), reply.parse_error
    assert reply.message.tool_calls is None  # all or nothing
    assert reply.message.content == text  # the raw text is kept


@pytest.mark.parametrize(
    "text",
    [
        "<|python_tag|>" * 50,
        "{" * 5000,
        '{"name": ' + "[" * 100_000,
        '{"name": "x", "parameters": ' + "x" * 100_000,
        "<|python_tag|>\x00\x01\x02",
        '{"name": "get_weather", "parameters": {"a": NaN}} trailing',
        "<|python_tag|>null",
        "<|eom_id|>",
    ],
)
def test_adversarial_input_never_raises(text: str) -> None:
    reply = LLAMA3_JSON.parse(text, TOOLS)
    assert isinstance(reply, ParsedReply)
    if reply.parse_error is not None:
        assert reply.message.tool_calls is None
        assert reply.message.content == text
        assert len(reply.parse_error) < 600  # errors stay short enough to feed back


# -- rendering ---------------------------------------------------------------------------------


def test_a_call_renders_as_llama_writes_it() -> None:
    call = ToolCall(id="c", function=FunctionCall(name="get_weather", arguments=PARIS))
    assert LLAMA3_JSON.render_call(call) == (
        '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    )
    broken = ToolCall(id="c", function=FunctionCall(name="get_weather", arguments="{oops"))
    assert json.loads(LLAMA3_JSON.render_call(broken)) == {
        "name": "get_weather",
        "parameters": "{oops",
    }


def test_tools_prompt_has_the_schemas_and_the_format() -> None:
    prompt = LLAMA3_JSON.render_tools_prompt(TOOLS)
    for tool in TOOLS:
        assert json.dumps(tool, indent=4) in prompt
    assert (
        '{"name": function name, "parameters": dictionary of argument name and its value}' in prompt
    )
    assert '{"name": "<function-name>", "parameters": {"<argument-name>": <value>}}' in prompt


def test_messages_render_as_plain_turns() -> None:
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather and time in Paris?"),
        Message(
            role="assistant",
            content="Checking both.",
            tool_calls=[
                ToolCall(id="a", function=FunctionCall(name="get_weather", arguments=PARIS)),
                ToolCall(id="b", function=FunctionCall(name="get_time", arguments={"zone": "CET"})),
            ],
        ),
        Message(role="tool", content="sunny", tool_call_id="a"),
        Message(role="tool", content="12:00", tool_call_id="b"),
    ]
    out = LLAMA3_JSON.render_messages(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("Be brief.\n\n# Tools\n")
    assert out[2]["content"] == (
        "Checking both.\n"
        '{"name": "get_weather", "parameters": {"city": "Paris"}}\n'
        '{"name": "get_time", "parameters": {"zone": "CET"}}'
    )
    assert out[3]["content"] == "Tool result:\nsunny\n\nTool result:\n12:00"
    # the rendered assistant turn reads back as the same message
    reply = LLAMA3_JSON.parse(out[2]["content"], TOOLS)
    assert reply.message.content == "Checking both."
    assert _calls(reply) == [("get_weather", PARIS), ("get_time", {"zone": "CET"})]


def test_feedback_names_the_error_and_the_format() -> None:
    feedback = LLAMA3_JSON.feedback('tool call 1: missing "name"')
    assert feedback == (
        'Your function call could not be read: tool call 1: missing "name"\n'
        'Call a function with only a JSON object, {"name": "<function-name>", '
        '"parameters": {...}}, or answer in plain text.'
    )
