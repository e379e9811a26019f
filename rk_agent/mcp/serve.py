"""An rk-agent environment served over MCP, so agents that speak MCP can be evaluated on it.

`build_env_server` makes an MCP server (the SDK's low-level ``Server``) whose tools are the
environment's ``@tool`` functions, plus two that play the task:

- ``start_task(seed)``: start an episode; returns the task's prompt (its system and user
  messages) as text, and its id;
- ``submit_answer(answer)``: end it with ``answer`` as the final assistant message; returns the
  episode's score, whether it counts as solved, and each reward's score, as JSON.

One server plays one environment, one episode at a time: over stdio that is one per client (each
client starts its own server process); over HTTP, clients share it (MCP's 2026 protocol has no
sessions to tell them apart), so serve one agent per HTTP server.
`serve_env` runs the server over stdio (for an ``mcpServers`` ``command``) or streamable HTTP
(``rk-agent mcp serve --env tools --http 127.0.0.1:8000``, optionally requiring a bearer token).

Main names: `build_env_server`, `serve_env`, `TASK_TOOLS`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

import mcp_types

from rk_agent.binding import check_port, is_loopback
from rk_agent.envs.base import ChatEnv
from rk_agent.envs.offered_tools import ToolScope
from rk_agent.errors import ConfigError
from rk_agent.terminal_text import escaped_log_config
from rk_agent.types import Message

__all__ = ["TASK_TOOLS", "build_env_server", "serve_env"]

TASK_TOOLS = ("start_task", "submit_answer")
"""The names of the two tools that play the environment's task."""

_START = mcp_types.Tool(
    name="start_task",
    description=(
        "Start a new task of this environment and get its instructions. Solve it with the "
        "other tools, then call submit_answer."
    ),
    input_schema={
        "type": "object",
        "properties": {"seed": {"type": "integer", "description": "picks the task", "default": 0}},
    },
)
_SUBMIT = mcp_types.Tool(
    name="submit_answer",
    description="Submit the final answer to the current task; returns its score.",
    input_schema={
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "description": "your final message, as the task asks for it (e.g. 'Answer: 42')",
            }
        },
        "required": ["answer"],
    },
)


