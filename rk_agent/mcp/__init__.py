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
    >>> from rk_agent.mcp import load_mcp_config
    >>> config = load_mcp_config({"mcpServers": {"kb": {"url": "http://127.0.0.1:9/mcp"}}})
    >>> config.servers["kb"].transport
    'http'
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers). Nothing of the
# mcp SDK is imported until a name is used.
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
