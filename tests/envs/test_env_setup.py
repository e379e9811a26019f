"""`EnvSetup`: building every registered environment from a setup, its name, and its errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.envs import get_env_class, list_envs
from rk_agent.envs.env_setup import (
    EnvSetup,
    env_maker,
    env_override_key,
    flat_location,
    flatten_env_keys,
    nest_env_keys,
)
from rk_agent.errors import ConfigError, DataError, UnknownNameError

USER_ENV = '''
from rk_agent.envs.guess_env import GuessEnv


class TinyGuess(GuessEnv):
    """Guess a number between 1 and 3."""

    def __init__(self, **kwargs):
        super().__init__(high=3, **kwargs)
'''


@pytest.mark.parametrize("name", sorted(list_envs()))
def test_every_registered_env_builds_from_a_spec(name: str) -> None:
    spec = EnvSetup(name=name, max_turns=2)
    env = spec.make()
    assert isinstance(env, get_env_class(name)) and env.max_turns == 2
    env.close()
    factory = spec.factory()
    first, second = factory(), factory()
    assert factory.name == name and first is not second
    assert type(first) is type(second) is get_env_class(name)
    assert (first.max_turns, second.max_turns) == (2, 2)
    for built in (first, second):
        built.close()


@pytest.mark.parametrize(
    ("written", "registered"),
    [("guess", "guess"), ("rk_agent/Guess-v0", "guess"),
     ("rk_agent.envs.guess_env:GuessEnv", "guess")],
)  # fmt: skip
def test_every_way_of_naming_a_builtin_records_its_registered_name(
    written: str, registered: str
) -> None:
    assert EnvSetup(name=written).registered_name() == registered
    assert EnvSetup(name=written).factory().name == registered


def test_code_no_name_points_at_keeps_the_spec_as_written(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(USER_ENV)
    spec = EnvSetup(name=f"{tmp_path / 'tiny.py'}::TinyGuess")
    factory = spec.factory()
    assert factory.name == spec.name
    assert factory().high == 3  # type: ignore[attr-defined]


def test_the_spec_sets_turns_rewards_and_tasks(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"prompt": "2+2?", "ground_truth": "4"}\n{"prompt": "3+3?", "ground_truth": "6"}\n'
    )
    spec = EnvSetup(
        name="math",
        kwargs={"retries": 1},
        tasks=str(tasks),
        rewards=["math", "rk_agent.rewards.builtin.length:length_reward"],
        max_turns=2,
        seed=5,
    )
    env = spec.make()
    assert (env.max_turns, env.retries) == (2, 1)  # type: ignore[attr-defined]
    assert env.dataset is not None and [t.ground_truth for t in env.dataset] == ["4", "6"]
    # Each reward is recorded under its function's name.
    assert list(env.episode_reward_specs) == ["math", "length_reward"]
    factory = spec.factory()
    assert factory.dataset_size == 2 and factory().dataset == factory().dataset


def test_rewards_sharing_a_name_keep_their_full_specs(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text("from rk_agent.rewards.builtin.length import length_reward\n")
    rewards = [
        "rk_agent.rewards.builtin.length:length_reward",
        f"{tmp_path / 'mine.py'}::length_reward",
    ]
    env = EnvSetup(name="guess", rewards=rewards).make()
    assert list(env.episode_reward_specs) == rewards


def test_unknown_env_names_get_did_you_mean() -> None:
    message = (
        "unknown environment 'gues'. Did you mean 'guess'? Known environments: code, guess, "
        "math, mcp_tools, tools."
    )
    for build in (EnvSetup(name="gues").make, EnvSetup(name="gues").factory):
        with pytest.raises(UnknownNameError, match=f"^{re.escape(message)}"):
            build()


def test_bad_kwargs_name_what_the_env_takes() -> None:
    message = (
        "environment 'guess' does not take 'hihg'. Did you mean 'high'? It takes: "
        "episode_rewards, episode_weights, high, max_turns, mcp, render_mode, step_rewards, tasks."
    )
    for build in (EnvSetup(name="guess", kwargs={"hihg": 5}).make,
                  EnvSetup(name="guess", kwargs={"hihg": 5}).factory):  # fmt: skip
        with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
            build()


def test_bad_rewards_and_task_files_fail_when_built(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match=re.escape("unknown reward 'lenght'")):
        EnvSetup(name="guess", rewards=["lenght"]).make()
    with pytest.raises(DataError, match=re.escape("missing.jsonl")):
        EnvSetup(name="math", tasks=str(tmp_path / "missing.jsonl")).make()


def test_the_spec_checks_its_own_fields() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        EnvSetup(max_turns=0)
    with pytest.raises(ValueError, match="seed"):
        EnvSetup(seed=-1)
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        EnvSetup(env_kwargs={})  # type: ignore[call-arg]


def test_an_unplayed_check_env_is_closed() -> None:
    factory = EnvSetup(name="guess", max_turns=3).factory()
    factory.close()
    factory.close()  # once only
    fresh = factory()  # the checked one is gone: a new one is built, with the same arguments
    assert type(fresh).__name__ == "GuessEnv" and fresh.max_turns == 3


def test_env_maker_resolves_once_and_takes_a_factory_as_it_is() -> None:
    make = env_maker("rk_agent/Guess-v0", {"high": 7})
    first, second = make(), make()
    assert first is not second and (type(second).__name__, second.high) == ("GuessEnv", 7)
    message = "environment 'guess' does not take 'hihg'. Did you mean 'high'?"
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        env_maker("guess", {"hihg": 5})  # checked when resolved, before any is built

    factory = EnvSetup(name="guess", max_turns=3).factory()
    assert env_maker(factory) is factory and env_maker(factory, {}) is factory
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "EnvFactory('guess') holds its environment's arguments; give high in its EnvSetup "
            "instead (or name the environment rather than its factory)."
        ),
    ):
        env_maker(factory, {"high": 5})
    factory.close()


def test_flat_keys_go_in_and_come_out() -> None:
    flat = {"env": "math", "env_kwargs": {"retries": 2}, "tasks": "t.jsonl", "rewards": ["math"],
            "max_turns": 2, "seed": 3, "n": 4}  # fmt: skip
    nested = nest_env_keys(flat)
    assert nested == {
        "env": {"name": "math", "kwargs": {"retries": 2}, "tasks": "t.jsonl",
                "rewards": ["math"], "max_turns": 2, "seed": 3},
        "n": 4,
    }  # fmt: skip
    assert flatten_env_keys(nested) == flat
    # A flat key wins over the same field of an `env:` mapping (flags over a file).
    assert nest_env_keys({"env": {"name": "math", "seed": 1}, "seed": 2})["env"]["seed"] == 2
    spec = EnvSetup(name="math")
    assert nest_env_keys({"env": spec})["env"] is spec
    assert nest_env_keys({"env": spec, "seed": 4})["env"]["seed"] == 4
    assert nest_env_keys({"n": 1}) == {"n": 1} and nest_env_keys([1]) == [1]
    assert env_override_key("tasks") == "env.tasks"
    assert env_override_key("sampling.x") == "sampling.x"
    assert flat_location(("env", "name")) == ("env",)
    assert flat_location(("env", "unknown")) == ("env", "unknown")


@pytest.mark.parametrize(
    ("mcp", "where"),
    [
        ({"s": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer abcdefgh1234"}}},
         "mcp.s.headers.Authorization"),
        ({"s": {"command": "srv", "env": {"GITHUB_TOKEN": "ghp_abcdefgh1234"}}},
         "mcp.s.env.GITHUB_TOKEN"),
        ({"s": {"url": "http://h/mcp?token=abcdefgh1234"}}, "mcp.s.url"),
        ({"s": {"command": "srv", "args": ["--api-key", "sk-abcdefgh1234"]}}, "mcp.s.args[1]"),
    ],
)  # fmt: skip
def test_an_inline_mcp_config_with_a_key_in_clear_is_refused(mcp: dict, where: str) -> None:
    with pytest.raises(ValueError, match=re.escape(where)) as info:
        EnvSetup(mcp=mcp)
    assert "abcdefgh1234" not in str(info.value) and "${NAME}" in str(info.value)


def test_an_inline_mcp_config_with_placeholders_or_a_file_is_kept() -> None:
    inline = {
        "s": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "t": {"command": "srv", "args": ["--api-key", "${KEY}", "--n", "3"], "env": {"A": "1"}},
    }
    assert EnvSetup(mcp=inline).mcp == inline
    assert EnvSetup(mcp="servers.json").mcp == "servers.json"
