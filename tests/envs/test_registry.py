"""The environment registry: names, Gymnasium ids, code paths, entry points, did-you-mean."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium
import pytest

from rk_agent.envs import (
    ChatEnv,
    check_env,
    get_env_class,
    get_solver,
    list_envs,
    make_env,
    play_with_solver,
    register_env,
    register_gymnasium_envs,
    registry,
    unregister_env,
)
from rk_agent.envs.guess_env import GuessEnv
from rk_agent.envs.math_env import MathEnv
from rk_agent.errors import ConfigError, EnvLoadError, UnknownNameError

USER_ENV = '''
from rk_agent.envs import ChatEnv, Task, tool


@tool
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: the text.
    """
    return text.upper()


def solve(messages, tools):
    """Call the tool once, then answer with what it said."""
    from rk_agent.types import Message

    results = [m.text for m in messages if m.role == "tool"]
    if not results:
        word = messages[-1].text.split()[-1]
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "shout", "arguments": {"text": word}}}]}
    return Message(role="assistant", content=results[0])


def exact(messages, ground_truth):
    """1.0 when the last reply is the ground truth."""
    return float(messages[-1].content == ground_truth)


class ShoutEnv(ChatEnv):
    """Shout a word back (a user env that overrides only hooks)."""

    default_episode_rewards = {"exact": exact}
    reference_solver = staticmethod(solve)

    def generate_task(self, rng):
        word = ["cat", "dog", "owl", "eel"][int(rng.integers(4))] + str(int(rng.integers(100)))
        return Task(id=word, messages=[{"role": "user", "content": f"Shout {word}"}],
                    ground_truth=word.upper())

    def tools(self):
        return [shout]

    def respond(self, action, state):
        if action.text == state.task.ground_truth:
            return None
        return [{"role": "user", "content": "Louder."}]
