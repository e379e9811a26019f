"""`McpServers`: the MCP servers of a run, connected once, their tools offered to environments.

Build it from an ``mcpServers`` configuration (`rk_agent.mcp.config`), pass it to any
environment as ``mcp=``, and close it when the run ends (it is a context manager; a run built
from an `rk_agent.envs.env_setup.EnvSetup` with ``mcp`` does all of this itself)::

    with McpServers.connect("servers.json") as servers:
        env = make_env("tools", mcp=servers)

Every server is connected at `McpServers.start`, its tools listed and converted to OpenAI
schemas (`rk_agent.mcp.tools`); a name two servers share is an error that lists the clashes.
Servers in ``"session": "shared"`` mode (the default) have one client for the whole run, shared
by every environment and episode; ``"per_episode"`` servers get a fresh client for each episode
(a new stdio process, or a new HTTP session). Stdio servers are started and stopped by the
``mcp`` SDK (a session of their own; stdin closed, then SIGTERM to the group, then SIGKILL):
by `McpServers.close`, on Ctrl-C and on a crash (the servers' ``close`` runs at exit, from
`rk_agent.processes.on_exit`), and, should this process be killed outright, by the end of
their stdin.

Main names: `McpServers`, `McpToolset`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from rk_agent.envs.tool import Tool
from rk_agent.envs.tool_source import ToolSource
from rk_agent.errors import ConfigError, ToolServerError
from rk_agent.loop_thread import LoopThread
from rk_agent.mcp.client import McpConnection
from rk_agent.mcp.config import McpConfig, McpServerConfig, SessionMode, load_mcp_config
from rk_agent.mcp.tools import McpTool, openai_name
from rk_agent.processes import on_exit
from rk_agent.retry import MCP_RECONNECT_RETRY, RetryPolicy

__all__ = ["McpServers", "McpToolset"]


class McpServers:
    """The MCP servers of a run (see the module docstring).

    Args:
        config: an ``mcpServers`` configuration: an `McpConfig`, a mapping, JSON text or the
            path of a JSON file (see `load_mcp_config`).
        retry: waits between reconnect attempts.
        start_timeout_s: how long each server may take to start and list its tools.
        errlog: where stdio servers' stderr goes (default: ours).

    Raises:
        ConfigError: the configuration is malformed.

    Example:
        >>> servers = McpServers({"kb": {"command": "python", "args": ["-m", "kb"]}})
        >>> servers.config.servers["kb"].transport
        'stdio'
    """

    def __init__(
        self,
        config: McpConfig | Mapping[str, Any] | str | Path,
        *,
        retry: RetryPolicy = MCP_RECONNECT_RETRY,
        start_timeout_s: float = 60.0,
        errlog: TextIO | None = None,
    ) -> None:
        self.config = load_mcp_config(config)
        self.retry = retry
        self.start_timeout_s = start_timeout_s
        self.errlog = errlog
        self._loop: LoopThread | None = None
        self._shared: dict[str, McpConnection] = {}
        self._catalogue: list[tuple[str, McpServerConfig, Any, str]] = []
        self._lock = threading.Lock()
        self._toolsets: weakref.WeakSet[McpToolset] = weakref.WeakSet()
        self._closed = False
        self._cancel_exit: Callable[[], None] | None = None

    @classmethod
    def connect(
        cls, config: McpConfig | Mapping[str, Any] | str | Path, **kwargs: Any
    ) -> McpServers:
        """Build and `start` in one go."""
        return cls(config, **kwargs).start()

    def __enter__(self) -> McpServers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"McpServers({sorted(self.config.servers)})"

    @property
    def started(self) -> bool:
        """Whether `start` ran (and `close` did not)."""
        return self._loop is not None and not self._closed

    def start(self) -> McpServers:
        """Connect to every server and list its tools (once; later calls do nothing).

        Raises:
            ToolServerError: a server refused the credentials or could not be reached.
            ConfigError: two servers offer a tool under one name.
        """
        with self._lock:
            if self._closed:
                raise ConfigError("these MCP servers were closed; build a new McpServers.")
            if self._loop is not None:
                return self
            self._loop = LoopThread(name="rk-mcp")
            # A crash or Ctrl-C that skips close(): no server left behind (a strong reference:
            # the servers live until they are closed).
            self._cancel_exit = on_exit(self.close)
        try:
            for name, server in self.config.servers.items():
                connection = self._connection(name, server)
                tools = connection.start(self.start_timeout_s)
                if server.session is SessionMode.SHARED:
                    self._shared[name] = connection
                else:  # listed once; each episode connects anew
                    connection.close()
                self._add_tools(name, server, tools)
            self._check_names()
        except BaseException:
            self.close()
            raise
        return self

    def tool_names(self) -> dict[str, tuple[str, str]]:
        """``{name the model sees: (server, name on the server)}`` for every tool offered."""
        return {exposed: (server, remote.name) for server, _, remote, exposed in self._catalogue}

    def open_toolset(self) -> McpToolset:
        """The tools for one environment (`rk_agent.envs.tool_source.ToolSource`)."""
        if not self.started:
            self.start()
        toolset = McpToolset(self)
        self._toolsets.add(toolset)
        return toolset

    def for_one_env(self) -> ToolSource:
        """A `ToolSource` whose one environment owns these servers: closing the environment
        closes them (what ``EnvSetup(mcp=...).make()`` uses)."""
        return _OwnedBy(self)

    def close(self) -> None:
        """Disconnect from every server and stop the stdio ones. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for toolset in list(self._toolsets):
            toolset.close()
        for connection in self._shared.values():
            connection.close()
        self._shared.clear()
        if self._loop is not None:
            self._loop.stop()
        if self._cancel_exit is not None:
            self._cancel_exit()

    # ---------------------------------------------------------------- internals

    def _connection(self, name: str, server: McpServerConfig) -> McpConnection:
        assert self._loop is not None
        return McpConnection(name, server, self._loop, retry=self.retry, errlog=self.errlog)

    def _add_tools(self, name: str, server: McpServerConfig, tools: list[Any]) -> None:
        listed = {tool.name: tool for tool in tools}
        if server.tools is not None:
            missing = [tool for tool in server.tools if tool not in listed]
            if missing:
                raise ConfigError(
                    f'MCP server {name!r} has no tools {missing} (named in its "tools"); it '
                    f"offers: {', '.join(sorted(listed)) or 'none'}."
                )
            tools = [listed[tool] for tool in server.tools]
        for remote in tools:
            exposed = openai_name(remote.name, server.tool_prefix)
            self._catalogue.append((name, server, remote, exposed))

    def _check_names(self) -> None:
        seen: dict[str, str] = {}
        clashes: list[str] = []
        for server, _, _remote, exposed in self._catalogue:
            if exposed in seen:
                clashes.append(f"{exposed!r} (servers {seen[exposed]!r} and {server!r})")
            else:
                seen[exposed] = server
        if clashes:
            raise ConfigError(
                f"two MCP servers offer a tool under one name: {'; '.join(clashes)}. Give one "
                'of each pair a "toolPrefix" (e.g. "search_") in the mcpServers configuration, '
                'or offer only some of its tools with "tools": [...].'
            )


