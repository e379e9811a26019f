"""`rk-agent train grpo|sft` as real subprocesses: checkpoints, resume, wandb offline, errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rk_agent.rollouts.stub_replies import call_first_tool_then_answer
from rk_agent.rollouts.stub_server import StubServer

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


def test_grpo_writes_checkpoints_and_the_final_model_then_resumes(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    common = ("--n-tasks", "4", "--max-turns", "3", "--no-wandb")
    first = train_guess(tiny_model_dir, out, *common, "--max_steps", "1", env=_env(tmp_path))
    assert first.returncode == 0, first.stderr
    assert (out / "checkpoint-1" / "trainer_state.json").is_file()
    final = out / "final"
    assert (final / "config.json").is_file() and (final / "tokenizer_config.json").is_file()
    assert f"rk-agent rollout --model {final}" in first.stdout
    saved = yaml.safe_load((out / "rk_agent_config.yaml").read_text())
    assert saved["env"] == "guess" and saved["trl"]["max_steps"] == 1

    second = train_guess(tiny_model_dir, out, *common, "--max_steps", "2", env=_env(tmp_path))
    assert second.returncode == 0, second.stderr
    assert f"resuming from {out / 'checkpoint-1'}" in second.stdout
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    episodes = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(episodes) == 4  # 2 episodes per step; the resumed run did not replay step 0


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
    trained = rk(*common, "--include-unsuccessful", env=_env(tmp_path))
    assert trained.returncode == 0, trained.stderr
    assert "SFT data: kept 3 of 3 trajectories" in trained.stdout
    assert (out / "final" / "config.json").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("grpo", "--learning_rat", "1e-5"), "Did you mean 'learning_rate'?"),
        (("grpo", "--env", "toolz"), "Did you mean 'tools'?"),
        (("sft",), "sft needs trajectories"),
    ],
)
def test_bad_input_is_one_clear_line_before_any_work(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    run = rk("train", *args, "--output-dir", str(tmp_path / "run"), env=_env(tmp_path))
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr
    assert "Traceback" not in run.stderr
