"""`prepare_run`: the environments come from the config's spec, built and checked once."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from rk_agent.envs import get_solver
from rk_agent.errors import ConfigError
from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.rollouts.runner import prepare_run
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir


def test_trajectories_record_the_registered_name_of_the_env(tmp_path: Path) -> None:
    config = RolloutConfig(env="rk_agent/Guess-v0", n=2, concurrency=1, output=str(tmp_path / "r"))
    with prepare_run(config, policy=FunctionPolicy(get_solver("guess"))) as run:
        assert run.env_name == "guess"
        result = asyncio.run(run.play())
    assert {t.env for t in result.trajectories} == {"guess"}
    assert {t.id for t in run.run_dir.read_trajectories()} == {"0-0", "1-0"}


def test_the_default_run_folder_is_named_after_the_registered_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = RolloutConfig(env="rk_agent.envs.guess_env:GuessEnv", n=1)
    with prepare_run(config, policy=FunctionPolicy(get_solver("guess"))) as run:
        assert re.fullmatch(r"runs/guess-\d{8}-\d{6}", str(run.config.output))


def test_n_larger_than_the_task_file_plays_every_row_once(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    config = RolloutConfig(env="math", tasks=str(tasks), n=3, output=str(tmp_path / "r"))
    with prepare_run(config, policy=FunctionPolicy(lambda m, t: "#### 4")) as run:
        assert run.notes == [f"{tasks} holds 1 task, fewer than --n 3: playing each once."]
        assert run.config.n == 1 and RunDir.open(tmp_path / "r").config.n == 1  # as saved


def test_a_bad_env_argument_fails_before_the_run_folder_is_made(tmp_path: Path) -> None:
    config = RolloutConfig(env="guess", env_kwargs={"hihg": 3}, output=str(tmp_path / "r"))
    with pytest.raises(ConfigError, match=re.escape("does not take 'hihg'. Did you mean 'high'?")):
        prepare_run(config, policy=FunctionPolicy(get_solver("guess")))
    assert not (tmp_path / "r").exists()


def test_run_rollouts_takes_the_name_and_seeds_from_the_spec() -> None:
    config = RolloutConfig(env="rk_agent/Guess-v0", n=2, concurrency=1, seed=5)
    policy = FunctionPolicy(get_solver("guess"))
    result = asyncio.run(run_rollouts(config, policy=policy, make_env=config.env.factory()))
    assert {(t.env, t.seed) for t in result.trajectories} == {("guess", 5), ("guess", 6)}
    message = (
        "run_rollouts needs env_name= (the name trajectories record) when make_env is not an "
        "EnvFactory; or pass make_env=config.env.factory()."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        asyncio.run(run_rollouts(config, policy=policy, make_env=config.env.make))
