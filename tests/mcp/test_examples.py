"""The docstring examples of rk_agent.mcp run as written, and its public names are pinned."""

from __future__ import annotations

import doctest
import importlib

import pytest

import rk_agent.mcp

MODULES = ["rk_agent.mcp", "rk_agent.mcp.config", "rk_agent.mcp.tools", "rk_agent.mcp.servers",
           "rk_agent.envs.mcp_tools_env"]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(name))
    assert tried > 0 and failures == 0


def test_public_names() -> None:
    assert rk_agent.mcp.__all__ == [
        "CallOutcome", "McpConfig", "McpConnection", "McpServerConfig", "McpServers", "McpTool",
        "McpToolset", "SessionMode", "build_env_server", "load_mcp_config", "openai_schema",
        "serve_env",
    ]  # fmt: skip
    for name in rk_agent.mcp.__all__:
        assert getattr(rk_agent.mcp, name).__module__.startswith("rk_agent.mcp")
