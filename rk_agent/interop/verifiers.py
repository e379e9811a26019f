"""``verifiers:MODULE``: verifiers v1 tasksets, played by rk-agent and scored from the transcript.

verifiers 0.4 (``pip install 'rk-agent[verifiers]'``) ships ``verifiers.v1``: an environment is
a package that exports one ``Taskset`` subclass through ``__all__``; ``Taskset.load()`` yields
``Task``s, each holding frozen ``TaskData`` (``prompt``, ``system_prompt``, fields of the
taskset's own); a task scores a rollout's ``Trace`` with its async ``@vf.reward(weight=)`` and
``@vf.metric`` methods and offers tools through MCP toolsets. ``verifiers:MODULE`` names such a
package as verifiers does (``MODULE`` is its module, or a Hub id ``owner/name@version``, which
imports ``name``; verifiers' own tasksets are looked for first). An episode is one task:

- the opening: the task data's ``system_prompt`` (a system message), then its ``prompt`` (a
  user message, or the messages it holds); rk-agent's policy plays the agent, as verifiers'
  ``null`` chat harness would (an answer without tool calls ends the episode);
- the tools: the task's MCP toolsets, started for each episode, and the taskset's, started once
  for the environment (`rk_agent.interop.verifiers_toolsets`); ``tool_scope`` is ``task`` when
  there are any;
- the reward ``verifiers``: the task's own ``Task.score`` of a ``Trace`` built from the
  transcript (`rk_agent.interop.verifiers_trace`): ``trace.reward`` (each reward times its
  weight, summed), with every reward and metric as a component (the weights in ``weights``);
  an exception, a non-finite value or a reward that needs a runtime gives an invalid score
  with the reason, never a 0;
- the task's ``setup`` and ``finalize`` hooks run before the episode and before scoring;
- the reference solver answers with the task data's ``answer`` field (``solver_reply`` formats
  it); a taskset whose data has none has no solver, and says so.

Refused, in one line each, since rk-agent plays the episode itself: a package that exports an
``Env`` (an environment that owns the loop: ``Env.run``, games, user simulators, several
agents) or a ``Harness`` (a program that runs the agent), and tasks that need a runtime (the
box a harness runs in: ``NEEDS_CONTAINER``, or a ``setup``/``finalize`` that takes a
``runtime``).

The verifiers package is imported when an environment of it is built (``import verifiers.v1``
takes seconds), never at ``import rk_agent``; its async hooks run on one event loop per
environment, in a daemon thread (`rk_agent.loop_thread.LoopThread`).

Main names: `SOURCE`, `VerifiersSource`, `VerifiersEnv`, `module_name`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rk_agent.config_files import validation_problems
from rk_agent.envs.base import ChatEnv
from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.offered_tools import EpisodeTool, ToolScope
from rk_agent.envs.sources import EnvSource
from rk_agent.envs.task import Task
from rk_agent.envs.tool import ToolResult
from rk_agent.errors import ConfigError, EnvError
from rk_agent.interop.verifiers_toolsets import EpisodeTools, ToolHost
from rk_agent.interop.verifiers_trace import (
    build_trace,
    new_trace,
    opening_messages,
    requires_runtime,
    score_trace,
)
from rk_agent.loop_thread import LoopThread
from rk_agent.types import EvaluateResult, Message, ToolCall

__all__ = ["SOURCE", "VerifiersEnv", "VerifiersSource", "module_name"]

_HOOK_TIMEOUT_S = 300.0  # a task's setup, finalize or scoring, when its data sets none
_META = "verifiers"  # the key of rk tasks' metadata that records the verifiers task


def module_name(rest: str) -> str:
    """The module ``verifiers:rest`` imports, by verifiers' own rule: a Hub id
    ``owner/name@version`` imports ``name``, ``-`` becomes ``_``, lower case; verifiers' own
    tasksets (``verifiers.v1.tasksets.NAME``) come first.

    Example:
        >>> module_name("primeintellect/Wordle-Game@0.2.1")  # doctest: +SKIP
        'wordle_game'
    """
    name = rest.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()
    return _builtin(name) or name


def _builtin(name: str) -> str | None:
    """``verifiers.v1.tasksets.NAME`` when verifiers ships it, found without importing it."""
    spec = importlib.util.find_spec("verifiers") if "." not in name else None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root) / "v1" / "tasksets"
        if (folder / name / "__init__.py").exists() or (folder / f"{name}.py").exists():
            return f"verifiers.v1.tasksets.{name}"
    return None


@dataclass(frozen=True)
class _Loaded:
    """One taskset config's tasks, loaded once per process."""

    taskset: Any
    tasks: list[Any]  # verifiers Tasks, by position
    rk_tasks: list[Task]
    has_tools: bool


