"""MCP tools as rk-agent `Tool`s: an OpenAI schema for the model, a ``run`` for the environment.

An `McpTool` is called like any ``@tool``: its arguments are checked first (a JSON object that
fits the server's input schema; a mistake is a ``bad_arguments`` error the model reads, and
nothing is sent), the call has the server's ``timeout``, and an error becomes a tool message
for the model with ``ok=False``; the step's ``tool_calls`` and ``tool_success`` metrics count
it the same way. ``error_kind`` is one of ``@tool``'s (``bad_arguments``, ``exception`` when the
tool reported an error, ``timeout``) or ``disconnected`` (the connection dropped while the call
was in flight; it was not replayed) or ``server_error`` (the server answered with a protocol
error). A server that refused the credentials or stayed down raises
`rk_agent.errors.ToolServerError` instead: no model can fix that.

Main names: `McpTool`, `openai_schema`, `render_result`, `openai_name`.

Example:
    >>> import mcp_types
    >>> remote = mcp_types.Tool(name="search.web", description="Search the web.",
    ...                         input_schema={"type": "object", "properties": {}})
    >>> openai_schema(remote, name=openai_name(remote.name))["function"]["name"]
    'search_web'
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
import mcp_types

from rk_agent.envs.tool import Tool, ToolResult, _render, decode_arguments
from rk_agent.mcp.client import CallOutcome, McpConnection

__all__ = ["McpTool", "openai_name", "openai_schema", "render_result"]

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def openai_name(name: str, prefix: str = "") -> str:
    """The tool's name as the model sees it: the prefix, then the MCP name with characters
    OpenAI does not allow (anything but letters, digits, ``_`` and ``-``) replaced by ``_``,
    cut to 64 characters."""
    return (prefix + _INVALID.sub("_", name))[:64]


def openai_schema(remote: mcp_types.Tool, *, name: str) -> dict[str, Any]:
    """The OpenAI ``{"type": "function", ...}`` schema of an MCP tool."""
    parameters = dict(remote.input_schema or {})
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    description = remote.description or remote.title or remote.name
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def render_result(result: mcp_types.CallToolResult) -> str:
    """The text of a tool result, as the model reads it.

    Text blocks are joined by newlines; structured content is JSON when there is no text;
    images, audio and resources are named (``[image: image/png]``). Long results are cut as
    ``@tool`` results are.
    """
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            parts.append(f"[image: {block.mime_type}]")
        elif isinstance(block, mcp_types.AudioContent):
            parts.append(f"[audio: {block.mime_type}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {resource.uri}]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    if not parts and result.structured_content is not None:
        return _render(result.structured_content)
    return _render("\n".join(parts))


class McpTool(Tool):
    """A tool of an MCP server, offered to the model as if it were a ``@tool``.

    Args:
        remote: the tool as the server lists it.
        connection: returns the connection to call it on (the shared one, or the episode's).
        server: the server's name in the configuration.
        name: the name the model sees (`openai_name`).
        timeout_s: the limit of one call.
        idempotent: whether a call in flight when the connection dropped is sent again.

    Attributes:
        remote_name: the tool's name on the server.
        origin: where the tool comes from, for error messages (``MCP server 'kb'``).
    """

    def __init__(
        self,
        remote: mcp_types.Tool,
        connection: Callable[[], McpConnection],
        *,
        server: str,
        name: str,
        timeout_s: float,
        idempotent: bool = False,
    ) -> None:
        # Not Tool.__init__: the schema comes from the server, not from a Python signature.
        self.name = name
        self.remote_name = remote.name
        self.server = server
        self.origin = f"MCP server {server!r}"
        self.description = remote.description or remote.name
        self.timeout_s = timeout_s
        self.idempotent = idempotent
        self.is_async = False
        self.func = self._call_remote
        self.schema = openai_schema(remote, name=name)
        self._connection = connection
        self._validator = _validator(self.schema["function"]["parameters"])

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self.server!r})"

    def _call_remote(self, **arguments: Any) -> str:
        result = self.run(arguments)
        if not result.ok:
            raise RuntimeError(result.content)
        return result.content

    def run(self, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Check the arguments and call the tool on its server, within its timeout.

        Returns a `ToolResult` for everything the model can act on (see the module docstring).

        Raises:
            ToolServerError: the server refused the credentials, or stayed down through every
                reconnect attempt.
        """
        start = time.perf_counter()
        parsed, problem = self._check(arguments)
        if problem is not None:
            return ToolResult(problem, ok=False, error_kind="bad_arguments")
        outcome = self._connection().call(
            self.remote_name, parsed, timeout_s=self.timeout_s, idempotent=self.idempotent
        )
        return self._result(outcome, time.perf_counter() - start)

    def _check(
        self, arguments: str | Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], str | None]:
        parsed, problem = decode_arguments(self.name, arguments)
        if problem is not None:
            return {}, problem
        if self._validator is not None:
            problems = sorted(self._validator.iter_errors(parsed), key=lambda e: list(e.path))
            if problems:
                text = "; ".join(
                    f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message}"
                    for e in problems[:5]
                )
                return {}, f"Error: bad arguments for {self.name!r}: {text}."
        return parsed, None

    def _result(self, outcome: CallOutcome, latency_s: float) -> ToolResult:
        if outcome.result is None:
            return ToolResult(
                f"Error: {outcome.message}",
                ok=False,
                error_kind=outcome.error_kind,
                latency_s=latency_s,
            )
        text = render_result(outcome.result)
        if outcome.result.is_error:
            return ToolResult(
                f"Error: tool {self.name!r} failed: {text}",
                ok=False,
                error_kind="exception",
                latency_s=latency_s,
            )
        return ToolResult(text, latency_s=latency_s)


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    """A validator of the tool's input schema, or ``None`` when the schema is itself invalid
    (the server then checks the arguments alone)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return cls(schema)
