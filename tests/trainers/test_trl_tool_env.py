"""`rk_agent.trainers.trl_tool_env`: TRL's tool loop reads replies as rk-agent's loop does."""

from __future__ import annotations

import asyncio
from typing import Any

from rk_agent.envs.registry import make_env
from rk_agent.envs.task import Task
from rk_agent.policies.openai_policy import OpenAIPolicy
from rk_agent.policies.policy import SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.runs.trajectory import Trajectory
from rk_agent.testing.stub_server import StubServer
from rk_agent.tool_calls import LLAMA3_JSON
from rk_agent.trainers.trl_env import trl_environment
from rk_agent.trainers.trl_tool_env import episode_trajectory

# A Llama 3 call cut off in its arguments, then a plain answer.
MALFORMED = '<|python_tag|>{"name": "lookup", "parameters": {"country": '
ANSWER = "The answer is 0.54."


async def _rk_episode(row: dict[str, Any], replies: list[str]) -> Trajectory:
    """The episode played by rk-agent's loop: an `OpenAIPolicy` in the Llama 3 format on the
    text protocol, against the stub server."""
    slot = EpisodeSlot(0, 0, row["seed"], options={"task": Task.model_validate_json(row["task"])})
    with StubServer(replies) as server:
        policy = OpenAIPolicy(
            "m", base_url=server.base_url, native_tools=False, tool_call_format="llama3_json"
        )
        try:
            return await play_episode(
                make_env("tools"), policy, slot, sampling=SamplingParams(), env_name="tools"
            )
        finally:
            await policy.aclose()


def test_both_loops_read_a_reply_in_a_non_default_format_alike() -> None:
    spec = trl_environment("tools", n_tasks=1, tool_call_format="llama3_json")
    row = dict(spec.train_dataset[0])
    rk = asyncio.run(_rk_episode(row, [MALFORMED, ANSWER]))
    instance = spec.environment_factory()
    instance.reset(**row)
    # TRL ends its episode at the first reply in which it found no call: the malformed one.
    trl = episode_trajectory(instance, [{"role": "assistant", "content": MALFORMED}])

    expected = LLAMA3_JSON.parse(MALFORMED, instance.env.tool_schemas).parse_error
    assert expected is not None and expected.startswith("tool call 1: invalid JSON")
    feedback = LLAMA3_JSON.feedback(expected)
    assert feedback.startswith("Your function call could not be read: tool call 1")
    for played in (rk, trl):
        first = played.turns[0]
        assert first.parse_error == expected
        assert [(m.role, m.text) for m in first.environment] == [("user", feedback)]
        assert first.parse_feedback == feedback
        assert first.metrics["parse_error"].score == -1.0
    # rk-agent's loop goes on: the plain answer is read as no call, and ends the episode.
    assert rk.turns[1].parse_error is None and rk.turns[1].assistant.text == ANSWER
    assert rk.stop_reason == "answered"


def test_a_plain_answer_is_no_call_in_either_loop() -> None:
    spec = trl_environment("tools", n_tasks=1, tool_call_format="llama3_json")
    row = dict(spec.train_dataset[0])
    rk = asyncio.run(_rk_episode(row, [ANSWER]))
    instance = spec.environment_factory()
    instance.reset(**row)
    trl = episode_trajectory(instance, [{"role": "assistant", "content": ANSWER}])
    for played in (rk, trl):
        assert [t.parse_error for t in played.turns] == [None]
        assert played.episode is not None
    assert rk.episode is not None and trl.episode is not None
    assert rk.episode.score == trl.episode.score
