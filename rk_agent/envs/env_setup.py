"""One environment as a run sets it up (`EnvSetup`), and the one way to build it.

A rollout run (`rk_agent.runs.config.RolloutConfig`) and a training run
(`rk_agent.trainers.config.TrainConfig`) both hold an `EnvSetup` as their ``env`` option: which
environment, its constructor's arguments, a task file, episode rewards replacing the
environment's, the turn limit, the seed of the first task, and MCP servers whose tools the
environment offers too (`rk_agent.mcp`). `EnvSetup.make` builds the environment through the
registry (`rk_agent.envs.registry`); `EnvSetup.factory` builds the fresh
ones a run needs, checked once, and knows the name trajectories record; `env_maker` takes such a
factory or anything `rk_agent.envs.registry.make_env` takes, resolved once.

Config files keep their flat keys (``env: math``, ``env_kwargs: {...}``, ``tasks: t.jsonl``,
``tasks_columns: {prompt: question}``, ``rewards: [...]``, ``max_turns: 3``, ``seed: 0``,
``mcp: servers.json``): `nest_env_keys` lifts them into the setup when a config is read,
`flatten_env_keys` writes them flat again when it is saved, and `flat_location` names a field
in an error the way the file spells it.

Main names: `EnvSetup`, `EnvFactory`, `env_maker`, `env_label`, `ENV_KEYS`, `nest_env_keys`,
`flatten_env_keys`, `env_override_key`, `flat_location`, `EnvConfig`.

Example:
    >>> setup = EnvSetup(name="guess", kwargs={"high": 10}, max_turns=4)
    >>> env = setup.make()
    >>> type(env).__name__, env.high, env.max_turns
    ('GuessEnv', 10, 4)
    >>> nest_env_keys({"env": "math", "env_kwargs": {"retries": 2}, "n": 4})
    {'env': {'name': 'math', 'kwargs': {'retries': 2}}, 'n': 4}
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from rk_agent.envs.offered_tools import ToolScope
from rk_agent.envs.tool_source import ToolServers, start_tool_servers
from rk_agent.errors import ConfigError

if TYPE_CHECKING:
    from rk_agent.envs.base import ChatEnv
    from rk_agent.envs.registry import EnvLike
    from rk_agent.envs.task import Task

__all__ = [
    "ENV_KEYS",
    "EnvConfig",
    "EnvFactory",
    "EnvSetup",
    "env_label",
    "env_maker",
    "env_override_key",
    "flat_location",
    "flatten_env_keys",
    "nest_env_keys",
    "reward_names",
]

ENV_KEYS: Mapping[str, str] = {
    "env": "name",
    "env_kwargs": "kwargs",
    "tasks": "tasks",
    "tasks_columns": "tasks_columns",
    "rewards": "rewards",
    "max_turns": "max_turns",
    "seed": "seed",
    "mcp": "mcp",
}
"""Flat config key -> `EnvSetup` field, in the order configs list them."""

_FIELD_KEYS = {field: key for key, field in ENV_KEYS.items()}


class EnvSetup(BaseModel):
    """Which environment a run plays, and how it is set up.

    Not Gymnasium's ``EnvSpec`` (a registered id and its entry point): a run's choice of
    environment, with its arguments, tasks and rewards.

    Attributes:
        name: the environment: a registered name (``tools``), a Gymnasium id
            (``rk_agent/Tools-v0``), ``package.module:Class`` or ``path/to/file.py::Class``.
            Config key ``env``.
        kwargs: keyword arguments for its constructor. Config key ``env_kwargs``.
        tasks: a JSONL dataset of tasks instead of the environment's generator.
        tasks_columns: which column of ``tasks`` holds which field of a task
            (``{"prompt": "question", "ground_truth": "answer"}``; also written
            ``prompt=question,ground_truth=answer``), for a dataset named otherwise.
        rewards: episode rewards replacing the environment's (names or ``file.py::fn`` paths);
            each is recorded under its function's name (``file.py::exact`` as ``exact``).
        max_turns: assistant turns per episode (``None``: the environment's default).
        seed: task ``i`` is played with seed ``seed + i``.
        mcp: MCP servers whose tools the environment offers next to its own: the path of an
            ``mcpServers`` JSON file, or that configuration inline (see
            `rk_agent.mcp.load_mcp_config`). A run connects to them once and stops them at the
            end.

    Example:
        >>> EnvSetup(name="math", rewards=["rk_agent.rewards.math:math_reward"]).make().max_turns
        1
    """

    # No input echoed in errors: an inline `mcp` refused for holding a key would print it.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = "tools"
    kwargs: dict[str, Any] = Field(default_factory=dict)
    tasks: str | None = None
    tasks_columns: dict[str, str] | None = None
    rewards: list[str] = Field(default_factory=list)
    max_turns: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0)
    mcp: str | dict[str, Any] | None = None

    @field_validator("tasks_columns", mode="before")
    @classmethod
    def _columns(cls, value: Any) -> Any:
        """``prompt=question,ground_truth=answer`` (a flag's spelling) as a mapping."""
        from rk_agent.envs.task import parse_columns

        if isinstance(value, str):
            return parse_columns(value) or None
        return value

    @field_validator("mcp")
    @classmethod
    def _no_literal_secrets(cls, mcp: str | dict[str, Any] | None) -> Any:
        """An inline ``mcp`` configuration is saved with the run (``config.yaml``): a key
        written into it would be on disk in clear, so it must come from a ``${NAME}``."""
        if isinstance(mcp, dict):
            found = _literal_secrets(mcp, "mcp")
            if found:
                raise ValueError(
                    f"the inline MCP configuration holds a secret in clear at {', '.join(found)}; "
                    "a run saves its configuration, so the key would be written to disk. Write "
                    'a ${NAME} placeholder there (e.g. "Bearer ${GITHUB_TOKEN}") and set the '
                    "variable, or keep the servers in a file and pass its path"
                )
        return mcp

    def env_class(self) -> type[ChatEnv]:
        """The environment's class (see `rk_agent.envs.registry.get_env_class`).

        Raises:
            UnknownNameError: no environment has that name (with "did you mean").
        """
        from rk_agent.envs.registry import get_env_class

        return get_env_class(self.name)

    def registered_name(self) -> str:
        """The name the environment is registered under; trajectories record it.

        ``rk_agent/Math-v0`` and ``rk_agent.envs.math_env:MathEnv`` are both ``math``; code
        that no registered name points at keeps the name as written.

        Example:
            >>> EnvSetup(name="rk_agent/Guess-v0").registered_name()
            'guess'
        """
        from rk_agent.envs.registry import GYMNASIUM_IDS, REGISTRY

        if self.name in REGISTRY.names():
            return self.name
        for short, gym_id in GYMNASIUM_IDS.items():
            if self.name == gym_id:
                return short
        cls = self.env_class()
        path = f"{cls.__module__}:{cls.__qualname__}"
        for name, entry in {**REGISTRY.builtins, **REGISTRY.registered}.items():
            if entry is cls or entry == path:
                return name
        return self.name

    def constructor_kwargs(self, tasks: list[Task] | None = None) -> dict[str, Any]:
        """The environment's constructor arguments: ``kwargs`` with ``max_turns``, the rewards
        (loaded) and the tasks (``tasks``, or the file read now) set from the setup.

        Raises:
            ConfigError: a reward is unknown or does not load.
            DataError: the task file cannot be read.
        """
        from rk_agent.envs.task import load_tasks
        from rk_agent.rewards.registry import get_reward_function

        kwargs = dict(self.kwargs)
        if self.max_turns is not None:
            kwargs["max_turns"] = self.max_turns
        if self.rewards:
            names = reward_names(self.rewards)
            loaded = [get_reward_function(spec) for spec in self.rewards]
            kwargs["episode_rewards"] = dict(zip(names, loaded, strict=True))
        if tasks is not None:
            kwargs["tasks"] = tasks
        elif self.tasks is not None:
            kwargs["tasks"] = load_tasks(self.tasks, self.tasks_columns)
        return kwargs

    def make(self) -> ChatEnv:
        """Build the environment, its arguments checked first.

        Raises:
            UnknownNameError: no environment has that name (with "did you mean").
            ConfigError: ``kwargs`` names an argument the environment does not take (the
                message lists those it takes), a reward does not load, or the environment's
                own checks fail.
            DataError: the task file cannot be read.
            ToolServerError: an MCP server (``mcp``) refused the credentials or did not start;
                with ``mcp``, the environment's ``close`` stops the servers.
        """
        from rk_agent.envs.registry import make_env

        kwargs = self.constructor_kwargs()
        if self.mcp is None:
            return make_env(self.name, **kwargs)
        servers = start_tool_servers("mcp", self.mcp)
        try:
            return make_env(self.name, **kwargs, mcp=servers.for_one_env())
        except BaseException:
            servers.close()
            raise

    def factory(self) -> EnvFactory:
        """An `EnvFactory` of this setup: one environment is built now, as a check."""
        return EnvFactory(self)


class EnvFactory:
    """Fresh environments of one `EnvSetup`, one per call: what a run's workers play.

    Building the factory builds the first environment (so a bad argument fails before any
    work starts) and reads the task file once; the first call hands out that environment, the
    next ones build new ones with the same arguments.

    Args:
        setup: the environment.

    Attributes:
        setup: the environment.
        name: its registered name (`EnvSetup.registered_name`), recorded with trajectories.
        dataset_size: how many tasks its dataset holds (``None``: generated tasks).
        tool_schemas: the tool schemas its environments offer (their own and MCP servers'),
            as the first one offers them before any episode.
        tool_scope: whether those differ per task or between turns (``ChatEnv.tool_scope``;
            each episode then records its own, `rk_agent.runs.provenance`).
        tool_origins: where each tool that is not the environment's own comes from.
        max_turns: the turn limit of its episodes.
        tool_servers: the MCP servers its environments share (``setup.mcp``), connected once;
            ``None`` without ``mcp``.

    With ``setup.mcp``, the MCP servers are connected once here and shared by every environment
    the factory builds; `close` stops them.

    Raises:
        ConfigError: see `EnvSetup.make`.
        ToolServerError: see `EnvSetup.make`.

    Example:
        >>> factory = EnvSetup(name="rk_agent/Guess-v0").factory()
        >>> factory.name, type(factory()).__name__, factory.dataset_size
        ('guess', 'GuessEnv', None)
    """

    def __init__(self, setup: EnvSetup) -> None:
        from rk_agent.envs.registry import make_env

        self.setup = setup
        self._kwargs = setup.constructor_kwargs()
        self.tool_servers: ToolServers | None = None
        if setup.mcp is not None:
            self.tool_servers = start_tool_servers("mcp", setup.mcp)
            self._kwargs["mcp"] = self.tool_servers
        try:
            self._first: ChatEnv | None = make_env(setup.name, **self._kwargs)
        except BaseException:
            self.close()
            raise
        self._class = type(self._first)
        self.name = setup.registered_name()
        dataset = self._first.dataset
        self.dataset_size: int | None = len(dataset) if dataset is not None else None
        # What the model is offered, read once (a run records it: rk_agent.runs.provenance).
        self.tool_schemas: list[dict[str, Any]] = list(self._first.tool_schemas)
        self.tool_origins: dict[str, str] = self._first.tool_origins
        self.tool_scope: ToolScope = self._first.tool_scope
        self.max_turns: int = self._first.max_turns

    def __call__(self) -> ChatEnv:
        """A fresh environment (the one built as a check, the first time)."""
        first, self._first = self._first, None
        return first if first is not None else self._class(**self._kwargs)

    def spare(self) -> ChatEnv:
        """One more environment, built anew and never handed to the run, for a check to play
        (`rk_agent.rollouts.dataset_tasks`); the caller closes it."""
        return self._class(**self._kwargs)

    @property
    def env_class(self) -> type[ChatEnv]:
        """The class of the environments it builds."""
        return self._class

    def close(self) -> None:
        """Close the environment built as a check if it was never handed out, and stop the MCP
        servers (the run is over)."""
        first, self._first = getattr(self, "_first", None), None
        if first is not None:
            first.close()
        servers, self.tool_servers = self.tool_servers, None
        if servers is not None:
            servers.close()

    def __repr__(self) -> str:
        return f"EnvFactory({self.name!r})"


def env_maker(
    env: EnvLike | EnvFactory, kwargs: Mapping[str, Any] | None = None
) -> Callable[[], ChatEnv]:
    """Fresh environments of ``env``, one per call, the environment resolved once.

    An `EnvFactory` is returned as it is (its setup holds the arguments: ``kwargs`` must be
    empty); for anything `rk_agent.envs.registry.make_env` takes, the class is found and
    ``kwargs`` checked now, and each call builds one with them.

    Raises:
        ConfigError: ``kwargs`` given with an `EnvFactory`; otherwise as `make_env`.

    Example:
        >>> make = env_maker("guess", {"high": 10})
        >>> first, second = make(), make()
        >>> first is not second, second.high
        (True, 10)
    """
    if isinstance(env, EnvFactory):
        if kwargs:
            raise ConfigError(
                f"{env!r} holds its environment's arguments; give {', '.join(sorted(kwargs))} "
                "in its EnvSetup instead (or name the environment rather than its factory)."
            )
        return env
    from rk_agent.envs.registry import checked_env_class

    checked = dict(kwargs or {})
    return functools.partial(checked_env_class(env, checked), **checked)


def env_label(env: EnvLike | EnvFactory) -> str:
    """How the user named ``env``, for messages: the spec as given, a class's name, or a
    factory's registered name.

    Example:
        >>> env_label("guess"), env_label(dict)
        ('guess', 'dict')
    """
    if isinstance(env, EnvFactory):
        return env.name
    return env if isinstance(env, str) else env.__name__


def reward_names(specs: list[str]) -> list[str]:
    """Each reward under its function's name; a name two rewards share keeps the full spec.

    The names ``rewards`` get as an environment's episode rewards (and ``rk-agent rescore``
    gives its reward).

    Example:
        >>> reward_names(["math", "my_rewards.py::exact"])
        ['math', 'exact']
    """
    short = [spec.rsplit("::", 1)[-1].rsplit(":", 1)[-1] or spec for spec in specs]
    counts = Counter(short)
    return [name if counts[name] == 1 else spec for name, spec in zip(short, specs, strict=True)]


# --------------------------------------------------------------------------------------------
# Flat config keys


def nest_env_keys(data: Any) -> Any:
    """A config mapping with its flat environment keys lifted into ``env`` (a new mapping).

    ``env`` may be a name, a mapping of `EnvSetup` fields or an `EnvSetup`; a flat key given
    too (``seed: 3``) wins over the same field inside ``env``, so flags override a file.
    Anything but a mapping is returned as is (pydantic then says what is wrong with it).

    Example:
        >>> nest_env_keys({"env": {"name": "math", "seed": 1}, "seed": 2, "max_turns": 3})
        {'env': {'name': 'math', 'seed': 2, 'max_turns': 3}}
    """
    if not isinstance(data, Mapping):
        return data
    rest = {key: value for key, value in data.items() if key not in ENV_KEYS}
    env = data.get("env")
    flat = {field: data[key] for key, field in ENV_KEYS.items() if key != "env" and key in data}
    setup: EnvSetup | dict[str, Any]
    if isinstance(env, EnvSetup):
        setup = {**env.model_dump(), **flat} if flat else env
    elif isinstance(env, Mapping):
        setup = {**env, **flat}
    else:
        setup = {**({"name": env} if "env" in data else {}), **flat}
    return {"env": setup, **rest} if setup or "env" in data else rest


def flatten_env_keys(data: dict[str, Any]) -> dict[str, Any]:
    """A dumped config with its ``env`` written as the flat keys config files use.

    Example:
        >>> flatten_env_keys({"env": {"name": "math", "kwargs": {}, "seed": 0}, "n": 4})
        {'env': 'math', 'env_kwargs': {}, 'seed': 0, 'n': 4}
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "env" and isinstance(value, dict):
            out.update({_FIELD_KEYS[field]: item for field, item in value.items()})
        else:
            out[key] = value
    return out


def env_override_key(key: str) -> str:
    """A flag's dotted config key with a flat environment key moved under ``env``.

    Example:
        >>> env_override_key("env"), env_override_key("env_kwargs.sandbox"), env_override_key("n")
        ('env.name', 'env.kwargs.sandbox', 'n')
    """
    head, dot, rest = key.partition(".")
    field = ENV_KEYS.get(head)
    return f"env.{field}{dot}{rest}" if field is not None else key


def flat_location(location: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A pydantic error location inside ``env`` as the flat key a config file uses.

    Example:
        >>> flat_location(("env", "kwargs", "high")), flat_location(("sampling", "top_p"))
        (('env_kwargs', 'high'), ('sampling', 'top_p'))
    """
    if len(location) >= 2 and location[0] == "env" and location[1] in _FIELD_KEYS:
        return (_FIELD_KEYS[str(location[1])], *location[2:])
    return location


def _literal_secrets(value: Any, where: str) -> list[str]:
    """Where in ``value`` a string holds a secret (`rk_agent.secrets.redact` would hide it)
    that is not a ``${NAME}`` placeholder."""
    from rk_agent.secrets import redact, redact_argv, secret_values

    known = secret_values()
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}"
            if isinstance(item, str):
                if "${" not in item and redact({key: item}, known) != {key: item}:
                    found.append(path)
            else:
                found.extend(_literal_secrets(item, path))
    elif isinstance(value, list):
        words = [item if isinstance(item, str) else "" for item in value]
        for index, (item, hidden) in enumerate(zip(words, redact_argv(words), strict=True)):
            if not isinstance(value[index], str):
                found.extend(_literal_secrets(value[index], f"{where}[{index}]"))
            elif item != hidden and "${" not in item:  # `--api-key KEY`, `--token=KEY`
                found.append(f"{where}[{index}]")
    return found


class EnvConfig(BaseModel):
    """Base of a config holding an `EnvSetup` as ``env`` (`RolloutConfig`, `TrainConfig`).

    It reads the flat environment keys config files and flags use (``env``, ``env_kwargs``,
    ``tasks``, ``rewards``, ``max_turns``, ``seed``, ``mcp``) into ``env`` and writes them flat
    again. Subclasses declare the ``env`` field themselves, where it belongs in
    their order of options.
    """

    model_config = ConfigDict(hide_input_in_errors=True)  # as `EnvSetup`'s: no keys echoed

    if TYPE_CHECKING:
        env: EnvSetup

    @model_validator(mode="before")
    @classmethod
    def _nest_env_keys(cls, data: Any) -> Any:
        return nest_env_keys(data)

    @model_serializer(mode="wrap")
    def _flat_env_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return flatten_env_keys(handler(self))
