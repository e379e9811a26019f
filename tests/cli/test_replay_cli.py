"""`rk-agent replay` as a real subprocess: its lines and exit codes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from rk_agent.envs.registry import get_solver
from rk_agent.runs.run_dir import read_trajectories
from tests.cli.test_rescore_cli import ENV, rk
from tests.rollouts.runs import play_run
from tests.runs.test_replay import NOISY, noisy_solver


def test_a_matching_episode_exits_0(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("tools"), env="tools", n=2)
    out = rk("replay", str(run), "--episode", "1-0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Replaying episode 1-0 of {run} (tools, seed 1, 3 turns) in a fresh environment",
        "task: match",
        "turn 0: match",
        "turn 1: match",
        "turn 2: match",
        "end: match",
        "All 3 turns match: observations, step rewards, the episode's result and the stop reason.",
    ]


def test_a_one_turn_episode_reads_as_one_turn(tmp_path: Path) -> None:
    """Not "All 1 turns match" (issue 40 item 15)."""
    run = play_run(tmp_path / "run", get_solver("math"), env="math", n=1)
    out = rk("replay", str(run), "--episode", "0-0")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert (
        lines[0] == f"Replaying episode 0-0 of {run} (math, seed 0, 1 turn) in a fresh environment"
    )
    assert lines[-1] == (
        "The turn matches: observations, step rewards, the episode's result and the stop reason."
    )


def test_a_nondeterministic_env_exits_1_naming_the_first_difference(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", noisy_solver, env=NOISY, n=1)
    recorded = read_trajectories(run)[0].turns[0].environment[0].text
    out = rk("replay", str(run), "--episode", "0-0")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1:2] == ["task: match"]
    assert re.fullmatch(
        rf'turn 0: differs: environment\[0\]\.content: recorded "{recorded}", replayed "\d+"',
        lines[2],
    )
    assert lines[3:] == [
        "turn 1: match", "turn 2: match", "end: match",
        "Mismatch: first at turn 0, environment[0].content.",
    ]  # fmt: skip


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("math"), env="math", n=2)
    out = rk("replay", str(run), "--episode", "5-1")
    assert out.returncode == 2
    assert out.stderr == (
        f"error: {run} has no episode '5-1'; its episodes are 0-0, 1-0. Give an id as "
        "`rk-agent show` lists them (<task index>-<sample>).\n"
    )


def test_rollout_fork_writes_one_group_of_n(tmp_path: Path) -> None:
    source = play_run(tmp_path / "source", get_solver("tools"), env="tools", n=2)
    fork = tmp_path / "fork"
    out = rk("rollout", "--fork", f"{source}::1-0@2", "--policy", "solver", "--n", "3",
             "-o", str(fork))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"tools: 3 episodes (1 tasks x 3), concurrency 8, writing to {fork}" in out.stdout
    assert sorted(t.id for t in read_trajectories(fork)) == ["1-0", "1-1", "1-2"]


def test_a_fork_cut_short_resumes_from_another_folder(tmp_path: Path) -> None:
    # Forked with the source named relatively, as typed in its folder; resumed from elsewhere.
    play_run(tmp_path / "source", get_solver("tools"), env="tools", n=2)
    forked = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rollout", "--fork", "source::1-0@2", "--policy",
         "solver", "--n", "8", "-o", "fork"],
        capture_output=True, text=True, env=ENV, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    fork = tmp_path / "fork"
    assert f"fork: {tmp_path / 'source'}::1-0@2" in (fork / "config.yaml").read_text()
    file = fork / "trajectories.jsonl"
    file.write_text("".join(file.read_text().splitlines(keepends=True)[:3]))  # killed after 3

    resumed = rk("rollout", "--resume", str(fork))
    assert resumed.returncode == 0, resumed.stderr
    assert "(resuming: 3 done)" in resumed.stdout
    assert sorted(t.id for t in read_trajectories(fork)) == [f"1-{i}" for i in range(8)]


def test_rollout_fork_of_a_nondeterministic_env_is_refused_in_one_line(tmp_path: Path) -> None:
    source = play_run(tmp_path / "source", noisy_solver, env=NOISY, n=1)
    fork = f"{source}::0-0@1"
    out = rk("rollout", "--fork", fork, "--policy", "solver", "-o", str(tmp_path / "f"))
    assert out.returncode == 2
    assert out.stderr.startswith(
        f"error: cannot fork {source}::0-0@1: the environment's state cannot be restored by "
        "replay (the replay of the first 1 turns differs at turn 0: environment[0].content: "
    )
    assert out.stderr.count("\n") == 1
