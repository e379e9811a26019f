"""Training on an OpenEnv server's environment: rk-agent's GRPO loop plays it; TRL's refuses it.

A tiny random model (``tiny_model_dir``) takes one GRPO step on the word game (a text-action
environment: every reply is a guess, every guess is rewarded), each episode in its own
WebSocket session of OpenEnv's own server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.openenv.servers import counts

TINY = (
    "--num_generations", "2", "--per_device_train_batch_size", "2",
    "--max_completion_length", "8", "--save_steps", "1", "--learning_rate", "1e-3",
    "--no-wandb", "--max_steps", "1", "--n-tasks", "2", "--max-turns", "2",
)  # fmt: skip


def train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rk_agent", "train", "grpo", *args],
                          capture_output=True, text=True, env=env, timeout=600)  # fmt: skip


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_rk_agents_grpo_loop_trains_on_an_openenv_server(
    words_url: str, tmp_path: Path, tiny_model_dir: Path
) -> None:
    before = counts(words_url)
    out = tmp_path / "run"
    trained = train(tmp_path, "--env", f"openenv:{words_url}", "--model", str(tiny_model_dir),
                    "--output-dir", str(out), *TINY)  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    episodes = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(episodes) == 2 and all(e["env"] == f"openenv:{words_url}" for e in episodes)
    for episode in episodes:  # the server rewarded every guess: its last reward is the score
        assert episode["episode"]["is_score_valid"], episode["episode"]
        assert episode["episode"]["metrics"]["openenv.rewarded_steps"]["score"] >= 1
    after = counts(words_url)
    assert after["built"] - before["built"] == after["closed"] - before["closed"] >= 2


def test_trls_loop_refuses_it_in_one_line(words_url: str, tmp_path: Path) -> None:
    refused = train(tmp_path, "--env", f"openenv:{words_url}", "--loop", "trl", "--model",
                    "x", "--output-dir", str(tmp_path / "run"), "--max_steps", "1")  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: environment 'openenv:{words_url}' cannot train with TRL's tool loop (--loop "
        "trl): its tools differ per task (tool_scope 'task'), and TRL 1.16's environment_factory "
        "offers every rollout the same tools, the methods of one class read once when the "
        "trainer starts. Train it with rk-agent's episode loop instead: --loop rk "
        "(rk_agent.grpo_trainer in a script)."
    ]
