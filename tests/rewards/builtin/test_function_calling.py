"""Tests for rk_agent.rewards.builtin.function_calling: match_function_call and tool_calls_match."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.function_calling import match_function_call, tool_calls_match
from rk_agent.rewards.builtin.json_schema import parse_json_response
from rk_agent.rewards.function import RewardFunction
from rk_agent.types import EvaluateResult, ToolCall

USER = {"role": "user", "content": "What's the weather in Paris, in celsius?"}
WEATHER = {
    "name": "get_weather",
    "arguments": {"location": {"type": "string"}, "unit": {"type": "string"}},
}


def tool_call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def call_score(**kwargs: Any) -> EvaluateResult:
    kwargs.setdefault("messages", [USER])
    kwargs.setdefault("expected_call_schema", WEATHER)
    return match_function_call(**kwargs)


# --------------------------------------------------------------------------------------------
# match_function_call


def test_launch_post_usage_through_reward_function() -> None:
    rf = RewardFunction(
        func=match_function_call,
        expected_call_schema=WEATHER,
        argument_match_strictness="exact",
    )
    result = rf(
        messages=[USER, {"role": "assistant", "content": "Calling get_weather."}],
        function_name="get_weather",
        parsed_arguments={"location": "Paris", "unit": "celsius"},
    )
    assert result.score == 1.0
    assert result.is_score_valid
    assert result.metrics["function_name_match"].score == 1.0
    assert result.metrics["arguments_match"].reason == "all arguments match"


def test_registered_name() -> None:
    assert match_function_call.reward_spec.name == "function_call"
    assert tool_calls_match.reward_spec.name == "tool_calls"


def test_wrong_type_scores_zero_and_says_which_argument() -> None:
    result = call_score(function_name="get_weather", parsed_arguments={"location": 75, "unit": "c"})
    assert result.score == 0.0
    assert result.metrics["function_name_match"].score == 1.0
    assert result.metrics["arguments_match"].reason == (
        "wrong: location (75 is not of type 'string')"
    )


def test_exact_rejects_missing_and_extra_arguments() -> None:
    result = call_score(
        function_name="get_weather", parsed_arguments={"location": "Paris", "debug": True}
    )
    assert result.score == 0.0
    assert result.metrics["arguments_match"].reason == "missing: unit; extra: debug"
    assert result.reason == "get_weather: missing: unit; extra: debug"


def test_partial_is_the_fraction_right_minus_a_penalty_per_extra_argument() -> None:
    half = call_score(
        function_name="get_weather",
        parsed_arguments={"location": "Paris"},
        argument_match_strictness="partial",
    )
    assert half.score == 0.5
    extra = call_score(
        function_name="get_weather",
        parsed_arguments={"location": "Paris", "unit": "c", "debug": 1, "verbose": 2},
        argument_match_strictness="partial",
    )
    assert extra.score == pytest.approx(0.8)
    assert extra.metrics["arguments_match"].success is False
    floored = call_score(
        function_name="get_weather",
        parsed_arguments={"location": 1, "a": 1},
        argument_match_strictness="partial",
    )
    assert floored.score == 0.0


def test_wrong_function_scores_zero_even_with_the_right_arguments() -> None:
    result = call_score(
        function_name="get_time", parsed_arguments={"location": "Paris", "unit": "c"}
    )
    assert result.score == 0.0
    assert result.reason == "wrong function: expected 'get_weather', got 'get_time'"
    assert result.metrics["function_name_match"].score == 0.0
    assert result.metrics["arguments_match"].score == 1.0


@pytest.mark.parametrize(
    ("expected", "given", "score"),
    [
        ("Paris", "Paris", 1.0),
        ("Paris", "paris", 0.0),
        (1, 1.0, 1.0),
        (1, "1", 0.0),
        (1, True, 0.0),
        (["a", "b"], ["b", "a"], 0.0),
        ({"lat": 1, "lon": 2}, {"lon": 2, "lat": 1}, 1.0),
    ],
)
def test_expected_values_compare_as_json(expected: Any, given: Any, score: float) -> None:
    schema = {"name": "f", "arguments": {"x": expected}}
    result = call_score(
        function_name="f", parsed_arguments={"x": given}, expected_call_schema=schema
    )
    assert result.score == score


def test_type_spec_versus_literal_dict_with_a_type_key() -> None:
    schema = {"name": "f", "arguments": {"filter": {"type": "object", "const": {"type": "pdf"}}}}
    good = call_score(
        function_name="f", parsed_arguments={"filter": {"type": "pdf"}}, expected_call_schema=schema
    )
    bad = call_score(
        function_name="f", parsed_arguments={"filter": {"type": "doc"}}, expected_call_schema=schema
    )
    assert (good.score, bad.score) == (1.0, 0.0)


def test_type_spec_with_enum() -> None:
    schema = {"name": "f", "arguments": {"unit": {"type": "string", "enum": ["c", "f"]}}}
    result = call_score(
        function_name="f", parsed_arguments={"unit": "kelvin"}, expected_call_schema=schema
    )
    assert result.score == 0.0
    assert result.metrics["arguments_match"].reason == (
        "wrong: unit ('kelvin' is not one of ['c', 'f'])"
    )


def test_full_json_schema_parameters_with_optional_arguments() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query"],
            },
        },
    }
    ok = call_score(
        function_name="search", parsed_arguments={"query": "rl"}, expected_call_schema=tool
    )
    bad_limit = call_score(
        function_name="search",
        parsed_arguments={"query": "rl", "limit": 2.5},
        expected_call_schema=tool,
    )
    no_query = call_score(
        function_name="search",
        parsed_arguments={"limit": 3},
        expected_call_schema=tool,
        argument_match_strictness="partial",
    )
    assert ok.score == 1.0
    assert bad_limit.score == 0.0
    assert no_query.score == 0.5  # query missing, limit (optional, given) right


def test_schema_as_json_string_or_ground_truth() -> None:
    as_string = call_score(
        function_name="get_weather",
        expected_call_schema=json.dumps(WEATHER),
        parsed_arguments='{"location": "Paris", "unit": "c"}',
    )
    from_truth = match_function_call(
        messages=[USER],
        function_name="get_weather",
        parsed_arguments={"location": "Paris", "unit": "c"},
        ground_truth=WEATHER,
    )
    assert as_string.score == 1.0
    assert from_truth.score == 1.0


def test_reads_the_first_tool_call_of_the_last_assistant_message() -> None:
    messages = [
        USER,
        assistant_calls(tool_call("get_time", {})),
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        assistant_calls(
            tool_call("get_weather", {"location": "Paris", "unit": "c"}),
            tool_call("get_time", {}, "call_2"),
        ),
    ]
    assert call_score(messages=messages).score == 1.0


def test_malformed_json_arguments_score_zero_with_a_reason() -> None:
    messages = [USER, assistant_calls(tool_call("get_weather", '{"location": "Paris",'))]
    result = call_score(messages=messages)
    assert result.is_score_valid
    assert result.score == 0.0
    assert result.metrics["function_name_match"].score == 1.0
    assert "arguments are not valid JSON" in str(result.metrics["arguments_match"].reason)


def test_arguments_that_are_not_an_object_score_zero() -> None:
    result = call_score(messages=[USER, assistant_calls(tool_call("get_weather", "[1, 2]"))])
    assert result.score == 0.0
    assert result.metrics["arguments_match"].reason == (
        "arguments must be a JSON object, got '[1, 2]'"
    )


@pytest.mark.parametrize(
    "content",
    [
        '<tool_call>{"name": "get_weather", "arguments": {"location": "Paris", "unit": "c"}}'
        "</tool_call>",
        'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", '
        '"unit": "c"}}',  # unclosed: runs to the end
        '{"name": "get_weather", "parameters": {"location": "Paris", "unit": "c"}}',
        '```json\n{"name": "get_weather", "arguments": "{\\"location\\": \\"Paris\\", '
        '\\"unit\\": \\"c\\"}"}\n```',
    ],
)
def test_text_fallbacks(content: str) -> None:
    assert call_score(messages=[USER, {"role": "assistant", "content": content}]).score == 1.0


def test_broken_tool_call_block_scores_zero_with_a_reason() -> None:
    content = '<tool_call>{"name": "get_weather", "arguments": {</tool_call>'
    result = call_score(messages=[USER, {"role": "assistant", "content": content}])
    assert result.score == 0.0
    assert result.reason == (
        "the tool call could not be read: tool call 1: invalid JSON at char 38 (Expecting "
        "property name enclosed in double quotes) in "
        """'{"name": "get_weather", "arguments": {'"""
    )


def test_no_call_at_all_scores_zero() -> None:
    result = call_score(messages=[USER, {"role": "assistant", "content": "It is sunny."}])
    assert result.is_score_valid
    assert result.score == 0.0
    assert result.reason == "no function call in the last message"


def test_no_assistant_message_and_no_explicit_call_is_invalid() -> None:
    result = call_score(messages=[USER])
    assert not result.is_score_valid
    assert str(result.error).startswith("reward 'function_call' reads the call from the last")


def test_unknown_strictness_raises_naming_the_allowed_values() -> None:
    message = (
        "argument_match_strictness must be one of 'exact', 'partial'; got 'exakt'. "
        "Did you mean 'exact'?"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        call_score(
            function_name="get_weather", parsed_arguments={}, argument_match_strictness="exakt"
        )


def test_missing_expected_call_is_an_invalid_sample() -> None:
    missing = match_function_call(messages=[USER], function_name="f", parsed_arguments={})
    assert not missing.is_score_valid
    assert missing.error == (
        "ConfigError: function_call reward needs the expected call: pass "
        "expected_call_schema={'name': ..., 'arguments': {...}} (or the same as ground_truth)"
    )


def test_deeply_nested_argument_value_does_not_crash() -> None:
    deep = "[" * 5000 + "]" * 5000
    result = call_score(messages=[USER, assistant_calls(tool_call("get_weather", deep))])
    assert result.is_score_valid
    assert result.score == 0.0
    nested: Any = "x"
    for _ in range(3000):
        nested = [nested]
    schema = {"name": "f", "arguments": {"x": {"type": "array", "items": {"$ref": "#"}}}}
    value = call_score(
        function_name="f", parsed_arguments={"x": nested}, expected_call_schema=schema
    )
    assert value.is_score_valid
    assert value.score == 0.0


# --------------------------------------------------------------------------------------------
# tool_calls_match


def calls_score(
    actual: list[dict[str, Any]] | None, expected: Any, **kwargs: Any
) -> EvaluateResult:
    last = (
        assistant_calls(*actual) if actual is not None else {"role": "assistant", "content": "ok"}
    )
    return tool_calls_match([USER, last], expected, **kwargs)


def test_key_order_does_not_matter_but_types_do() -> None:
    expected = [{"name": "f", "arguments": {"a": 1, "b": 2}}]
    assert calls_score([tool_call("f", '{"b": 2, "a": 1}')], expected).score == 1.0
    assert calls_score([tool_call("f", '{"b": 2, "a": 1.0}')], expected).score == 1.0
    result = calls_score([tool_call("f", '{"a": "1", "b": 2}')], expected)
    assert result.score == 0.0
    assert result.metrics["arguments_match"].reason == "f: a: expected 1, got '1'"
    assert calls_score([tool_call("f", '{"a": true, "b": 2}')], expected).score == 0.0


def test_order_insensitive_matching_is_optimal_not_greedy() -> None:
    expected = [{"name": "f", "arguments": {"x": 1}}, {"name": "f", "arguments": {"x": 2}}]
    swapped = [tool_call("f", {"x": 2}), tool_call("f", {"x": 1}, "call_2")]
    assert calls_score(swapped, expected).score == 1.0
    # A first-fit by name would pair f(x=1) with f(x=2) and find no match at all.
    one_right = [tool_call("f", {"x": 3}), tool_call("f", {"x": 2}, "call_2")]
    result = calls_score(one_right, expected)
    assert result.score == 0.5
    assert result.metrics["arguments_match"].reason == "f: x: expected 1, got 3"


def test_order_sensitive() -> None:
    expected = [{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {}}]
    swapped = [tool_call("g", {}), tool_call("f", {"x": 1}, "call_2")]
    result = calls_score(swapped, expected, order_sensitive=True)
    assert result.score == 0.0
    assert result.metrics["names_match"].score == 0.0
    assert calls_score(swapped, expected).score == 1.0


def test_duplicate_and_extra_calls_are_penalised() -> None:
    expected = [{"name": "f", "arguments": {"x": 1}}]
    result = calls_score([tool_call("f", {"x": 1}), tool_call("f", {"x": 1}, "c2")], expected)
    assert result.score == 0.0  # the repeat cancels the match
    assert result.metrics["call_count_match"].score == 0.0
    assert result.metrics["call_count_match"].reason == "expected 1 call(s), got 2"
    assert result.metrics["names_match"].reason == "unexpected: f"
    assert result.reason.endswith("; 1 call(s) too many cancel as many matches")


def test_each_call_too_many_cancels_a_match_so_calling_every_tool_earns_nothing() -> None:
    two = [{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {}}]
    right = [tool_call("f", {"x": 1}), tool_call("g", {}, "c2")]
    assert calls_score(right, two).score == 1.0
    assert calls_score(right[:1], two).score == 0.5  # a missing call costs its share
    assert calls_score([*right, tool_call("h", {}, "c3")], two).score == 0.5
    assert calls_score([*right, tool_call("h", {}, "c3"), tool_call("k", {}, "c4")], two).score == 0
    every = [tool_call(name, {"x": 1}, f"c{name}") for name in ("f", "g", "h")]
    assert calls_score(every, [{"name": "f", "arguments": {"x": 1}}]).score == 0.0


def test_no_call_expected() -> None:
    none_made = calls_score(None, [])
    assert none_made.score == 1.0
    assert none_made.reason == "no call expected and none made"
    called = calls_score([tool_call("delete_everything", {})], "[]")
    assert called.score == 0.0
    assert called.metrics["names_match"].reason == "unexpected: delete_everything"


def test_missing_tool_calls_scores_zero() -> None:
    result = calls_score(None, [{"name": "f", "arguments": {}}])
    assert result.score == 0.0
    assert result.is_score_valid
    assert result.metrics["names_match"].reason == "missing: f"
    assert result.metrics["arguments_match"].reason == "no call has an expected name"


def test_malformed_model_arguments_fail_only_that_call() -> None:
    expected = [{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {"y": 2}}]
    result = calls_score([tool_call("f", {"x": 1}), tool_call("g", '{"y": 2', "c2")], expected)
    assert result.score == 0.5
    assert result.metrics["names_match"].score == 1.0
    assert str(result.metrics["arguments_match"].reason).startswith(
        "g: arguments are not valid JSON"
    )


def test_expected_call_formats() -> None:
    actual = [tool_call("f", {"x": 1})]
    openai_format = [tool_call("f", '{"x": 1}', "call_9")]
    assert calls_score(actual, openai_format).score == 1.0
    assert calls_score(actual, json.dumps([{"name": "f", "arguments": {"x": 1}}])).score == 1.0
    message = {"role": "assistant", "tool_calls": openai_format}
    assert calls_score(actual, message).score == 1.0
    assert calls_score(actual, {"name": "f", "arguments": {"x": 1}}).score == 1.0
    assert calls_score(actual, [ToolCall.model_validate(openai_format[0])]).score == 1.0
    overridden = calls_score(actual, [], expected_calls=[{"name": "f", "arguments": {"x": 1}}])
    assert overridden.score == 1.0


def test_missing_expected_calls_is_an_invalid_sample() -> None:
    missing = tool_calls_match([USER, assistant_calls()])
    assert not missing.is_score_valid
    assert str(missing.error).startswith("ConfigError: tool_calls reward needs the expected")


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        ([{"name": "f", "arguments": "{oops"}], "expected_calls[0] (f): arguments are not valid "
         "JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): "
         "'{oops'"),
        ([{"arguments": {}}], 'expected_calls[0] must have a "name" (directly or under '
         "\"function\"), got {'arguments': {}}"),
        (42, 'expected_calls must be a list of {"name": ..., "arguments": {...}} or OpenAI '
         "tool_call dicts (or a JSON string of one), got int"),
        ("[{", "expected_calls is a string but not valid JSON: Expecting property name enclosed "
         "in double quotes: line 1 column 3 (char 2)"),
    ],
)  # fmt: skip
def test_malformed_expected_calls(expected: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        calls_score([], None, expected_calls=expected)
    result = calls_score([], expected)
    assert not result.is_score_valid
    assert result.error == f"ConfigError: {message}"


def test_no_assistant_message_is_invalid() -> None:
    result = tool_calls_match([USER], [])
    assert not result.is_score_valid
    assert result.error == (
        "reward 'tool_calls' scores the last assistant message, but the conversation has none"
    )


@pytest.mark.parametrize("depth", [400, 950, 5000])
def test_deeply_nested_model_arguments_score_zero_without_crashing(depth: int) -> None:
    deep = '{"x": ' + "[" * depth + "]" * depth + "}"
    result = calls_score([tool_call("f", deep)], [{"name": "f", "arguments": {"x": 1}}])
    assert result.is_score_valid
    assert result.score == 0.0
    assert result.metrics["names_match"].score == 1.0


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"name": "f", "arguments": {"x": {"type": "strng"}}},
            "expected_call_schema: argument 'x' has an invalid type spec {'type': 'strng'}: "
            "'strng' is not valid under any of the given schemas",
        ),
        (
            {"name": "f", "parameters": {"properties": {"x": "string"}}},
            "expected_call_schema: argument 'x' has an invalid type spec 'string': 'string' is "
            "not of type 'object', 'boolean'",
        ),
        (
            {"name": "f", "parameters": ["x"]},
            "expected_call_schema['parameters'] must be a JSON Schema object with 'properties' "
            "(an object) and 'required' (a list), got ['x']",
        ),
        (
            {"name": "f", "arguments": ["x"]},
            "expected_call_schema['arguments'] must map argument names to a type spec or an "
            "expected value, got list",
        ),
        (
            {"arguments": {}},
            'expected_call_schema must be an object with a "name" and "arguments" (names to type '
            'specs or values) or "parameters" (a JSON Schema), got {\'arguments\': {}}',
        ),
        ('{"name": ', "expected_call_schema is a string but not valid JSON: Expecting value: "
         "line 1 column 10 (char 9)"),
    ],
)  # fmt: skip
def test_malformed_expected_schemas(schema: Any, message: str) -> None:
    # As an option it is misuse, raised at once; as a sample's ground truth, a bad sample.
    with pytest.raises(ConfigError, match=re.escape(message)):
        call_score(function_name="f", parsed_arguments={}, expected_call_schema=schema)
    result = call_score(function_name="f", parsed_arguments={}, expected_call_schema=None,
                        ground_truth=schema)  # fmt: skip
    assert not result.is_score_valid
    assert result.error == f"ConfigError: {message}"


# --------------------------------------------------------------------------------------------
# match_function_call reads text calls as the engine does (rk_agent.tool_calls)


def test_text_calls_in_another_format() -> None:
    content = (
        '<|python_tag|>{"name": "get_weather", "parameters": {"location": "Paris", "unit": "c"}}'
    )
    messages = [USER, {"role": "assistant", "content": content}]
    assert call_score(messages=messages, tool_call_format="llama3_json").score == 1.0
    hermes = call_score(messages=messages)  # the default format sees no call there
    assert hermes.score == 0.0 and hermes.reason == "no function call in the last message"


def test_an_unknown_tool_call_format_raises() -> None:
    message = (
        "unknown tool-call format 'llama'. Did you mean 'llama3_json'? Known tool-call formats"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        call_score(messages=[USER, {"role": "assistant", "content": "x"}], tool_call_format="llama")


ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {"type": "object", "properties": {"a": {}, "b": {}}},
    },
}
# Replies as models write them, good and bad, in both formats; every name is an offered tool's.
CORPUS = [
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
    'Adding.\n<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>',
    '<tool_call>\n```json\n{"name": "add", "arguments": {"a": 1}}\n```\n</tool_call>',
    '<tool_call>[{"name": "add", "arguments": {"a": 5}}, {"name": "add"}]</tool_call>',
    '<tool_call>{"name": "add", "arguments": {"a": 1}}',  # stopped before the closing tag
    '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "add", '
    '"arguments": {"a": </tool_call>',  # the second call is broken
    '<tool_call>{"name": "add", "arguments": "a=1"}</tool_call>',
    "<tool_call>{'name': 'add'}</tool_call>",
    '<tool_call>{"arguments": {"a": 1}}</tool_call>',
    '{"name": "add"}</tool_call>',
    "<tool_call></tool_call>",
    '{"name": "add", "parameters": {"a": 1, "b": 2}}',
    '<|python_tag|>{"name": "add", "parameters": {"a": 1}}<|eom_id|>',
    '{"type": "function", "name": "add", "parameters": {"a": 3}}',
    '```json\n{"name": "add", "parameters": {"a": 1}}\n```',
    '{"name": "add", "parameters": {"a": 1}}; {"name": "add", "parameters": {"a": 2}}',
    'Let me add.\n{"name": "add", "parameters": {"a": 1}}',
    '{"name": "add", "parameters": {"a": 1}',  # cut off
    '{"name": "add", "parameters": {"a": 1}}\nDone.',
    "<|python_tag|>",
    "The sum is 3.",
    "",
]


def _engine_replies(tool_call_format: str) -> list[Any]:
    """Each corpus reply as `OpenAIPolicy`'s text protocol reads it, over loopback HTTP."""
    from rk_agent.policies.openai_policy import OpenAIPolicy
    from rk_agent.policies.policy import SamplingParams
    from rk_agent.testing.stub_server import StubServer
    from rk_agent.types import Message

    async def read_all(policy: OpenAIPolicy) -> list[Any]:
        try:
            return [
                await policy.generate([Message(role="user", content=text)], [ADD], SamplingParams())
                for text in CORPUS
            ]
        finally:
            await policy.aclose()

    # the stub answers each request with its last user message: the corpus reply
    with StubServer(lambda request: request["messages"][-1]["content"]) as server:
        policy = OpenAIPolicy(
            "m",
            base_url=server.base_url,
            native_tools=False,
            tool_call_format=tool_call_format,
        )
        return asyncio.run(read_all(policy))


