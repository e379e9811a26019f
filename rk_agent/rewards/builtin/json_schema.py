"""The JSON-schema reward: is the response JSON, and does it validate against a schema?

Main names:
    json_schema_reward: ``"json_schema"``, scores the last assistant message.
    parse_json_response: the parsing rules on their own.
    PARSEABLE_CREDIT: the score of JSON that parses but does not validate, before partial credit.

What counts as JSON: the whole response (surrounding whitespace aside) is one JSON value, or,
failing that, the response contains a fenced code block labelled ``json`` or unlabelled, whose
body is one JSON value (the first such block counts). Standard JSON only: text after the value,
comments, single quotes, trailing commas and the ``NaN`` / ``Infinity`` literals that Python's
``json`` module would accept are all unparseable. Nesting too deep to parse or to validate is
reported, never raised.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["PARSEABLE_CREDIT", "json_schema_reward", "parse_json_response"]

PARSEABLE_CREDIT = 0.3
"""What JSON that parses but fails the schema earns; partial credit adds up to ``0.7`` more."""

_MAX_ERRORS = 1000  # validation errors looked at; a huge invalid array must not take forever
_SHOWN_ERRORS = 3


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> tuple[bool, Any, str]:
    """``(True, value, "")`` or ``(False, None, why)``."""
    try:
        return True, json.loads(text, parse_constant=_reject_constant), ""
    except ValueError as exc:
        return False, None, str(exc)
    except RecursionError:
        return False, None, "nested too deeply to parse"


def _first_fenced_block(text: str) -> str | None:
    """The body of the first ```` ```json ```` or unlabelled fenced block, if there is one."""
    cursor = 0
    while (start := text.find("```", cursor)) != -1:
        line_end = text.find("\n", start)
        if line_end == -1:
            return None
        end = text.find("```", line_end)
        if end == -1:
            return None
        label = text[start + 3 : line_end].strip().lower()
        if label in ("", "json"):
            return text[line_end + 1 : end]
        cursor = end + 3
    return None


def parse_json_response(text: str) -> tuple[bool, Any, str]:
    """Parse a model response as JSON, by the rules in the module docstring.

    Returns:
        ``(True, value, how)`` where ``how`` says where the JSON was found, or
        ``(False, None, why)``. A tuple, because ``None`` is a JSON value too.

    Example:
        >>> parse_json_response('Here it is:\\n```json\\n{"a": 1}\\n```')
        (True, {'a': 1}, 'a fenced ```json block')
        >>> parse_json_response('{"a": 1} hope that helps')[0]
        False
    """
    stripped = text.strip()
    if not stripped:
        return False, None, "the response is empty"
    ok, value, why = _loads(stripped)
    if ok:
        return True, value, "the whole response"
    block = _first_fenced_block(stripped)
    if block is None:
        return False, None, f"not JSON: {why}"
    ok, value, block_why = _loads(block)
    if ok:
        return True, value, "a fenced ```json block"
    return False, None, f"the fenced block is not JSON: {block_why}"


@functools.lru_cache(maxsize=128)
def _cached_validator(schema_json: str, check_formats: bool) -> Validator:
    schema = json.loads(schema_json)
    # None as the default tells "no $schema" and "an unknown $schema" apart from a known one.
    cls: Any = validator_for(schema, default=None)  # type: ignore[arg-type]
    if cls is None:
        if isinstance(schema, Mapping) and "$schema" in schema:
            raise ConfigError(
                f"json_schema: unknown $schema {schema['$schema']!r}; use a JSON Schema draft "
                "URI such as 'https://json-schema.org/draft/2020-12/schema', or leave it out "
                "for Draft 2020-12"
            )
        cls = Draft202012Validator
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path if exc.path else "the root"
        raise ConfigError(
            f"json_schema is not a valid schema ({cls.__name__}): {exc.message} (at {where} of "
            "the schema)"
        ) from exc
    checker = cls.FORMAT_CHECKER if check_formats else None
    validator: Validator = cls(schema, format_checker=checker)
    return validator


def _validator(source: Any, check_formats: bool) -> Validator:
    if source is None:
        raise ConfigError(
            "json_schema reward needs a schema: pass json_schema={...} (a dict or a JSON string) "
            "or the same as ground_truth"
        )
    if isinstance(source, str):
        try:
            source = json.loads(source)
        except ValueError as exc:
            raise ConfigError(f"json_schema is a string but not valid JSON: {exc}") from exc
    if not isinstance(source, (Mapping, bool)):
        raise ConfigError(
            f"json_schema must be a JSON Schema object (or true/false), got {type(source).__name__}"
        )
    try:
        key = json.dumps(source, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"json_schema must be JSON data: {exc}") from exc
    return _cached_validator(key, check_formats)


