"""Forking a recorded episode: continuations from its turn K, the first K turns as recorded."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.registry import get_solver
from rk_agent.errors import ConfigError
from rk_agent.rollouts.fork import ForkPoint
from rk_agent.rollouts.runner import PreparedRun, prepare_run
from rk_agent.runs.compare import compare_runs
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir, RunStatus, read_trajectories
from rk_agent.runs.trajectory import Trajectory, Turn
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer
from rk_agent.types import Message
from tests.rollouts.runs import play_run
from tests.rollouts.served import play_served
from tests.runs.test_replay import NOISY, noisy_solver


def wrong_answer(messages: list[Message], tools: Any) -> str:
    return "Answer: -1"


def as_recorded(turns: list[Turn]) -> list[Turn]:
    """Turns a fork copied, without the mark that says so."""
    return [turn.model_copy(update={"copied_from": None}) for turn in turns]


def test_a_fork_keeps_the_first_k_turns_and_continues_with_the_policy(tmp_path: Path) -> None:
    source = play_run(tmp_path / "source", get_solver("tools"), env="tools", n=2)
    recorded = {t.id: t for t in read_trajectories(source)}["1-0"]
    fork = play_run(
        tmp_path / "fork", wrong_answer, env="math", fork=f"{source}::1-0@2", group_size=8
    )
    played = sorted(read_trajectories(fork), key=lambda t: t.sample)
    assert [t.id for t in played] == [f"1-{i}" for i in range(8)]
    origin = f"{source.resolve()}::1-0"
    for t in played:
        assert t.env == "tools" and t.task == recorded.task and t.seed == recorded.seed
        # The first 2 turns as recorded, marked as copied from the source (another policy's).
        assert [u.copied_from for u in t.turns] == [origin, origin, None]
        assert as_recorded(t.turns[:2]) == recorded.turns[:2]
        assert t.turns[2].assistant.text == "Answer: -1" != recorded.turns[2].assistant.text
        assert (t.success, recorded.success) == (False, True)
    assert (
        compare_runs(source, fork).scope == "compared on 1 shared tasks; 1 only in A, 0 only in B"
    )


def play_until_ctrl_c(run: PreparedRun, after: int) -> None:
    """Play ``run`` and stop it as Ctrl-C does once ``after`` episodes have finished: asyncio.run
    cancels its main task, then raises `KeyboardInterrupt`."""
    seen: list[str] = []

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None

        def on_episode(trajectory: Trajectory) -> None:
            seen.append(trajectory.id)
            if len(seen) == after:
                task.cancel()

        await run.play(on_episode)

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def test_an_interrupted_fork_resumes_to_the_same_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fork names its source relatively, as a command line does, and is resumed from
    # another folder: the saved config holds the source's absolute path.
    monkeypatch.chdir(tmp_path)
    play_run(Path("source"), get_solver("tools"), env="tools", n=2)
    recorded = {t.id: t for t in read_trajectories("source")}["1-0"]
    config = RolloutConfig.model_validate(
        {"fork": "source::1-0@2", "group_size": 8, "concurrency": 2, "output": "fork"}
    )
    with (
        pytest.raises(KeyboardInterrupt),
        prepare_run(config, policy=ScriptedPolicy(["Answer: -1"], latency_s=0.02)) as run,
    ):
        play_until_ctrl_c(run, after=3)
    record = RunDir.open("fork").read_record()
    assert record is not None and record.status is RunStatus.INTERRUPTED
    first = {t.id for t in read_trajectories("fork")}
    assert 3 <= len(first) < 8

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    policy = ScriptedPolicy(["Answer: -1"])
    with prepare_run(config, resume=tmp_path / "fork", policy=policy) as run:
        assert run.done == first
        assert run.config.fork == f"{tmp_path / 'source'}::1-0@2"
        asyncio.run(run.play())
    played = read_trajectories(tmp_path / "fork")
    assert sorted(t.id for t in played) == [f"1-{i}" for i in range(8)]  # one group, once each
    for t in played:
        assert (t.task, t.seed) == (recorded.task, recorded.seed)
        assert as_recorded(t.turns[:2]) == recorded.turns[:2]
        assert [turn.assistant.text for turn in t.turns[2:]] == ["Answer: -1"]


def test_a_fork_against_the_stub_server(tmp_path: Path) -> None:
    source = play_run(tmp_path / "source", get_solver("tools"), env="tools", n=1)
    recorded = read_trajectories(source)[0]
    with StubServer(call_first_tool_then_answer("Answer: 7")) as server:
        fork = play_served(tmp_path / "fork", server, fork=f"{source}::0-0@1", group_size=3)
        sent = server.chat_requests[0].body["messages"]
    played = read_trajectories(fork)
    assert len(played) == 3
    assert all(as_recorded(t.turns[:1]) == recorded.turns[:1] for t in played)
    opening = [m.to_openai() for m in (*recorded.task.messages, recorded.turns[0].assistant)]
    assert sent[: len(opening)] == opening  # the model is sent the recorded prefix


def test_a_fork_point_out_of_range_is_refused(tmp_path: Path) -> None:
    source = play_run(tmp_path / "source", get_solver("math"), env="math", n=1)
    message = f"cannot fork {source}::0-0@1: episode 0-0 has 1 turns; give a turn from 0 to 0."
    with pytest.raises(ConfigError, match=re.escape(message)):
        play_run(tmp_path / "fork", wrong_answer, fork=f"{source}::0-0@1")


def test_a_nondeterministic_env_cannot_be_forked(tmp_path: Path) -> None:
    source = play_run(tmp_path / "source", noisy_solver, env=NOISY, n=1)
    message = (
        f"cannot fork {source}::0-0@1: the environment's state cannot be restored by replay "
        "(the replay of the first 1 turns differs at turn 0: environment[0].content: recorded "
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        play_run(tmp_path / "fork", noisy_solver, fork=f"{source}::0-0@1")
    assert not (tmp_path / "fork").exists()


def test_a_bad_fork_spec_is_refused() -> None:
    message = "--fork expects RUN::ID@K (a run, an episode id, a turn: runs/a::3-0@2), got 'a@2'."
    with pytest.raises(ConfigError, match=re.escape(message)):
        ForkPoint.parse("a@2")


def test_a_fork_is_scored_by_the_rewards_it_gives_and_a_fork_of_a_fork_keeps_the_origin(
    tmp_path: Path,
) -> None:
    source = play_run(tmp_path / "source", get_solver("tools"), env="tools", n=1)
    reward = "rk_agent.rewards.builtin.math:math_reward"
    fork = play_run(tmp_path / "fork", wrong_answer, fork=f"{source}::0-0@1", group_size=2,
                    rewards=[reward])  # fmt: skip
    played = read_trajectories(fork)
    assert {t.env for t in played} == {"tools"}
    for t in played:  # scored by the reward given alone, not the env's own
        assert t.episode is not None
        assert {name.split(".")[0] for name in t.episode.metrics} == {"math_reward"}
    # A fork of the fork: its first turn was the source's, and still says so.
    again = play_run(tmp_path / "again", wrong_answer, fork=f"{fork}::0-0@1", group_size=1)
    (forked,) = read_trajectories(again)
    assert [t.copied_from for t in forked.turns] == [f"{source.resolve()}::0-0", None]


def test_a_training_runs_episode_can_be_named() -> None:
    assert ForkPoint.parse("runs/grpo::s3-0-1@2") == ForkPoint("runs/grpo", "s3-0-1", 2)