class _Session(BaseSession):
    """One rollout of one verifiers task."""

    def __init__(self, env: VerifiersEnv, task: Any, opening: int) -> None:
        self.env: VerifiersEnv | None = env  # None once closed: the reference solver keeps
        self.solver_reply = env.solver_reply  # sessions, which should not keep environments
        self.task = task
        self.opening_size = opening
        self.trace = new_trace(task)
        self.tools_now: EpisodeTools | None = None

    def open(self) -> None:
        env, task = self.env, self.task
        assert env is not None
        if type(task).setup is not _task_base().setup:
            env._run(_invoke(task.setup, self.trace), task.data.timeout.setup, "setup")
        self.tools_now = env._host.open_episode(task, self.trace, env._shared_toolsets)

    def tools(self) -> list[EpisodeTool] | None:
        return list(self.tools_now.tools) if self.tools_now is not None else None

    def call_tool(self, call: ToolCall) -> ToolResult:
        if self.tools_now is None:
            return super().call_tool(call)
        return self.tools_now.call(call)

    def verify(self, messages: list[Message]) -> EvaluateResult:
        env = self.env
        if env is None:
            return EvaluateResult.invalid("the episode's session is closed; score it before")
        tools = [tool.schema for tool in self.tools_now.tools] if self.tools_now else []
        build_trace(self.trace, messages, self.opening_size, tools)
        timeout = self.task.data.timeout
        try:
            if type(self.task).finalize is not _task_base().finalize:
                env._run(_invoke(self.task.finalize, self.trace), timeout.finalize, "finalize")
            return env._run(score_trace(self.task, self.trace), timeout.scoring, "scoring")
        except EnvError as exc:
            return EvaluateResult.invalid(str(exc))

    def solve(self, messages: list[Message], tools: Any) -> Message | None:
        answer = getattr(self.task.data, "answer", None)
        if answer is None:
            return None
        return Message(role="assistant", content=self.solver_reply.format(answer=answer))

    def close(self) -> None:
        if self.tools_now is not None:
            self.tools_now.close()
            self.tools_now = None
        self.env = None
        self.trace = None


async def _invoke(hook: Any, trace: Any) -> None:
    """Call a task hook with what it asks for by name (``trace``, ``task``), as verifiers
    does; a hook that takes a ``runtime`` was refused when the class was built."""
    from verifiers.v1.utils.decorators import invoke

    result = invoke(hook, {"trace": trace, "task": trace.task.data, "runtime": None})
    if hasattr(result, "__await__"):
        await result


def _task_base() -> Any:
    from verifiers.v1.task import Task as VfTask

    return VfTask


