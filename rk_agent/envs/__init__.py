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
    EnvSetup: an environment as a run sets it up (`EnvSetup.make`, `EnvSetup.factory`).
    check_env, play_with_solver: check an environment; play one episode with a solver.
    ToolsEnv, MathEnv, CodeEnv, GuessEnv: the built-ins (``tools``, ``math``, ``code``,
        ``guess``), imported on first use.
    ToolScope: whether an environment's tools differ per task or change between turns.
    EnvSource, list_sources: environments from elsewhere, named ``SCHEME:REST``
        (``reasoning-gym:chain_sum``), and the sources installed.
    ImportedEnv, Session, BaseSession: the base of a source's environments, around one
        session per episode.

Example:
    >>> import gymnasium, rk_agent.envs
    >>> env = gymnasium.make("rk_agent/Guess-v0", high=10)
    >>> observation, info = env.reset(seed=0)
    >>> observation[-1]["content"]
    'The secret is between 1 and 10. Your guess?'
"""

from rk_agent._lazy import attach_stub
from rk_agent.envs.registry import register_gymnasium_envs

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)

register_gymnasium_envs()  # Gymnasium's contract for env packages: see the docstring
