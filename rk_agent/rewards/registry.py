"""The reward registry: rewards by name, and one resolver for every way of naming a reward.

Main names:
    register_reward_function: add a reward under a name (also usable as a decorator).
    get_reward_function: resolve a name, ``module:fn``, ``file.py::fn`` or a callable.
    list_reward_functions: every known name with its one-line description.

Built-in rewards are listed as ``"module:attr"`` strings and imported only when asked for, and
packages contribute rewards through the ``rk_agent.rewards`` entry-point group, also loaded
lazily, so ``import rk_agent`` stays fast and has no side effects.

Example:
    >>> from rk_agent import get_reward_function
    >>> get_reward_function("math").name
    'math'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, overload, runtime_checkable

from rk_agent.errors import ConfigError, RewardLoadError
from rk_agent.loading import is_import_spec, load_object
from rk_agent.registry import NameRegistry, is_entry_point
from rk_agent.rewards.decorator import AnyRewardFn, is_reward_function, reward_function

__all__ = [
    "ENTRY_POINT_GROUP",
    "RewardLike",
    "RewardSource",
    "get_reward_function",
    "list_reward_functions",
    "register_reward_function",
    "unregister_reward_function",
]

ENTRY_POINT_GROUP = "rk_agent.rewards"

RewardLike = str | Callable[..., Any]
"""A reward as users give it: a name, ``module:fn``, ``file.py::fn`` or a callable."""

_BUILTINS: dict[str, str] = {
    "math": "rk_agent.rewards.builtin.math:math_reward",
    "function_call": "rk_agent.rewards.builtin.function_calling:match_function_call",
    "tool_calls": "rk_agent.rewards.builtin.function_calling:tool_calls_match",
    "format": "rk_agent.rewards.builtin.format:format_reward",
    "json_schema": "rk_agent.rewards.builtin.json_schema:json_schema_reward",
    "length": "rk_agent.rewards.builtin.length:length_reward",
    "cosine_length": "rk_agent.rewards.builtin.length:cosine_length_reward",
    "repetition": "rk_agent.rewards.builtin.repetition:repetition_penalty_reward",
    "code_execution": "rk_agent.rewards.builtin.code_execution:code_execution_reward",
    "llm_judge": "rk_agent.rewards.builtin.llm_judge:llm_judge_reward",
    "relevance": "rk_agent.rewards.builtin.relevance:relevance_reward",
}


@runtime_checkable
class RewardSource(Protocol):
    """An object that stands for a reward and turns into a decorated one (a `RewardFunction`
    does, keeping its bound arguments and mode); `get_reward_function` accepts it."""

    def as_reward_fn(self) -> AnyRewardFn:
        """The decorated reward this object stands for."""
        ...


REGISTRY: NameRegistry[AnyRewardFn] = NameRegistry("reward", ENTRY_POINT_GROUP, _BUILTINS)
"""Every reward name (built-ins, registrations, entry points)."""


@overload
def register_reward_function(
    name: str, fn: Callable[..., Any], *, overwrite: bool = ...
) -> Any: ...
@overload
def register_reward_function(
    name: str, fn: None = None, *, overwrite: bool = ...
) -> Callable[[Callable[..., Any]], Any]: ...


def register_reward_function(
    name: str, fn: Callable[..., Any] | None = None, *, overwrite: bool = False
) -> Any:
    """Register ``fn`` under ``name`` so that configs and the CLI can name it.

    An undecorated function is decorated first. Used as a decorator when ``fn`` is omitted.

    Args:
        name: the registry name (no ``:``).
        fn: the reward function.
        overwrite: replace an existing entry instead of raising.

    Raises:
        ConfigError: the name is taken (and ``overwrite`` is false) or contains ``:``.

    Example:
        >>> @register_reward_function("shout")
        ... def shout(response: str) -> float:
        ...     return float(response.isupper())
        >>> get_reward_function("shout")(response="HI").score
        1.0
    """
    if fn is None:
        return lambda f: register_reward_function(name, f, overwrite=overwrite)
    if not name or is_import_spec(name):
        raise ConfigError(
            f"reward name {name!r} is not valid: use a plain name such as 'my_reward' "
            "(':' is reserved for 'module:fn' paths)."
        )
    reward: Any = fn if is_reward_function(fn) else reward_function(name=name)(fn)
    REGISTRY.add(name, reward, overwrite=overwrite)
    return reward


def unregister_reward_function(name: str) -> None:
    """Remove a reward registered with `register_reward_function` (built-ins stay)."""
    REGISTRY.remove(name)


def list_reward_functions() -> dict[str, str]:
    """Every registered name with its one-line description, sorted by name.

    Built-ins and entry-point rewards are imported to read their descriptions; a reward that
    fails to import is listed with the error as its description.
    """
    out: dict[str, str] = {}
    for name in sorted(REGISTRY.names()):
        try:
            out[name] = get_reward_function(name).reward_spec.description
        except RewardLoadError as exc:
            out[name] = f"(cannot be loaded: {exc})"
    return out


def get_reward_function(spec: RewardLike) -> AnyRewardFn:
    """Resolve any way of naming a reward to a decorated reward function.

    Args:
        spec: a registered name (``"math"``), ``"package.module:fn"``, ``"file.py::fn"``, or a
            callable (decorated or not; an undecorated one is decorated).

    Raises:
        UnknownNameError: no reward has that name (the message suggests the closest).
        RewardLoadError: the module or file cannot be loaded, or the object is not callable.
    """
    if is_reward_function(spec):
        return spec  # type: ignore[return-value]
    if callable(spec):
        return _as_reward(spec, getattr(spec, "__name__", type(spec).__name__))
    if not isinstance(spec, str):
        raise ConfigError(
            f"a reward must be a name, 'module:fn', 'file.py::fn' or a callable; got "
            f"{type(spec).__name__}."
        )
    if is_import_spec(spec):
        return _as_reward(load_object(spec, kind="reward"), spec)
    entry = REGISTRY.lookup(
        spec, hint="Give a registered name, 'package.module:fn' or 'path/to/file.py::fn'."
    )
    if isinstance(entry, str):
        return _as_reward(load_object(entry, kind="reward"), spec)
    if is_entry_point(entry):
        return _as_reward(entry.load(), spec)  # type: ignore[union-attr]
    return entry  # type: ignore[return-value]


def _as_reward(obj: Any, spec: str) -> AnyRewardFn:
    if is_reward_function(obj):
        return obj
    if isinstance(obj, RewardSource):  # a RewardFunction keeps its bound kwargs and mode
        return obj.as_reward_fn()
    if not callable(obj):
        raise RewardLoadError(
            f"reward {spec!r} is a {type(obj).__name__}, not a function. Point at a function "
            "decorated with @reward_function."
        )
    return reward_function(obj)
