"""`run_training` as a real process: the run record, memory in the logs, and a run the OS kills."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rk_agent.runs.run_record import RunKind, RunStatus, read_run_record

# One GRPO group of 2 guess episodes of a few tokens: a fraction of a second per step.
TINY = (
    "--env", "guess", "--n-tasks", "4", "--max-turns", "2", "--no-wandb",
    "--num_generations", "2", "--per_device_train_batch_size", "2",
    "--max_completion_length", "12", "--learning_rate", "1e-3", "--save_steps", "1",
)  # fmt: skip


def _train(model: Path, out: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "rk_agent", "train", "grpo", "--model", str(model),
            "--output-dir", str(out), *TINY, *flags]  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, "HOME": str(tmp_path / "home")}


@pytest.mark.slow
def test_a_finished_run_records_itself_and_logs_its_memory(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    done = subprocess.run(_train(tiny_model_dir, out, "--max_steps", "2", "--seed", "3"),
                          capture_output=True, text=True, env=_env(tmp_path),
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = read_run_record(out)
    assert record is not None
    assert record.kind is RunKind.TRAINING
    assert record.status is RunStatus.FINISHED and record.global_step == 2
    assert record.last_checkpoint == "checkpoint-2"
    # What reproduces it: the seeds (the task seed given; TRL's own, its default 42) and the
    # versions.
    assert record.seed == 3 and record.training_seed == 42
    assert record.python == platform.python_version()
    assert {"rk-agent", "trl", "transformers", "torch"} <= set(record.packages)
    assert record.peak_rss_bytes is not None and record.peak_rss_bytes >= 50 * 1024**2
    assert "peak resident memory: " in done.stdout
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logged = [h for h in state["log_history"] if "loss" in h]
    assert len(logged) == 2
    for entry in logged:
        assert 0.05 < entry["memory/rss_gb"] <= entry["memory/peak_rss_gb"]


@pytest.mark.slow
@pytest.mark.timeout(900)  # two process starts and a dozen steps: minutes on a loaded machine
def test_a_run_the_os_kills_is_reported_on_the_next_start_which_resumes(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "run"
    # A long run, killed with SIGKILL (what the out-of-memory killer sends) once a checkpoint
    # exists: it cannot write a last word.
    process = subprocess.Popen(_train(tiny_model_dir, out, "--max_steps", "500"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=_env(tmp_path))  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            record = read_run_record(out)
            if record is not None and record.pid == process.pid and record.global_step >= 2:
                break
            assert process.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("the run did not reach step 2")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    killed = read_run_record(out)
    assert killed is not None and killed.status is RunStatus.RUNNING
    complete = [c for c in out.glob("checkpoint-*") if (c / "trainer_state.json").is_file()]
    newest = max(complete, key=lambda c: int(c.name.split("-")[1]))

    again = subprocess.run(_train(tiny_model_dir, out, "--max_steps", str(killed.global_step + 1)),
                           capture_output=True, text=True, env=_env(tmp_path),
                           timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (
        f"the previous run in {out} (pid {process.pid}, started" in again.stdout
        and "without finishing and without an error: its process was killed" in again.stdout
    )
    # It resumed from the newest complete checkpoint the killed run left (a half-written one,
    # cut by the kill, is skipped).
    assert f"resuming from {newest}\n" in again.stdout
    finished = read_run_record(out)
    assert finished is not None and finished.status is RunStatus.FINISHED
    assert finished.pid != process.pid
