"""Function-calling rewards: did the model call the right tool, with the right arguments?

Main names:
    match_function_call: ``"function_call"``, one call against an expected name and argument
        schema (argument types or values), with ``exact`` or ``partial`` argument matching.
    tool_calls_match: ``"tool_calls"``, every OpenAI ``tool_calls`` entry of the last assistant
        message against a list of expected calls, order-sensitive or not.

Both read the model's calls from the last assistant message's ``tool_calls``.
`match_function_call` also falls back to that message's text, read with the same
`rk_agent.tool_calls.ToolCallFormat` the rollout engine uses (``tool_call_format``, default
``"hermes"``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks), so the
reward and the engine agree on whether a call parsed: the first call when the text's calls
parse, a score of 0 with the format's parse error when they do not. Text with no call in the
format still counts when the whole content is one JSON object with ``name`` and ``arguments``
(or ``parameters``), or a fenced ```` ```json ```` block holding one
(`rk_agent.rewards.builtin.json_schema.parse_json_response`).

Broken JSON arguments from the model score 0 with a reason; a missing or malformed expectation
or a bad option gives an invalid result (``is_score_valid=False``, ``error`` set).
"""

from __future__ import annotations

import functools
import json
import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from pydantic import BaseModel

from rk_agent.errors import ConfigError, did_you_mean
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.builtin.json_schema import parse_json_response
from rk_agent.rewards.decorator import reward_function
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["STRICTNESS_LEVELS", "match_function_call", "tool_calls_match"]

STRICTNESS_LEVELS = ("exact", "partial")
"""The values `match_function_call` accepts for ``argument_match_strictness``."""

EXTRA_ARGUMENT_PENALTY = 0.1
"""What each unexpected argument takes off the ``partial`` arguments score."""

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60


@dataclass(frozen=True)
class _Call:
    """A call, made or expected; ``arguments`` is ``None`` when unreadable, ``problem`` says why."""

    name: str | None
    arguments: dict[str, Any] | None
    problem: str | None = None


@dataclass(frozen=True)
class _ArgSpec:
    """What one expected argument must satisfy: a JSON Schema, and whether it is required."""

    required: bool
    validator: Draft202012Validator


@dataclass(frozen=True)
class _ExpectedCall:
    name: str
    arguments: Mapping[str, _ArgSpec]


