"""Rollout configs: YAML, flag overrides, clear errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rk_agent.envs.env_setup import EnvSetup
from rk_agent.errors import ConfigError
from rk_agent.runs.config import RolloutConfig, load_rollout_config

ROOT = Path(__file__).parents[2]


def test_yaml_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("env: math\nn: 4\nsampling:\n  temperature: 0.2\n  max_tokens: 64\n")
    config = load_rollout_config(path, {"n": 8, "sampling.temperature": 0.9, "seed": None})
    assert (config.env.name, config.n, config.env.seed) == ("math", 8, 0)
    assert config.sampling.temperature == 0.9 and config.sampling.max_tokens == 64


def test_one_sampling_flag_keeps_the_other_defaults(tmp_path: Path) -> None:
    # --max-tokens alone used to reset the temperature to SamplingParams' own 1.0.
    config = load_rollout_config(None, {"env": "math", "sampling.max_tokens": 32})
    assert (config.sampling.temperature, config.sampling.max_tokens) == (0.7, 32)
    config = load_rollout_config(None, {"env": "math", "sampling.temperature": 0.0})
    assert (config.sampling.temperature, config.sampling.max_tokens) == (0.0, 256)


def test_unknown_and_invalid_options_are_named(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("env: tools\nconcurrancy: 4\n")
    with pytest.raises(ConfigError, match=re.escape("concurrancy: Extra inputs are not permitted")):
        load_rollout_config(path)
    with pytest.raises(
        ConfigError, match=re.escape("n: Input should be greater than or equal to 1")
    ):
        load_rollout_config(None, {"n": 0})
    with pytest.raises(ConfigError, match=re.escape("failure_policy.action")):
        load_rollout_config(None, {"failure_policy.action": "ignore"})


BUNDLED = sorted((ROOT / "configs" / "rollout").glob("*.yaml")) + sorted(
    p for p in (ROOT / "examples").rglob("*.yaml") if "env" in yaml.safe_load(p.read_text())
)


def _same_values(given: dict[str, Any], resolved: dict[str, Any]) -> None:
    """Every option a file sets reads back with its value (nested ones key by key)."""
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(resolved[key], dict):
            _same_values(value, resolved[key])
        else:
            assert resolved[key] == value, key


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_configs_load_with_the_values_they_give(path: Path) -> None:
    config = load_rollout_config(path)
    _same_values(yaml.safe_load(path.read_text()), config.model_dump(mode="json"))


def test_flat_environment_keys_make_one_spec(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    path = tmp_path / "c.yaml"
    path.write_text(
        "env: math\nenv_kwargs: {retries: 2}\ntasks: tasks.jsonl\nrewards: [math]\n"
        "max_turns: 2\nseed: 7\nn: 1\n"
    )
    config = load_rollout_config(path)
    spec = EnvSetup(name="math", kwargs={"retries": 2}, tasks=str(tmp_path / "tasks.jsonl"),
                   rewards=["math"], max_turns=2, seed=7)  # fmt: skip
    assert config.env == spec
    # Flags are flat too, and override the file, inside `env_kwargs` as well.
    flagged = load_rollout_config(
        path, {"env": "guess", "env_kwargs.sandbox": "process", "seed": 1, "max_turns": None}
    )
    assert (flagged.env.name, flagged.env.kwargs, flagged.env.seed, flagged.env.max_turns) == (
        "guess", {"retries": 2, "sandbox": "process"}, 1, 2
    )  # fmt: skip
    # Python callers give the same flat keys, or a spec.
    assert RolloutConfig(env="math", env_kwargs={"retries": 2}, seed=7).env == EnvSetup(
        name="math", kwargs={"retries": 2}, seed=7
    )
    assert RolloutConfig(env=spec, seed=8).env == spec.model_copy(update={"seed": 8})


def test_an_env_mapping_in_a_file_works_and_flags_reach_into_it(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  name: math\n  kwargs: {retries: 2}\n  tasks: tasks.jsonl\n")
    config = load_rollout_config(path, {"env": "guess", "max_turns": 3})
    assert config.env == EnvSetup(
        name="guess", kwargs={"retries": 2}, tasks=str(tmp_path / "tasks.jsonl"), max_turns=3
    )


def test_the_saved_config_is_flat_and_reads_back(tmp_path: Path) -> None:
    config = RolloutConfig(env="guess", env_kwargs={"high": 10}, max_turns=3, seed=2, n=4)
    saved = config.model_dump(mode="json")
    assert list(saved)[:9] == [
        "env",
        "env_kwargs",
        "tasks",
        "tasks_columns",
        "rewards",
        "max_turns",
        "seed",
        "mcp",
        "model",
    ]
    assert (saved["env"], saved["env_kwargs"], saved["seed"]) == ("guess", {"high": 10}, 2)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved))
    assert load_rollout_config(path) == config


def test_environment_errors_name_the_flat_key() -> None:
    for overrides, message in [
        ({"max_turns": 0}, "max_turns: Input should be greater than or equal to 1"),
        ({"seed": -1}, "seed: Input should be greater than or equal to 0"),
        ({"env_kwargs": 5}, "env_kwargs: Input should be a valid dictionary"),
        ({"env": 5}, "env: Input should be a valid string"),
    ]:
        with pytest.raises(ConfigError, match=f"^invalid rollout config: {re.escape(message)}"):
            load_rollout_config(None, overrides)


def test_paths_in_a_config_are_read_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "tasks.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    (folder / "scoring.py").write_text("")
    (folder / "run.yaml").write_text(
        "env: math\ntasks: tasks.jsonl\nrewards: [scoring.py::exact, math]\n"
    )
    monkeypatch.chdir(tmp_path)
    config = load_rollout_config(folder / "run.yaml")
    assert config.env.tasks == str(folder / "tasks.jsonl")
    assert config.env.rewards == [f"{folder / 'scoring.py'}::exact", "math"]
    # A flag is relative to where it was typed; a path missing next to the config stays as is.
    flagged = load_rollout_config(folder / "run.yaml", {"tasks": "other.jsonl"})
    assert flagged.env.tasks == "other.jsonl"
    (folder / "run.yaml").write_text("tasks: elsewhere/tasks.jsonl\n")
    assert load_rollout_config(folder / "run.yaml").env.tasks == "elsewhere/tasks.jsonl"