class McpToolset:
    """One environment's MCP tools (made by `McpServers.open_toolset`).

    Shared servers' tools call the run's one client; per-episode servers' tools call the client
    this toolset opened for the current episode.
    """

    def __init__(self, servers: McpServers, *, close_servers: bool = False) -> None:
        self._servers = servers
        self._close_servers = close_servers
        self._episode: dict[str, McpConnection] = {}
        self._tools: list[Tool] = []
        for name, server, remote, exposed in servers._catalogue:
            self._tools.append(
                McpTool(
                    remote,
                    self._route(name, server),
                    server=name,
                    name=exposed,
                    timeout_s=server.timeout,
                    idempotent=server.is_idempotent(remote.name),
                )
            )

    def tools(self) -> list[Tool]:
        """The tools of every server, under the names the model sees."""
        return list(self._tools)

    def start_episode(self) -> None:
        """Close the last episode's per-episode clients; the next call opens fresh ones."""
        self._close_episode()

    def close(self) -> None:
        """Close this environment's per-episode clients (shared ones stay with the run)."""
        self._close_episode()
        if self._close_servers:
            self._servers.close()

    def _close_episode(self) -> None:
        connections, self._episode = self._episode, {}
        for connection in connections.values():
            connection.close()

    def _route(self, name: str, server: McpServerConfig) -> Any:
        servers = self._servers
        if server.session is SessionMode.SHARED:

            def shared() -> McpConnection:
                connection = servers._shared.get(name)
                if connection is None:
                    raise ToolServerError(
                        f"MCP server {name!r} is closed (the run has ended).", server=name
                    )
                return connection

            return shared

        def per_episode() -> McpConnection:
            connection = self._episode.get(name)
            if connection is None:
                connection = servers._connection(name, server)
                connection.start(servers.start_timeout_s)
                self._episode[name] = connection
            return connection

        return per_episode


class _OwnedBy:
    """A `ToolSource` over servers that its environment owns (see `McpServers.for_one_env`)."""

    def __init__(self, servers: McpServers) -> None:
        self._servers = servers

    def open_toolset(self) -> McpToolset:
        toolset = McpToolset(self._servers.start(), close_servers=True)
        self._servers._toolsets.add(toolset)
        return toolset
