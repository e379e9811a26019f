"""verifiers' MCP toolsets, started the way verifiers starts them and offered as rk-agent tools.

A verifiers task offers tools through MCP servers (``verifiers.v1.Toolset``: ``@vf.tool``
methods on a FastMCP server): ``Task.toolsets(config)`` are launched for each rollout, and
``Taskset.toolsets(config)`` once for all of them. verifiers starts one the way its subprocess
runtime does, and `ToolHost` does the same:

- ``python -m <the toolset's module>`` (or, by default, a fork of a process that imported
  verifiers once: `rk_agent.interop.verifiers_launch`), with the server's config as JSON in
  ``VF_CONFIG``, a file to write its port to in ``MCP_PORT_FILE`` and a private ``TMPDIR``;
  stopped with its episode (the taskset's with the environment), and killed with this
  process;
- the rollout's *state channel* in ``VF_STATE_URL`` and ``VF_STATE_SECRET``: an HTTP endpoint
  on loopback (``GET``/``PUT /state``, ``GET /task``) that a per-rollout server reads the task
  from (its ``setup_task``) and reads and writes the rollout's shared state through, around
  every tool call. rk-agent serves it from the environment's event loop; the state is the
  episode trace's (``trace.state``), which the task's rewards then read. A shared server with
  a state of its own is reached with the rollout's signed coordinates in its URL, as verifiers
  does;
- its tools, listed over streamable HTTP (``http://127.0.0.1:PORT/mcp``), are offered as
  `rk_agent.mcp.tools.McpTool`s through rk-agent's MCP client (`rk_agent.mcp.client`), named as
  verifiers names them: ``<server name>_<tool>`` (the server name is its ``TOOL_PREFIX``, or its
  class name in snake case; ``TOOL_PREFIX = None`` offers them bare).

Only local processes are started: a toolset whose config asks for another runtime (docker,
prime, modal, ...) fails the episode saying so; one with a ``url`` is connected to as it is.

Main names: `ToolHost`, `EpisodeTools`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from rk_agent.envs.tool import ToolResult
from rk_agent.errors import EnvError, ToolServerError
from rk_agent.interop.verifiers_launch import Started, forker, start_exec
from rk_agent.loop_thread import LoopThread
from rk_agent.mcp.client import McpConnection
from rk_agent.mcp.config import McpServerConfig
from rk_agent.mcp.tools import McpTool, openai_name
from rk_agent.types import ToolCall

__all__ = ["EpisodeTools", "ToolHost"]

_LOG_TAIL = 2000  # characters of a server's log quoted when it fails to start


@dataclass
class _Binding:
    """One rollout as the state channel sees it: its trace (whose ``state`` the tools share)
    and its task."""

    trace: Any
    adapter: Any  # a pydantic TypeAdapter of the trace's state type


class _Channel:
    """The state channel of an environment's rollouts (see the module docstring)."""

    def __init__(self) -> None:
        self.service_secret = secrets.token_urlsafe(24)
        self._private: dict[str, _Binding] = {}  # per-rollout servers, by their bearer
        self._routes: dict[str, _Binding] = {}  # shared servers, by the rollout's route
        self._runner: Any = None
        self.base_url = ""

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/state", self._get_state)
        app.router.add_put("/state", self._put_state)
        app.router.add_get("/task", self._get_task)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.SockSite(self._runner, _listening_socket())
        await site.start()
        host, port = site._server.sockets[0].getsockname()[:2]  # type: ignore[union-attr]
        self.base_url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def register(self, binding: _Binding) -> tuple[str, str]:
        """A private bearer and a route for one rollout."""
        secret, route = secrets.token_urlsafe(16), secrets.token_hex(8)
        self._private[secret] = binding
        self._routes[route] = binding
        return secret, route

    def unregister(self, secret: str, route: str) -> None:
        self._private.pop(secret, None)
        self._routes.pop(route, None)

    def _binding(self, request: Any, *, shared: bool) -> _Binding | None:
        auth = request.headers.get("Authorization", "")
        secret = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else ""
        found = self._private.get(secret)
        if found is None and shared and secrets.compare_digest(secret, self.service_secret):
            found = self._routes.get(request.headers.get("X-Verifiers-State-Route", ""))
        return found

    async def _get_state(self, request: Any) -> Any:
        from aiohttp import web

        binding = self._binding(request, shared=True)
        if binding is None:
            return web.json_response({"error": "unauthorized"}, status=401)
        body = binding.adapter.dump_json(binding.trace.state)
        return web.Response(body=body, content_type="application/json")

    async def _put_state(self, request: Any) -> Any:
        from aiohttp import web
        from pydantic import ValidationError

        binding = self._binding(request, shared=True)
        if binding is None:
            return web.json_response({"error": "unauthorized"}, status=401)
        try:
            binding.trace.state = binding.adapter.validate_json(await request.read())
        except ValidationError as exc:
            return web.json_response({"error": f"invalid state: {exc}"}, status=400)
        return web.json_response({"ok": True})

    async def _get_task(self, request: Any) -> Any:
        from aiohttp import web

        binding = self._binding(request, shared=False)
        if binding is None:
            return web.json_response({"error": "unauthorized"}, status=401)
        data = binding.trace.task.data
        kind = type(data)
        return web.json_response(
            {"cls": f"{kind.__module__}:{kind.__qualname__}", "task": data.model_dump_json()}
        )


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class _Server:
    """One started (or external) tool server."""

    name: str  # its server name: the tools' prefix
    url: str  # its MCP endpoint
    process: Started | None = None
    workdir: str | None = None
    stateful: bool = False  # a shared server with a state of its own (signed coordinates)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class EpisodeTools:
    """The tools of one rollout: its connections to every server, its own servers' processes.

    Attributes:
        tools: the tools offered, under the names the model sees.
    """

    tools: list[McpTool] = field(default_factory=list)
    _connections: list[McpConnection] = field(default_factory=list)
    _servers: list[_Server] = field(default_factory=list)
    _release: Any = None

    def call(self, call: ToolCall) -> ToolResult:
        """Run one tool call; a failure is a ``ToolResult(ok=False)`` the model reads."""
        for tool in self.tools:
            if tool.name == call.function.name:
                return tool.run(call.function.arguments)
        known = ", ".join(sorted(t.name for t in self.tools)) or "none"
        return ToolResult(
            f"Error: there is no tool named {call.function.name!r}. Available: {known}.",
            ok=False,
            error_kind="unknown_tool",
        )

    def close(self) -> None:
        """Disconnect, stop the rollout's servers, forget it on the state channel."""
        for connection in self._connections:
            connection.close()
        for server in self._servers:
            server.stop()
        self._connections, self._servers, self.tools = [], [], []
        if self._release is not None:
            self._release()
            self._release = None