class VerifiersEnv(ImportedEnv):
    """Play a verifiers v1 taskset's tasks; each scored by the task's own rewards.

    Made by the ``verifiers`` source for one module (``verifiers:my_taskset``), with `module`
    and `taskset_class` set; see the module docstring.

    Args:
        config: the taskset's config fields (its ``TasksetConfig``; ``{"task": {...}}`` holds
            the tasks' ``TaskConfig``: plugged rewards and metrics, toolset configs).
        limit: play only the first ``limit`` tasks (required for an infinite taskset).
        solver_reply: the reference solver's reply, ``{answer}`` the data's ``answer``.
        start_timeout_s: how long a tool server may take to start.
        tool_timeout_s: how long one tool call may take.
        tool_launch: ``"fork"`` (the default: tool servers forked from a process that imported
            verifiers once) or ``"exec"`` (``python -m MODULE`` each time, as verifiers does;
            seconds per server); see `rk_agent.interop.verifiers_launch`.
        **kwargs: see `ChatEnv` (``tasks=`` plays tasks recorded from this taskset).

    Raises:
        ConfigError: the config does not fit the taskset's, a task has no prompt, or an
            infinite taskset was given no ``limit``.
    """

    module: ClassVar[str] = ""
    taskset_class: ClassVar[Any] = None
    source_name: ClassVar[str] = "verifiers"
    default_max_turns: ClassVar[int] = 10
    talks_back: ClassVar[bool] = False  # an answer without tool calls ends the episode
    inline_steps = False  # steps start processes and wait on tool servers
    _cache: ClassVar[dict[str, _Loaded]]
    _cache_lock: ClassVar[threading.Lock]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._cache, cls._cache_lock = {}, threading.Lock()

    def __init__(
        self,
        *,
        config: Mapping[str, Any] | None = None,
        limit: int | None = None,
        solver_reply: str = "{answer}",
        start_timeout_s: float = 120.0,
        tool_timeout_s: float = 60.0,
        tool_launch: str = "fork",
        **kwargs: Any,
    ) -> None:
        if self.taskset_class is None:
            raise ConfigError(
                "VerifiersEnv is made by the verifiers source: name it 'verifiers:MODULE' "
                "(make_env, --env)."
            )
        if tool_launch not in ("fork", "exec"):
            raise ConfigError(f"tool_launch must be 'fork' or 'exec', got {tool_launch!r}.")
        self.solver_reply = solver_reply
        self._loaded = self._load(dict(config or {}), limit)
        self._shared_toolsets = list(self.taskset_class.toolsets(self._loaded.taskset.config))
        if self._loaded.has_tools or self._shared_toolsets:
            self.tool_scope = ToolScope.TASK
        kwargs.setdefault("tasks", self._loaded.rk_tasks)
        self._vf_loop = LoopThread(name="rk-verifiers")
        self._host = ToolHost(
            self._vf_loop,
            self.env_name,
            start_timeout_s=start_timeout_s,
            tool_timeout_s=tool_timeout_s,
            launch=tool_launch,
        )
        try:
            super().__init__(**kwargs)
        except BaseException:
            self._vf_loop.stop()
            raise

    def open_session(self, task: Task) -> _Session:
        """The session of one episode: the verifiers task the rk task records, its setup hook
        run and its tool servers started."""
        session = _Session(self, self._verifiers_task(task), len(task.messages))
        try:
            session.open()
        except BaseException:
            session.close()
            raise
        return session

    def close(self) -> None:
        """Close the episode, the tool servers and the event loop."""
        try:
            super().close()
        finally:
            self._host.close()
            self._vf_loop.stop()

    # ---------------------------------------------------------------- internals

    def _run(self, coroutine: Any, timeout_s: float | None, what: str) -> Any:
        """Run a task hook on the environment's loop; a failure is an `EnvError` naming it."""
        limit = timeout_s if timeout_s is not None else _HOOK_TIMEOUT_S
        try:
            return self._vf_loop.run(coroutine, limit)
        except TimeoutError:
            raise EnvError(f"{self.env_name}: the task's {what} took over {limit:g} s") from None
        except Exception as exc:
            raise EnvError(
                f"{self.env_name}: the task's {what} raised {type(exc).__name__}: {exc}"
            ) from exc

    def _verifiers_task(self, task: Task) -> Any:
        meta = task.metadata.get(_META)
        if not isinstance(meta, Mapping) or "data" not in meta:
            raise EnvError(
                f"task {task.id!r} is not a task of {self.env_name}: its metadata has no "
                f"'{_META}' record (play the taskset's own tasks, or tasks recorded from them)."
            )
        loaded = self._loaded.tasks
        index = meta.get("idx")
        if (
            isinstance(index, int)
            and 0 <= index < len(loaded)
            and loaded[index].key == meta.get("key")
        ):
            return loaded[index]
        task_type = self.taskset_class.task_type()
        data = task_type.data_type().model_validate(meta["data"])
        return task_type(data, self._loaded.taskset.config.task)

    def _load(self, config: dict[str, Any], limit: int | None) -> _Loaded:
        key = json.dumps([config, limit], sort_keys=True, default=str)
        with self._cache_lock:
            found = self._cache.get(key)
            if found is None:
                found = self._cache[key] = _load(type(self), config, limit)
        return found


def _load(cls: type[VerifiersEnv], config: dict[str, Any], limit: int | None) -> _Loaded:
    """Load the taskset's tasks under ``config`` and make rk-agent tasks of them."""
    from pydantic import ValidationError
    from verifiers.v1.configs.taskset import TasksetConfig
    from verifiers.v1.taskset import Taskset
    from verifiers.v1.utils.generic import concrete_type

    label = cls.env_name
    if "id" in config:
        raise ConfigError(f"{label}: config sets the taskset's id; the name says it.")
    config_type = concrete_type(cls.taskset_class, TasksetConfig, origin=Taskset) or TasksetConfig
    try:
        parsed = config_type.model_validate({**config, "id": cls.module})
    except ValidationError as exc:
        raise ConfigError(
            f"{label}: config does not fit the taskset's {config_type.__name__}: "
            f"{validation_problems(exc)}."
        ) from exc
    taskset = cls.taskset_class(parsed)
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"{label}: limit must be at least 1, got {limit}.")
        taskset = taskset.take(limit)
    elif not taskset.bounded:
        raise ConfigError(
            f"{label} is an infinite taskset (INFINITE = True): give limit=N to play its "
            "first N tasks."
        )
    try:
        tasks = list(taskset)
    except Exception as exc:
        raise ConfigError(f"{label}: loading its tasks raised {type(exc).__name__}: {exc}") from exc
    if not tasks:
        raise ConfigError(f"{label}: the taskset loaded no tasks.")
    ids = [t.data.id or str(t.data.idx) for t in tasks]
    if len(set(ids)) < len(ids):
        ids = [str(t.data.idx) for t in tasks]
    rk_tasks = []
    for task_id, task in zip(ids, tasks, strict=True):
        opening = opening_messages(task.data)
        if opening is None:
            raise ConfigError(
                f"{label}: task {task_id!r} has no prompt (verifiers leaves it unset when a "
                "user-simulating Env opens the conversation, which rk-agent does not play)."
            )
        data = task.data.model_dump(mode="json")
        rk_tasks.append(
            Task(
                id=task_id,
                messages=opening,
                ground_truth=data.get("answer"),
                metadata={_META: {"idx": task.data.idx, "key": task.key, "data": data}},
            )
        )
    has_tools = any(type(t).toolsets(t.config) for t in tasks)
    return _Loaded(taskset, tasks, rk_tasks, has_tools)


