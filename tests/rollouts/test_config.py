"""Rollout configs: YAML, flag overrides, clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rollouts.config import load_rollout_config

ROOT = Path(__file__).parents[2]


def test_yaml_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("env: math\nn: 4\nsampling:\n  temperature: 0.2\n  max_tokens: 64\n")
    config = load_rollout_config(path, {"n": 8, "sampling.temperature": 0.9, "seed": None})
    assert (config.env, config.n, config.seed) == ("math", 8, 0)
    assert config.sampling.temperature == 0.9 and config.sampling.max_tokens == 64


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


def test_bundled_configs_are_valid() -> None:
    for path in sorted((ROOT / "configs" / "rollout").glob("*.yaml")):
        load_rollout_config(path)


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
    assert config.tasks == str(folder / "tasks.jsonl")
    assert config.rewards == [f"{folder / 'scoring.py'}::exact", "math"]
    # A flag is relative to where it was typed; a path missing next to the config stays as is.
    flagged = load_rollout_config(folder / "run.yaml", {"tasks": "other.jsonl"})
    assert flagged.tasks == "other.jsonl"
    (folder / "run.yaml").write_text("tasks: elsewhere/tasks.jsonl\n")
    assert load_rollout_config(folder / "run.yaml").tasks == "elsewhere/tasks.jsonl"
