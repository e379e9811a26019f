"""McpServers: discovery, names, sessions, sharing one server among many episodes, shutdown."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from rk_agent.envs.tool import tool
from rk_agent.errors import ConfigError
from rk_agent.mcp import McpServers

from .conftest import FAST_RETRY, processes_tagged, stdio_server, wait_until_gone


def test_tools_become_openai_schemas() -> None:
    with McpServers({"f": stdio_server(tools=["add", "echo"], toolPrefix="f_")}) as servers:
        assert servers.tool_names() == {"f_add": ("f", "add"), "f_echo": ("f", "echo")}
        schema = {t.name: t.schema for t in servers.open_toolset().tools()}["f_add"]
        assert schema["type"] == "function"
        assert schema["function"]["description"] == "Add two integers."
        assert schema["function"]["parameters"]["required"] == ["a", "b"]
        assert schema["function"]["parameters"]["properties"]["a"]["type"] == "integer"


def test_a_name_two_servers_share_is_an_error_listing_them(tag: str) -> None:
    config = {"one": stdio_server(tag), "two": stdio_server(tag, tools=["echo", "add"])}
    with pytest.raises(ConfigError, match=re.escape(
        "two MCP servers offer a tool under one name: 'echo' (servers 'one' and 'two'); 'add' "
        "(servers 'one' and 'two'). Give one of each pair a \"toolPrefix\""
    )):  # fmt: skip
        McpServers(config).start()
    assert wait_until_gone(tag) == []  # the failed start stopped what it had started


def test_a_prefix_resolves_the_clash() -> None:
    config = {
        "one": stdio_server(tools=["echo"]),
        "two": stdio_server(tools=["echo"], toolPrefix="two_"),
    }
    with McpServers(config) as servers:
        assert sorted(servers.tool_names()) == ["echo", "two_echo"]


def test_unknown_tools_in_the_allowlist() -> None:
    with pytest.raises(ConfigError, match=re.escape("MCP server 'f' has no tools ['nope']")):
        McpServers({"f": stdio_server(tools=["nope"])}).start()


def test_a_clash_with_the_env_own_tools_is_an_error() -> None:
    from rk_agent.envs.guess_env import GuessEnv

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    class EchoEnv(GuessEnv):
        def tools(self):  # type: ignore[no-untyped-def]
            return [echo]

    expected = re.escape(
        "EchoEnv would offer two tools under one name: 'echo' (EchoEnv's own @tool and MCP "
        "server 'f')."
    )
    servers = McpServers({"f": stdio_server(tools=["echo"])})
    with servers, pytest.raises(ConfigError, match=expected):
        EchoEnv(mcp=servers)


def test_shared_servers_are_one_process_for_every_env(tag: str) -> None:
    from rk_agent.envs.guess_env import GuessEnv

    with McpServers({"f": stdio_server(tag)}) as servers:
        envs = [GuessEnv(mcp=servers) for _ in range(3)]
        pids = {env._tools["pid"].run({}).content for env in envs}
        assert len(pids) == 1 and len(processes_tagged(tag)) == 1
        for env in envs:
            env.close()
        assert len(processes_tagged(tag)) == 1  # closing an env leaves the run's server up
    assert wait_until_gone(tag) == []


def test_per_episode_sessions_start_fresh_each_episode(tag: str) -> None:
    from rk_agent.envs.guess_env import GuessEnv

    with McpServers({"f": stdio_server(tag, session="per_episode")}) as servers:
        env = GuessEnv(mcp=servers)
        counts = []
        for seed in range(2):
            env.reset(seed=seed)
            counts.append([env._tools["count"].run({}).content for _ in range(2)])
        assert counts == [["1", "2"], ["1", "2"]]  # state per episode, not per run
        env.close()
        assert wait_until_gone(tag) == []  # the episode's server stopped with the env


@pytest.mark.slow
def test_256_concurrent_episodes_share_one_server_and_lose_no_call(tag: str) -> None:
    from rk_agent.envs.guess_env import GuessEnv

    episodes, calls = 256, 4
    results: list[list[str]] = [[] for _ in range(episodes)]
    start = threading.Barrier(episodes)
    with McpServers({"f": stdio_server(tag)}, retry=FAST_RETRY) as servers:

        def play(index: int) -> None:
            env = GuessEnv(mcp=servers)
            env.reset(seed=index)
            start.wait()
            for call in range(calls):
                result = env._tools["echo"].run({"text": f"{index}-{call}"})
                results[index].append(result.content if result.ok else f"lost: {result.content}")
            env.close()

        threads = [threading.Thread(target=play, args=(i,)) for i in range(episodes)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(processes_tagged(tag)) == 1
    assert results == [[f"{i}-{c}" for c in range(calls)] for i in range(episodes)]


def test_close_stops_stdio_servers_and_is_idempotent(tag: str, tmp_path: Path) -> None:
    servers = McpServers({"a": stdio_server(tag), "b": stdio_server(tag, toolPrefix="b_")})
    servers.start()
    assert len(processes_tagged(tag)) == 2
    servers.close()
    servers.close()
    assert wait_until_gone(tag) == []
    with pytest.raises(ConfigError, match="these MCP servers were closed"):
        servers.start()
