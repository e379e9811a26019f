"""`@tool`: a typed, documented Python function becomes an OpenAI tool the model can call.

The parameters' JSON schema comes from the type hints (through pydantic), the descriptions from
the Google-style docstring. Calling a tool never raises: bad arguments, an exception inside the
tool or a timeout all give a `ToolResult` with ``ok=False`` and an error message written for the
model, so it can correct itself on the next turn.

Main names: `tool`, `Tool`, `ToolResult`.

Example:
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.
    ...
    ...     Args:
    ...         a: the first number.
    ...         b: the second number.
    ...     '''
    ...     return a + b
    >>> add.schema["function"]["parameters"]["required"]
    ['a', 'b']
    >>> add.run({"a": 2, "b": "x"}).ok
    False
    >>> add.run('{"a": 2, "b": 3}').content
    '5'
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import json
import math
import re
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from rk_agent.daemon_threads import DaemonThreads
from rk_agent.errors import ConfigError
from rk_agent.loop_thread import run_sync

__all__ = ["Tool", "ToolResult", "decode_arguments", "tool"]

_MAX_RESULT_CHARS = 8_000
# Threads for tool calls: a timed-out sync call cannot be killed, only abandoned, and daemon
# threads let the process end without it (`rk_agent.daemon_threads`).
_tool_threads = DaemonThreads(max_threads=64, name="rk-tool")


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, as the model will see it.

    Attributes:
        content: what goes into the ``tool`` message (the result, or the error for the model).
        ok: whether the tool ran and returned.
        error_kind: ``"bad_arguments"``, ``"unknown_tool"``, ``"exception"`` or ``"timeout"``.
        latency_s: wall time of the call.
    """

    content: str
    ok: bool = True
    error_kind: str | None = None
    latency_s: float = 0.0


