"""One MCP server's client for a run: connected once, shared by concurrent episodes, reconnected.

`McpConnection` keeps one client of the official ``mcp`` SDK connected to one server (a stdio
subprocess, or a streamable-HTTP endpoint) on a private event loop
(`rk_agent.loop_thread.LoopThread`), so the synchronous tool calls of environments running in
worker threads can share it: each call is a request on the same session, and the SDK matches
answers to requests.

When the connection drops (a stdio server crashed, an HTTP server went away), the connection is
rebuilt in the background, waiting between attempts as `rk_agent.retry.MCP_RECONNECT_RETRY`
says. What happens to a call depends on when it met the drop:

- sent before the drop and unanswered: the server may have run it, so it is not sent again
  (the model reads a ``disconnected`` tool error), unless the tool is marked idempotent in the
  configuration (``idempotentTools``): then it is sent once more after the reconnect;
- not yet sent (the connection was already known to be closed): it waits for the reconnect
  and is sent then, within the call's own timeout;
- the server refused the credentials (HTTP 401 or 403), or it stayed down through every
  reconnect attempt: `rk_agent.errors.ToolServerError` is raised, which the rollout engine
  records as a typed failure (``auth_error`` or ``tool_server_error``) of the episode.

Main names: `McpConnection`, `CallOutcome`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import mcp_types

from rk_agent.errors import ToolServerError
from rk_agent.loop_thread import LoopThread
from rk_agent.mcp.config import McpServerConfig
from rk_agent.retry import MCP_RECONNECT_RETRY, RetryPolicy
from rk_agent.secrets import redact

__all__ = ["CallOutcome", "McpConnection"]

T = TypeVar("T")

_CLOSE_TIMEOUT_S = 10.0  # the SDK stops a stdio server within ~6 s (stdin, SIGTERM, SIGKILL)
_AUTH_STATUSES = frozenset({401, 403})


@dataclass(frozen=True)
class CallOutcome:
    """What one tool call through MCP gave.

    Attributes:
        result: the server's result (``None`` when the call got no answer).
        error_kind: ``None`` when answered; else ``"timeout"``, ``"disconnected"`` (in flight
            when the connection dropped, and not replayed) or ``"server_error"`` (the server
            answered with a protocol error instead of a result).
        message: what went wrong, for the model.
        replayed: whether the call was sent a second time after a reconnect (idempotent tools).
    """

    result: mcp_types.CallToolResult | None = None
    error_kind: str | None = None
    message: str = ""
    replayed: bool = False


class _Lost(Exception):
    """The connection dropped under a call."""


class McpConnection:
    """A client of one MCP server, kept connected for a run and shared by every episode.

    Args:
        name: the server's name in the configuration.
        config: how to reach it.
        loop: the event loop the client lives on.
        retry: the waits between reconnect attempts, and how many.
        errlog: where a stdio server's stderr goes (default: ours).

    Attributes:
        tools: the server's tools, listed at `start`.
        reconnects: how many times the connection was rebuilt after a drop.
    """

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        loop: LoopThread,
        *,
        retry: RetryPolicy = MCP_RECONNECT_RETRY,
        errlog: TextIO | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.tools: list[mcp_types.Tool] = []
        self.reconnects = 0
        self._loop = loop
        self._retry = retry
        self._errlog = errlog
        self._client: Any = None
        self._generation = 0
        self._failure: ToolServerError | None = None
        self._closing = False
        self._auth_status: int | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._lost: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, {self.config.transport})"

    # ---------------------------------------------------------------- sync API

    def start(self, timeout_s: float = 60.0) -> list[mcp_types.Tool]:
        """Connect and list the server's tools.

        Raises:
            ToolServerError: the server refused the credentials, or could not be reached
                within ``timeout_s`` and the reconnect attempts.
        """
        try:
            return self._loop.run(self._start(), timeout_s)
        except TimeoutError:
            self.close()
            raise ToolServerError(
                f"MCP server {self.name!r} did not answer within {timeout_s:g} s of starting "
                f"({self._describe()}). Check that it starts on its own and speaks MCP.",
                server=self.name,
                retryable=True,
            ) from None

    def call(
        self, tool: str, arguments: dict[str, Any], *, timeout_s: float, idempotent: bool = False
    ) -> CallOutcome:
        """Call a tool on the server (from any thread but the loop's).

        Args:
            tool: the tool's name on the server.
            arguments: its arguments.
            timeout_s: the whole call's limit, a wait for a reconnect included.
            idempotent: send the call again if the connection dropped while it was in flight.

        Raises:
            ToolServerError: the server refused the credentials, or stayed down through every
                reconnect attempt.
        """
        # The loop enforces the timeout; the margin only guards against a stuck loop.
        return self._loop.run(self._call(tool, arguments, timeout_s, idempotent), timeout_s + 30)

    def close(self) -> None:
        """Disconnect; a stdio server is stopped (stdin closed, then SIGTERM, then SIGKILL)."""
        if self._loop.stopped:
            return
        with contextlib.suppress(TimeoutError, RuntimeError, concurrent.futures.CancelledError):
            self._loop.run(self._close(), _CLOSE_TIMEOUT_S + 10)

    # ---------------------------------------------------------------- on the loop

    async def _start(self) -> list[mcp_types.Tool]:
        self._changed = asyncio.Event()
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())
        await self._ready()
        return self.tools

    async def _supervise(self) -> None:
        attempt = 0
        while not self._closing:
            self._lost = asyncio.Event()
            error: BaseException | None = None
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._open(stack)
                    tools = await _list_tools(client)
                    if not self.tools:
                        self.tools = tools
                    self._client = client
                    self._generation += 1
                    attempt = 0
                    self._changed_now()
                    await self._lost.wait()
                    self._client = None
            except asyncio.CancelledError:
                self._client = None
                raise
            except BaseException as exc:  # ExceptionGroups from the SDK's task groups too
                error = exc
            self._client = None
            if self._closing:
                break
            if self._auth_status in _AUTH_STATUSES:
                self._fail(self._auth_error())
                return
            never_started = self._generation == 0
            if never_started and _spawn_failed(error):  # no command: trying again cannot help
                self._fail(
                    ToolServerError(
                        f"MCP server {self.name!r} could not be started: "
                        f'{self._reason(error)} ({self._describe()}). Check its "command" '
                        '(a program on PATH, or a full path) and "cwd".',
                        server=self.name,
                    )
                )
                return
            if attempt >= self._retry.max_retries:
                state = "could not be reached" if never_started else "is down"
                self._fail(
                    ToolServerError(
                        f"MCP server {self.name!r} {state}: {self._reason(error)}; "
                        f"{attempt + 1} connection attempts failed ({self._describe()}).",
                        server=self.name,
                        retryable=True,
                    )
                )
                return
            self._changed_now()
            await asyncio.sleep(self._retry.delay(attempt))
            attempt += 1
            self.reconnects += 1

    async def _open(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client, StdioServerParameters

        config = self.config
        if config.transport == "stdio":
            assert config.command is not None
            from mcp.client.stdio import stdio_client

            parameters = StdioServerParameters(
                command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
            )
            server: Any = stdio_client(parameters, errlog=_errlog(self._errlog))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            async def note_status(response: httpx2.Response) -> None:
                if response.status_code in _AUTH_STATUSES:
                    self._auth_status = response.status_code

            http = httpx2.AsyncClient(
                headers=config.headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64),
                event_hooks={"response": [note_status]},
            )
            await stack.enter_async_context(http)
            assert config.url is not None
            server = streamable_http_client(config.url, http_client=http)
        # The initialize handshake: what every MCP server speaks (2024-11 to 2025-11 protocol
        # versions, and the SDK's own 2026 servers too), and measurably cheaper per call here
        # than the 2026 per-request envelope (benchmarks/bench_mcp.py).
        return await stack.enter_async_context(Client(server, mode="legacy"))

    async def _ready(self) -> tuple[Any, int]:
        while True:
            if self._failure is not None:
                raise self._failure
            if self._closing:
                raise ToolServerError(
                    f"MCP server {self.name!r} was closed (the run is ending).", server=self.name
                )
            if self._client is not None and not _closed(self._client):
                return self._client, self._generation
            if self._client is not None:  # it closed under us: have it rebuilt
                self._mark_lost(self._generation)
            assert self._changed is not None
            await self._changed.wait()

    async def _call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float, idempotent: bool
    ) -> CallOutcome:
        if self._supervisor is None:
            raise ToolServerError(f"MCP server {self.name!r} was not started.", server=self.name)
        replayed = False
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    client, generation = await self._ready()
                    try:
                        result = await self._send(client, tool, arguments, timeout_s)
                    except _Lost:
                        self._mark_lost(generation)
                        if self._auth_status in _AUTH_STATUSES:
                            raise self._auth_error() from None
                        if idempotent and not replayed:
                            replayed = True
                            continue
                        return CallOutcome(
                            error_kind="disconnected",
                            message=(
                                f"the connection to MCP server {self.name!r} dropped while "
                                f"{tool!r} was running; it may or may not have run. It is being "
                                "reconnected: call again if it is safe to."
                            ),
                            replayed=replayed,
                        )
                    if isinstance(result, CallOutcome):
                        return result
                    return CallOutcome(result=result, replayed=replayed)
        except TimeoutError:
            return CallOutcome(
                error_kind="timeout",
                message=f"tool {tool!r} timed out after {timeout_s:g} s.",
                replayed=replayed,
            )

    async def _send(
        self, client: Any, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> mcp_types.CallToolResult | CallOutcome:
        from mcp.shared.exceptions import MCPError

        try:
            result: mcp_types.CallToolResult = await client.call_tool(
                tool, arguments, read_timeout_seconds=timeout_s
            )
            return result
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise _Lost from exc
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise TimeoutError from exc
            if self._auth_status in _AUTH_STATUSES:
                raise self._auth_error() from exc
            return CallOutcome(
                error_kind="server_error",
                message=f"MCP server {self.name!r} answered {tool!r} with an error: {exc}",
            )
        except (asyncio.CancelledError, TimeoutError):
            raise
        except Exception as exc:  # a transport failure (HTTP connection refused, ...)
            raise _Lost from exc

    def _mark_lost(self, generation: int) -> None:
        if generation == self._generation and self._lost is not None:
            self._lost.set()

    def _changed_now(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        if changed is not None:
            changed.set()

    def _fail(self, error: ToolServerError) -> None:
        self._failure = error
        self._changed_now()

    async def _close(self) -> None:
        self._closing = True
        if self._lost is not None:
            self._lost.set()
        self._changed_now()
        supervisor = self._supervisor
        if supervisor is None or supervisor.done():
            return
        if self._client is None:  # connecting, or waiting to reconnect: nothing to finish
            supervisor.cancel()
        # asyncio.wait, not wait_for: it neither raises nor cancels this coroutine.
        done, _ = await asyncio.wait({supervisor}, timeout=_CLOSE_TIMEOUT_S)
        if not done:
            supervisor.cancel()
            await asyncio.wait({supervisor}, timeout=5.0)

    # ---------------------------------------------------------------- messages

    def _auth_error(self) -> ToolServerError:
        return ToolServerError(
            f"MCP server {self.name!r} refused the credentials (HTTP {self._auth_status}) at "
            f'{self._describe()}. Check the Authorization header in its "headers" (a '
            "${VARIABLE} placeholder reads it from the environment).",
            server=self.name,
            auth=True,
            status=self._auth_status,
            url=redact(self.config.url) if self.config.url else None,
        )

    def _describe(self) -> str:
        config = self.config
        if config.transport == "http":
            return str(redact(str(config.url)))
        text = " ".join([str(config.command), *config.args])
        return str(redact(text, config.env.values()))

    @staticmethod
    def _reason(error: BaseException | None) -> str:
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        if error is None:
            return "the connection closed"
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _spawn_failed(error: BaseException | None) -> bool:
    """Whether the error is a stdio server's program that could not be run at all."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return isinstance(error, (FileNotFoundError, PermissionError, NotADirectoryError))


def _errlog(errlog: TextIO | None) -> TextIO:
    """Where a stdio server's stderr goes: a real file (a subprocess needs a descriptor)."""
    for stream in (errlog, sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (OSError, ValueError, AttributeError):
            continue
        return stream
    raise RuntimeError("no stderr with a file descriptor to give an MCP server")


async def _list_tools(client: Any) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(1000):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _closed(client: Any) -> bool:
    """Whether the client's connection is known to be closed (so a request would not be sent).

    Reads the SDK's dispatcher state where it has one; when it cannot tell, says "open", and a
    request is then treated as possibly delivered.
    """
    session = getattr(client, "_session", None)
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))
