"""Replaying recorded episodes: every built-in environment replays as recorded, a planted
nondeterministic one is reported with its exact first difference."""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rk_agent.envs.registry import get_solver, make_env
from rk_agent.envs.tool import Tool, tool
from rk_agent.errors import ConfigError
from rk_agent.policies.function_policy import tool_call
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.runs.replay import Difference, replay_episode, replay_trajectory
from rk_agent.runs.run_dir import read_trajectories
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.tool_calls import LLAMA3_JSON
from rk_agent.types import Message
from tests.rollouts.runs import play_run
from tests.rollouts.toy import AddEnv, solver as add_solver

REPO = Path(__file__).resolve().parents[2]

_rng = random.Random()  # unseeded on purpose: the environment below is not reproducible
DRAWS: list[int] = []


@tool
def roll() -> int:
    """Roll a number (a different one each time, whatever the seed)."""
    DRAWS.append(_rng.randrange(10**9))
    return DRAWS[-1]


class NoisyEnv(AddEnv):
    """`AddEnv` with a `roll` tool whose answers are not seeded."""

    default_episode_rewards: ClassVar[dict[str, Any]] = {"answer": "math"}

    def tools(self) -> list[Tool]:
        return [*super().tools(), roll]


def noisy_solver(messages: list[Message], tools: Any) -> Message | str:
    """Roll first, then add the numbers, then answer."""
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return tool_call("roll", {})
    if len(results) == 1:
        a, b = messages[0].text.rstrip("?").split("+")
        return tool_call("add", {"a": int(a), "b": int(b)})
    return f"#### {results[-1].text}"


NOISY = f"{__name__}:NoisyEnv"


@pytest.mark.parametrize("env", ["tools", "math", "guess", "code"])
def test_every_episode_of_a_builtin_env_replays_as_recorded(tmp_path: Path, env: str) -> None:
    run = play_run(tmp_path / "run", get_solver(env), env=env, n=3)
    for trajectory in read_trajectories(run):
        report = replay_episode(run, trajectory.id)
        assert report.first_difference is None, report.first_difference
        assert report.end_checked and report.note is None
        assert [t.index for t in report.turns] == list(range(len(trajectory.turns)))


def test_the_mcp_tools_env_replays_as_recorded(tmp_path: Path) -> None:
    servers = REPO / "examples" / "mcp" / "servers.json"
    solver = get_solver("mcp_tools")
    run = play_run(tmp_path / "run", solver, env="mcp_tools", mcp=str(servers), n=2)
    for trajectory in read_trajectories(run):
        assert replay_episode(run, trajectory.id).matched


def test_a_nondeterministic_env_is_reported_with_its_first_difference(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", noisy_solver, env=NOISY, n=1)
    recorded = DRAWS[-1]
    report = replay_episode(run, "0-0")
    assert not report.matched
    assert report.task is None
    first = Difference(
        turn=0, field="environment[0].content", recorded=f'"{recorded}"', replayed=f'"{DRAWS[-1]}"'
    )
    assert report.first_difference == first
    assert [t.matched for t in report.turns] == [False, True, True]
    assert report.end is None and report.end_checked


def test_a_partial_replay_does_not_compare_the_end(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("tools"), env="tools", n=1)
    report = replay_episode(run, "0-0", turns=1)
    assert report.matched and not report.end_checked
    assert report.note == "replayed the first 1 of 3 turns"


def test_an_episode_the_run_does_not_hold_names_some_it_does(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("math"), env="math", n=7)
    message = (
        f"{run} has no episode '9-0'; its episodes are 0-0, 1-0, 2-0, 3-0, 4-0, ... (7 in all). "
        "Give an id as `rk-agent show` lists them (<task index>-<sample>)."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        replay_episode(run, "9-0")


def test_a_changed_recorded_reward_is_reported(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("tools"), env="tools", n=1)
    file = run / "trajectories.jsonl"
    row = json.loads(file.read_text())
    row["episode"]["score"] = 0.5
    file.write_text(json.dumps(row) + "\n")
    report = replay_episode(run, "0-0")
    assert report.first_difference == Difference(
        turn=None, field="episode.score", recorded="0.5", replayed="1.0"
    )


def test_a_rejected_turn_replays_with_the_feedback_of_the_policys_format() -> None:
    """The environment has no tool-call format: a rejected turn is played again with the
    feedback it was shown, whichever format the policy wrote it in."""
    env, error = AddEnv(), "tool call 1: invalid JSON at char 1"
    broken = PolicyOutput(
        message=Message(role="assistant", content="{"), parse_error=error, parse_format=LLAMA3_JSON
    )
    slot = EpisodeSlot(0, 0, seed=3)
    played = asyncio.run(
        play_episode(env, ScriptedPolicy([broken, "#### 5"]), slot, sampling=SamplingParams(),
                     env_name="add")
    )  # fmt: skip
    assert played.turns[0].parse_feedback == LLAMA3_JSON.feedback(error)
    report = replay_trajectory(AddEnv(), played)
    assert report.matched, report.difference


def test_the_opening_the_reset_made_is_recorded_and_compared(tmp_path: Path) -> None:
    # A task without a system prompt: the tools env's reset adds its own. That opening, what
    # the model was sent, is recorded, and a replay compares it.
    env = make_env("tools")
    env.reset(seed=0)
    bare = env.task.model_copy(update={"messages": env.task.messages[1:]})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(bare.model_dump_json() + "\n")
    run = play_run(tmp_path / "run", get_solver("tools"), env="tools", tasks=str(tasks), n=1)
    (trajectory,) = read_trajectories(run)
    assert trajectory.opening == [env.conversation[0], *bare.messages]  # the system prompt
    assert replay_episode(run, "0-0").matched
    file = run / "trajectories.jsonl"
    row = json.loads(file.read_text())
    row["opening"][0]["content"] = "Be brief."
    file.write_text(json.dumps(row) + "\n")
    difference = replay_episode(run, "0-0").first_difference
    assert difference is not None and (difference.turn, difference.field, difference.recorded) == (
        None, "opening[0].content", '"Be brief."'
    )  # fmt: skip


def test_a_training_runs_episodes_replay_when_its_signed_config_names_their_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training run's folder has no rollout config: its episodes name their environment, and
    its signed ``rk_agent_config.yaml`` vouches for that name (`signed_training_env`)."""
    from rk_agent.errors import UntrustedRunError
    from rk_agent.runs.run_trust import sign_config

    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "cache"))
    env = f"{REPO / 'tests' / 'rollouts' / 'toy.py'}::AddEnv"
    played = play_run(tmp_path / "played", add_solver, env=env, n=1)
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / "trajectories.jsonl").write_text((played / "trajectories.jsonl").read_text())
    config = folder / "rk_agent_config.yaml"
    config.write_text(f"kind: grpo\nenv: {env}\n")
    with pytest.raises(UntrustedRunError, match=re.escape(f"would import {REPO}/tests/rollouts")):
        replay_episode(folder, "0-0")
    sign_config(config)
    assert replay_episode(folder, "0-0").matched
    config.write_text("kind: grpo\nenv: tools\n")  # another env: it vouches for nothing else
    sign_config(config)
    with pytest.raises(UntrustedRunError):
        replay_episode(folder, "0-0")
    assert replay_episode(folder, "0-0", trust_run=True).matched