def _fraction_valid(schema: Any, instance: Any, errors: list[ValidationError]) -> float:
    """The share of the schema's top-level properties that are right (see the reward's doc)."""
    if not isinstance(schema, Mapping) or not isinstance(instance, dict):
        return 0.0
    properties = schema.get("properties")
    required = schema.get("required")
    declared = set(properties) if isinstance(properties, Mapping) else set()
    declared |= {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()
    if not declared:
        return 0.0
    failed: set[str] = set()
    other_failures = 0
    for error in errors:
        path = error.absolute_path
        if path and path[0] in declared:
            failed.add(str(path[0]))
        elif not path and error.validator == "required" and isinstance(error.validator_value, list):
            missing = {n for n in error.validator_value if n not in instance}
            failed |= missing & declared
            other_failures += bool(missing - declared)
        else:
            other_failures += 1
    return (len(declared) - len(failed)) / (len(declared) + other_failures)


def _error_lines(errors: list[ValidationError]) -> str:
    shown = [f"{e.json_path}: {e.message[:120]}" for e in errors[:_SHOWN_ERRORS]]
    more = len(errors) - len(shown)
    extra = f" (+{more}{'+' if len(errors) >= _MAX_ERRORS else ''} more)" if more > 0 else ""
    return "; ".join(shown) + extra


@reward_function(
    name="json_schema",
    description="Whether the response is JSON that validates against a JSON Schema.",
)
def json_schema_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    json_schema: Mapping[str, Any] | str | bool | None = None,
    partial_credit: bool = True,
    check_formats: bool = False,
    **kwargs: Any,
) -> EvaluateResult:
    """Score whether the last assistant message is JSON valid against a JSON Schema.

    The schema (``json_schema``, else ``ground_truth``; a dict or a JSON string) is checked
    against its metaschema first: its ``$schema`` picks the draft, Draft 2020-12 when it has none.

    Scores: 1.0 when the JSON validates; 0.0 when it does not parse (see the module docstring).
    JSON that parses but does not validate scores `PARSEABLE_CREDIT` (0.3) plus, with
    ``partial_credit``, up to 0.7 times the share of the schema's top-level properties that are
    right. A property (named in the root's ``properties`` or ``required``) is wrong when it is
    required and missing or any error lies under it; every other error (a wrong root type, extra
    properties under ``additionalProperties: false``, ...) counts as one more wrong part. Schemas
    without top-level properties, and non-object JSON, get no partial credit beyond 0.3.

    Args:
        messages: the conversation; the last assistant message's text is scored.
        ground_truth: the schema when ``json_schema`` is not given.
        json_schema: the JSON Schema, a dict or a JSON string.
        partial_credit: add the share-of-properties credit above; ``False`` makes invalid JSON
            score 0.0 (parseable only shows in the metrics).
        check_formats: enforce ``format`` (``email``, ``date``, ...), which JSON Schema treats as
            an annotation by default.
        **kwargs: ignored.

    Returns:
        The score with metrics ``parseable`` and ``schema_valid`` (whose reason lists the first
        validation errors with their JSON paths, e.g. ``$.age: 'x' is not of type 'integer'``).

    Raises:
        ConfigError: an invalid ``json_schema``. A missing or invalid ``ground_truth`` schema
            is a bad sample instead: an invalid result whose ``error`` starts with
            ``"ConfigError: "``.

    Example:
        >>> schema = {"type": "object", "properties": {"age": {"type": "integer"}},
        ...           "required": ["age"]}
        >>> msgs = [{"role": "user", "content": "Age?"},
        ...         {"role": "assistant", "content": '{"age": 42}'}]
        >>> json_schema_reward(msgs, json_schema=schema).score
        1.0
    """
    if json_schema is not None:
        validator = _validator(json_schema, check_formats)  # a bad option: ConfigError propagates
    else:
        try:  # a bad sample: an invalid result, the other samples go on
            validator = _validator(ground_truth, check_formats)
        except ConfigError as exc:
            return EvaluateResult.invalid(f"ConfigError: {exc}")
    reply = last_reply(messages)
    if reply is None:
        return no_reply("json_schema")
    text = reply.text
    ok, instance, how = parse_json_response(text)
    if not ok:
        return EvaluateResult(
            score=0.0,
            reason=how,
            metrics={
                "parseable": MetricResult(score=0.0, success=False, reason=how),
                "schema_valid": MetricResult(score=0.0, success=False, reason="not parsed"),
            },
        )
    parseable = MetricResult(score=1.0, success=True, reason=f"parsed {how}")
    try:
        errors = list(itertools.islice(validator.iter_errors(instance), _MAX_ERRORS))
    except RecursionError:
        why = "the JSON is nested too deeply to validate"
        score = PARSEABLE_CREDIT if partial_credit else 0.0
        valid = MetricResult(score=0.0, success=False, reason=why)
        return EvaluateResult(
            score=score, reason=why, metrics={"parseable": parseable, "schema_valid": valid}
        )
    if not errors:
        valid = MetricResult(score=1.0, success=True, reason="valid against the schema")
        return EvaluateResult(
            score=1.0,
            reason=f"valid JSON ({how}) that matches the schema",
            metrics={"parseable": parseable, "schema_valid": valid},
        )
    fraction = _fraction_valid(validator.schema, instance, errors)
    score = PARSEABLE_CREDIT + (1 - PARSEABLE_CREDIT) * fraction if partial_credit else 0.0
    lines = _error_lines(errors)
    valid = MetricResult(score=0.0, success=False, reason=lines)
    reason = f"JSON does not match the schema ({fraction:.0%} of top-level properties right): "
    return EvaluateResult(
        score=score,
        reason=reason + lines,
        metrics={"parseable": parseable, "schema_valid": valid},
    )
