"""Tests for rk_agent.rewards.builtin.json_schema: parsing model output and validating it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.json_schema import json_schema_reward, parse_json_response
from rk_agent.types import EvaluateResult

USER = {"role": "user", "content": "Give me the person as JSON."}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def score(content: Any, schema: Any = PERSON, **kwargs: Any) -> EvaluateResult:
    messages = [USER, {"role": "assistant", "content": content}]
    return json_schema_reward(messages, json_schema=schema, **kwargs)


def test_registered_name() -> None:
    assert json_schema_reward.reward_spec.name == "json_schema"


def test_valid_json() -> None:
    result = score('  {"name": "Ada", "age": 36, "tags": ["math"]}\n')
    assert result.score == 1.0
    assert result.metrics["parseable"].reason == "parsed the whole response"
    assert result.metrics["schema_valid"].success is True


@pytest.mark.parametrize(
    "content",
    [
        'Here you go:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?',
        '```\n{"name": "Ada", "age": 36}\n```',
        '```JSON\n{"name": "Ada", "age": 36}\n```',
        '```python\nprint(1)\n```\n```json\n{"name": "Ada", "age": 36}\n```',
    ],
)
def test_fenced_json_blocks(content: str) -> None:
    result = score(content)
    assert result.score == 1.0
    assert result.metrics["parseable"].reason == "parsed a fenced ```json block"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"name": "Ada", "age": 36} Hope this helps!', "not JSON: Extra data: line 1 column 28 "
         "(char 27)"),
        ('{"name": "Ada", // the name\n "age": 36}', "not JSON: Expecting property name enclosed "
         "in double quotes: line 1 column 17 (char 16)"),
        ("{'name': 'Ada', 'age': 36}", "not JSON: Expecting property name enclosed in double "
         "quotes: line 1 column 2 (char 1)"),
        ('{"name": "Ada", "age": NaN}', "not JSON: NaN is not valid JSON"),
        ('{"name": "Ada", "age": -Infinity}', "not JSON: -Infinity is not valid JSON"),
        ("", "the response is empty"),
        ("   \n ", "the response is empty"),
        ("```python\n{}\n```", "not JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
)  # fmt: skip
def test_unparseable_responses_score_zero(content: str, reason: str) -> None:
    result = score(content)
    assert result.is_score_valid
    assert result.score == 0.0
    assert result.reason == reason
    assert result.metrics["parseable"].score == 0.0
    assert result.metrics["schema_valid"].score == 0.0


def test_a_broken_fenced_block_says_so() -> None:
    # The JSON error text itself differs between Python versions (3.13 names trailing commas).
    result = score('```json\n{"name": "Ada",}\n```')
    assert result.score == 0.0
    assert str(result.reason).startswith("the fenced block is not JSON: ")


def test_deeply_nested_json_never_crashes() -> None:
    too_deep = "[" * 100_000 + "]" * 100_000
    result = score(too_deep, schema={"type": "array"})
    assert result.score == 0.0
    assert result.reason == "not JSON: nested too deeply to parse"
    # Parses, but validating with a recursive schema recurses several frames per level.
    deep = "[" * 900 + "]" * 900
    recursive = score(deep, schema={"type": "array", "items": {"$ref": "#"}})
    assert recursive.is_score_valid
    assert recursive.metrics["parseable"].score == 1.0
    assert recursive.score in (0.3, 1.0)
    shallow = score("[" * 50 + "]" * 50, schema={"type": "array", "items": {"$ref": "#"}})
    assert shallow.score == 1.0


def test_partial_credit_is_the_share_of_top_level_properties_right() -> None:
    # name wrong, age right, email and tags optional and absent: 3 of 4 right.
    one_wrong = score('{"name": 7, "age": 36}')
    assert one_wrong.score == pytest.approx(0.3 + 0.7 * 3 / 4)
    assert one_wrong.metrics["parseable"].score == 1.0
    assert one_wrong.metrics["schema_valid"].reason == "$.name: 7 is not of type 'string'"
    # age missing (required) and an extra property: 3 right of 4 + 1 other failure.
    missing_and_extra = score('{"name": "Ada", "nickname": "A"}')
    assert missing_and_extra.score == pytest.approx(0.3 + 0.7 * 3 / 5)
    empty = score("{}")
    assert empty.score == pytest.approx(0.3 + 0.7 * 2 / 4)
    wrong_root = score('["Ada", 36]')
    assert wrong_root.score == pytest.approx(0.3)
    assert wrong_root.metrics["schema_valid"].reason == "$: ['Ada', 36] is not of type 'object'"


def test_no_partial_credit() -> None:
    result = score('{"name": 7, "age": 36}', partial_credit=False)
    assert result.score == 0.0
    assert result.metrics["parseable"].score == 1.0


def test_reason_lists_the_first_errors_with_json_paths() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"price": {"type": "number"}}},
            }
        },
    }
    items = [{"price": "cheap"}, {"price": 2}, {"price": None}, {"price": []}, {"price": {}}]
    result = score(json.dumps({"items": items}), schema=schema)
    assert result.metrics["schema_valid"].reason == (
        "$.items[0].price: 'cheap' is not of type 'number'; "
        "$.items[2].price: None is not of type 'number'; "
        "$.items[3].price: [] is not of type 'number' (+1 more)"
    )
    assert result.score == pytest.approx(0.3)  # the only top-level property is wrong


def test_huge_invalid_array_is_capped() -> None:
    result = score(json.dumps(list(range(50_000))), schema={"items": {"type": "string"}})
    assert result.score == pytest.approx(0.3)
    assert str(result.metrics["schema_valid"].reason).endswith("(+997+ more)")


def test_json_null_and_scalars_are_values() -> None:
    assert score("null", schema={"type": "null"}).score == 1.0
    assert score("42", schema={"type": "integer"}).score == 1.0
    assert score('"42"', schema={"type": "integer"}).score == pytest.approx(0.3)


def test_schema_as_json_string_or_ground_truth() -> None:
    assert score('{"name": "Ada", "age": 1}', schema=json.dumps(PERSON)).score == 1.0
    messages = [USER, {"role": "assistant", "content": '{"name": "Ada", "age": 1}'}]
    assert json_schema_reward(messages, PERSON).score == 1.0
    assert json_schema_reward(messages, ground_truth=json.dumps(PERSON)).score == 1.0
    # json_schema wins over ground_truth
    assert json_schema_reward(messages, {"type": "array"}, json_schema=PERSON).score == 1.0


def test_draft_follows_dollar_schema() -> None:
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "items": [{"type": "integer"}],
        "additionalItems": False,
    }
    assert score("[1]", schema=draft7).score == 1.0
    assert score("[1, 2]", schema=draft7).score == pytest.approx(0.3)
    without = {k: v for k, v in draft7.items() if k != "$schema"}
    with pytest.raises(ConfigError, match=re.escape("is not a valid schema (Draft202012")):
        score("[1]", schema=without)  # array-form items is not Draft 2020-12


def test_check_formats() -> None:
    schema = {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
    assert score('{"email": "not an email"}', schema=schema).score == 1.0
    checked = score('{"email": "not an email"}', schema=schema, check_formats=True)
    assert checked.score == pytest.approx(0.3)
    assert score('{"email": "ada@example.com"}', schema=schema, check_formats=True).score == 1.0


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"type": "strng"}, "json_schema is not a valid schema (Draft202012Validator): 'strng' is "
         "not valid under any of the given schemas (at $.type of the schema)"),
        ({"$schema": "http://example.com/mine"}, "json_schema: unknown $schema "
         "'http://example.com/mine'; use a JSON Schema draft URI such as "
         "'https://json-schema.org/draft/2020-12/schema', or leave it out for Draft 2020-12"),
        ("{not json", "json_schema is a string but not valid JSON: Expecting property name "
         "enclosed in double quotes: line 1 column 2 (char 1)"),
        (42, "json_schema must be a JSON Schema object (or true/false), got int"),
    ],
)  # fmt: skip
def test_bad_schemas(schema: Any, error: str) -> None:
    # As an option it is misuse, raised at once; as a sample's ground truth, a bad sample.
    with pytest.raises(ConfigError, match=re.escape(error)):
        score('{"name": "Ada", "age": 1}', schema=schema)
    with pytest.raises(ConfigError, match=re.escape(error)):  # even with no reply to score
        json_schema_reward([USER], json_schema=schema)
    messages = [USER, {"role": "assistant", "content": '{"name": "Ada", "age": 1}'}]
    result = json_schema_reward(messages, ground_truth=schema)
    assert not result.is_score_valid
    assert result.error == f"ConfigError: {error}"


def test_missing_schema_is_an_invalid_sample() -> None:
    result = score("{}", schema=None)
    assert not result.is_score_valid
    assert result.error == (
        "ConfigError: json_schema reward needs a schema: pass json_schema={...} (a dict or a "
        "JSON string) or the same as ground_truth"
    )


def test_no_assistant_message_is_invalid() -> None:
    result = json_schema_reward([USER], json_schema=PERSON)
    assert not result.is_score_valid
    assert result.error == (
        "reward 'json_schema' scores the last assistant message, but the conversation has none"
    )


def test_parse_json_response() -> None:
    assert parse_json_response('Here:\n```json\n{"a": 1}\n```') == (
        True,
        {"a": 1},
        "a fenced ```json block",
    )
    assert parse_json_response("null") == (True, None, "the whole response")
    assert parse_json_response("```json\n[1]") == (
        False,
        None,
        "not JSON: Expecting value: line 1 column 1 (char 0)",
    )