def build_env_server(
    make_env: Callable[[], ChatEnv], *, name: str = "rk-agent", task_tools: bool = True
) -> Any:
    """An MCP server exposing an environment's tools (and its task and reward as tools).

    Args:
        make_env: builds the environment (once).
        name: the server's name, as clients see it.
        task_tools: also offer ``start_task`` and ``submit_answer``.

    Returns:
        An ``mcp.server.lowlevel.Server``.

    Raises:
        ConfigError: an environment tool is called ``start_task`` or ``submit_answer``; the
            environment's tools differ per task or change between turns (``tool_scope``).
    """
    import anyio.to_thread
    from mcp.server.lowlevel.server import Server

    probe = make_env()
    if probe.tool_scope is not ToolScope.ENV:
        label = getattr(probe, "env_name", None) or type(probe).__name__
        varies = "differ per task" if probe.tool_scope is ToolScope.TASK else "change between turns"
        probe.close()
        raise ConfigError(
            f"{label} cannot be served over MCP: its tools {varies} (tool_scope "
            f"{probe.tool_scope.value!r}), and an MCP server offers one list of tools that its "
            "clients read once; play it with rk-agent rollout, whose policies are given each "
            "episode's tools."
        )
    listed = [
        mcp_types.Tool(
            name=t.name,
            description=t.description,
            input_schema=t.schema["function"]["parameters"],
        )
        for t in probe._tools.values()
    ]
    if task_tools:
        clash = [t.name for t in listed if t.name in TASK_TOOLS]
        if clash:
            raise ConfigError(
                f"the environment has tools named {clash}, which the task tools use; serve it "
                "with task_tools=False (--no-task-tools)."
            )
        listed += [_START, _SUBMIT]
    env = probe

    async def list_tools(
        ctx: Any, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        arguments = dict(params.arguments or {})
        if task_tools and params.name in TASK_TOOLS:
            play = _start if params.name == "start_task" else _submit
            return await anyio.to_thread.run_sync(play, env, arguments)
        found = env._tools.get(params.name)
        if found is None:
            return _text(f"Error: there is no tool named {params.name!r}.", error=True)
        result = await anyio.to_thread.run_sync(found.run, arguments)
        return _text(result.content, error=not result.ok)

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def serve_env(
    make_env: Callable[[], ChatEnv],
    *,
    http: str | None = None,
    token: str | None = None,
    allow_public: bool = False,
    task_tools: bool = True,
    name: str = "rk-agent",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve an environment over MCP until stdin closes (stdio) or Ctrl-C (HTTP).

    Args:
        make_env: builds the environment (once).
        http: ``host:port`` to serve streamable HTTP on (path ``/mcp``); ``None`` for stdio.
        token: with ``http``, the bearer token clients must send (others get HTTP 401).
        allow_public: serve a non-loopback ``http`` address without a token (the same rule as
            the reward server: refused otherwise, since anyone who reaches the machine could
            call the environment's tools, code-running ones included).
        task_tools: offer ``start_task`` and ``submit_answer`` too.
        name: the server's name.
        on_ready: called with the endpoint's URL once the HTTP server listens.

    Raises:
        ConfigError: a malformed ``http``, a port that cannot be bound, or a non-loopback
            address without a token.
    """
    if http is not None:
        host, port = _http_address(http, token, allow_public)
    server = build_env_server(make_env, name=name, task_tools=task_tools)
    if http is None:
        import anyio
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return
    import uvicorn

    app: Any = server.streamable_http_app(host=host)
    if token is not None:
        app = _BearerToken(app, token)
    config = uvicorn.Config(
        app, host=host, port=int(port), log_level="warning",
        log_config=escaped_log_config(uvicorn.config.LOGGING_CONFIG),  # a tool's text, escaped
    )  # fmt: skip
    runner = uvicorn.Server(config)
    if on_ready is not None:
        startup = runner.startup

        async def announce(sockets: Any = None) -> None:
            await startup(sockets)
            on_ready(f"http://{host}:{port}/mcp")

        runner.startup = announce  # type: ignore[method-assign]
    runner.run()


def _http_address(http: str, token: str | None, allow_public: bool) -> tuple[str, int]:
    """``host`` and ``port`` of ``--http``, checked before anything is built."""
    host, _, port = http.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--http takes host:port, e.g. 127.0.0.1:8000; got {http!r}.")
    if not (token or allow_public or is_loopback(host)):
        raise ConfigError(
            f"refusing to serve MCP on {host} without a token: anyone who can reach this "
            "machine could call the environment's tools. Set one with --token-env VAR "
            "(clients send 'Authorization: Bearer <token>'), bind --http 127.0.0.1:PORT, or "
            "pass --allow-public if the network is trusted."
        )
    check_port(host, int(port), flag="--http HOST:PORT")
    return host, int(port)


class _BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get a 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = [v for k, v in scope.get("headers") or [] if k == b"authorization"]
            # Exactly one: with two, which one counts would be up to each proxy on the way.
            if len(given) != 1 or not secrets.compare_digest(given[0], self.expected):
                body = b'{"error": "invalid_token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer error="invalid_token"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _text(text: str, *, error: bool = False) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=error
    )


def _start(env: ChatEnv, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
    seed = arguments.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        return _text(f"Error: seed must be an integer, got {seed!r}.", error=True)
    env.reset(seed=seed)
    prompt = "\n\n".join(f"[{m.role}]\n{m.text}" for m in env.conversation)
    return _text(f"Task {env.task.id}\n\n{prompt}")


def _submit(env: ChatEnv, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
    answer = arguments.get("answer")
    if not isinstance(answer, str):
        return _text("Error: answer must be a string.", error=True)
    if env._state is None or env.state.done:
        return _text("Error: no task is running; call start_task first.", error=True)
    result = env.play_turn(Message(role="assistant", content=answer))
    if not result.done:
        feedback = " ".join(m.text for m in result.messages)
        return _text(json.dumps({"done": False, "feedback": feedback}))
    episode = result.episode
    assert episode is not None
    return _text(
        json.dumps(
            {
                "done": True,
                "score": episode.score if episode.is_score_valid else None,
                "success": env.is_success(episode),
                "rewards": {name: m.score for name, m in episode.metrics.items()},
                "reason": episode.reason,
            }
        )
    )
