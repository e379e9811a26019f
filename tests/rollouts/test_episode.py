"""One episode, three loops: the engine, `play_with_solver` and TRL's tool loop agree.

They record the same turns: each reads the environment's `TurnResult`s, and `step_turn` makes
one into a `Turn` record.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from rk_agent.envs import make_env, play_with_solver
from rk_agent.envs.task import Task
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode, step_turn
from rk_agent.runs.trajectory import Trajectory, Turn
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.trainers.trl_env import trl_environment
from rk_agent.trainers.trl_tool_env import episode_trajectory
from rk_agent.types import Message, StopReason

KINDS = {"kinds": ["population_ratio"]}


def _tool_message(*calls: tuple[str, dict[str, Any]]) -> Message:
    return Message.coerce({
        "role": "assistant", "content": "",
        "tool_calls": [{"id": f"c{i}", "type": "function",
                        "function": {"name": n, "arguments": json.dumps(a)}}
                       for i, (n, a) in enumerate(calls)],
    })  # fmt: skip


def _as_trl(message: Message) -> dict[str, Any]:
    """An assistant message as TRL parses it (arguments as dicts, no call ids)."""
    calls = [
        {"type": "function",
         "function": {"name": c.function.name, "arguments": c.function.parsed_arguments()}}
        for c in message.tool_calls or []
    ]  # fmt: skip
    return {
        "role": "assistant",
        "content": message.text,
        **({"tool_calls": calls} if calls else {}),
    }


def _record(turn: Turn) -> dict[str, Any]:
    """What the loops must agree on: not latencies, nor call ids (TRL makes its own)."""
    return {
        "environment": [(m.role, m.name, m.text) for m in turn.environment],
        "tools": [(c.name, c.ok, c.error_kind) for c in turn.tool_calls],
        "reward": turn.reward,
        "valid": turn.reward_valid,
        "metrics": {k: m.model_dump() for k, m in turn.metrics.items()},
        "parse_error": turn.parse_error,
    }


def _episode(trajectory: Trajectory) -> Any:
    episode = trajectory.episode
    return (episode.model_dump() if episode else None, trajectory.stop_reason, trajectory.success)


def _engine(row: dict[str, Any], replies: list[Any]) -> Trajectory:
    slot = EpisodeSlot(0, 0, row["seed"], options={"task": Task.model_validate_json(row["task"])})
    return asyncio.run(
        play_episode(make_env("tools", **KINDS), ScriptedPolicy(replies), slot,
                     sampling=SamplingParams(), env_name="tools")
    )  # fmt: skip


def _trl(spec: Any, row: dict[str, Any], replies: list[Message]) -> Trajectory:
    instance = spec.environment_factory()
    instance.reset(**row)
    for reply in replies:  # TRL runs the calls it can through the tool methods, as they come
        for call in reply.tool_calls or []:
            method = getattr(instance, call.function.name, None)
            if method is not None:
                method(**call.function.parsed_arguments())
    return episode_trajectory(instance, [_as_trl(reply) for reply in replies])


def test_the_engine_check_and_trl_loops_record_the_same_turns() -> None:
    spec = trl_environment("tools", n_tasks=1, env_kwargs=KINDS)
    row = dict(spec.train_dataset[0])
    replies = [
        _tool_message(("lookup", {"name": "France", "attribute": "population"}),
                      ("lookup", {"name": "Atlantis", "attribute": "population"})),
        _tool_message(("search", {"query": "population"})),  # a tool the env does not have
        Message(role="assistant", content="Answer: 1.23"),
    ]  # fmt: skip

    script = iter(replies)
    played = play_with_solver(
        make_env("tools", **KINDS), lambda messages, tools: next(script), seed=row["seed"],
        options={"task": Task.model_validate_json(row["task"])},
    )  # fmt: skip
    pairs = enumerate(zip(replies, played.turns, strict=True))
    checked = [step_turn(i, PolicyOutput(message=reply), result, 0.0, 0.0)
               for i, (reply, result) in pairs]  # fmt: skip
    engine = _engine(row, replies)
    trl = _trl(spec, row, replies)

    assert [_record(t) for t in engine.turns] == [_record(t) for t in checked]
    assert [_record(t) for t in trl.turns] == [_record(t) for t in checked]
    assert [c.error_kind for t in engine.turns for c in t.tool_calls] == [
        None, "exception", "unknown_tool"
    ]  # fmt: skip
    assert _episode(engine) == _episode(trl)
    assert engine.episode is not None and engine.episode.model_dump() == played.episode.model_dump()
    assert engine.stop_reason is StopReason.ANSWERED is played.stop_reason


def test_a_malformed_call_is_the_same_rejected_turn_in_the_engine_and_trl() -> None:
    spec = trl_environment("tools", n_tasks=1, env_kwargs=KINDS)
    row = dict(spec.train_dataset[0])
    broken = Message(role="assistant", content='<tool_call>{"name": "lookup", </tool_call>')
    answer = Message(role="assistant", content="Answer: 1.23")

    trl = _trl(spec, row, [broken, answer])
    error = trl.turns[0].parse_error  # TRL's loop finds it; the engine's policy reports it
    assert error is not None
    engine = _engine(row, [PolicyOutput(message=broken, parse_error=error), answer])

    assert [_record(t) for t in engine.turns] == [_record(t) for t in trl.turns]
    assert engine.turns[0].parse_error == error
    assert engine.turns[0].environment[0].role == "user"  # the env's feedback, one for both
    assert _episode(engine) == _episode(trl)


def test_the_opening_is_recorded_where_the_reset_changed_the_tasks_messages() -> None:
    env = make_env("tools", **KINDS)
    env.reset(seed=0)
    task = env.task  # generated, with the env's system prompt
    bare = task.model_copy(update={"messages": task.messages[1:]})

    def play(played: Task) -> Trajectory:
        slot = EpisodeSlot(0, 0, 0, options={"task": played})
        return asyncio.run(
            play_episode(make_env("tools", **KINDS), ScriptedPolicy(["Answer: 1"]), slot,
                         sampling=SamplingParams(), env_name="tools")
        )  # fmt: skip

    assert play(task).opening is None  # the task's messages, as they were
    added = play(bare)
    assert (added.task, added.opening) == (bare, task.messages)  # the system prompt added


def test_an_episode_records_the_tools_of_each_turn_outside_a_run_too() -> None:
    from rk_agent.envs.offered_tools import ToolScope
    from rk_agent.policies.function_policy import FunctionPolicy
    from tests.envs import varying_tools

    varying_tools.OFFERED.clear()
    slot = EpisodeSlot(0, 0, 5)
    env = varying_tools.ShopEnv()
    trajectory = asyncio.run(
        play_episode(env, FunctionPolicy(varying_tools.solve), slot, sampling=SamplingParams(),
                     env_name="shop")
    )  # fmt: skip
    assert trajectory.success and len(trajectory.turns) == 4
    seen = trajectory.provenance  # recorded although record_provenance is off
    assert seen is not None and env.tool_scope is ToolScope.TURN
    per_turn = [
        [t["function"]["name"] for t in trajectory.offered_tools(turn.index, [])]
        for turn in trajectory.turns
    ]
    assert per_turn == varying_tools.OFFERED
    fixed = asyncio.run(
        play_episode(make_env("tools"), ScriptedPolicy(["Answer: 1"]), slot,
                     sampling=SamplingParams(), env_name="tools")
    )  # fmt: skip
    assert fixed.provenance is None  # the same tools as every episode: nothing to record