@pytest.mark.parametrize("tool_call_format", ["hermes", "llama3_json"])
def test_the_reward_and_the_engine_agree_on_whether_a_call_parsed(tool_call_format: str) -> None:
    outputs = _engine_replies(tool_call_format)
    parsed = failed = 0
    for text, output in zip(CORPUS, outputs, strict=True):
        calls = output.message.tool_calls or []
        expected = {"name": "add", "arguments": {"a": 1}}
        if calls:
            expected = {"name": calls[0].function.name,
                        "arguments": calls[0].function.parsed_arguments()}  # fmt: skip
        messages = [USER, {"role": "assistant", "content": text}]
        result = match_function_call(
            messages, expected_call_schema=expected, tool_call_format=tool_call_format
        )
        if calls:  # the engine read calls: the reward reads the same first call
            parsed += 1
            assert result.score == 1.0, (text, result.reason)
        elif output.parse_error is not None:  # the engine saw a broken call: so does the reward
            failed += 1
            assert result.score == 0.0, text
            assert result.reason == f"the tool call could not be read: {output.parse_error}"
        elif tool_call_format == "hermes" and parse_json_response(text)[0]:
            # the one documented difference: a reply that is one JSON object (maybe fenced) is
            # the reward's fallback, while the Hermes engine takes it as the final answer
            assert result.metrics["function_name_match"].score == 1.0, text
        else:  # no call either way
            assert result.reason == "no function call in the last message", (text, result.reason)
    assert parsed >= 5 and failed >= 5  # the corpus exercises both sides in each format
