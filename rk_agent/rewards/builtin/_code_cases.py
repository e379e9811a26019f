"""Test cases for the code-execution reward: the accepted shapes, read into `CodeTestCase`.

Main names:
    CodeTestCase: one stdin/stdout or call-style test case.
    parse_test_cases: a list of `CodeTestCase` from any accepted shape (list, JSON string,
        plain assert strings, APPS/TACO ``{"inputs", "outputs", "fn_name"}``).

The shapes are described in `rk_agent.rewards.builtin.code_execution`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from rk_agent.errors import ConfigError

__all__ = ["CodeTestCase", "parse_test_cases"]


class CodeTestCase(BaseModel):
    """One test case: stdin/stdout (``input`` + ``expected_output``) or call style.

    Attributes:
        input: stdin for a stdin/stdout case.
        expected_output: the expected stdout of a stdin/stdout case.
        call: Python statements, or an expression compared with ``expected``.
        fn_name: a function (or ``Solution`` method) to call with ``args``.
        args: positional arguments for ``fn_name``.
        expected: the expected value of ``call`` or ``fn_name(*args)``; ``None`` is a value,
            leaving the field out means "no value to check".
        unwrap: also accept ``expected[0]`` when ``expected`` is a one-item list (APPS).

    Example:
        >>> CodeTestCase(fn_name="add", args=[1, 2], expected=3).is_stdio
        False
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: str | None = None
    expected_output: str | None = None
    call: str | None = None
    fn_name: str | None = None
    args: list[Any] | None = None
    expected: Any = None
    unwrap: bool = False

    @model_validator(mode="before")
    @classmethod
    def _loose(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"call": data}
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "output" in data and "expected_output" not in data:
            data["expected_output"] = data.pop("output")
        for key in ("input", "expected_output"):  # datasets store numbers and line lists too
            if data.get(key) is not None and not isinstance(data[key], str):
                data[key] = _text(data[key])
        return data

    @model_validator(mode="after")
    def _one_style(self) -> CodeTestCase:
        styles = [self.expected_output is not None, self.call is not None, self.fn_name is not None]
        if sum(styles) != 1:
            raise ValueError(
                "a test case needs exactly one of expected_output (with input, stdin style), "
                "call, or fn_name (with args)"
            )
        return self

    @property
    def is_stdio(self) -> bool:
        """Whether this is a stdin/stdout case."""
        return self.expected_output is not None

    @property
    def has_expected(self) -> bool:
        """Whether ``expected`` was given (``None`` included)."""
        return "expected" in self.model_fields_set

    def harness_spec(self) -> dict[str, Any]:
        """This call-style case as the sandbox harness takes it (see ``_code_harness``)."""
        if self.fn_name is not None:
            spec: dict[str, Any] = {"fn": self.fn_name, "args": self.args or []}
        elif self.has_expected:
            spec = {"eval": self.call}
        else:
            spec = {"exec": self.call}
        if self.has_expected:
            spec.update(expected=self.expected, unwrap=self.unwrap)
        return spec


def parse_test_cases(value: Any) -> list[CodeTestCase]:
    """Read test cases from any accepted shape (see the module docs).

    Raises:
        ConfigError: the value is not test cases; the message says which item and why.

    Example:
        >>> [c.call for c in parse_test_cases('["assert f() == 1"]')]
        ['assert f() == 1']
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = [value]  # test code, e.g. a block of asserts
    if isinstance(value, dict) and "inputs" in value and "outputs" in value:
        value = _from_apps(value)
    if isinstance(value, (dict, CodeTestCase)):
        value = [value]
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not value:
        raise ConfigError(
            f"test cases must be a non-empty list (or a JSON string of one), got {_short(value)}"
        )
    cases = []
    for index, item in enumerate(value):
        try:
            cases.append(CodeTestCase.model_validate(item))
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise ConfigError(
                f"test case {index} ({_short(item)}) is not valid: {problem}"
            ) from exc
    return cases


def _from_apps(data: dict[str, Any]) -> list[dict[str, Any]]:
    inputs, outputs, fn_name = data["inputs"], data["outputs"], data.get("fn_name")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise ConfigError("APPS-style test cases need 'inputs' and 'outputs' lists of one length")
    if fn_name:
        return [
            {"fn_name": fn_name, "args": args, "expected": out, "unwrap": True}
            for args, out in zip(inputs, outputs, strict=True)
        ]
    return [
        {"input": _text(i), "expected_output": _text(o)}
        for i, o in zip(inputs, outputs, strict=True)
    ]


def _text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
