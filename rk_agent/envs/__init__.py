"""rk_agent.envs: Gymnasium environments for multi-turn chat with tools and rewards.

Importing this package registers the built-ins' Gymnasium ids, so
``gymnasium.make("rk_agent/Tools-v0")`` works after ``import rk_agent.envs`` (Gymnasium 1.x
writes it ``gymnasium.register_envs(rk_agent.envs)``), and ``gymnasium.make(
"rk_agent.envs:rk_agent/Tools-v0")`` works with no import at all. This is the one import-time
side effect in the package, kept on purpose: it is Gymnasium's contract for packages of
environments, and it only adds ``"module:Class"`` strings to Gymnasium's registry (no
environment module is imported; ``import rk_agent`` alone does not even import Gymnasium).
rk-agent's own registry (`make_env`) needs none of it.

Main names:
    ChatEnv, EpisodeState: the base class and its per-episode state.
    TurnResult, ToolCallRecord: what one turn did (``ChatEnv.play_turn``), and each tool call.
    tool, Tool, ToolResult: typed Python functions as tools the model can call.
    Task, load_tasks: tasks, generated or from JSONL.
    make_env, get_env_class, list_envs, get_solver, register_env: the registry.
    EnvSpec: an environment as a run names it (`EnvSpec.make`, `EnvSpec.factory`).
    check_env, play_with_solver: check an environment; play one episode with a solver
        (``play_episode``, its old name, still works and warns).
    ToolsEnv, MathEnv, CodeEnv, GuessEnv: the built-ins (``tools``, ``math``, ``code``,
        ``guess``), imported on first use.

Example:
    >>> import gymnasium, rk_agent.envs
    >>> env = gymnasium.make("rk_agent/Guess-v0", high=10)
    >>> observation, info = env.reset(seed=0)
    >>> observation[-1]["content"]
    'The secret is between 1 and 10. Your guess?'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.check import PlayedEpisode, check_env, play_episode, play_with_solver
from rk_agent.envs.registry import (
    GYMNASIUM_IDS,
    get_env_class,
    get_solver,
    list_envs,
    make_env,
    register_env,
    register_gymnasium_envs,
    unregister_env,
)
from rk_agent.envs.spaces import ConversationSpace, MessageSpace
from rk_agent.envs.spec import EnvSpec
from rk_agent.envs.task import Task, load_tasks
from rk_agent.envs.tool import Tool, ToolResult, tool
from rk_agent.envs.turn import ToolCallRecord, TurnResult

if TYPE_CHECKING:
    from rk_agent.envs.code_env import CodeEnv
    from rk_agent.envs.guess_env import GuessEnv
    from rk_agent.envs.math_env import MathEnv
    from rk_agent.envs.tools_env import ToolsEnv

__all__ = [
    "GYMNASIUM_IDS",
    "ChatEnv",
    "CodeEnv",
    "ConversationSpace",
    "EnvSpec",
    "EpisodeState",
    "GuessEnv",
    "MathEnv",
    "MessageSpace",
    "PlayedEpisode",
    "Task",
    "Tool",
    "ToolCallRecord",
    "ToolResult",
    "ToolsEnv",
    "TurnResult",
    "check_env",
    "get_env_class",
    "get_solver",
    "list_envs",
    "load_tasks",
    "make_env",
    "play_episode",
    "play_with_solver",
    "register_env",
    "register_gymnasium_envs",
    "tool",
    "unregister_env",
]

_LAZY = {
    "CodeEnv": "rk_agent.envs.code_env",
    "GuessEnv": "rk_agent.envs.guess_env",
    "MathEnv": "rk_agent.envs.math_env",
    "ToolsEnv": "rk_agent.envs.tools_env",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rk_agent.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


register_gymnasium_envs()
