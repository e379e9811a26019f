"""The ``openenv:URL`` source against real OpenEnv servers (openenv 0.10.0's ``create_app``).

The servers run in their own environment (`servers.py`); every episode here is played over a
real WebSocket on loopback, and the servers count the sessions they built and closed.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from typing import Any

import pytest

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.registry import make_env
from rk_agent.envs.sources import get_source
from rk_agent.envs.turn import TurnResult
from rk_agent.errors import ConfigError, ToolServerError
from rk_agent.interop.openenv.source import OpenEnvEnv
from rk_agent.runs.run_wants import env_wants
from rk_agent.types import FunctionCall, Message, ToolCall
from tests.interop.openenv.servers import (
    WORDS,
    counts,
    free_port,
    guess_and_words_reply,
    openenv_server,
    wait_for,
)


def ws(url: str) -> str:
    return url.replace("http://", "ws://")


def reply_to(env: ChatEnv) -> Message:
    """The stub model's reply to the conversation so far (as it would answer over HTTP)."""
    request = {"messages": [m.to_openai() for m in env.conversation], "tools": env.tool_schemas}
    reply = guess_and_words_reply(request)
    calls = [
        ToolCall(id=f"c{i}", function=FunctionCall(name=c["name"],
                                                    arguments=json.dumps(c["arguments"])))
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]  # fmt: skip
    return Message(role="assistant", content=reply.get("content"), tool_calls=calls or None)


def play(env: ChatEnv, seed: int) -> TurnResult:
    env.reset(seed=seed)
    while True:
        turn = env.play_turn(reply_to(env))
        if turn.done:
            return turn


def episode_of(url: str, seed: int) -> dict[str, Any]:
    """What the server recorded of the latest episode reset with ``seed`` (the server is
    shared by the tests of this process: an earlier test may have reset one with that seed)."""
    return [e for e in counts(url)["episodes"] if e["seed"] == seed][-1]


def test_an_mcp_environment_plays_with_its_tools_per_episode_and_its_rewards(
    guess_url: str,
) -> None:
    before = counts(guess_url)
    env = make_env(f"openenv:{ws(guess_url)}", max_turns=12)
    try:
        for seed in range(4):
            turn = play(env, seed)
            server_seed = env.task.metadata["seed"]
            secret = random.Random(server_seed).randint(1, 100)
            offered = sorted(t["function"]["name"] for t in env.tool_schemas)
            assert offered == (["guess", "parity"] if server_seed % 2 else ["guess"])
            played = episode_of(guess_url, server_seed)
            assert played["secret"] == secret and played["actions"][-1] == secret
            episode = turn.episode
            assert turn.terminated and episode is not None
            assert episode.score == 1.0 and episode.reason == "weighted_sum: openenv=1"
            assert episode.metrics["openenv"].reason == "the server's last reward: 1"
            assert episode.metrics["openenv.server_done"].score == 1.0
            assert episode.metrics["openenv.rewarded_steps"].score == len(played["actions"])
            rewards = [s.metrics["openenv_step.server_reward"].score for s in episode.step_outputs]
            assert rewards == [-0.1] * (len(played["actions"]) - 1) + [1.0]
            assert all(s.reward == 0.0 for s in episode.step_outputs)  # recorded, not counted
            tool_messages = [m.text for m in env.conversation if m.role == "tool"]
            assert tool_messages[-1] == "correct" and set(tool_messages[:-1]) <= {"higher", "lower"}
        # Each session was closed when its episode ended, the environment still open.
        assert wait_for(lambda: counts(guess_url)["closed"] - before["closed"] == 4, 10)
    finally:
        env.close()
    assert counts(guess_url)["built"] - before["built"] == 4


def test_the_sum_of_the_rewards_and_step_rewards_are_options(guess_url: str) -> None:
    env = make_env(f"openenv:{ws(guess_url)}", max_turns=12, reward="sum", step_reward=True)
    try:
        turn = play(env, 5)
        guesses = len(episode_of(guess_url, env.task.metadata["seed"])["actions"])
        assert turn.episode is not None
        assert turn.episode.score == pytest.approx(1.0 - 0.1 * (guesses - 1))
        assert [s.reward for s in turn.episode.step_outputs] == pytest.approx(
            [-0.1] * (guesses - 1) + [1.0]
        )
    finally:
        env.close()


