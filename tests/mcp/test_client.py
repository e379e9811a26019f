"""One server's client under trouble: a tool that raises, a server that hangs, crashes mid-run,
crashes for good, or refuses the credentials; with real servers over stdio and loopback HTTP."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.tool import Tool
from rk_agent.errors import ToolServerError
from rk_agent.mcp import McpServers
from rk_agent.retry import RetryPolicy

from .conftest import FAST_RETRY, start_http, stdio_server, stop, wait_until_gone


def toolset(servers: McpServers) -> dict[str, Tool]:
    return {t.name: t for t in servers.open_toolset().tools()}


def call_until_refused(echo: Tool) -> None:
    """Call until the server refuses (a test that never gets there fails: it returns)."""
    for _ in range(10):
        result = echo.run({"text": "x"})
        assert result.ok or result.error_kind == "disconnected", result


@pytest.fixture
def stdio(tmp_path: Path) -> Any:
    env = {"CRASH_MARKER": str(tmp_path / "down"), "ONCE_MARKER": str(tmp_path / "once")}
    # A call's limit covers the reconnects it waits for: each starts a Python process, which
    # on a loaded machine takes seconds, so the limit is far above that (no test here hangs).
    config = {"f": stdio_server(env=env, timeout=120, idempotentTools=["crash_once"])}
    with McpServers(config, retry=FAST_RETRY) as servers:
        yield servers


def test_calls_answer_over_stdio(stdio: McpServers) -> None:
    tools = toolset(stdio)
    result = tools["add"].run('{"a": 2, "b": 3}')
    assert (result.content, result.ok, result.error_kind) == ("5", True, None)
    assert tools["echo"].run({"text": "hi"}).content == "hi"


def test_a_tool_that_raises_is_an_error_for_the_model(stdio: McpServers) -> None:
    result = toolset(stdio)["boom"].run({})
    assert (result.ok, result.error_kind) == (False, "exception")
    assert result.content.startswith("Error: tool 'boom' failed: ")
    assert toolset(stdio)["add"].run({"a": 1, "b": 1}).content == "2"  # the server is fine


def test_bad_arguments_are_caught_before_sending(stdio: McpServers) -> None:
    tools = toolset(stdio)
    result = tools["add"].run({"a": 1, "b": "two"})
    assert (result.ok, result.error_kind) == (False, "bad_arguments")
    assert result.content == "Error: bad arguments for 'add': b: 'two' is not of type 'integer'."
    assert tools["add"].run("{not json").error_kind == "bad_arguments"
    assert tools["count"].run({}).content == "1"  # nothing was sent by the bad calls


def test_a_hanging_server_times_out_and_the_connection_stays(tmp_path: Path) -> None:
    with McpServers({"f": stdio_server(timeout=0.5)}, retry=FAST_RETRY) as servers:
        tools = toolset(servers)
        before = tools["pid"].run({}).content
        result = tools["hang"].run({"seconds": 30})
        assert (result.ok, result.error_kind) == (False, "timeout")
        assert result.content == "Error: tool 'hang' timed out after 0.5 s."
        assert tools["pid"].run({}).content == before  # same process, same connection


def test_a_call_in_flight_when_the_server_crashes_is_not_replayed(stdio: McpServers) -> None:
    tools = toolset(stdio)
    first_pid = tools["pid"].run({}).content
    assert tools["count"].run({}).content == "1"
    result = tools["crash"].run({})
    assert (result.ok, result.error_kind) == (False, "disconnected")
    assert re.match(r"Error: the connection to MCP server 'f' dropped while 'crash' was running",
                    result.content)  # fmt: skip
    # The next call waits for the reconnect: a new process, a fresh count.
    assert tools["pid"].run({}).content != first_pid
    assert tools["count"].run({}).content == "1"
    assert stdio._shared["f"].reconnects >= 1


def test_an_idempotent_call_is_sent_again_after_the_reconnect(stdio: McpServers) -> None:
    result = toolset(stdio)["crash_once"].run({})
    assert (result.content, result.ok) == ("ran after the crash", True)


def test_a_server_that_stays_down_is_a_typed_error(stdio: McpServers) -> None:
    tools = toolset(stdio)
    result = tools["crash_for_good"].run({})
    assert result.error_kind == "disconnected"
    with pytest.raises(
        ToolServerError, match=r"MCP server 'f' is down: .*3 connection attempts"
    ) as caught:
        tools["pid"].run({})
    assert (caught.value.auth, caught.value.server, caught.value.retryable) == (False, "f", True)


def test_calls_answer_over_http(http_url: str) -> None:
    config = {"h": {"url": http_url, "headers": {"Authorization": "Bearer secret-token"}}}
    with McpServers(config, retry=FAST_RETRY) as servers:
        tools = toolset(servers)
        assert tools["add"].run({"a": 40, "b": 2}).content == "42"
        assert tools["boom"].run({}).error_kind == "exception"


def test_a_refused_token_is_an_auth_error_at_start(http_url: str) -> None:
    config = {"h": {"url": http_url, "headers": {"Authorization": "Bearer wrong"}}}
    with pytest.raises(
        ToolServerError, match=re.escape("refused the credentials (HTTP 401)")
    ) as caught:
        McpServers(config, retry=FAST_RETRY).start()
    assert (caught.value.auth, caught.value.status) == (True, 401)
    assert "wrong" not in str(caught.value)


def test_a_token_refused_mid_run_is_an_auth_error() -> None:
    process, url = start_http("--expire-after", "5")
    try:
        config = {"h": {"url": url, "headers": {"Authorization": "Bearer secret-token"}}}
        with McpServers(config, retry=FAST_RETRY) as servers:
            tools = toolset(servers)
            results = [tools["echo"].run({"text": "x"}) for _ in range(2)]
            assert all(result.ok for result in results)  # the token is good for a while
            with pytest.raises(ToolServerError, match=re.escape("(HTTP 401)")) as caught:
                call_until_refused(tools["echo"])
            assert caught.value.auth
    finally:
        stop(process)


def test_an_http_server_that_goes_away_is_reported() -> None:
    process, url = start_http()
    config = {"h": {"url": url, "headers": {"Authorization": "Bearer secret-token"}}}
    with McpServers(config, retry=FAST_RETRY) as servers:
        tools = toolset(servers)
        assert tools["echo"].run({"text": "up"}).content == "up"
        process.kill()
        stop(process)
        with pytest.raises(ToolServerError, match=r"MCP server 'h' is down"):
            call_until_refused(tools["echo"])


def test_a_command_that_does_not_exist_fails_at_once() -> None:
    config = {"gone": {"command": "rk-agent-no-such-program", "args": ["--x"]}}
    with pytest.raises(ToolServerError, match=re.escape(
        "MCP server 'gone' could not be started: FileNotFoundError"
    )) as caught:  # fmt: skip
        McpServers(config).start()  # the default reconnect policy: no waiting on a missing program
    assert "rk-agent-no-such-program --x" in str(caught.value)


def test_an_endpoint_that_never_answers_is_reported_after_the_attempts() -> None:
    from .conftest import free_port

    config = {"h": {"url": f"http://127.0.0.1:{free_port()}/mcp"}}
    with pytest.raises(
        ToolServerError,
        match=r"MCP server 'h' could not be reached: .*3 connection attempts failed",
    ):
        McpServers(config, retry=FAST_RETRY).start()


def test_secrets_stay_out_of_reprs_and_messages() -> None:
    from rk_agent.mcp import load_mcp_config

    server = {
        "url": "http://h/mcp?token=s3cr3t-value",
        "headers": {"Authorization": "Bearer s3cr3t-value"},
        "env": {"API_KEY": "s3cr3t-value"},
    }
    config = load_mcp_config({"h": server})
    assert "s3cr3t" not in repr(config)
    with pytest.raises(ToolServerError) as caught:
        McpServers(config, retry=RetryPolicy(max_retries=0)).start()
    assert "s3cr3t" not in str(caught.value) and "s3cr3t" not in str(caught.value.url)


def test_a_server_that_never_answers_is_stopped_and_reported(tag: str) -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)", tag]}
    servers = McpServers({"silent": silent}, start_timeout_s=1.0)
    with pytest.raises(ToolServerError, match=re.escape(
        "MCP server 'silent' did not answer within 1 s of starting"
    )):  # fmt: skip
        servers.start()
    assert wait_until_gone(tag) == []