class ToolHost:
    """The toolsets of one environment's rollouts (see the module docstring).

    Args:
        loop: the environment's event loop (the state channel and the MCP clients live on it).
        label: the environment's name, for messages.
        start_timeout_s: how long a server may take to start and list its tools.
        tool_timeout_s: how long one tool call may take.
        launch: ``"fork"`` (from a warm process) or ``"exec"`` (``python -m``, as verifiers
            does); see `rk_agent.interop.verifiers_launch`.
    """

    def __init__(
        self,
        loop: LoopThread,
        label: str,
        *,
        start_timeout_s: float,
        tool_timeout_s: float,
        launch: str = "fork",
    ) -> None:
        self._loop = loop
        self.launch = launch
        self.label = label
        self.start_timeout_s = start_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self._channel: _Channel | None = None
        self._shared: list[_Server] | None = None
        # The shared servers without a state of their own: one connection for every episode.
        self._shared_connections: list[McpConnection] = []
        self._shared_tools: list[McpTool] = []

    def open_episode(self, task: Any, trace: Any, shared: Sequence[Any]) -> EpisodeTools:
        """Start the rollout's own servers (``task``'s toolsets) and connect to them and to the
        environment's shared ones (``shared``: the taskset's toolsets, started on first use).

        Raises:
            EnvError: a server could not be started, or asks for a runtime other than a local
                process.
        """
        from pydantic import TypeAdapter

        own = type(task).toolsets(task.config)
        episode = EpisodeTools()
        if not own and not shared:
            return episode
        channel = self._ensure_channel()
        secret, route = channel.register(_Binding(trace, TypeAdapter(type(trace.state))))
        episode._release = lambda: channel.unregister(secret, route)
        try:
            state_url = f"{channel.base_url}/state"
            if self._shared is None:
                self._shared = self._start(shared, state_url=None, secret=channel.service_secret)
                for server in self._shared:
                    if not server.stateful:
                        connection, tools = self._connect(server.name, server.url)
                        self._shared_connections.append(connection)
                        self._shared_tools += tools
            episode._servers = self._start(own, state_url=state_url, secret=secret)
            servers = [*self._shared, *episode._servers]
            names = [s.name for s in servers]
            clash = sorted({n for n in names if names.count(n) > 1})
            if clash:
                raise EnvError(
                    f"{self.label}: two tool servers are named {clash[0]!r}; give one of them "
                    "another TOOL_PREFIX."
                )
            episode.tools += self._shared_tools
            for server in servers:
                if server.stateful:
                    url = _signed(server.url, state_url, route, channel.service_secret)
                elif any(server is known for known in self._shared):
                    continue  # connected once, above
                else:
                    url = server.url
                connection, tools = self._connect(server.name, url)
                episode._connections.append(connection)
                episode.tools += tools
        except BaseException:
            episode.close()
            raise
        return episode

    def close(self) -> None:
        """Stop the shared servers and the state channel."""
        for connection in self._shared_connections:
            connection.close()
        self._shared_connections, self._shared_tools = [], []
        for server in self._shared or []:
            server.stop()
        self._shared = None
        if self._channel is not None and not self._loop.stopped:
            with contextlib.suppress(Exception):
                self._loop.run(self._channel.stop(), 10.0)
        self._channel = None

    # ---------------------------------------------------------------- internals

    def _ensure_channel(self) -> _Channel:
        if self._channel is None:
            channel = _Channel()
            self._loop.run(channel.start(), self.start_timeout_s)
            self._channel = channel
        return self._channel

    def _start(
        self, toolsets: Sequence[Any], *, state_url: str | None, secret: str
    ) -> list[_Server]:
        """Start ``toolsets`` (all at once), then wait for each to serve."""
        from verifiers.v1.state import State

        started: list[_Server] = []
        try:
            for toolset in toolsets:
                config = toolset.config
                name = toolset.server_name
                if getattr(config, "url", None):
                    started.append(_Server(name, str(config.url)))
                    continue
                kind = getattr(getattr(config, "runtime", None), "type", "subprocess")
                if kind != "subprocess":
                    raise EnvError(
                        f"{self.label}: tool server {name!r} ({type(toolset).__name__}) asks for "
                        f"a {kind!r} runtime; rk-agent starts verifiers' tool servers as local "
                        "processes only (runtime type 'subprocess', the default), or connects "
                        "to one given a url."
                    )
                stateful = state_url is None and toolset._state_cls is not State
                started.append(self._spawn(toolset, name, state_url, secret, stateful))
            for server in started:
                self._wait_serving(server)
        except BaseException:
            for server in started:
                server.stop()
            raise
        return started

    def _spawn(
        self, toolset: Any, name: str, state_url: str | None, secret: str, stateful: bool
    ) -> _Server:
        workdir = tempfile.mkdtemp(prefix="rk-vf-tools-")
        env = {
            **os.environ,
            "VF_CONFIG": toolset.config.model_dump_json(),
            "VF_STATE_URL": state_url or "",
            "VF_STATE_SECRET": secret if state_url or stateful else "",
            "MCP_PORT_FILE": str(Path(workdir) / "port"),
            "TMPDIR": workdir,
        }
        kind, log = type(toolset), Path(workdir) / "server.log"
        try:
            if self.launch == "exec":
                process = start_exec(kind.__module__, env, log)
            else:
                process = forker(self.start_timeout_s).start(
                    kind.__module__, kind.__qualname__, env, log, self.start_timeout_s
                )
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return _Server(name, "", process=process, workdir=workdir, stateful=stateful)

    def _wait_serving(self, server: _Server) -> None:
        """Wait for the server's port file, then for the port to accept connections."""
        assert server.process is not None
        assert server.workdir is not None
        deadline = time.monotonic() + self.start_timeout_s
        port_file = Path(server.workdir) / "port"
        port: int | None = None
        while time.monotonic() < deadline:
            code = server.process.exit_status()
            if code is not None:
                raise EnvError(
                    f"{self.label}: tool server {server.name!r} exited (status {code}) before "
                    f"serving: {self._log_tail(server)}"
                )
            if port is None:
                text = port_file.read_text().strip() if port_file.exists() else ""
                port = int(text) if text.isdigit() else None
            if port is not None:
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), timeout=1.0),
                ):
                    server.url = f"http://127.0.0.1:{port}/mcp"
                    return
            time.sleep(0.05)
        raise EnvError(
            f"{self.label}: tool server {server.name!r} did not serve within "
            f"{self.start_timeout_s:g} s of starting: {self._log_tail(server)}"
        )

    def _log_tail(self, server: _Server) -> str:
        assert server.workdir is not None
        try:
            text = (Path(server.workdir) / "server.log").read_text(errors="replace").strip()
        except OSError:
            text = ""
        return text[-_LOG_TAIL:] or "(it wrote nothing)"

    def _connect(self, name: str, url: str) -> tuple[McpConnection, list[McpTool]]:
        """Connect to a server and list its tools, named as verifiers names them."""
        prefix = f"{name}_" if name else ""
        config = McpServerConfig(url=url, tool_prefix=prefix, timeout=self.tool_timeout_s)
        label = name or "tools"
        connection = McpConnection(label, config, self._loop)
        try:
            remote = connection.start(self.start_timeout_s)
        except ToolServerError as exc:
            connection.close()
            raise EnvError(f"{self.label}: {exc}") from exc
        tools = [
            McpTool(
                tool,
                _constant(connection),
                server=label,
                name=openai_name(tool.name, prefix),
                timeout_s=self.tool_timeout_s,
            )
            for tool in remote
        ]
        return connection, tools


def _constant(connection: McpConnection) -> Callable[[], McpConnection]:
    return lambda: connection


def _signed(url: str, state_url: str, route: str, secret: str) -> str:
    """``url`` with one rollout's state coordinates, signed as a shared server checks them."""
    from verifiers.v1.mcp.server import (
        STATE_ROUTE_PARAM,
        STATE_SIGNATURE_PARAM,
        STATE_URL_PARAM,
        state_signature,
    )

    query = {
        STATE_URL_PARAM: state_url,
        STATE_ROUTE_PARAM: route,
        STATE_SIGNATURE_PARAM: state_signature(secret, state_url, route),
    }
    return f"{url}?{urlencode(query)}"
