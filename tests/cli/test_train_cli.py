"""`rk-agent train grpo|sft` as real subprocesses: checkpoints, resume, wandb offline, errors."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from rk_agent.runs.run_record import RUN_RECORD_FILE
from rk_agent.runs.watch_log import read_watch
from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer
from rk_agent.view.app import make_app
from rk_agent.view.catalog import find_runs

SECRET = "sk-train-SECRET-0123456789abcdef"
# A tiny run: one GRPO group of 2 episodes, a few tokens each.
TINY = (
    "--num_generations", "2", "--per_device_train_batch_size", "2",
    "--max_completion_length", "12", "--save_steps", "1", "--learning_rate", "1e-3",
)  # fmt: skip


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    # No wandb key anywhere: a fresh HOME has no ~/.netrc.
    return {**env, "HOME": str(tmp_path / "home"), "COLUMNS": "200", **extra}


def rk(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True,
        env=env, timeout=600,
    )  # fmt: skip


def train_guess(
    model: Path, out: Path, *flags: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`rk-agent train grpo` on the guess env, a tiny run (`TINY`) plus ``flags``."""
    return rk(
        "train", "grpo", "--env", "guess", "--model", str(model), "--output-dir", str(out),
        *TINY, *flags, env=env,
    )  # fmt: skip


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_grpo_writes_checkpoints_and_the_final_model_then_resumes(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    common = ("--n-tasks", "4", "--max-turns", "3", "--no-wandb")
    # Started as `uv run` starts it: the command it suggests is pasted back as is (issue 40
    # item 15).
    uv_run = _env(tmp_path, UV_RUN_RECURSION_DEPTH="1")
    first = train_guess(tiny_model_dir, out, *common, "--max_steps", "1", env=uv_run)
    assert first.returncode == 0, first.stderr
    assert (out / "checkpoint-1" / "trainer_state.json").is_file()
    final = out / "final"
    assert (final / "config.json").is_file() and (final / "tokenizer_config.json").is_file()
    assert f"evaluate it with `uv run rk-agent rollout --model {final}`" in first.stdout
    saved = yaml.safe_load((out / "rk_agent_config.yaml").read_text())
    assert saved["env"] == "guess" and saved["trl"]["max_steps"] == 1

    second = train_guess(tiny_model_dir, out, *common, "--max_steps", "2", env=_env(tmp_path))
    assert second.returncode == 0, second.stderr
    assert f"resuming from {out / 'checkpoint-1'}" in second.stdout
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    episodes = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(episodes) == 4  # 2 episodes per step; the resumed run did not replay step 0

    # `show` reads a training run's episodes too, after its status (as the docs promise).
    shown = rk("show", str(out), "--limit", "1", env=_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    first_id = json.loads(episodes[0])["id"]
    assert "episodes" in shown.stdout and f"episode {first_id}" in shown.stdout


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_stop_on_alarm_ends_the_run_at_its_last_checkpoint_and_show_lists_the_alarm(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    flags = ("--n-tasks", "2", "--max-turns", "2", "--no-wandb", "--max_steps", "3",
             "--stop-on-alarm", "--alarm-truncated", "0.5",
             "--alarm-dominant-share", "1")  # fmt: skip
    done = train_guess(tiny_model_dir, out, *flags, env=_env(tmp_path))
    assert done.returncode == 1, done.stderr
    # The random model never ends a reply: every episode runs out of its 12 tokens. (Its
    # guesses are no numbers, so the game's per-step penalty is all of its reward: the
    # dominant_component alarm, kept quiet here with a share of 1.)
    warning = (
        "step 1: 100% of completions were cut by a token limit: the reward scores unfinished "
        "work. Try: a larger --max_completion_length, or fewer turns (--max-turns)."
    )
    assert warning in done.stderr
    assert (
        f"stopped at step 1 by the truncation alarm (--stop-on-alarm); no final model was saved; "
        f"its last checkpoint is {out / 'checkpoint-1'}." in done.stdout
    )
    assert not (out / "final").exists() and not (out / "checkpoint-2").exists()
    saved = yaml.safe_load((out / "rk_agent_config.yaml").read_text())
    assert saved["watch"]["stop_on_alarm"] is True and saved["watch"]["truncated_share"] == 0.5

    shown = rk("show", str(out), env=_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "stopped" in shown.stdout and "Alarms raised: 1" in shown.stdout
    assert f"- {warning}" in " ".join(shown.stdout.split())


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_grpo_plays_the_env_spec_of_its_flags(tmp_path: Path, tiny_model_dir: Path) -> None:
    """--tasks, --reward, --max-turns and --seed reach the environment through one EnvSetup."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(
        json.dumps({"id": f"q{i}", "prompt": f"{i}+1?", "ground_truth": str(i + 1)}) + "\n"
        for i in range(2)
    ))  # fmt: skip
    out = tmp_path / "run"
    flags = ("--tasks", str(tasks), "--reward", "rk_agent.rewards.builtin.math:math_reward",
             "--max-turns", "1", "--seed", "7", "--no-wandb", "--max_steps", "1")  # fmt: skip
    trained = rk(
        "train", "grpo", "--env", "rk_agent/Math-v0", "--model", str(tiny_model_dir),
        "--output-dir", str(out), *TINY, *flags, env=_env(tmp_path),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    saved = yaml.safe_load((out / "rk_agent_config.yaml").read_text())
    assert {k: saved[k] for k in ("env", "tasks", "rewards", "max_turns", "seed")} == {
        "env": "rk_agent/Math-v0", "tasks": str(tasks),
        "rewards": ["rk_agent.rewards.builtin.math:math_reward"], "max_turns": 1, "seed": 7,
    }  # fmt: skip
    episodes = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert episodes and {(e["task"]["id"], e["seed"]) for e in episodes} <= {("q0", 7), ("q1", 8)}
    assert {e["env"] for e in episodes} == {"math"}  # the registered name, as rollouts record
    assert all(len(e["turns"]) <= 1 for e in episodes)
    assert all("math_reward" in e["episode"]["metrics"] for e in episodes)  # its function's name


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_the_trained_folder_is_a_model_for_rk_agent_rollout(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    trained = train_guess(
        tiny_model_dir,
        out,
        "--n-tasks",
        "2",
        "--no-wandb",
        "--max_steps",
        "1",
        env=_env(tmp_path),
    )
    assert trained.returncode == 0, trained.stderr
    played = rk(
        "rollout", "--env", "guess", "--model", str(out / "final"), "--n", "2",
        "--max-turns", "2", "--max-tokens", "4", "--output", str(tmp_path / "eval"),
        env=_env(tmp_path),
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    assert len((tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines()) == 2


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_wandb_without_a_key_logs_offline_and_says_how_to_sync(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    run = train_guess(
        tiny_model_dir,
        out,
        "--n-tasks",
        "2",
        "--max_steps",
        "1",
        env=_env(tmp_path, FIREWORKS_API_KEY=SECRET),
    )
    assert run.returncode == 0, run.stderr
    assert "no API key, logging offline" in run.stdout and "wandb sync" in run.stdout
    # Piped output: plain lines, no progress bar and no completions table in the terminal
    # (the table goes to wandb, below).
    assert "step 1/1: started" in run.stdout
    assert "┏" not in run.stdout + run.stderr and "\r" not in run.stderr
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    # An offline run keeps its history in the .wandb file (protobuf; the names are plain bytes).
    (history,) = runs[0].glob("run-*.wandb")
    logged = history.read_bytes()
    for metric in ("rewards/episode/mean", "episodes/turns_mean", "episodes/step_reward_mean",
                   "episodes/parse_error_rate", "episodes/stop/truncated"):  # fmt: skip
        assert f"train/{metric}".encode() in logged, metric
    tables = list((runs[0] / "files" / "media" / "table").glob("completions_*.table.json"))
    assert tables, "the completions table (with the trajectory column) was not logged"
    assert '"trajectory"' in tables[0].read_text()
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    # Resumed from its checkpoint, the run logs to the same W&B run (a second offline folder
    # with the same id, which `wandb sync` appends).
    resumed = train_guess(
        tiny_model_dir, out, "--n-tasks", "2", "--max_steps", "2", env=_env(tmp_path)
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stdout
    ids = {path.name.rsplit("-", 1)[-1] for path in (out / "wandb").glob("offline-run-*")}
    assert len(list((out / "wandb").glob("offline-run-*"))) == 2 and len(ids) == 1


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_sft_from_a_rollout_run(tmp_path: Path, tiny_model_dir: Path) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 42"), api_key=SECRET) as stub:
        rolled = rk(
            "rollout", "--env", "tools", "--base-url", stub.base_url, "--model", "stub",
            "--api-key", SECRET, "--n", "3", "--output", str(tmp_path / "episodes"),
            env=_env(tmp_path),
        )  # fmt: skip
    assert rolled.returncode == 0, rolled.stderr
    out = tmp_path / "sft"
    common = ("train", "sft", "--trajectories", str(tmp_path / "episodes"), "--model",
              str(tiny_model_dir), "--output-dir", str(out), "--no-wandb", "--max_steps", "1",
              "--per_device_train_batch_size", "2", "--max_length", "2048")  # fmt: skip
    refused = rk(*common, env=_env(tmp_path))
    assert refused.returncode == 2
    assert "0 of 3 trajectories passed the filter" in refused.stderr
    assert not out.exists()  # nothing trained: no empty run folder left behind
    trained = rk(*common, "--include-unsuccessful", env=_env(tmp_path))
    assert trained.returncode == 0, trained.stderr
    assert "SFT data: kept 3 of 3 trajectories" in trained.stdout
    assert (out / "final" / "config.json").is_file()

    # The viewer shows it (its record, config and checkpoints; no episodes of its own).
    client = TestClient(make_app(find_runs([out])))
    assert "<td>tools</td>" in client.get("/").text  # the env its episodes were played in
    page = client.get("/run/sft")
    assert page.status_code == 200
    assert "<th>training</th><td>SFT</td>" in page.text
    assert "<th>checkpoints</th><td>checkpoint-1</td>" in page.text
    assert "An SFT run writes no episodes of its own" in page.text


# Runs the CLI's entry point in a fresh interpreter, then reports its exit code and which heavy
# libraries it imported.
ENTRY = """
import json, sys
from rk_agent.cli import main
sys.argv = ["rk-agent", *json.loads(sys.argv[1])]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = {"torch", "transformers", "trl", "datasets", "wandb", "accelerate"} & set(sys.modules)
print(json.dumps({"code": code, "heavy": sorted(heavy)}))
"""

BAD_INPUT = [
    (("grpo", "--max_steps", "-2"),
     "--max_steps must be at least 1, or -1 (no limit: train num_train_epochs); got -2."),
    (("grpo", "--learning_rate=-1"), "--learning_rate must be greater than 0; got -1.0."),
    (("grpo", "--num_generations", "3", "--per_device_train_batch_size", "4"),
     "trl: the generation batch must hold whole groups of num_generations 3 completions, but "
     "it is per_device_train_batch_size 4 x gradient_accumulation_steps 1 (default) = 4. Make "
     "per_device_train_batch_size a multiple of 3 (e.g. --per_device_train_batch_size 3), or "
     "change num_generations."),
    (("grpo", "--learning_rat", "1e-5"),
     "unknown GRPOConfig option '--learning_rat'. Did you mean 'learning_rate'? Options are the "
     "fields of trl.GRPOConfig, e.g. --learning_rate 1e-5."),
    (("grpo", "--n-task", "8"),
     "unknown option '--n-task' for rk-agent train grpo. Did you mean '--n-tasks'? See "
     "`rk-agent train grpo --help`."),
    (("grpo", "--env", "toolz"),
     "unknown environment 'toolz'. Did you mean 'tools'? Known environments: code, guess, math, "
     "mcp_tools, tools. Give a registered name, a Gymnasium id such as 'rk_agent/Tools-v0', "
     "'package.module:Class', 'path/to/file.py::Class' or SCHEME:REST of an environment source "
     "(`rk-agent envs list` shows them)."),
    (("grpo", "--n-tasks", "0"), "--n-tasks 0: Input should be greater than or equal to 1."),
    (("grpo", "--loop", "tlr"), "--loop tlr: Input should be 'rk' or 'trl'. Did you mean 'trl'?"),
    (("grpo", "--tool-call-format", "llama"),
     "unknown tool-call format 'llama'. Did you mean 'llama3_json'? Known tool-call formats: "
     "hermes, llama3_json."),
    (("grpo", "--max-turns", "0"), "--max-turns 0: Input should be greater than or equal to 1."),
    (("grpo", "--alarm-zero-spread", "2", "--alarm-truncated", "-1"),
     "--alarm-zero-spread 2.0: Input should be less than or equal to 1; --alarm-truncated -1.0: "
     "Input should be greater than or equal to 0."),
    (("grpo", "--retire-after", "0", "--max-extra-draws", "-1"),
     "--max-extra-draws -1: Input should be greater than or equal to 0; --retire-after 0: Input "
     "should be greater than or equal to 1."),
    (("grpo", "--dynamic-sampling", "--multi_objective_aggregation", "normalize_then_sum"),
     "dynamic sampling drops the groups whose rewards have no spread, which GRPO gives no "
     "advantage; with multi_objective_aggregation='normalize_then_sum' TRL normalises over the "
     "whole batch and gives them one. Use the default 'sum_then_normalize', or train without "
     "dynamic sampling."),
    (("grpo", "--config", "missing.yaml"),
     "cannot read config missing.yaml: No such file or directory"),
    (("grpo", "--tasks", "missing.jsonl"),
     "tasks: missing.jsonl does not exist; give a JSONL file of tasks (--tasks FILE), or leave "
     "it out to use the environment's generated tasks."),
    (("grpo", "--model", "./nope"),
     "model './nope' looks like a local folder but does not exist; give a model folder (--model "
     "runs/<run>/final) or a Hugging Face hub id (org/name)."),
    (("grpo", "--resume", "nope"),
     "resume: checkpoint 'nope' does not exist; give a checkpoint-<step> folder, 'auto' (the "
     "last one in output_dir, if any) or false (--resume false)."),
    (("sft",),
     "invalid train config: sft needs trajectories: a rollout run directory or a "
     "trajectories JSONL file (--trajectories RUN_DIR)."),
    (("sft", "--trajectories", "missing/"),
     "trajectories: missing/ does not exist; give a run folder made by `rk-agent rollout` or a "
     "trajectories JSONL file (--trajectories RUN_DIR)."),
    (("sft", "--trajectories", "t.jsonl", "--max-per-task", "0"),
     "--max-per-task 0: Input should be greater than or equal to 1."),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_before_torch_or_trl_is_imported(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "t.jsonl").write_text("")
    run = subprocess.run(
        [sys.executable, "-c", ENTRY, json.dumps(["train", *args])], capture_output=True,
        text=True, env=_env(tmp_path), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.stderr == f"error: {message}\n"
    assert json.loads(run.stdout) == {"code": 2, "heavy": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # no run folder


def test_a_task_file_with_a_bad_row_fails_before_torch_or_a_run_folder(tmp_path: Path) -> None:
    """Every row of --tasks is read by the checks, not when the environment is built after
    the run folder is named (issue 40 item 12)."""
    rows = ['{"prompt": "2+2?", "ground_truth": "4"}', '{"question": "3+3?", "answer": "6"}']
    (tmp_path / "tasks.jsonl").write_text("\n".join(rows) + "\n")
    args = ["train", "grpo", "--env", "math", "--tasks", "tasks.jsonl", "--max_steps", "1"]
    run = subprocess.run(
        [sys.executable, "-c", ENTRY, json.dumps(args)], capture_output=True, text=True,
        env=_env(tmp_path), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.stderr.startswith("error: tasks.jsonl:2: not a valid task: expected a 'messages'")
    assert run.stderr.count("\n") == 1
    assert json.loads(run.stdout) == {"code": 2, "heavy": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.jsonl"]  # no run folder

    # A dataset's own column names are read with --tasks-columns (issue 40 item 11): its rows
    # pass the checks, and the next check (a missing checkpoint) is the one that stops it.
    (tmp_path / "tasks.jsonl").write_text('{"question": "3+3?", "answer": "6"}\n')
    mapped = [*args, "--tasks-columns", "prompt=question,ground_truth=answer", "--resume", "no"]
    run = subprocess.run(
        [sys.executable, "-c", ENTRY, json.dumps(mapped)], capture_output=True, text=True,
        env=_env(tmp_path), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.stderr.startswith("error: resume: checkpoint 'no' does not exist"), run.stderr
    assert json.loads(run.stdout) == {"code": 2, "heavy": []}


def _unsolved(env: str, count: int, *, success: bool = False) -> str:
    """``count`` unsolved (or solved) one-turn trajectories of ``env``, as JSONL."""
    from rk_agent.runs.trajectory import Trajectory

    return "".join(
        Trajectory.model_validate({
            "id": f"{i}-0", "task_index": i, "sample": 0, "env": env, "model": "m",
            "task": {"id": f"t{i}", "messages": [{"role": "user", "content": "q"}]},
            "turns": [{"index": 0, "assistant": {"role": "assistant", "content": "7"}}],
            "success": success, "stop_reason": "answered",
        }).model_dump_json() + "\n"
        for i in range(count)
    )  # fmt: skip


def test_sft_with_nothing_passing_its_filter_stops_before_loading_or_naming_a_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "episodes.jsonl").write_text(_unsolved("shop_env.py::ShopEnv", 3))
    run = subprocess.run(
        [sys.executable, "-c", ENTRY, json.dumps(["train", "sft", "-t", "episodes.jsonl"])],
        capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.stderr == (
        "error: episodes.jsonl: 0 of 3 trajectories passed the filter (success_only=True, "
        "min_reward=None, drop_failed=True, max_per_task=None): 3 unsuccessful. To keep more: "
        "--include-unsuccessful (sft_filter.success_only: false) keeps unsolved episodes; "
        "collect more episodes (solved ones: `rk-agent rollout --provider solver`).\n"
    )
    assert json.loads(run.stdout) == {"code": 2, "heavy": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.jsonl"]  # no run folder


def test_sft_on_episodes_from_elsewhere_naming_code_needs_trust_run(tmp_path: Path) -> None:
    """Their environment is built to read its tools: a file from elsewhere is not imported
    without --trust-run; the refusal comes before anything heavy loads."""
    (tmp_path / "episodes.jsonl").write_text(_unsolved("shop_env.py::ShopEnv", 2, success=True))
    (tmp_path / "shop_env.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "rollout-run").mkdir()
    (tmp_path / "rollout-run" / "config.yaml").write_text("env: tools\n")

    def train(*flags: str) -> subprocess.CompletedProcess[str]:
        args = ["train", "sft", "-t", "episodes.jsonl", "--output-dir", "rollout-run", *flags]
        return subprocess.run(
            [sys.executable, "-c", ENTRY, json.dumps(args)], capture_output=True, text=True,
            env=_env(tmp_path), cwd=tmp_path, timeout=120,
        )  # fmt: skip

    refused = train()
    assert refused.stderr == (
        "error: episodes.jsonl is not a run rk-agent wrote on this machine (no valid signature "
        "of its config by this user's key: it was made elsewhere or by hand, moved, or edited), "
        "and reading its environment's tools would import shop_env.py (environment "
        "shop_env.py::ShopEnv). If you trust this run, give --trust-run (trust_run=True in "
        "Python).\n"
    )
    assert json.loads(refused.stdout) == {"code": 2, "heavy": []}
    trusted = train("--trust-run")  # past that check: the next one stops it
    assert trusted.stderr.startswith("error: output_dir: rollout-run holds a run of `rk-agent")
    assert json.loads(trusted.stdout) == {"code": 2, "heavy": []}


def _interrupt_when(line_starts: str, tmp_path: Path, model: Path, out: Path) -> tuple[int, str]:
    """Start a long tiny GRPO run, Ctrl-C it when a stdout line starts with ``line_starts``;
    its exit status and everything it printed."""
    import signal

    command = [sys.executable, "-u", "-m", "rk_agent", "train", "grpo", "--env", "guess",
               "--model", str(model), "--output-dir", str(out), *TINY, "--save_steps", "1000",
               "--max_steps", "500", "--n-tasks", "4", "--max-turns", "3",
               "--no-wandb"]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(tmp_path)
    )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith(line_starts):
            process.send_signal(signal.SIGINT)
            break
    rest, _ = process.communicate(timeout=120)
    return process.returncode, "".join(seen) + rest


@pytest.mark.slow  # trains a tiny model in a subprocess, twice: tens of seconds
def test_ctrl_c_exits_130_and_says_truthfully_what_was_kept(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "mid"
    status, printed = _interrupt_when("step 2/", tmp_path, tiny_model_dir, out)
    assert status == 130, printed[-2000:]
    assert "terminate called" not in printed and "Traceback" not in printed
    record = json.loads((out / RUN_RECORD_FILE).read_text())
    assert (record["kind"], record["status"]) == ("training", "interrupted")
    assert record.get("last_checkpoint") is None
    assert "before the first checkpoint (every save_steps steps): nothing was kept" in printed

    early = tmp_path / "early"
    status, printed = _interrupt_when("run folder:", tmp_path, tiny_model_dir, early)
    assert status == 130, printed[-2000:]
    assert "terminate called" not in printed and "Traceback" not in printed
    assert json.loads((early / RUN_RECORD_FILE).read_text())["status"] == "interrupted"
    assert "interrupted before the first step: nothing was trained" in printed or (
        "interrupted at step" in printed  # the signal landed once training had begun
    )


# A loop, the env it plays, and an alarm its first step raises with the random model: in the
# guess game every reply is cut by its 12 tokens (truncation); the tools env's replies are cut
# too but end the episode, and no group has a spread (zero spread, counted from one step).
LOOPS = [
    ("rk", "guess", ("--max-turns", "2", "--alarm-truncated", "0.5"), "truncation"),
    ("trl", "tools", ("--alarm-zero-spread-steps", "1"), "zero_spread"),
]


@pytest.mark.slow  # trains a tiny model in a subprocess, twice per loop: a minute or two
@pytest.mark.timeout(900)  # two process starts of 2 steps: minutes on a loaded machine
@pytest.mark.parametrize(("loop", "env_name", "flags", "alarm"), LOOPS, ids=["rk", "trl"])
def test_a_resumed_run_names_episodes_by_step_writes_each_step_once_and_keeps_its_alarms(
    tmp_path: Path, tiny_model_dir: Path, loop: str, env_name: str, flags: tuple[str, ...],
    alarm: str,
) -> None:  # fmt: skip
    out = tmp_path / "run"
    # Two tasks of 2 samples a step, for 2 steps; one alarm at step 1 (the others kept quiet).
    command = (
        "train", "grpo", "--env", env_name, "--loop", loop, "--model", str(tiny_model_dir),
        "--output-dir", str(out), "--num_generations", "2", "--per_device_train_batch_size",
        "4", "--max_completion_length", "12", "--save_steps", "1", "--n-tasks", "2", *flags,
        "--no-wandb", "--max_steps", "2", "--alarm-dominant-share", "1",
    )  # fmt: skip
    first = rk(*command, env=_env(tmp_path))
    assert first.returncode == 0, first.stderr
    alarms = json.loads((out / RUN_RECORD_FILE).read_text())["alarms"]
    assert [(a["kind"], a["step"]) for a in alarms] == [(alarm, 1)]
    # What Ctrl-C during step 2, after its rollouts and before its checkpoint, leaves: step 2's
    # episodes written, checkpoint-1 the last.
    shutil.rmtree(out / "checkpoint-2")
    shutil.rmtree(out / "final")

    again = rk(*command, env=_env(tmp_path))
    assert again.returncode == 0, again.stderr
    assert f"resuming from {out / 'checkpoint-1'}" in again.stdout
    assert "dropped 4 episode(s) of step 2 from trajectories.jsonl" in again.stdout
    episodes = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    steps = [e["metadata"]["train_step"] for e in episodes]
    assert steps == [0] * 4 + [1] * 4  # step 2 once, as the resumed run played it
    ids = [e["id"] for e in episodes]
    assert len(set(ids)) == len(ids) == 8
    for e in episodes:
        assert e["id"] == f"s{e['metadata']['train_step'] + 1}-{e['task_index']}-{e['sample']}"
    for step in (1, 2):  # each step: two tasks of the run, samples 0 and 1 of each
        names = sorted(i.split("-", 1)[1] for i in ids if i.startswith(f"s{step}-"))
        assert names == sorted(f"{task}-{sample}" for task in (0, 1) for sample in (0, 1))
    # The alarm raised before the resume is kept, and not raised again.
    record = json.loads((out / RUN_RECORD_FILE).read_text())
    assert record["status"] == "finished"
    assert [(a["kind"], a["step"]) for a in record["alarms"]] == [(alarm, 1)]
    assert [line["step"] for line in read_watch(out)] == [1, 2]

    # `show` and the viewer count the same episodes; an id names one episode.
    shown = rk("show", str(out), "--episode", ids[5], env=_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "8 (2 tasks x 2)" in shown.stdout and "Alarms raised: 1" in shown.stdout
    assert shown.stdout.count("episode s") == 1 and f"episode {ids[5]}" in shown.stdout
    (run,) = find_runs([out]).runs.values()
    assert run.info().episodes == 8


ROOT = Path(__file__).resolve().parents[2]


def _rk_agent_as_a_user_runs_it() -> list[str]:
    """``uv run rk-agent`` (a terminal's Ctrl-C reaches uv and rk-agent both) when uv would run
    this very environment; else the environment's ``rk-agent`` script."""
    uv = shutil.which("uv")
    env_dir = os.environ.get("UV_PROJECT_ENVIRONMENT") or str(ROOT / ".venv")
    if uv and Path(env_dir).resolve() == Path(sys.prefix).resolve():
        return [uv, "run", "--no-sync", "--frozen", "--project", str(ROOT), "rk-agent"]
    return [str(Path(sys.executable).parent / "rk-agent")]


@pytest.fixture(scope="module")
def small_model_dir(tmp_path_factory: pytest.TempPathFactory, embedded_tok: Any) -> Path:
    """A random 6-layer Llama (hidden 384, LM head tied, as the embedded model's), slow enough
    on a CPU that a step's generation is still running a second after it starts."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("small-llama")
    config = LlamaConfig(
        vocab_size=len(embedded_tok), hidden_size=384, intermediate_size=1024,
        num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=2,
        max_position_embeddings=4096, bos_token_id=embedded_tok.bos_token_id,
        eos_token_id=embedded_tok.eos_token_id, pad_token_id=embedded_tok.pad_token_id,
        tie_word_embeddings=True,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(path)
    embedded_tok.save_pretrained(path)
    return path


def _ctrl_c_to_the_group(
    command: list[str], when: str, after_s: float, tmp_path: Path
) -> tuple[int, str]:
    """Run ``command`` in a session of its own, and send SIGINT to its whole process group, as
    a terminal does, twice (an impatient user), ``after_s`` after a line starts with ``when``."""
    import signal
    import time

    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=_env(tmp_path, PYTHONUNBUFFERED="1"), start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith(when):
            time.sleep(after_s)
            os.killpg(process.pid, signal.SIGINT)
            time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            break
    rest, _ = process.communicate(timeout=300)
    return process.returncode, "".join(seen) + rest


@pytest.mark.slow  # one step of a small model, in three processes: a few minutes on 2 cores
@pytest.mark.timeout(900)
def test_ctrl_c_to_the_process_group_exits_130_cleanly_and_resumes(
    tmp_path: Path, small_model_dir: Path
) -> None:
    """Issue 40 item 7: a terminal's Ctrl-C reaches `uv run` and rk-agent both; during model
    loading or generation, twice, it ends with 130 and no native abort (`terminate called
    without an active exception`: the generation thread was left running in torch while the
    interpreter exited)."""
    out = tmp_path / "run"
    command = [
        *_rk_agent_as_a_user_runs_it(), "train", "grpo", "--env", "guess", "--model",
        str(small_model_dir), "--output-dir", str(out), "--num_generations", "2",
        "--per_device_train_batch_size", "2", "--max_completion_length", "512",
        "--save_steps", "1", "--n-tasks", "2", "--max-turns", "3", "--no-wandb",
    ]  # fmt: skip
    # Loading the model; step 2's generation, a second in (step 1 is saved as checkpoint-1).
    for when, after_s in (("run folder:", 0.0), ("step 2/", 1.0)):
        status, printed = _ctrl_c_to_the_group(
            [*command, "--max_steps", "50"], when, after_s, tmp_path
        )
        assert status == 130, printed[-3000:]
        assert "terminate called" not in printed and "Traceback" not in printed, printed[-3000:]
        assert "interrupted" in printed
    assert (out / "checkpoint-1" / "trainer_state.json").is_file()
    # Resumed to where checkpoint-1 stands: it loads and finishes, with no step to play.
    resumed = subprocess.run(
        [*command, "--max_steps", "1"], capture_output=True, text=True, env=_env(tmp_path),
        timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {out / 'checkpoint-1'}" in resumed.stdout
    assert "missing keys" not in resumed.stdout + resumed.stderr  # its LM head is tied
    assert (out / "final" / "config.json").is_file()
