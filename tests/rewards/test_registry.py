"""The registry: names, paths, callables, entry points, did-you-mean."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from rk_agent import get_reward_function, list_reward_functions, register_reward_function
from rk_agent.errors import ConfigError, RewardLoadError, UnknownNameError
from rk_agent.rewards import registry

BUILTINS = ["code_execution", "cosine_length", "format", "function_call", "json_schema",
            "length", "llm_judge", "math", "relevance", "repetition", "tool_calls"]  # fmt: skip


@pytest.fixture
def clean_registry() -> Iterator[None]:
    before = dict(registry.REGISTRY.registered)
    yield
    registry.REGISTRY.registered.clear()
    registry.REGISTRY.registered.update(before)


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_resolves_and_describes_itself(name: str) -> None:
    reward = get_reward_function(name)
    assert reward.reward_spec.name == name
    assert reward.reward_spec.description, f"{name} has no one-line description"


def test_list_has_every_builtin() -> None:
    assert set(BUILTINS) <= set(list_reward_functions())


def test_register_and_lookup(clean_registry: None) -> None:
    @register_reward_function("shout")
    def shout(response: str) -> float:
        """Upper-case replies."""
        return float(response.isupper())

    assert get_reward_function("shout") is shout
    assert shout(response="HI").score == 1.0
    assert list_reward_functions()["shout"] == "Upper-case replies."


def test_register_refuses_taken_names(clean_registry: None) -> None:
    with pytest.raises(ConfigError, match=re.escape("a reward named 'math' is already registered")):
        register_reward_function("math", lambda response: 1.0)
    register_reward_function("mine", lambda response: 1.0)
    register_reward_function("mine", lambda response: 0.5, overwrite=True)
    assert get_reward_function("mine")(response="x").score == 0.5


def test_register_refuses_path_like_names() -> None:
    with pytest.raises(ConfigError, match="':' is reserved"):
        register_reward_function("a:b", lambda response: 1.0)


def test_unknown_name_says_did_you_mean() -> None:
    with pytest.raises(
        UnknownNameError, match=re.escape("unknown reward 'mth'. Did you mean 'math'?")
    ):
        get_reward_function("mth")


def test_file_and_module_paths(tmp_path: Path) -> None:
    path = tmp_path / "my_rewards.py"
    path.write_text("def plain(response):\n    return len(response) > 2\n")
    reward = get_reward_function(f"{path}::plain")
    assert reward(response="long").score == 1.0  # undecorated functions get decorated
    assert (
        get_reward_function("rk_agent.rewards.builtin.format:format_reward").reward_spec.name
        == "format"
    )


def test_path_to_something_not_callable(tmp_path: Path) -> None:
    path = tmp_path / "r.py"
    path.write_text("THRESHOLD = 3\n")
    with pytest.raises(RewardLoadError, match="is a int, not a function"):
        get_reward_function(f"{path}::THRESHOLD")


def test_wrong_type() -> None:
    with pytest.raises(ConfigError, match="got int"):
        get_reward_function(3)  # type: ignore[arg-type]


def test_entry_points_are_loaded_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    # A real EntryPoint object, as an installed package would declare it.
    entry = metadata.EntryPoint(
        name="from_plugin",
        value="rk_agent.rewards.builtin.format:format_reward",
        group="rk_agent.rewards",
    )

    def fake_entry_points(**kwargs: Any) -> list[metadata.EntryPoint]:
        assert kwargs == {"group": "rk_agent.rewards"}
        return [entry]

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    registry.REGISTRY.forget_entry_points()
    assert get_reward_function("from_plugin").reward_spec.name == "format"
    assert "from_plugin" in list_reward_functions()
    monkeypatch.undo()
    registry.REGISTRY.forget_entry_points()
