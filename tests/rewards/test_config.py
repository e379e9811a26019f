"""Rewards from YAML/dict configs: every form, and clear errors for the rest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError, UnknownNameError
from rk_agent.rewards.config import build_reward, load_reward_config

ROOT = Path(__file__).parents[2]
TAGGED = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "<answer>4</answer>"},
]
BARE = [TAGGED[0], {"role": "assistant", "content": "4"}]


def test_string_forms() -> None:
    assert build_reward("math").reward_spec.name == "math"
    assert (
        build_reward("rk_agent.rewards.builtin.format:format_reward").reward_spec.name == "format"
    )


def test_single_with_kwargs() -> None:
    reward = build_reward({"name": "format", "kwargs": {"tags": ["answer"]}})
    assert reward(messages=TAGGED).score == 1.0
    assert reward(messages=BARE).score == 0.0


def test_combined_with_weights_and_gate() -> None:
    reward = build_reward(
        {
            "combine": {"answer": "math", "bonus": {"name": "math", "weight": 0.5}},
            "gate": {"name": "format", "kwargs": {"tags": ["answer"]}},
        }
    )
    passed = reward(messages=TAGGED, ground_truth="4")
    assert passed.score == 1.5
    assert passed.weights == {"answer": 1.0, "bonus": 0.5}
    assert reward(messages=BARE, ground_truth="4").score == 0.0


def test_bundled_configs_load() -> None:
    gsm8k = load_reward_config(ROOT / "configs/rewards/gsm8k.yaml")
    assert gsm8k(messages=TAGGED, ground_truth="4").score == pytest.approx(1.1)
    first = load_reward_config(ROOT / "configs/rewards/first_reward.yaml")
    assert first.reward_spec.name == "evaluate"


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("kwarg: Extra inputs are not permitted")):
        build_reward({"name": "math", "kwarg": {}})
    with pytest.raises(ConfigError, match=re.escape("A reward is a name or path string")):
        build_reward(3)  # type: ignore[arg-type]
    with pytest.raises(UnknownNameError, match="Did you mean 'math'"):
        build_reward({"combine": {"a": "maths"}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("reward: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_reward_config(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("other: 1\n")
    with pytest.raises(ConfigError, match=re.escape("has no 'reward:' key")):
        load_reward_config(empty)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_reward_config(tmp_path / "missing.yaml")


def test_a_reward_file_is_read_from_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    (project / "configs" / "my_rewards.py").write_text(
        "from rk_agent import reward_function\n\n"
        "@reward_function\ndef exact(response: str, ground_truth: str) -> float:\n"
        "    return float(response == ground_truth)\n"
    )
    (project / "configs" / "reward.yaml").write_text(
        "reward:\n  combine:\n    hit: my_rewards.py::exact\n    fmt: {name: format, weight: 0.5}\n"
    )
    monkeypatch.chdir(tmp_path)  # run from elsewhere: the config still finds its file
    reward = load_reward_config(project / "configs" / "reward.yaml")
    result = reward([{"role": "assistant", "content": "4"}], ground_truth="4")
    assert result.metrics["hit"].score == 1.0
