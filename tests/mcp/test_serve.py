"""rk-agent mcp serve: an environment's tools, task and reward over MCP (stdio and HTTP)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from rk_agent.envs.tools_env import solve
from rk_agent.errors import ToolServerError
from rk_agent.mcp import McpServers
from rk_agent.types import Message

from .conftest import FAST_RETRY, free_port

SERVE = [sys.executable, "-m", "rk_agent", "mcp", "serve", "--env", "tools"]


def play_over_mcp(tools: dict[str, Any], seed: int) -> dict[str, Any]:
    """Play one task of the tools env through MCP alone, with the reference solver's calls."""
    started = tools["start_task"].run({"seed": seed})
    assert started.ok, started.content
    question = started.content.split("[user]\n", 1)[1]
    messages = [Message(role="user", content=question)]
    while True:
        reply = solve(messages)
        if not reply.tool_calls:
            break
        messages.append(reply)
        call = reply.tool_calls[0]
        result = tools[call.function.name].run(call.function.arguments)
        assert result.ok, result.content
        messages.append(Message(role="tool", tool_call_id=call.id, content=result.content))
    submitted = tools["submit_answer"].run({"answer": reply.text})
    assert submitted.ok, submitted.content
    return dict(json.loads(submitted.content))


def test_serves_tools_task_and_reward_over_stdio() -> None:
    with McpServers({"rk": {"command": SERVE[0], "args": SERVE[1:]}}) as servers:
        tools = {t.name: t for t in servers.open_toolset().tools()}
        assert sorted(tools) == sorted(
            ["calculator", "convert_units", "days_between", "add_days", "weekday", "lookup",
             "start_task", "submit_answer"]
        )  # fmt: skip
        schema = tools["calculator"].schema["function"]
        assert schema["parameters"]["required"] == ["expression"]
        outcome = play_over_mcp(tools, seed=3)
        assert (outcome["done"], outcome["success"], outcome["score"]) == (True, True, 1.0)
        assert outcome["rewards"]["answer"] == 1.0
        wrong = tools["calculator"].run({"expression": "1/0"})
        assert (wrong.ok, wrong.error_kind) == (False, "exception")
        again = tools["submit_answer"].run({"answer": "Answer: 1"})
        assert again.content == (
            "Error: tool 'submit_answer' failed: Error: no task is running; call start_task first."
        )


def test_no_task_tools() -> None:
    config = {"rk": {"command": SERVE[0], "args": [*SERVE[1:], "--no-task-tools"]}}
    with McpServers(config) as servers:
        assert "start_task" not in servers.tool_names()


@pytest.fixture
def served_over_http() -> Any:
    port = free_port()
    process = subprocess.Popen(
        [*SERVE, "--http", f"127.0.0.1:{port}", "--token-env", "RK_TEST_MCP_TOKEN"],
        env={**os.environ, "RK_TEST_MCP_TOKEN": "tok-123"},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    assert line.startswith("serving tools over MCP at http://127.0.0.1:"), line
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)
    process.stderr.close()


def test_serves_over_http_with_a_bearer_token(served_over_http: str) -> None:
    good = {"rk": {"url": served_over_http, "headers": {"Authorization": "Bearer tok-123"}}}
    with McpServers(good) as servers:
        tools = {t.name: t for t in servers.open_toolset().tools()}
        assert play_over_mcp(tools, seed=5)["success"] is True
    bad = {"rk": {"url": served_over_http, "headers": {"Authorization": "Bearer nope"}}}
    with pytest.raises(ToolServerError, match=re.escape("refused the credentials (HTTP 401)")):
        McpServers(bad, retry=FAST_RETRY).start()


def test_two_authorization_headers_are_refused(served_over_http: str) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = [
        ("Authorization", "Bearer nope"),
        ("Authorization", "Bearer tok-123"),
        ("Accept", "application/json, text/event-stream"),
    ]
    answer = httpx.post(served_over_http, json=body, headers=headers, timeout=30)
    assert answer.status_code == 401


@pytest.mark.parametrize(
    ("http", "message"),
    [
        ("0.0.0.0:8765", "error: refusing to serve MCP on 0.0.0.0 without a token: anyone who "
         "can reach this machine could call the environment's tools. Set one with --token-env "
         "VAR"),
        ("127.0.0.1:99999", "error: --http HOST:PORT must be a TCP port from 1 to 65535, got "
         "99999."),
        ("localhost", "error: --http takes host:port, e.g. 127.0.0.1:8000; got 'localhost'."),
    ],
)  # fmt: skip
def test_a_bad_or_public_http_address_is_one_line(http: str, message: str) -> None:
    out = subprocess.run(
        [*SERVE, "--http", http], capture_output=True, text=True, timeout=60,
        env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(message), out.stderr
    assert "Traceback" not in out.stderr


def test_a_public_address_with_a_token_or_allow_public_serves() -> None:
    for extra, env in ((["--token-env", "RK_T"], {"RK_T": "t"}), (["--allow-public"], {})):
        port = free_port()
        process = subprocess.Popen(
            [*SERVE, "--http", f"0.0.0.0:{port}", *extra], env={**os.environ, **env},
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert process.stderr is not None
        try:
            line = process.stderr.readline()
            assert line.startswith("serving tools over MCP at http://0.0.0.0:"), line
        finally:
            process.terminate()
            process.wait(10)
            process.stderr.close()


def test_an_env_whose_tools_differ_per_task_is_refused() -> None:
    from rk_agent.errors import ConfigError
    from rk_agent.mcp.serve import build_env_server
    from tests.envs.varying_tools import ShopEnv

    message = (
        "ShopEnv's tools differ per turn (tool_scope turn), and an MCP server lists its tools "
        "once for every task: serve an environment whose tools are the same in every episode."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_env_server(ShopEnv)
