"""The environment registry: environments by short name, Gymnasium id, or a path to your code.

Main names:
    get_env_class: resolve a short name (``"tools"``), a Gymnasium id (``"rk_agent/Tools-v0"``),
        ``"package.module:Class"``, ``"path/to/file.py::Class"``, an entry-point name, an
        environment from elsewhere (``"reasoning-gym:chain_sum"``, `rk_agent.envs.sources`), or
        a class.
    make_env: build an environment from any of those, with keyword arguments checked first.
    list_envs: every known name with its one-line description.
    get_solver: an environment's reference solver (``(messages, tools) -> Message``).
    register_env / unregister_env: add your own environment under a name.
    register_gymnasium_envs: make the built-ins known to ``gymnasium.make`` (done on
        ``import rk_agent.envs``).

Built-ins are listed as ``"module:Class"`` strings and imported only when asked for, and
packages contribute environments through the ``rk_agent.envs`` entry-point group, also loaded
lazily. Environments of outside sources are named ``SCHEME:REST``; the sources are entry
points of the ``rk_agent.env_sources`` group (`rk_agent.envs.sources`, which also says which
form wins when a name could be read two ways).

Example:
    >>> env = make_env("guess", high=100)
    >>> type(env).__name__, env.max_turns
    ('GuessEnv', 12)
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.sources import get_source, split_source_spec
from rk_agent.errors import ConfigError, EnvLoadError, UnknownNameError, did_you_mean
from rk_agent.loading import is_import_spec, load_object
from rk_agent.registry import NameRegistry, is_entry_point

if TYPE_CHECKING:
    pass

__all__ = [
    "ENTRY_POINT_GROUP",
    "GYMNASIUM_IDS",
    "EnvLike",
    "Solver",
    "checked_env_class",
    "get_env_class",
    "get_solver",
    "list_envs",
    "make_env",
    "register_env",
    "register_gymnasium_envs",
    "unregister_env",
]

ENTRY_POINT_GROUP = "rk_agent.envs"

EnvLike = str | type[ChatEnv]
"""An environment as users name it: a name, a Gymnasium id, a code path, or the class."""

Solver = Callable[..., Any]
"""A reference solver: ``solve(messages, tools) -> Message`` (usable as ``FunctionPolicy``)."""


@dataclass(frozen=True)
class _Builtin:
    entry_point: str
    gym_id: str


_BUILTINS: dict[str, _Builtin] = {
    "tools": _Builtin("rk_agent.envs.tools_env:ToolsEnv", "rk_agent/Tools-v0"),
    "math": _Builtin("rk_agent.envs.math_env:MathEnv", "rk_agent/Math-v0"),
    "code": _Builtin("rk_agent.envs.code_env:CodeEnv", "rk_agent/Code-v0"),
    "guess": _Builtin("rk_agent.envs.guess_env:GuessEnv", "rk_agent/Guess-v0"),
    "mcp_tools": _Builtin("rk_agent.envs.mcp_tools_env:McpToolsEnv", "rk_agent/McpTools-v0"),
}

GYMNASIUM_IDS: Mapping[str, str] = {name: b.gym_id for name, b in _BUILTINS.items()}
"""Short name -> Gymnasium id of each built-in environment."""

_BY_GYM_ID = {b.gym_id: name for name, b in _BUILTINS.items()}
_GYM_ID = re.compile(r"^(?:[\w.-]+/)?[\w.:-]+-v\d+$")
_HINT = (
    "Give a registered name, a Gymnasium id such as 'rk_agent/Tools-v0', "
    "'package.module:Class', 'path/to/file.py::Class' or SCHEME:REST of an environment source "
    "(`rk-agent envs list` shows them)."
)

REGISTRY: NameRegistry[type[ChatEnv]] = NameRegistry(
    "environment", ENTRY_POINT_GROUP, {name: b.entry_point for name, b in _BUILTINS.items()}
)
"""Every environment name (built-ins, registrations, entry points)."""


@overload
def register_env(
    name: str, env: type[ChatEnv] | str, *, overwrite: bool = ...
) -> type[ChatEnv] | str: ...
@overload
def register_env(
    name: str, env: None = None, *, overwrite: bool = ...
) -> Callable[[type[ChatEnv]], type[ChatEnv]]: ...


def register_env(
    name: str, env: type[ChatEnv] | str | None = None, *, overwrite: bool = False
) -> Any:
    """Register an environment class (or a ``"module:Class"`` path, loaded lazily) by name.

    Used as a class decorator when ``env`` is omitted.

    Args:
        name: the short name (no ``:`` or ``/``).
        env: a `ChatEnv` subclass, or ``"package.module:Class"``.
        overwrite: replace an existing entry instead of raising.

    Raises:
        ConfigError: the name is taken (and ``overwrite`` is false) or is not a plain name.

    Example:
        >>> from rk_agent.envs.guess_env import GuessEnv
        >>> @register_env("small_guess")
        ... class SmallGuess(GuessEnv):
        ...     '''Guess a number between 1 and 10.'''
        ...     def __init__(self, **kwargs):
        ...         super().__init__(high=10, **kwargs)
        >>> make_env("small_guess").high
        10
        >>> unregister_env("small_guess")
    """
    if env is None:

        def decorate(cls: type[ChatEnv]) -> type[ChatEnv]:
            register_env(name, cls, overwrite=overwrite)
            return cls

        return decorate
    if not name or is_import_spec(name) or "/" in name:
        raise ConfigError(
            f"environment name {name!r} is not valid: use a plain name such as 'my_env' "
            "(':' and '/' are reserved for code paths and Gymnasium ids)."
        )
    if not isinstance(env, str):
        _check_class(env, name)
    REGISTRY.add(name, env, overwrite=overwrite)
    return env


def unregister_env(name: str) -> None:
    """Remove an environment added with `register_env` (built-ins stay)."""
    REGISTRY.remove(name)


def get_env_class(spec: EnvLike) -> type[ChatEnv]:
    """Resolve any way of naming an environment to its class.

    Args:
        spec: a short name (``"tools"``), a Gymnasium id (``"rk_agent/Tools-v0"``, or any id
            registered with Gymnasium whose entry point is a `ChatEnv`), ``"package.module:Class"``,
            ``"path/to/file.py::Class"``, the name of an ``rk_agent.envs`` entry point,
            ``"SCHEME:REST"`` of an environment source (`rk_agent.envs.sources`), or a
            `ChatEnv` subclass.

    Raises:
        UnknownNameError: no environment has that name (the message suggests the closest).
        EnvLoadError: the module or file cannot be loaded.
        ConfigError: the object named is not a `ChatEnv` subclass, or a source has nothing of
            that name.
        NotAvailableError: the source's package is not installed (the message names the
            install command).

    Example:
        >>> get_env_class("rk_agent/Math-v0").__name__
        'MathEnv'
    """
    if isinstance(spec, type):
        return _check_class(spec, spec.__name__)
    if not isinstance(spec, str):
        raise ConfigError(
            f"an environment must be a name, a Gymnasium id, 'module:Class', 'file.py::Class' "
            f"or a ChatEnv subclass; got {type(spec).__name__}."
        )
    source = split_source_spec(spec)
    if source is not None:
        return _check_class(get_source(source[0]).env_class(source[1]), spec)
    if is_import_spec(spec):
        return _check_class(load_object(spec, kind="environment"), spec)
    name = _BY_GYM_ID.get(spec, spec)
    if name not in REGISTRY.names() and _GYM_ID.match(spec):
        return _from_gymnasium(spec)
    entry = REGISTRY.lookup(name, hint=_HINT)
    if isinstance(entry, str):
        return _check_class(load_object(entry, kind="environment"), spec)
    if is_entry_point(entry):
        return _check_class(entry.load(), spec)  # type: ignore[union-attr]
    return entry  # type: ignore[return-value]


def make_env(spec: EnvLike, **kwargs: Any) -> ChatEnv:
    """Build an environment named any way `get_env_class` accepts.

    Args:
        spec: the environment.
        **kwargs: its constructor's arguments (``tasks``, ``max_turns``, ``retries``, ...).

    Raises:
        ConfigError: ``kwargs`` names an argument the environment does not take (the message
            lists those it takes), or the environment's own checks fail.

    Example:
        >>> make_env("math", retries=2).max_turns
        3
    """
    return checked_env_class(spec, kwargs)(**kwargs)


def checked_env_class(spec: EnvLike, kwargs: Mapping[str, Any]) -> type[ChatEnv]:
    """The class `get_env_class` finds, once its constructor is known to take ``kwargs``.

    What `make_env` checks before building; `check_env` checks the same before handing the
    arguments to ``gymnasium.make``.

    Raises:
        ConfigError: ``kwargs`` names an argument the environment does not take (the message
            suggests the closest one and lists those it takes).
    """
    cls = get_env_class(spec)
    accepted = _accepted_arguments(cls)
    unknown = sorted(set(kwargs) - accepted) if accepted is not None else []
    if "sandbox" in unknown:
        raise ConfigError(_no_sandbox(_label(spec)))
    if unknown:
        hint = did_you_mean(unknown[0], sorted(accepted or ()))
        raise ConfigError(
            f"environment {_label(spec)!r} does not take {', '.join(map(repr, unknown))}.{hint} "
            f"It takes: {', '.join(sorted(accepted or ()))}."
        )
    return cls


def list_envs() -> dict[str, str]:
    """Every registered name with its one-line description, sorted by name.

    Environments are imported to read their docstrings; one that fails to import is listed
    with the error as its description.
    """
    out: dict[str, str] = {}
    for name in sorted(REGISTRY.names()):
        try:
            cls = get_env_class(name)
        except (ConfigError, ImportError) as exc:
            out[name] = f"(cannot be loaded: {exc})"
            continue
        doc = inspect.getdoc(cls) or ""
        summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
        out[name] = re.sub(r"``?([^`]+)``?", r"\1", summary) or cls.__name__  # no RST marks
    return out


def get_solver(spec: EnvLike) -> Solver:
    """The reference solver of an environment: ``solve(messages, tools) -> Message``.

    Wrap it in ``FunctionPolicy(solver)`` to run it through the rollout engine.

    Raises:
        ConfigError: the environment has no ``reference_solver``.

    Example:
        >>> from rk_agent.types import Message
        >>> get_solver("guess")([Message(role="user", content="between 1 and 10")]).text
        '5'
    """
    cls = get_env_class(spec)
    solver = cls.reference_solver
    if solver is None:
        why = getattr(cls, "no_solver_reason", None)  # an imported environment says why
        raise ConfigError(
            f"environment {_label(spec)!r} has no reference solver: {why}."
            if why
            else f"environment {_label(spec)!r} ({cls.__name__}) has no reference solver. Give "
            "the class one with `reference_solver = staticmethod(solve)`, where "
            "`solve(messages, tools)` returns the assistant message."
        )
    return solver


def register_gymnasium_envs() -> None:
    """Register the built-ins with Gymnasium (``rk_agent/Tools-v0``, ...). Idempotent.

    Example:
        >>> import gymnasium
        >>> register_gymnasium_envs()
        >>> gymnasium.make("rk_agent/Guess-v0").unwrapped.__class__.__name__
        'GuessEnv'
    """
    import gymnasium

    for builtin in _BUILTINS.values():
        if builtin.gym_id not in gymnasium.registry:
            gymnasium.register(id=builtin.gym_id, entry_point=builtin.entry_point)


# --------------------------------------------------------------------------------------------
# Internals


def _no_sandbox(label: str) -> str:
    """A sandbox mode given to an environment that runs no code: which ones take it."""
    takers = []
    for name in sorted(REGISTRY.names()):
        with contextlib.suppress(ConfigError, ImportError):
            if "sandbox" in (_accepted_arguments(get_env_class(name)) or ()):
                takers.append(name)
    which = f" (registered: {', '.join(takers)})" if takers else ""
    return (
        f"environment {label!r} runs no code the model writes, so it has no sandbox to choose: "
        f"--sandbox (sandbox in env_kwargs) is for environments that run it{which}. Leave "
        f"--sandbox out for {label!r}."
    )


def _label(spec: EnvLike) -> str:
    return spec if isinstance(spec, str) else spec.__name__


def _check_class(obj: Any, spec: str) -> type[ChatEnv]:
    if isinstance(obj, type) and issubclass(obj, ChatEnv):
        return obj
    what = f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
    raise ConfigError(
        f"environment {spec!r} is {what}, not a ChatEnv subclass. Point at a class that "
        "subclasses rk_agent.envs.ChatEnv."
    )


def _from_gymnasium(spec: str) -> type[ChatEnv]:
    import gymnasium

    found = gymnasium.registry.get(spec)
    if found is None:
        raise UnknownNameError("environment", spec, REGISTRY.names() | set(_BY_GYM_ID), hint=_HINT)
    entry = found.entry_point
    if isinstance(entry, str):
        try:
            entry = load_object(entry, kind="environment")
        except EnvLoadError as exc:
            raise ConfigError(f"Gymnasium id {spec!r}: {exc}") from exc
    return _check_class(entry, spec)


def _accepted_arguments(cls: type[ChatEnv]) -> set[str] | None:
    """Keyword arguments the constructor takes, following ``**kwargs`` up to `ChatEnv`."""
    accepted: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):
            return None
        accepted |= {
            p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        }
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return accepted
    return None