def test_a_text_action_environment_takes_replies_as_its_action(words_url: str) -> None:
    env = make_env(f"openenv:{ws(words_url)}", max_turns=8)
    try:
        assert env.action.text_field == "message" and not env.action.tools
        for seed in range(3):
            observation, info = env.reset(seed=seed)
            assert info["tools"] == []
            assert observation == [{"role": "user", "content": (
                "Guess the five-letter word. Write your guess in brackets, e.g. [crane]. "
                f"Words: {', '.join(WORDS)}.")}]  # fmt: skip
            while True:
                turn = env.play_turn(reply_to(env))
                if turn.done:
                    break
                assert re.fullmatch(r"[a-z]{5}: [GYX]{5}", turn.messages[-1].text)
            played = episode_of(words_url, env.task.metadata["seed"])
            assert played["actions"][-1] == f"[{played['secret']}]"  # solved by elimination
            assert turn.terminated and turn.stop_reason is not None
            assert turn.stop_reason.value == "answered"
            assert turn.episode is not None and turn.episode.score == 1.0
    finally:
        env.close()


def test_an_unreachable_server_is_one_clear_error_not_an_episode() -> None:
    port = free_port()
    message = f"cannot reach the OpenEnv server at ws://127.0.0.1:{port} (http://127.0.0.1:{port}"
    with pytest.raises(ToolServerError, match=re.escape(message)) as caught:
        make_env(f"openenv:ws://127.0.0.1:{port}")
    assert caught.value.retryable


def test_capacity_a_slow_answer_and_sessions_closed_on_errors() -> None:
    with openenv_server("guess", "--max-sessions", "1", "--slow", "1") as (url, _):
        first = make_env(f"openenv:{ws(url)}")
        second = make_env(f"openenv:{ws(url)}", timeout_s=0.3)
        try:
            first.reset(seed=0)  # holds the one slot
            refused = "refused the session (CAPACITY_REACHED: Server at capacity"
            with pytest.raises(ToolServerError, match=re.escape(refused)) as full:
                second.reset(seed=1)
            assert full.value.retryable and full.value.server == f"openenv:{ws(url)}"
            first.close()
            assert wait_for(lambda: counts(url)["built"] == counts(url)["closed"] + 0, 10)
            # the slot is free again; the server's steps take 1 s, more than 0.3
            late = re.escape(f"OpenEnv server {ws(url)}/ws sent no answer in 0.3 s.")
            with pytest.raises(ToolServerError, match=late):
                second.reset(seed=1)
            # the session that timed out was closed, so a third can have the slot
            assert wait_for(lambda: counts(url)["built"] == counts(url)["closed"], 10)
        finally:
            first.close()
            second.close()


def test_a_source_env_is_named_as_written_and_asks_for_trust(guess_url: str) -> None:
    name = f"openenv:{ws(guess_url)}"
    assert env_wants(EnvSetup(name=name)) == [
        f"connect to {ws(guess_url)} (sending ${{OPENENV_TOKEN}} as its token when set) "
        f"(environment {name})"
    ]
    cls = get_source("openenv").env_class(ws(guess_url))
    assert issubclass(cls, OpenEnvEnv) and cls.env_name == name
    assert cls.reference_solver is None and "no reference solver" in (cls.no_solver_reason or "")
    with pytest.raises(ConfigError, match=re.escape("openenv:ftp://x is not an OpenEnv server")):
        make_env("openenv:ftp://x")
    with pytest.raises(ConfigError, match=re.escape("reward must be 'last' or 'sum'")):
        make_env(name, reward="max")


BLOCKED = (
    "import sys; sys.modules['websockets'] = None  # as if it were not installed\n"
    "from rk_agent.cli import main\n"
    "sys.argv = ['rk-agent', *{args}]\n"
    "main()\n"
)


def test_without_the_extra_a_run_fails_in_one_line_naming_the_install() -> None:
    code = BLOCKED.format(args=json.dumps(["rollout", "--env", "openenv:ws://127.0.0.1:9",
                                           "--policy", "solver"]))  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, timeout=120)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: environment source 'openenv' needs websockets, which is not installed: "
        "pip install 'rk-agent[openenv]' (uv add 'rk-agent[openenv]'; in a checkout of "
        "rk-agent: uv sync --extra openenv)."
    ]
