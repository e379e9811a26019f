"""The env/loop contract: `ChatEnv.play_turn`, `reject_turn`, `end_truncated`, `TurnResult`."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rk_agent.envs import TurnResult
from rk_agent.envs.guess_env import GuessEnv
from rk_agent.envs.tool import ToolResult
from rk_agent.errors import EnvError
from rk_agent.policies.function_policy import tool_call
from rk_agent.tool_calls import HERMES, ToolCallFormat
from rk_agent.types import Message, StopReason
from tests.rollouts.toy import AddEnv


def started(env: AddEnv | GuessEnv, seed: int = 0) -> AddEnv | GuessEnv:
    env.reset(seed=seed)
    return env


def test_a_tool_turn_returns_the_tool_messages_and_records() -> None:
    env = started(AddEnv())
    a, b = (int(x) for x in env.task.messages[0].text.rstrip("?").split("+"))
    result = env.play_turn(tool_call("add", {"a": a, "b": b}))
    assert [(m.role, m.text) for m in result.messages] == [("tool", str(a + b))]
    assert [(r.call.function.name, r.result.ok) for r in result.tool_calls] == [("add", True)]
    assert result.step.metrics["tool_success"].score == 1.0
    assert not result.done and result.episode is None and result.stop_reason is None
    assert result.parse_error is None
    assert env.conversation[-1] == result.messages[-1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.terminated = True  # type: ignore[misc]


def test_the_last_turn_carries_the_episode_and_the_stop_reason() -> None:
    env = started(AddEnv())
    a, b = (int(x) for x in env.task.messages[0].text.rstrip("?").split("+"))
    result = env.play_turn({"role": "assistant", "content": f"#### {a + b}"})
    assert result.terminated and not result.truncated and result.done
    assert result.messages == ()
    assert result.stop_reason is StopReason.ANSWERED
    assert result.episode is not None and result.episode.score == 1.0
    assert result.reward == result.step.score + 1.0


def test_step_is_gymnasiums_view_of_play_turn() -> None:
    turned, stepped = (
        started(GuessEnv(high=10, max_turns=2)),
        started(GuessEnv(high=10, max_turns=2)),
    )
    for guess in ("5", "6"):
        result = turned.play_turn({"role": "assistant", "content": guess})
        observation, reward, terminated, truncated, info = stepped.step(
            {"role": "assistant", "content": guess}
        )
        assert observation == [m.to_openai() for m in turned.conversation]
        assert (reward, terminated, truncated) == (
            result.reward, result.terminated, result.truncated
        )  # fmt: skip
        assert info == result.info()
    assert set(info) == {"step", "tool_calls", "episode", "stop_reason"}
    assert info["stop_reason"] is StopReason.MAX_TURNS and truncated


def test_reject_turn_writes_the_feedback_and_penalises_the_step() -> None:
    env = started(AddEnv())
    result = env.reject_turn({"role": "assistant", "content": "<tool_call>{"}, "invalid JSON")
    assert result.parse_error == "invalid JSON"
    assert [(m.role, m.text) for m in result.messages] == [
        ("user", env.parse_error_feedback("invalid JSON", HERMES))
    ]
    assert result.messages[0].text.startswith("Your tool call could not be read: invalid JSON")
    assert result.step.metrics["parse_error"].score == -1.0
    assert not result.done and env.state.turn == 1


def test_an_env_can_write_its_own_parse_error_feedback() -> None:
    class Terse(AddEnv):
        def parse_error_feedback(self, parse_error: str, tool_format: ToolCallFormat) -> str:
            return f"bad {tool_format.name} call ({parse_error})"

    env = started(Terse())
    result = env.reject_turn({"role": "assistant", "content": "?"}, "no name")
    assert result.messages == (Message(role="user", content="bad hermes call (no name)"),)
    result = env.reject_turn({"role": "assistant", "content": "?"}, "no", tool_format="llama3_json")
    assert result.messages == (Message(role="user", content="bad llama3_json call (no)"),)
    *_, info = env.reject({"role": "assistant", "content": "?"}, "again", feedback="custom")
    assert env.conversation[-1].text == "custom" and info["step"].metrics["parse_error"]


def test_end_truncated_scores_the_episode_and_ends_it() -> None:
    env = started(AddEnv())
    env.play_turn(tool_call("add", {"a": 1, "b": 2}))
    episode = env.end_truncated()
    assert episode.score == 0.0 and len(episode.step_outputs) == 1
    over = "AddEnv: the episode is over; call reset()."
    with pytest.raises(EnvError, match=re.escape(over)):
        env.end_truncated()
    with pytest.raises(EnvError, match=re.escape(over)):
        env.play_turn({"role": "assistant", "content": "3"})


def test_run_tool_runs_a_call_of_the_current_episode() -> None:
    env = AddEnv()
    call = tool_call("add", {"a": 2, "b": 3}).tool_calls
    assert call is not None
    with pytest.raises(EnvError, match=re.escape("AddEnv: call reset() before step().")):
        env.run_tool(call[0])
    env.reset(seed=0)
    assert env.run_tool(call[0]).content == "5"


def test_given_tool_results_are_recorded_not_run_again() -> None:
    env = started(AddEnv())
    given = ToolResult("41", ok=True)
    result = env.play_turn(tool_call("add", {"a": 1, "b": 1}), tool_results=[given])
    assert result.messages[0].text == "41" and result.tool_calls[0].result is given
    with pytest.raises(EnvError, match=re.escape(
        "AddEnv.play_turn: got 2 tool results for 1 tool calls; give one result per call, "
        "in order."
    )):  # fmt: skip
        env.play_turn(tool_call("add", {"a": 1, "b": 1}), tool_results=[given, given])


def test_turn_result_info_leaves_out_what_a_mid_episode_turn_lacks() -> None:
    env = started(GuessEnv(high=10))
    result = env.play_turn({"role": "assistant", "content": "5"})
    assert isinstance(result, TurnResult)
    assert set(result.info()) == {"step", "tool_calls"}