class VerifiersSource(EnvSource):
    """The ``verifiers`` source (see the module docstring)."""

    summary = (
        "verifiers v1 tasksets (an installed package's Taskset), played by rk-agent and scored "
        "by the task's own rewards from the transcript; its MCP toolsets as tools"
    )
    form = "verifiers:MODULE"
    packages = ("verifiers",)
    extra = "verifiers"

    def wants(self, rest: str) -> list[str]:
        """Importing the taskset's module (and what its tasks start: their tool servers)."""
        name = module_name(rest)
        if name.startswith("verifiers.v1.tasksets."):
            return []  # installed with verifiers (and refused: each owns its loop)
        return [f"import the module {name} (a verifiers taskset; it may start tool servers)"]

    def build_class(self, rest: str) -> type[ChatEnv]:
        """The environment class of the taskset ``rest`` names, or a one-line refusal."""
        name = module_name(rest)
        label = f"verifiers:{rest}"
        if importlib.util.find_spec(name.split(".")[0]) is None:
            raise ConfigError(
                f"{label}: there is no module {name!r}; install the taskset's package (a Hub "
                "taskset: prime env install OWNER/NAME, from Prime's own index) or put it on "
                "the path."
            )
        taskset_class = _taskset_class(name, label)
        task_class = taskset_class.task_type()
        _refuse_runtime_tasks(task_class, label)
        data_type = task_class.data_type()
        has_answer = "answer" in data_type.model_fields
        return type(
            "VerifiersEnv",
            (VerifiersEnv,),
            {
                "__module__": __name__,
                "__qualname__": f"VerifiersEnv[{rest}]",
                "__doc__": VerifiersEnv.__doc__,
                "module": name,
                "taskset_class": taskset_class,
                "env_name": label,
                "has_solver": has_answer,
                "no_solver_reason": None
                if has_answer
                else f"its task data ({data_type.__name__}) has no 'answer' field to answer "
                "with; its rewards score the transcript",
            },
        )


def _taskset_class(name: str, label: str) -> Any:
    """The module's exported ``Taskset``, refusing a package that exports an ``Env`` or a
    ``Harness`` (either owns the episode's loop)."""
    import verifiers.v1 as vf

    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"{label}: importing {name} raised {type(exc).__name__}: {exc}") from exc
    exported = [getattr(module, n, None) for n in getattr(module, "__all__", [])]
    classes = [c for c in exported if isinstance(c, type)]
    for base, what in ((vf.Env, "an Env"), (vf.Harness, "a Harness")):
        found = [c.__name__ for c in classes if issubclass(c, base) and c is not base]
        if found:
            raise ConfigError(
                f"{label} exports {what} ({found[0]}), which owns the episode's loop: rk-agent "
                "plays tasksets scored from the transcript, not Envs, harnesses, runtimes or "
                "multi-agent episodes."
            )
    tasksets = [c for c in classes if issubclass(c, vf.Taskset) and c is not vf.Taskset]
    if len(tasksets) != 1:
        raise ConfigError(
            f"{label}: a verifiers taskset exports exactly one Taskset subclass in __all__; "
            f"{module.__name__} exports {len(tasksets)}."
        )
    return tasksets[0]


def _refuse_runtime_tasks(task_class: Any, label: str) -> None:
    base = _task_base()
    if task_class.NEEDS_CONTAINER:
        raise ConfigError(
            f"{label}: its task {task_class.__name__} needs a container (NEEDS_CONTAINER), "
            "a runtime rk-agent's episodes do not have."
        )
    for hook in ("setup", "finalize"):
        fn = getattr(task_class, hook)
        if fn is not getattr(base, hook) and requires_runtime(fn):
            raise ConfigError(
                f"{label}: its task {task_class.__name__}.{hook} takes a runtime (the box a "
                "verifiers harness runs the agent in), which rk-agent's episodes do not have "
                "(give it runtime=None if it does not use it)."
            )


SOURCE = VerifiersSource()
"""The source the ``verifiers`` entry point names."""