class Tool:
    """A function the model may call, with its OpenAI schema. Made by `tool`.

    A sync tool runs on a thread of its own, so that its timeout holds, unless it declares it
    never blocks (``inline=True``): then in the caller's thread, where a thread would cost more
    than the work.

    Attributes:
        inline: whether calls run in the caller's thread (a sync tool declared ``inline``).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float = 30.0,
        inline: bool = False,
    ) -> None:
        self.func = func
        self.name = name or func.__name__
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", self.name):
            raise ConfigError(
                f"tool name {self.name!r} is not valid: use 1-64 letters, digits, '_' or '-'."
            )
        doc = inspect.getdoc(func) or ""
        summary, arg_docs = _parse_docstring(doc)
        self.description = description or summary or self.name
        self.timeout_s = timeout_s
        self.is_async = inspect.iscoroutinefunction(func)
        self.inline = inline and not self.is_async
        self._arguments = _arguments_model(func, self.name, arg_docs)
        parameters = self._arguments.model_json_schema()
        parameters.pop("title", None)
        for prop in parameters.get("properties", {}).values():
            prop.pop("title", None)
        self.schema: dict[str, Any] = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (as if undecorated)."""
        return self.func(*args, **kwargs)

    def run(self, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Validate the arguments and run the tool, within its timeout. Never raises.

        Args:
            arguments: the model's arguments, as a JSON string (OpenAI) or a mapping.
        """
        start = time.perf_counter()
        parsed, problem = self._validate(arguments)
        if problem is not None:
            return ToolResult(problem, ok=False, error_kind="bad_arguments")
        try:
            value = self._invoke(parsed)
        except TimeoutError:
            return ToolResult(
                f"Error: tool {self.name!r} timed out after {self.timeout_s:g} s.",
                ok=False,
                error_kind="timeout",
                latency_s=time.perf_counter() - start,
            )
        except Exception as exc:
            return ToolResult(
                f"Error: tool {self.name!r} failed: {type(exc).__name__}: {exc}",
                ok=False,
                error_kind="exception",
                latency_s=time.perf_counter() - start,
            )
        return ToolResult(_render(value), latency_s=time.perf_counter() - start)

    def _validate(
        self, arguments: str | Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], str | None]:
        model = None
        if isinstance(arguments, str):
            # Well-formed arguments (the usual case) in one pass, JSON to the model; anything
            # else takes the path below, which says what is wrong as the model reads it.
            with contextlib.suppress(ValidationError):
                model = self._arguments.model_validate_json(arguments)
        if model is None:
            decoded, problem = decode_arguments(self.name, arguments)
            if problem is not None:
                return {}, problem
            try:
                model = self._arguments.model_validate(decoded)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                    for e in exc.errors()
                )
                return {}, f"Error: bad arguments for {self.name!r}: {problems}."
        return {name: getattr(model, name) for name in type(model).model_fields}, None

    def _invoke(self, arguments: dict[str, Any]) -> Any:
        if self.is_async:
            return run_sync(asyncio.wait_for(self.func(**arguments), self.timeout_s))
        if self.inline:
            return self.func(**arguments)
        future = _tool_threads.submit(self.func, **arguments)
        try:
            return future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise TimeoutError from exc


@overload
def tool(func: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    func: None = None, /, *, name: str | None = None, description: str | None = None,
    timeout_s: float = 30.0, inline: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...  # fmt: skip


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float = 30.0,
    inline: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a typed, documented function (sync or async) a `Tool`.

    Args:
        func: the function (when used bare).
        name: the tool's name; defaults to the function's.
        description: defaults to the docstring's first paragraph.
        timeout_s: wall-clock limit per call. A sync tool that runs inline (below) cannot be
            cut off at it.
        inline: the tool's declaration of whether it may block: ``False`` (the default, the
            safe choice) runs a sync tool on a thread of its own, so its timeout holds and a
            call that hangs is abandoned; ``True`` says it never blocks (quick, pure Python:
            arithmetic, a lookup in memory) and runs it in the caller's thread, where a thread
            would cost more than the work. An environment runs its steps on the event loop
            only if all its tools say ``True`` (`rk_agent.envs.base.ChatEnv.inline_steps`).
            Async tools always run on a loop of their own.

    Raises:
        ConfigError: a parameter has no type hint, or the name is not a valid tool name.
    """

    def make(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, timeout_s=timeout_s, inline=inline)

    return make if func is None else make(func)


def _arguments_model(
    func: Callable[..., Any], name: str, arg_docs: dict[str, str]
) -> type[BaseModel]:
    hints = typing.get_type_hints(func)
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.name not in hints:
            raise ConfigError(
                f"tool {name!r}: parameter {param.name!r} has no type hint; the model needs "
                "one to know what to send."
            )
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            hints[param.name],
            Field(default=default, description=arg_docs.get(param.name)),
        )
    config = ConfigDict(extra="forbid")
    return create_model(f"{name}_arguments", __config__=config, **fields)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and ``{arg: description}`` from a Google-style docstring."""
    summary = doc.split("\n\n", 1)[0].strip().replace("\n", " ")
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args and stripped.endswith(":") and not line.startswith(" "):
            break  # the next section
        if not in_args or not stripped:
            continue
        match = re.match(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", stripped)
        if match and line.startswith(("    ", "\t")) and not line.startswith(("        ", "\t\t")):
            current = match.group(1)
            args[current] = match.group(2)
        elif current:
            args[current] += " " + stripped
    return summary, args


def _render(value: Any) -> str:
    kind = type(value)
    if kind is str:
        text = value
    elif kind is int or (kind is float and math.isfinite(value)):
        text = repr(value)  # what json.dumps writes for them, without its encoder
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, default=str)
        except (TypeError, ValueError):
            text = str(value)
    if len(text) > _MAX_RESULT_CHARS:
        text = text[:_MAX_RESULT_CHARS] + f"... [truncated, {len(text)} chars in all]"
    return text


def decode_arguments(
    tool_name: str, arguments: str | Mapping[str, Any] | None
) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, or the message the model reads when they are not a
    JSON object (empty or missing arguments are ``{}``). Every kind of tool checks them so.

    Example:
        >>> decode_arguments("add", '{"a": 1}')
        ({'a': 1}, None)
        >>> decode_arguments("add", "[1]")[1]
        "Error: the arguments for 'add' must be a JSON object."
    """
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return {}, (
                f"Error: the arguments for {tool_name!r} are not valid JSON ({exc.msg}). "
                "Send a JSON object."
            )
    if not isinstance(arguments, Mapping):
        return {}, f"Error: the arguments for {tool_name!r} must be a JSON object."
    return dict(arguments), None
