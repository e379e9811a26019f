"""rk_agent.mcp: tools from MCP servers in any environment, and environments served over MCP.

Two directions, both on the official ``mcp`` SDK:

- **MCP servers as tools.** An ``mcpServers`` configuration (the JSON other MCP clients use)
  names stdio commands and streamable-HTTP endpoints; `McpServers` connects to them once per
  run, and any `rk_agent.envs.ChatEnv` built with ``mcp=servers`` offers their tools next to
  its ``@tool`` functions, with the same timeout, error and metric rules. From the CLI:
  ``rk-agent rollout --env tools --mcp servers.json``.
- **Environments as MCP servers.** `serve_env` (``rk-agent mcp serve --env tools``) exposes an
  environment's tools, and its task and reward as tools, to any agent that speaks MCP.

Main names:
    McpServers, McpToolset: the servers of a run, and one environment's share of them.
    McpConfig, McpServerConfig, SessionMode, load_mcp_config: the configuration.
    McpConnection, CallOutcome: one server's client (reconnects, in-flight calls).
    McpTool, openai_schema: an MCP tool as an rk-agent `Tool`.
    build_env_server, serve_env: an environment as an MCP server.

Example:
    >>> config = load_mcp_config({"mcpServers": {"kb": {"url": "http://127.0.0.1:9/mcp"}}})
    >>> config.servers["kb"].transport
    'http'
"""

from __future__ import annotations

from rk_agent.mcp.client import CallOutcome, McpConnection
from rk_agent.mcp.config import McpConfig, McpServerConfig, SessionMode, load_mcp_config
from rk_agent.mcp.serve import build_env_server, serve_env
from rk_agent.mcp.servers import McpServers, McpToolset
from rk_agent.mcp.tools import McpTool, openai_schema

__all__ = [
    "CallOutcome",
    "McpConfig",
    "McpConnection",
    "McpServerConfig",
    "McpServers",
    "McpTool",
    "McpToolset",
    "SessionMode",
    "build_env_server",
    "load_mcp_config",
    "openai_schema",
    "serve_env",
]