'''


@pytest.fixture
def user_env_file(tmp_path: Path) -> Path:
    path = tmp_path / "shout_env.py"
    path.write_text(USER_ENV)
    return path


@pytest.fixture
def clean_registry() -> Iterator[None]:
    before = dict(registry.REGISTRY.registered)
    yield
    registry.REGISTRY.registered.clear()
    registry.REGISTRY.registered.update(before)


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("math", MathEnv),
        ("rk_agent/Math-v0", MathEnv),
        ("rk_agent.envs.math_env:MathEnv", MathEnv),
        (GuessEnv, GuessEnv),
    ],
)
def test_every_way_of_naming_resolves(spec: Any, cls: type[ChatEnv]) -> None:
    assert get_env_class(spec) is cls
    assert type(make_env(spec)) is cls


def test_unknown_name_suggests_the_closest() -> None:
    message = (
        "unknown environment 'tool'. Did you mean 'tools'? Known environments: code, guess, "
        "math, mcp_tools, tools. Give a registered name, a Gymnasium id such as "
        "'rk_agent/Tools-v0', 'package.module:Class', 'path/to/file.py::Class' or SCHEME:REST "
        "of an environment source (`rk-agent envs list` shows them)."
    )
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        make_env("tool")


def test_unknown_gymnasium_id_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError, match=re.escape("Did you mean 'rk_agent/Tools-v0'?")):
        get_env_class("rk_agent/Tool-v0")


def test_a_gymnasium_env_that_is_not_a_chat_env_is_refused() -> None:
    message = "environment 'CartPole-v1' is the class CartPoleEnv, not a ChatEnv subclass."
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_env_class("CartPole-v1")


def test_an_object_that_is_not_a_chat_env_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("'os.path:join' is a function, not a ChatEnv")):
        get_env_class("os.path:join")


def test_unknown_keyword_argument_is_named_with_what_is_accepted() -> None:
    message = (
        "environment 'math' does not take 'retrys'. Did you mean 'retries'? It takes: "
        "episode_rewards, episode_weights, max_turns, mcp, render_mode, retries, step_rewards, "
        "tasks."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_env("math", retrys=2)


@pytest.mark.parametrize("env", ["math", "tools"])
def test_a_sandbox_for_an_env_that_runs_no_code_says_which_envs_take_one(env: str) -> None:
    message = (
        f"environment {env!r} runs no code the model writes, so it has no sandbox to choose: "
        "--sandbox (sandbox in env_kwargs) is for environments that run it (registered: code). "
        f"Leave --sandbox out for {env!r}."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        make_env(env, sandbox="process")


def test_make_env_passes_keyword_arguments() -> None:
    env = make_env("rk_agent/Guess-v0", high=50, max_turns=3)
    assert isinstance(env, GuessEnv) and env.high == 50 and env.max_turns == 3


def test_user_env_from_a_file_overriding_only_hooks(user_env_file: Path) -> None:
    spec = f"{user_env_file}::ShoutEnv"
    env = make_env(spec)
    assert type(env).__name__ == "ShoutEnv"
    check_env(spec)
    played = play_with_solver(env, get_solver(spec), seed=3)
    assert played.terminated and played.episode is not None and played.episode.score == 1.0
    assert [m.role for m in played.messages] == ["user", "assistant", "tool", "assistant"]
    # A wrong answer gets the env's feedback, not the end of the episode.
    env.reset(seed=3)
    _, _, terminated, _, _ = env.step({"role": "assistant", "content": "cat"})
    assert not terminated and env.state.messages[-1].text == "Louder."


def test_missing_file_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(EnvLoadError, match=re.escape("does not exist")):
        get_env_class(f"{tmp_path}/nope.py::Env")


def test_register_env_as_decorator_and_unregister(clean_registry: None) -> None:
    @register_env("tiny_guess")
    class TinyGuess(GuessEnv):
        """Guess between 1 and 4."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(high=4, **kwargs)

    assert make_env("tiny_guess").high == 4
    assert list_envs()["tiny_guess"] == "Guess between 1 and 4."
    with pytest.raises(ConfigError, match=re.escape("'tiny_guess' is already registered")):
        register_env("tiny_guess", TinyGuess)
    unregister_env("tiny_guess")
    with pytest.raises(UnknownNameError):
        get_env_class("tiny_guess")


def test_register_env_lazily_by_path(clean_registry: None) -> None:
    register_env("mathy", "rk_agent.envs.math_env:MathEnv")
    assert get_env_class("mathy") is MathEnv


@pytest.mark.parametrize("name", ["tools", "bad:name", "a/b", ""])
def test_register_env_refuses_taken_or_bad_names(name: str, clean_registry: None) -> None:
    with pytest.raises(ConfigError):
        register_env(name, GuessEnv)


def test_register_env_refuses_a_non_env(clean_registry: None) -> None:
    with pytest.raises(ConfigError, match=re.escape("is the class int, not a ChatEnv subclass")):
        register_env("number", int)  # type: ignore[arg-type]


def test_entry_points_are_loaded_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = metadata.EntryPoint(
        name="plugin_guess", value="rk_agent.envs.guess_env:GuessEnv", group="rk_agent.envs"
    )

    def entry_points(**kwargs: Any) -> list[metadata.EntryPoint]:
        assert kwargs == {"group": "rk_agent.envs"}
        return [entry]

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    registry.REGISTRY.forget_entry_points()
    assert get_env_class("plugin_guess") is GuessEnv
    assert "plugin_guess" in list_envs()
    monkeypatch.undo()
    registry.REGISTRY.forget_entry_points()


def test_list_envs_describes_every_builtin() -> None:
    described = list_envs()
    assert set(described) >= {"code", "guess", "math", "tools"}
    assert described["tools"].startswith("Multi-step questions answered with tools")
    assert described["mcp_tools"] == (
        "The tools env's questions, answered with tools served over MCP (its own server by "
        "default)."
    )
    for name, description in described.items():  # plain text for a terminal, one sentence
        assert "`" not in description and "docstring" not in description, name
        assert description.endswith("."), name


def test_get_solver_without_a_solver(user_env_file: Path) -> None:
    class NoSolver(ChatEnv):
        """No solver."""

    message = "environment 'NoSolver' (NoSolver) has no reference solver."
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_solver(NoSolver)


def test_gymnasium_registration_is_idempotent() -> None:
    register_gymnasium_envs()
    register_gymnasium_envs()
    assert gymnasium.spec("rk_agent/Tools-v0").entry_point == "rk_agent.envs.tools_env:ToolsEnv"


def test_import_rk_agent_does_not_import_gymnasium_but_envs_registers() -> None:
    code = (
        "import sys, rk_agent\n"
        "assert 'gymnasium' not in sys.modules\n"
        "import gymnasium, rk_agent.envs\n"
        "print(type(gymnasium.make('rk_agent/Tools-v0').unwrapped).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "ToolsEnv"


def test_gymnasium_ids_register_on_import_of_rk_agent_envs_and_nothing_else_loads() -> None:
    """The one import-time side effect: Gymnasium ids as strings; no env module is imported."""
    code = (
        "import sys, gymnasium\n"
        "import rk_agent\n"
        "assert 'rk_agent/Tools-v0' not in gymnasium.registry\n"
        "import rk_agent.envs\n"
        "assert 'rk_agent/Tools-v0' in gymnasium.registry\n"
        "loaded = [m for m in ('rk_agent.envs.tools_env', 'rk_agent.envs.math_env',"
        " 'rk_agent.envs.code_env', 'rk_agent.envs.guess_env') if m in sys.modules]\n"
        "assert loaded == [], loaded\n"
        "gymnasium.register_envs(rk_agent.envs)\n"
        "print(type(gymnasium.make('rk_agent/Guess-v0').unwrapped).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "GuessEnv"


def test_gymnasium_module_prefix_needs_no_import() -> None:
    code = (
        "import gymnasium\n"
        "env = gymnasium.make('rk_agent.envs:rk_agent/Guess-v0')\n"
        "print(type(env.unwrapped).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "GuessEnv"
