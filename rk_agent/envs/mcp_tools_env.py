"""The ``mcp_tools`` environment: the ``tools`` questions, with every tool served over MCP.

The example of `rk_agent.mcp`: the same questions, rewards and reference solver as
`rk_agent.envs.tools_env.ToolsEnv`, but the environment has no ``@tool`` of its own; the six
tools come from an MCP server in another process. Given ``mcp=`` (``--mcp servers.json``, e.g.
``examples/mcp/servers.json``), it takes them from those servers, one connection for the run.
Without it, it starts rk-agent's own server for itself (``rk-agent mcp serve --env tools
--no-task-tools`` over stdio, `DEFAULT_SERVERS`) and stops it when it closes.

Main names: `McpToolsEnv`, `DEFAULT_SERVERS`.

Example:
    >>> env = McpToolsEnv()
    >>> observation, info = env.reset(seed=3)
    >>> sorted(schema["function"]["name"] for schema in info["tools"])[:2]
    ['add_days', 'calculator']
    >>> env.close()
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, ClassVar

from rk_agent.envs.tool import Tool
from rk_agent.envs.tool_source import ToolSource, start_tool_servers
from rk_agent.envs.tools_env import ToolsEnv

__all__ = ["DEFAULT_SERVERS", "McpToolsEnv"]


def default_servers() -> dict[str, Any]:
    """rk-agent's own tool server, started with this Python (`DEFAULT_SERVERS`)."""
    return {
        "mcpServers": {
            "tools": {
                "command": sys.executable,
                "args": ["-m", "rk_agent", "mcp", "serve", "--env", "tools", "--no-task-tools"],
            }
        }
    }


DEFAULT_SERVERS = default_servers()
"""The ``mcpServers`` configuration `McpToolsEnv` starts when given no ``mcp``."""


class McpToolsEnv(ToolsEnv):
    """The tools env's questions, answered with tools served over MCP (its own server by default).

    See the module docstring for the server and its tools.

    Takes the arguments of `ToolsEnv` except ``tool_names``; ``mcp`` defaults to its own
    server.
    """

    env_name: ClassVar[str] = "mcp_tools"

    def __init__(self, *, mcp: ToolSource | None = None, **kwargs: Any) -> None:
        if mcp is not None:
            super().__init__(mcp=mcp, **kwargs)
            return
        servers = start_tool_servers("mcp", default_servers())  # its own: it stops them
        try:
            super().__init__(mcp=servers.for_one_env(), **kwargs)
        except BaseException:  # a bad argument or task file: no server left running
            servers.close()
            raise
        # `close` stops them; so does dropping the environment without closing it.
        weakref.finalize(self, servers.close)

    def tools(self) -> list[Tool]:
        """None of its own: every tool comes from MCP."""
        return []
