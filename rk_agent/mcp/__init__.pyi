"""Type information for `rk_agent.mcp`, and its list of public names (one place)."""

from rk_agent.mcp.client import (
    CallOutcome as CallOutcome,
    McpConnection as McpConnection,
)
from rk_agent.mcp.config import (
    McpConfig as McpConfig,
    McpServerConfig as McpServerConfig,
    SessionMode as SessionMode,
    load_mcp_config as load_mcp_config,
)
from rk_agent.mcp.serve import (
    build_env_server as build_env_server,
    serve_env as serve_env,
)
from rk_agent.mcp.servers import (
    McpServers as McpServers,
    McpToolset as McpToolset,
)
from rk_agent.mcp.tools import (
    McpTool as McpTool,
    openai_schema as openai_schema,
)

__all__: list[str]
