"""`rk-agent check reward` and `rk-agent check env` as real subprocesses: tables, --json,
exit codes 0 (clean), 1 (flagged) and 2 (bad input), and model or user text kept plain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = [
    {"messages": [{"role": "user", "content": "What is 3 + 4?"},
                  {"role": "assistant", "content": "3 + 4 = 7.\n#### 7"}], "ground_truth": "7"},
    {"messages": [{"role": "user", "content": "What is [red]6[/red] times 7?"},
                  {"role": "assistant", "content": "#### 42"}], "ground_truth": "42"},
]  # fmt: skip

USER_CODE = """
from rk_agent import reward_function
from rk_agent.soundness.probes import probe


@reward_function(name="pays_for_length")
def pays_for_length(messages, ground_truth, **kwargs):
    text = messages[-1].text
    if text.rsplit("####", 1)[-1].strip() == ground_truth:
        return 1.0
    return min(0.5, max(0, len(text) - 200) / 2000)


@probe("[bold]loud[/bold]", "the answer in [red]capitals[/red]")
def loud(view):
    return view.wrong.text + "!" * 600
"""


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", "check", *args],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    (tmp_path / "user.py").write_text(USER_CODE)
    return path


def test_a_sound_reward_exits_0_with_a_table(samples: Path) -> None:
    done = check("reward", "math", "--samples", str(samples))
    assert done.returncode == 0, done.stderr
    assert "math (math): 2 samples" in done.stdout
    assert "two_answers" in done.stdout and done.stdout.rstrip().endswith("nothing flagged")


def test_a_flagged_reward_exits_1_and_user_text_stays_plain(samples: Path) -> None:
    user = samples.parent / "user.py"
    done = check("reward", f"{user}::pays_for_length", "--samples", str(samples),
                 "--probe", f"{user}::loud")  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "[bold]loud[/bold]" in done.stdout  # a name with markup is printed as it is
    assert "the answer in [red]capitals[/red]" in done.stdout
    report = json.loads(
        check("reward", f"{user}::pays_for_length", "--samples", str(samples), "--json").stdout
    )
    assert {f["probe"] for f in report["flags"]} == {"padding", "repetition"}


def test_bad_input_exits_2_with_one_line(samples: Path, tmp_path: Path) -> None:
    lone = tmp_path / "lone.jsonl"
    lone.write_text(json.dumps(SAMPLES[0]) + "\n")
    done = check("reward", "math", "--samples", str(lone))
    assert done.returncode == 2
    assert done.stderr == (
        "error: check_reward needs at least 2 samples (a sample's honest wrong answer is "
        "another sample's reference reply); got 1. Add samples with other answers.\n"
    )
    done = check("reward", "math", "--samples", str(samples), "--probe", "os.path:join")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --probe 'os.path:join' is a function, not a probe")
    # A name the file lacks: the probes it does define, or how to make one (issue 40 item 14).
    user = tmp_path / "user.py"
    done = check("reward", "math", "--samples", str(samples), "--probe", f"{user}::lod")
    assert done.stderr == (
        f"error: cannot load probe '{user}::lod': '{user}' has no 'lod'. Did you mean 'loud'? "
        "It defines these probes: loud.\n"
    )
    (tmp_path / "none.py").write_text("x = 1\n")
    done = check("reward", "math", "--samples", str(samples), "--probe", f"{tmp_path}/none.py::x2")
    assert done.stderr.endswith(
        "It defines no probes: make one with @rk_agent.soundness.probes.probe(name, "
        "description) on a function of the view.\n"
    )


TYPO = (
    "error: environment 'guess' does not take 'hihg'. Did you mean 'high'? It takes: "
    "episode_rewards, episode_weights, high, max_turns, mcp, render_mode, step_rewards, tasks.\n"
)


def test_a_typo_in_check_env_kwargs_is_one_line_and_exit_2() -> None:
    """Bad input (2), not a flagged environment (1), and no traceback (issue 40 item 6)."""
    done = check("env", "guess", "--kwargs", '{"hihg": 3}')
    assert (done.returncode, done.stderr, done.stdout) == (2, TYPO, "")


@pytest.mark.parametrize("command", ["mcp", "openenv"])
def test_a_typo_in_env_kwargs_of_the_servers_is_the_same_line(command: str) -> None:
    """Every command that takes an environment's arguments on the command line says the same."""
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", command, "serve", "--env", "guess",
         "--env-kwargs", '{"hihg": 3}'],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, TYPO)


def test_a_typo_in_a_rewards_kwargs_is_the_same_kind_of_line(samples: Path) -> None:
    """A reward drops what it does not take: a typo would be dropped silently."""
    typo = (
        "error: --kwargs names 'partial_credt', which the reward 'math' does not take. Did you "
        "mean 'partial_credit'? It takes: ground_truth, partial_credit.\n"
    )
    options = ("--kwargs", '{"partial_credt": true}')
    done = check("reward", "math", "--samples", str(samples), *options)
    assert (done.returncode, done.stderr, done.stdout) == (2, typo, "")
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "preview", "--reward", "math",
         "--samples", str(samples), *options], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (done.returncode, done.stderr, done.stdout) == (2, typo, "")


def test_check_env_prints_json_for_ci() -> None:
    done = check("env", "guess", "--episodes", "2", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["checked"] == "env" and report["flags"] == []
    assert [row["name"] for row in report["rows"]][:2] == ["reference", "wrong"]


def test_check_env_plays_a_reasoning_gym_env_and_says_which_have_no_solver() -> None:
    out = check("env", "reasoning-gym:chain_sum", "--episodes", "3", "--json")
    report = json.loads(out.stdout)
    assert report["target"] == "reasoning-gym:chain_sum"
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["reference"]["mean"] == 1.0 and rows["wrong"]["mean"] == 0.0
    # reasoning-gym's default scorer gives partial credit to an answer that holds the right
    # one: the check says so (exit 1).
    assert out.returncode == 1 and rows["two_answers"]["mean"] > 0
    none = check("env", "reasoning-gym:rubiks_cube", "--episodes", "3")
    assert none.returncode == 2
    assert none.stderr.strip() == (
        "error: check_env(adversarial=True) needs the environment's reference solver for its "
        "baselines; reasoning-gym:rubiks_cube has none: reasoning-gym's rubiks_cube stores no "
        "answer (answer=None) to answer with; score_answer checks a reply against the puzzle "
        "itself. Check its contract alone with rk_agent.envs.check_env."
    )


@pytest.mark.slow  # rk-agent processes that import verifiers (7.5 s each, idle)
def test_check_env_plays_a_verifiers_taskset_and_says_which_have_no_solver() -> None:
    tasksets = Path(__file__).parents[1] / "interop" / "verifiers_tasksets"
    env = {**os.environ, "COLUMNS": "300", "PYTHONPATH": str(tasksets)}
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", "check", "env", "verifiers:vf_scored",
         "--episodes", "3", "--json"], capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)["rows"]}
    # The reference answers 1.0; a wrong answer still earns brevity's 0.25 (its weight).
    assert rows["reference"]["mean"] == 1.0 and rows["wrong"]["mean"] == 0.25
    none = subprocess.run(
        [sys.executable, "-m", "rk_agent", "check", "env", "verifiers:vf_failing"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert none.returncode == 2
    assert none.stderr.strip() == (
        "error: check_env(adversarial=True) needs the environment's reference solver for its "
        "baselines; verifiers:vf_failing has none: its task data (TaskData) has no 'answer' "
        "field to answer with; its rewards score the transcript. Check its contract alone with "
        "rk_agent.envs.check_env."
    )