def _parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments as a dict from a JSON string or a mapping; ``(None, why)`` if impossible."""
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"arguments are not valid JSON ({exc}): {_short.repr(raw)}"
    except RecursionError:
        return None, "arguments are nested too deeply to parse"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {_short.repr(raw)}"
    return value, None


def _call_from_json_object(obj: Any) -> _Call | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    raw = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    arguments, problem = _parse_arguments(raw)
    return _Call(obj["name"], arguments, problem)


def _call_from_text(text: str, tool_format: ToolCallFormat) -> _Call | None:
    """A call written in the text (see the module docstring), or ``None`` if there is none."""
    reply = tool_format.parse(text)
    if reply.parse_error is not None:
        return _Call(None, None, f"the tool call could not be read: {reply.parse_error}")
    if reply.message.tool_calls:
        return _first_call(reply.message)
    parsed, value, _ = parse_json_response(text)
    return _call_from_json_object(value) if parsed else None


def _first_call(message: Message) -> _Call:
    function = (message.tool_calls or [])[0].function
    arguments, problem = _parse_arguments(function.arguments)
    return _Call(function.name, arguments, problem)


def _model_call(message: Message, tool_format: ToolCallFormat) -> _Call | None:
    if message.tool_calls:
        return _first_call(message)
    return _call_from_text(message.text, tool_format)


# --------------------------------------------------------------------------------------------
# match_function_call: the expected schema


def _load_json_option(value: Any, option: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"{option} is a string but not valid JSON: {exc}") from exc
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    return value


def _arg_spec(name: str, schema: Mapping[str, Any], required: bool) -> _ArgSpec:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ConfigError(
            f"expected_call_schema: argument {name!r} has an invalid type spec "
            f"{_short.repr(schema)}: {exc.message}"
        ) from exc
    return _ArgSpec(required, Draft202012Validator(schema))


def _expected_from_arguments(arguments: Any) -> dict[str, _ArgSpec]:
    """``{"arguments": {name: type spec | value}}``: every listed argument is required."""
    arguments = _load_json_option(arguments, "expected_call_schema['arguments']")
    if not isinstance(arguments, Mapping):
        raise ConfigError(
            "expected_call_schema['arguments'] must map argument names to a type spec or an "
            f"expected value, got {type(arguments).__name__}"
        )
    specs = {}
    for name, spec in arguments.items():
        is_type_spec = isinstance(spec, Mapping) and "type" in spec
        schema = spec if is_type_spec else {"const": spec}
        specs[name] = _arg_spec(name, schema, required=True)
    return specs


def _expected_from_parameters(parameters: Any) -> dict[str, _ArgSpec]:
    """``{"parameters": <JSON Schema object>}``: ``required`` says which must be present."""
    is_object = isinstance(parameters, Mapping)
    properties = (parameters.get("properties") or {}) if is_object else None
    required = (parameters.get("required") or []) if is_object else None
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise ConfigError(
            "expected_call_schema['parameters'] must be a JSON Schema object with 'properties' "
            f"(an object) and 'required' (a list), got {_short.repr(parameters)}"
        )
    specs = {name: _arg_spec(name, schema, name in required) for name, schema in properties.items()}
    for name in required:
        specs.setdefault(name, _arg_spec(name, {}, required=True))
    return specs


@functools.lru_cache(maxsize=256)
def _expected_call_cached(schema_json: str) -> _ExpectedCall:
    schema = json.loads(schema_json)
    if isinstance(schema, dict) and isinstance(schema.get("function"), dict):
        schema = schema["function"]  # an OpenAI tool definition: {"type": "function", ...}
    if not isinstance(schema, dict) or not isinstance(schema.get("name"), str):
        raise ConfigError(
            'expected_call_schema must be an object with a "name" and "arguments" (names to '
            'type specs or values) or "parameters" (a JSON Schema), got '
            f"{_short.repr(schema)}"
        )
    if "arguments" in schema:
        specs = _expected_from_arguments(schema["arguments"])
    elif "parameters" in schema:
        specs = _expected_from_parameters(schema["parameters"])
    else:
        specs = {}
    return _ExpectedCall(schema["name"], specs)


def _expected_call(schema: Any) -> _ExpectedCall:
    if schema is None:
        raise ConfigError(
            "function_call reward needs the expected call: pass expected_call_schema={'name': "
            "..., 'arguments': {...}} (or the same as ground_truth)"
        )
    schema = _load_json_option(schema, "expected_call_schema")
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"expected_call_schema must be JSON data: {exc}") from exc
    return _expected_call_cached(key)


def _check_value(spec: _ArgSpec, value: Any) -> str | None:
    try:
        error = best_match(spec.validator.iter_errors(value))
    except RecursionError:
        return "value is nested too deeply to check"
    return None if error is None else error.message[:200]


def _labelled(**groups: list[str]) -> list[str]:
    """``["missing: a, b", "extra: c"]`` for the non-empty groups."""
    return [f"{label}: {', '.join(items)}" for label, items in groups.items() if items]


def _arguments_metric(
    actual: dict[str, Any], expected: Mapping[str, _ArgSpec], strictness: str
) -> MetricResult:
    missing = [n for n, spec in expected.items() if spec.required and n not in actual]
    extra = [n for n in actual if n not in expected]
    wrong = [
        f"{n} ({why})"
        for n in expected
        if n in actual and (why := _check_value(expected[n], actual[n]))
    ]
    problems = _labelled(missing=missing, extra=extra, wrong=wrong)
    if strictness == "exact":
        score = 0.0 if problems else 1.0
    else:
        counted = [n for n, spec in expected.items() if spec.required or n in actual]
        good = len(counted) - len(missing) - len(wrong)
        fraction = good / len(counted) if counted else 1.0
        score = max(0.0, fraction - EXTRA_ARGUMENT_PENALTY * len(extra))
    reason = "; ".join(problems) if problems else "all arguments match"
    return MetricResult(score=score, success=not problems, reason=reason)


@reward_function(
    name="function_call",
    description="Whether the model called the expected function with matching arguments.",
)
def match_function_call(
    messages: list[Message],
    function_name: str | None = None,
    parsed_arguments: dict[str, Any] | str | None = None,
    expected_call_schema: dict[str, Any] | str | None = None,
    argument_match_strictness: str = "exact",
    ground_truth: Any = None,
    tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
    **kwargs: Any,
) -> EvaluateResult:
    """Score one function call against an expected name and arguments.

    The call is ``function_name`` / ``parsed_arguments`` when given; what is not given comes from
    the last assistant message (its first ``tool_calls`` entry, else the first call its text
    makes in ``tool_call_format``, or a JSON object as its whole text; see the module
    docstring).

    The expected call (``expected_call_schema``, else ``ground_truth``; a dict or a JSON string;
    an OpenAI tool definition ``{"type": "function", "function": {...}}`` also works) has a
    ``name`` and either

    * ``arguments``: argument names to a *type spec* or an *expected value*. A dict with a
      ``"type"`` key is a type spec, a JSON Schema the value must satisfy (``{"type": "string"}``,
      ``{"type": "string", "enum": ["c", "f"]}``); anything else is the expected value, compared
      as JSON (``1 == 1.0``, ``"1" != 1``, ``true != 1``). Every listed argument is required. To
      expect a literal dict that has a ``"type"`` key, write ``{"type": "object", "const": {...}}``.
    * ``parameters``: a full JSON Schema object (``properties``, ``required``); arguments not in
      ``required`` may be left out.

    With ``argument_match_strictness="exact"`` the arguments score 1.0 only when no required
    argument is missing, none is unexpected and every value fits its spec, else 0.0. With
    ``"partial"`` they score the fraction of expected arguments (the required ones plus optional
    ones that were given) present and fitting, minus `EXTRA_ARGUMENT_PENALTY` (0.1) per unexpected
    argument, floored at 0. The overall score is the name match (1 or 0) times the arguments score:
    the right arguments to the wrong function are worth nothing.

    Args:
        messages: the conversation, ending with the assistant's call.
        function_name: the called function's name (overrides the message).
        parsed_arguments: the call's arguments, a dict or a JSON string (overrides the message).
        expected_call_schema: the expected call, as above.
        argument_match_strictness: ``"exact"`` or ``"partial"``.
        ground_truth: the expected call when ``expected_call_schema`` is not given.
        tool_call_format: the text format calls in the message's text are read with, a name
            (``"hermes"``, ``"llama3_json"``) or a `rk_agent.tool_calls.ToolCallFormat`; use
            the one the rollouts used.
        **kwargs: ignored.

    Returns:
        The score with metrics ``function_name_match`` and ``arguments_match`` (whose reason lists
        missing, extra and wrong arguments).

    Raises:
        ConfigError: an unknown strictness or ``tool_call_format`` (`UnknownNameError`), or a
            malformed ``expected_call_schema``. A missing or
            malformed ``ground_truth`` is a bad sample instead: an invalid result whose
            ``error`` starts with ``"ConfigError: "``.

    Example:
        >>> schema = {"name": "get_weather",
        ...           "arguments": {"location": {"type": "string"}, "unit": {"type": "string"}}}
        >>> match_function_call(messages=[{"role": "user", "content": "Weather in Paris?"}],
        ...     function_name="get_weather", parsed_arguments={"location": "Paris", "unit": "c"},
        ...     expected_call_schema=schema).score
        1.0
    """
    if argument_match_strictness not in STRICTNESS_LEVELS:
        raise ConfigError(
            f"argument_match_strictness must be one of {', '.join(map(repr, STRICTNESS_LEVELS))};"
            f" got {argument_match_strictness!r}."
            f"{did_you_mean(str(argument_match_strictness), STRICTNESS_LEVELS)}"
        )
    tool_format = get_tool_call_format(tool_call_format)
    if expected_call_schema is not None:
        expected = _expected_call(expected_call_schema)  # a bad option: ConfigError propagates
    else:
        try:  # a bad sample: an invalid result, the other samples go on
            expected = _expected_call(ground_truth)
        except ConfigError as exc:
            return EvaluateResult.invalid(f"ConfigError: {exc}")
    call = _given_or_model_call(messages, function_name, parsed_arguments, tool_format)
    if isinstance(call, EvaluateResult):
        return call
    return _score_call(call, expected, argument_match_strictness)


def _given_or_model_call(
    messages: list[Message],
    function_name: str | None,
    parsed_arguments: Any,
    tool_format: ToolCallFormat,
) -> _Call | EvaluateResult:
    found: _Call | None = None
    if function_name is None or parsed_arguments is None:
        message = last_reply(messages)
        if message is None:
            return EvaluateResult.invalid(
                "reward 'function_call' reads the call from the last assistant message, but the "
                "conversation has none; pass function_name= and parsed_arguments=, or the reply"
            )
        found = _model_call(message, tool_format)
    name = function_name if function_name is not None else found.name if found else None
    if name is None:
        why = (found and found.problem) or "no function call in the last message"
        metric = MetricResult(score=0.0, success=False, reason=why)
        metrics = {"function_name_match": metric, "arguments_match": metric}
        return EvaluateResult(score=0.0, reason=why, metrics=metrics)
    if parsed_arguments is not None:
        return _Call(name, *_parse_arguments(parsed_arguments))
    if found is not None and found.name == name:
        return found
    return _Call(name, {})


def _score_call(call: _Call, expected: _ExpectedCall, strictness: str) -> EvaluateResult:
    name_ok = call.name == expected.name
    name_metric = MetricResult(
        score=float(name_ok),
        success=name_ok,
        reason=f"called {call.name!r}" + ("" if name_ok else f", expected {expected.name!r}"),
    )
    if call.arguments is None:
        args_metric = MetricResult(score=0.0, success=False, reason=call.problem)
    else:
        args_metric = _arguments_metric(call.arguments, expected.arguments, strictness)
    score = name_metric.score * args_metric.score
    if not name_ok:
        reason = f"wrong function: expected {expected.name!r}, got {call.name!r}"
    else:
        reason = f"{call.name}: {args_metric.reason}"
    return EvaluateResult(
        score=score,
        reason=reason,
        metrics={"function_name_match": name_metric, "arguments_match": args_metric},
    )


# --------------------------------------------------------------------------------------------
# tool_calls_match


def _canonical(value: Any) -> Any:
    """A JSON value in a form where equal JSON compares equal: ``1 == 1.0``, ``true != 1``."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _same_json(a: Any, b: Any) -> bool:
    try:
        return bool(_canonical(a) == _canonical(b))
    except RecursionError:  # nesting deeper than Python's stack: cannot be the expected value
        return False


