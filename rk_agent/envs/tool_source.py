"""`ToolSource`: tools an environment takes from outside its own code (MCP servers).

An environment built with ``mcp=`` (``ChatEnv(mcp=servers)``) asks the source for a `Toolset`
of its own: the tools it offers next to its ``@tool`` functions, told when an episode starts
(a source may give each episode a fresh session) and closed with the environment. The source
itself (e.g. `rk_agent.mcp.McpServers`) is shared by every environment of a run and outlives
them.

Where such sources come from is looked up by name (`start_tool_servers`) in the
``rk_agent.tool_servers`` entry-point group: ``"mcp"`` is `rk_agent.mcp.McpServers`, an entry
point of rk-agent's own package metadata, loaded only when a run asks for MCP servers, so
environments (below `rk_agent.mcp` in the house) neither import nor name it.

Main names: `ToolSource`, `Toolset`, `ToolServers`, `start_tool_servers`, `merge_tools`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from rk_agent.envs.tool import Tool
from rk_agent.errors import ConfigError
from rk_agent.registry import NameRegistry

__all__ = ["ToolServers", "ToolSource", "Toolset", "merge_tools", "start_tool_servers"]

# Kinds of tool servers a run can name (entry points, loaded when named).
_SERVER_KINDS = NameRegistry[Any]("tool servers", "rk_agent.tool_servers", {})


@runtime_checkable
class Toolset(Protocol):
    """One environment's share of a `ToolSource`."""

    def tools(self) -> list[Tool]:
        """The tools offered to the model."""
        ...

    def start_episode(self) -> None:
        """Called by ``reset`` before each episode."""
        ...

    def close(self) -> None:
        """Called when the environment closes."""
        ...


@runtime_checkable
class ToolSource(Protocol):
    """Where an environment's outside tools come from (see the module docstring)."""

    def open_toolset(self) -> Toolset:
        """A `Toolset` for one environment."""
        ...


class ToolServers(ToolSource, Protocol):
    """Servers a run connects to once, shared by its environments (`rk_agent.mcp.McpServers`)."""

    def start(self) -> ToolServers:
        """Connect (start stdio servers); returns itself."""
        ...

    def for_one_env(self) -> ToolSource:
        """A source for one environment that also stops the servers when it closes."""
        ...

    def close(self) -> None:
        """Stop the servers."""
        ...


def start_tool_servers(kind: str, config: Any) -> ToolServers:
    """Start the tool servers of ``kind`` (``"mcp"``) described by ``config``.

    Raises:
        ConfigError: ``config`` is not a valid configuration of that kind.
        ToolServerError: a server did not start or refused the credentials.
    """
    servers: ToolServers = _SERVER_KINDS.load(kind)(config)
    return servers.start()


def merge_tools(own: Sequence[Tool], outside: Sequence[Tool], env: str) -> dict[str, Tool]:
    """An environment's tools by name: its own, then the outside ones.

    Raises:
        ConfigError: two tools share a name; the message lists every clash and where each tool
            comes from, and says how to rename them.
    """
    tools: dict[str, Tool] = {}
    clashes: list[str] = []
    for tool in [*own, *outside]:
        if tool.name in tools:
            first = _origin(tools[tool.name], env)
            clashes.append(f"{tool.name!r} ({first} and {_origin(tool, env)})")
        else:
            tools[tool.name] = tool
    if clashes:
        raise ConfigError(
            f"{env} would offer two tools under one name: {'; '.join(clashes)}. Give the MCP "
            'server a "toolPrefix" (e.g. "kb_") in the mcpServers configuration, or offer only '
            'some of its tools with "tools": [...].'
        )
    return tools


def _origin(tool: Tool, env: str) -> str:
    origin = getattr(tool, "origin", None)
    return origin if isinstance(origin, str) else f"{env}'s own @tool"
