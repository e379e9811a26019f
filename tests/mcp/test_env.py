"""MCP tools inside environments and rollouts: the mcp_tools env, EnvSetup.mcp, typed failures."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.mcp_tools_env import McpToolsEnv
from rk_agent.envs.tools_env import solve
from rk_agent.mcp import McpServers
from rk_agent.policies.function_policy import FunctionPolicy, tool_call
from rk_agent.policies.policy import SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.types import FailureKind, FailureSite, StopReason

from .conftest import (
    FAST_RETRY,
    processes_tagged,
    start_http,
    stdio_server,
    stop,
    wait_until_gone,
)


def play(env: Any, policy: Any, seed: int = 0) -> Any:
    slot = EpisodeSlot(task_index=0, sample=0, seed=seed)
    return asyncio.run(play_episode(env, policy, slot, sampling=SamplingParams(), env_name="t"))


def test_mcp_tools_env_solves_with_its_own_server() -> None:
    env = McpToolsEnv()
    try:
        trajectory = play(env, FunctionPolicy(solve), seed=3)
    finally:
        env.close()
    assert trajectory.success and trajectory.failure is None
    calls = [call for turn in trajectory.turns for call in turn.tool_calls]
    assert calls and all(call.ok for call in calls)


def test_env_spec_mcp_builds_every_env_on_one_server(tmp_path: Path, tag: str) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"f": stdio_server(tag, tools=["echo"])}}))
    factory = EnvSetup(name="guess", mcp=str(path)).factory()
    envs = [factory() for _ in range(3)]
    assert all("echo" in env._tools for env in envs)
    assert {env._tools["echo"].run({"text": "x"}).content for env in envs} == {"x"}
    factory.close()
    assert wait_until_gone(tag) == []


def test_env_spec_make_owns_its_servers(tag: str) -> None:
    env = EnvSetup(name="guess", mcp={"mcpServers": {"f": stdio_server(tag)}}).make()
    assert env._tools["add"].run({"a": 1, "b": 2}).content == "3"
    env.close()
    assert wait_until_gone(tag) == []


def test_a_server_that_stays_down_fails_the_episode_with_a_typed_failure(tmp_path: Path) -> None:
    env_vars = {"CRASH_MARKER": str(tmp_path / "down")}
    calls = iter([tool_call("crash_for_good", {}), tool_call("pid", {})])
    policy = FunctionPolicy(lambda messages, tools: next(calls))
    with McpServers({"f": stdio_server(env=env_vars)}, retry=FAST_RETRY) as servers:
        from rk_agent.envs.guess_env import GuessEnv

        trajectory = play(GuessEnv(mcp=servers), policy)
    first = trajectory.turns[0].tool_calls[0]
    assert (first.ok, first.error_kind) == (False, "disconnected")
    failure = trajectory.failure
    assert failure is not None
    assert (failure.kind, failure.where, failure.retryable) == (
        FailureKind.TOOL_SERVER_ERROR, FailureSite.ENVIRONMENT, True
    )  # fmt: skip
    assert "MCP server 'f' is down" in failure.message
    assert trajectory.stop_reason is StopReason.ERROR


def test_a_refused_token_fails_the_episode_as_auth_error() -> None:
    process, url = start_http("--expire-after", "5")
    try:
        config = {"h": {"url": url, "headers": {"Authorization": "Bearer secret-token"}}}
        policy = FunctionPolicy(lambda messages, tools: tool_call("echo", {"text": "x"}))
        with McpServers(config, retry=FAST_RETRY) as servers:
            from rk_agent.envs.guess_env import GuessEnv

            env = GuessEnv(mcp=servers, max_turns=20)
            trajectory = play(env, policy)
    finally:
        stop(process)
    failure = trajectory.failure
    assert failure is not None
    assert (failure.kind, failure.retryable) == (FailureKind.AUTH_ERROR, False)
    assert "refused the credentials (HTTP 401)" in failure.message
    assert all(call.ok for turn in trajectory.turns for call in turn.tool_calls)


@pytest.mark.slow
def test_256_concurrent_rollout_episodes_on_one_server(tag: str) -> None:
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.runs.config import RolloutConfig

    server = {
        "command": sys.executable,
        "args": ["-m", "rk_agent", "mcp", "serve", "--env", "tools", "--no-task-tools"],
        "env": {"RK_TEST_TAG": tag},
    }
    config = RolloutConfig(env="mcp_tools", mcp={"mcpServers": {"tools": server}}, n=256,
                           concurrency=256)  # fmt: skip
    factory = config.env.factory()
    try:
        result = asyncio.run(run_rollouts(config, policy=FunctionPolicy(solve), make_env=factory))
        assert len(processes_tagged(tag)) == 1  # one server for all 256
    finally:
        factory.close()
    trajectories = result.trajectories
    assert len(trajectories) == 256
    assert [t.failure for t in trajectories if t.failure] == []
    calls = [call for t in trajectories for turn in t.turns for call in turn.tool_calls]
    assert len(calls) >= 2 * 256 and all(call.ok for call in calls)
    assert all(t.success for t in trajectories)
    assert wait_until_gone(tag) == []


def test_a_yaml_config_names_the_servers(tmp_path: Path, tag: str) -> None:
    from rk_agent.runs.config import load_rollout_config

    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"f": stdio_server(tag, tools=["add"])}}))
    path = tmp_path / "run.yaml"
    path.write_text(f"env: guess\nmcp: {servers}\nn: 2\n")
    config = load_rollout_config(path)
    assert config.env.mcp == str(servers)
    assert load_rollout_config(path, {"mcp": "other.json"}).env.mcp == "other.json"  # --mcp wins
    factory = config.env.factory()
    assert factory()._tools["add"].run({"a": 2, "b": 2}).content == "4"
    factory.close()
    assert wait_until_gone(tag) == []