def _call_key(call: _Call) -> str | None:
    """A string equal for exactly the calls that match; ``None`` when nothing can match it."""
    if call.arguments is None:
        return None
    try:
        return json.dumps([call.name, _canonical(call.arguments)], sort_keys=True)
    except (RecursionError, TypeError, ValueError):
        return None


def _expected_calls(value: Any) -> list[_Call]:
    if value is None:
        raise ConfigError(
            'tool_calls reward needs the expected calls: pass expected_calls=[{"name": ..., '
            '"arguments": {...}}] or the same as ground_truth ([] when no call is expected)'
        )
    value = _load_json_option(value, "expected_calls")
    if isinstance(value, Mapping):
        value = (value.get("tool_calls") or []) if "tool_calls" in value else [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(
            'expected_calls must be a list of {"name": ..., "arguments": {...}} or OpenAI '
            f"tool_call dicts (or a JSON string of one), got {type(value).__name__}"
        )
    calls = []
    for index, item in enumerate(value):
        item = _load_json_option(item, f"expected_calls[{index}]")
        inner = item.get("function", item) if isinstance(item, Mapping) else None
        if not isinstance(inner, Mapping) or not isinstance(inner.get("name"), str):
            raise ConfigError(
                f'expected_calls[{index}] must have a "name" (directly or under "function"), '
                f"got {_short.repr(item)}"
            )
        arguments, problem = _parse_arguments(inner.get("arguments"))
        if problem:
            raise ConfigError(f"expected_calls[{index}] ({inner['name']}): {problem}")
        calls.append(_Call(inner["name"], arguments))
    return calls


def _pair_calls(
    expected: list[_Call], actual: list[_Call], order_sensitive: bool
) -> list[tuple[int, int]]:
    """Pairs (expected index, actual index) that count against each other.

    Order-insensitive pairing first pairs identical calls, then calls with the same name.
    Identity and same-name are equivalence relations, so this maximises the number of matching
    calls and, after that, the number of same-name pairs: within a class any pairing is as good
    as another, which a greedy first-fit on names alone would not be.
    """
    if order_sensitive:
        return [(i, i) for i in range(min(len(expected), len(actual)))]
    by_key: dict[str, list[int]] = {}
    for j, call in enumerate(actual):
        if (key := _call_key(call)) is not None:
            by_key.setdefault(key, []).append(j)
    pairs = {}  # expected index -> actual index
    for i, call in enumerate(expected):
        if bucket := by_key.get(_call_key(call) or ""):
            pairs[i] = bucket.pop(0)
    used = set(pairs.values())
    by_name: dict[str | None, list[int]] = {}
    for j, call in enumerate(actual):
        if j not in used:
            by_name.setdefault(call.name, []).append(j)
    for i, call in enumerate(expected):
        if i not in pairs and (bucket := by_name.get(call.name)):
            pairs[i] = bucket.pop(0)
    return sorted(pairs.items())


def _argument_diff(expected: dict[str, Any], actual: dict[str, Any]) -> str:
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    wrong = [
        f"{k}: expected {_short.repr(expected[k])}, got {_short.repr(actual[k])}"
        for k in expected
        if k in actual and not _same_json(expected[k], actual[k])
    ]
    parts = [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"extra {', '.join(extra)}"] if extra else []
    return "; ".join(parts + wrong) or "arguments differ"


@reward_function(
    name="tool_calls",
    description="How well the assistant's tool calls match the expected calls.",
)
def tool_calls_match(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    expected_calls: Any = None,
    order_sensitive: bool = False,
    **kwargs: Any,
) -> EvaluateResult:
    """Score the last assistant message's ``tool_calls`` against the expected calls.

    A call matches an expected one when the names are equal and the arguments are equal as JSON
    values after parsing: key order does not matter, ``1 == 1.0``, but ``"1" != 1`` and
    ``true != 1`` (a string is not a number, whatever it spells). Arguments the model sent as
    broken JSON match nothing. Order-insensitive pairing (the default) finds the pairing with the
    most matches; with ``order_sensitive=True`` the i-th call is compared with the i-th expected.
    The score is ``(matches - extra) / len(expected)``, at least 0, where ``extra`` is how many
    more calls were made than expected: a missing call costs its share, and each call too many
    cancels a matching one, so calling every tool offered (or repeating a call) earns no partial
    credit when at most half of them are wanted (``rk-agent check reward tool_calls`` plays
    that policy). No call expected and none made scores 1.0; any call made when none was
    expected scores 0.

    Args:
        messages: the conversation; the last assistant message's ``tool_calls`` are scored.
        ground_truth: the expected calls when ``expected_calls`` is not given.
        expected_calls: a list of ``{"name": ..., "arguments": {...}}`` or OpenAI tool-call dicts
            (arguments as a dict or a JSON string), an assistant message dict with
            ``tool_calls``, or a JSON string of any of these. ``[]`` means no call is expected.
        order_sensitive: whether the calls must come in the expected order.
        **kwargs: ignored.

    Returns:
        The score with metrics ``call_count_match``, ``names_match`` (same-name pairs over the
        larger count) and ``arguments_match`` (the same-name pairs whose arguments match).

    Raises:
        ConfigError: malformed ``expected_calls``. Missing or malformed ``ground_truth`` is a
            bad sample instead: an invalid result whose ``error`` starts with ``"ConfigError: "``.

    Example:
        >>> msgs = [{"role": "user", "content": "Weather in Paris?"},
        ...         {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
        ...          "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}]
        >>> tool_calls_match(msgs, [{"name": "get_weather", "arguments": {"city": "Paris"}}]).score
        1.0
    """
    if expected_calls is not None:
        expected = _expected_calls(expected_calls)  # a bad option: ConfigError propagates
    else:
        try:  # a bad sample: an invalid result, the other samples go on
            expected = _expected_calls(ground_truth)
        except ConfigError as exc:
            return EvaluateResult.invalid(f"ConfigError: {exc}")
    message = last_reply(messages)
    if message is None:
        return no_reply("tool_calls")
    actual = [
        _Call(tc.function.name, *_parse_arguments(tc.function.arguments))
        for tc in message.tool_calls or []
    ]
    return _score_tool_calls(expected, actual, _pair_calls(expected, actual, order_sensitive))


def _call_arguments_metric(problems: list[str], same_name: int, n: int) -> MetricResult:
    """How many of the ``same_name`` pairs of calls also have matching arguments."""
    if same_name == 0:
        none_made = n == 0
        reason = "no calls to compare" if none_made else "no call has an expected name"
        return MetricResult(score=float(none_made), success=none_made, reason=reason)
    return MetricResult(
        score=(same_name - len(problems)) / same_name,
        success=not problems,
        reason="; ".join(problems) or "arguments match for every same-name call",
    )


def _score_tool_calls(
    expected: list[_Call], actual: list[_Call], pairs: list[tuple[int, int]]
) -> EvaluateResult:
    n = max(len(expected), len(actual))
    same_name = [(i, j) for i, j in pairs if expected[i].name == actual[j].name]
    arg_problems = []
    for i, j in same_name:
        want, got = expected[i], actual[j]
        key = _call_key(got)
        if got.arguments is None:
            arg_problems.append(f"{got.name}: {got.problem}")
        elif key is None or key != _call_key(want):
            arg_problems.append(
                f"{got.name}: {_argument_diff(want.arguments or {}, got.arguments)}"
            )
    matches = len(same_name) - len(arg_problems)
    named_expected = {i for i, _ in same_name}
    named_actual = {j for _, j in same_name}
    missing = [str(c.name) for i, c in enumerate(expected) if i not in named_expected]
    unexpected = [str(c.name) for j, c in enumerate(actual) if j not in named_actual]
    name_reason = "; ".join(_labelled(missing=missing, unexpected=unexpected))
    count_ok = len(expected) == len(actual)
    metrics = {
        "call_count_match": MetricResult(
            score=float(count_ok),
            success=count_ok,
            reason=f"expected {len(expected)} call(s), got {len(actual)}",
        ),
        "names_match": MetricResult(
            score=len(same_name) / n if n else 1.0,
            success=not name_reason,
            reason=name_reason or "every call has the expected name",
        ),
        "arguments_match": _call_arguments_metric(arg_problems, len(same_name), n),
    }
    extra = max(0, len(actual) - len(expected))
    score = max(0, matches - extra) / len(expected) if expected else float(not actual)
    if n == 0:
        reason = "no call expected and none made"
    else:
        problems = [m.reason for m in metrics.values() if not m.success]
        reason = f"{matches} of {n} call(s) match" + "".join(f"; {p}" for p in problems)
        if extra and matches:
            reason += f"; {extra} call(s) too many cancel as many matches"
    return EvaluateResult(score=score, reason=reason, metrics=metrics)
