"""The project's error tree: every exception rk-agent raises on purpose is one of these.

```text
RkAgentError
├── ConfigError (ValueError)            a setting, argument or name is wrong; fix the input
│   ├── UnknownNameError (KeyError)     a registry has no such name ("did you mean ...?")
│   ├── LoadError (ImportError)         `module:attr` / `file.py::attr` could not be loaded
│   │   ├── RewardLoadError             ... and it was a reward
│   │   └── EnvLoadError                ... and it was an environment
│   ├── DataError                       a data file is unreadable (carries path and line)
│   └── UntrustedRunError               a run from elsewhere would run code (`--trust-run`)
├── RewardError                         a reward was used wrongly
│   └── RewardInputError (TypeError)    the call does not fit the reward's signature
├── EndpointError (ConnectionError)     a remote service failed (carries status, retryable)
│   ├── ContextOverflowError            the prompt no longer fits the model's context window
│   ├── FireworksError                  the Fireworks API failed (carries the API's message)
│   └── ToolServerError                 an MCP tool server refused us, crashed or is unreachable
├── EnvError (RuntimeError)             an environment was used wrongly (step before reset, ...)
├── RunLockedError (RuntimeError)       another process is writing that run directory (names it)
├── SandboxError (RuntimeError)         the code sandbox itself (not the code in it) failed
├── WorkerError (RuntimeError)          worker processes (Ray, rescore) lost past replacing
└── NotAvailableError (NotImplementedError)  a feature that is not available yet or here
```

Categories also inherit the builtin they stand in for, so `except ValueError` in user code keeps
working. A failure *inside* a reward function is not raised at all: it becomes an
`EvaluateResult` with `is_score_valid=False` and `error` set (failures are data).

Every exception here stays picklable (it travels between processes) and its message says what
was expected, what arrived, and how to fix it.

A feature whose packages come with an extra (``rk-agent[local]``: the model in this process;
``rk-agent[train]``: TRL; ``rk-agent[plot]``; ``rk-agent[ray]``) checks them with
`require_extra` before importing any: a core install (rewards, ``serve``, ``deploy``, envs,
rollouts against servers) stops there with a `NotAvailableError` of one line naming the install
command (`extra_install_hint`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import Any

__all__ = [
    "EXTRA_MODULES",
    "ConfigError",
    "ContextOverflowError",
    "DataError",
    "EndpointError",
    "EnvError",
    "EnvLoadError",
    "FireworksError",
    "LoadError",
    "NotAvailableError",
    "RewardError",
    "RewardInputError",
    "RewardLoadError",
    "RkAgentError",
    "RunLockedError",
    "SandboxError",
    "ToolServerError",
    "UnknownNameError",
    "UntrustedRunError",
    "WorkerError",
    "did_you_mean",
    "extra_install_hint",
    "kind_of",
    "require_extra",
    "sentence",
]


class RkAgentError(Exception):
    """Root of every error rk-agent raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions with extra attributes only pickle if they say how to rebuild themselves.
        return (_rebuild, (type(self), self.message, self.__dict__.copy()))


def _rebuild(cls: type[RkAgentError], message: str, state: dict[str, Any]) -> RkAgentError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class ConfigError(RkAgentError, ValueError):
    """A setting, argument or name is wrong. The message says how to fix it."""


class UnknownNameError(ConfigError, KeyError):
    """A registry (rewards, environments) has no entry of that name.

    Attributes:
        name: the name that was asked for.
        kind: what was looked up, e.g. ``"reward"``.
        known: the names that do exist.
    """

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        known = sorted(known)
        message = f"unknown {kind} {name!r}.{did_you_mean(name, known)}"
        shown = ", ".join(known) if known else "(none registered)"
        message += f" Known {kind}s: {shown}."
        if hint:
            message += f" {hint}"
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.known = known

    # KeyError would wrap the message in quotes.
    __str__ = RkAgentError.__str__


class LoadError(ConfigError, ImportError):
    """Code named as ``module:attr`` or ``file.py::attr`` could not be loaded."""

    def __init__(self, message: str) -> None:
        ConfigError.__init__(self, message)


class RewardLoadError(LoadError):
    """A reward given as ``module:fn`` or ``file.py::fn`` could not be loaded."""


class EnvLoadError(LoadError):
    """An environment given as ``module:Class`` or ``file.py::Class`` could not be loaded."""


class DataError(ConfigError):
    """A data file (samples, tasks, trajectories) could not be read.

    Attributes:
        path: the file.
        line: the 1-based line number, when the problem is one line.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class UntrustedRunError(ConfigError):
    """A run's config would import a file, start a command, connect somewhere or read an
    environment variable, and nothing shows the run is this user's own (a run rk-agent wrote on
    this machine, `rk_agent.runs.run_trust`): the user opts in with ``--trust-run``
    (``trust_run=True``).

    Attributes:
        path: the run (its folder, or a trajectories file).
        wants: what building it would do, one phrase each (``import evil.py (environment
            evil.py::Env)``, ``start sh -c ... (MCP server 'kb')``).
    """

    def __init__(self, message: str, *, path: str, wants: list[str]) -> None:
        super().__init__(message)
        self.path = path
        self.wants = wants


class RewardError(RkAgentError):
    """A reward function was used in a way it cannot support."""


class RewardInputError(RewardError, TypeError):
    """A reward was called with arguments that do not fit its signature or the message format."""


class EndpointError(RkAgentError, ConnectionError):
    """A remote endpoint (reward server, model server, Fireworks) failed.

    Attributes:
        status: the HTTP status, or ``None`` for a connection failure or timeout.
        retryable: whether trying again may succeed (429, 5xx, connection errors, timeouts).
        url: the URL that failed, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.url = url


class ContextOverflowError(EndpointError):
    """The conversation no longer fits the model's context window (never retryable)."""


class FireworksError(EndpointError):
    """The Fireworks API refused or failed a request, or a Fireworks resource failed to build.

    Attributes:
        api_message: the API's own error message, when it sent one.
        logs: logs that explain the failure (the tail of an evaluator's failed build).
        attempts: how many times the request was sent (more than 1 after retries).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        url: str | None = None,
        api_message: str | None = None,
        logs: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message, status=status, retryable=retryable, url=url)
        self.api_message = api_message
        self.logs = logs
        self.attempts = attempts


class ToolServerError(EndpointError):
    """An MCP tool server (`rk_agent.mcp`) refused the run's credentials, crashed and did not
    come back, or could not be reached; the episode that needed it stops with a typed failure.

    Attributes:
        server: the server's name in the ``mcpServers`` configuration.
        auth: whether the server refused the credentials (HTTP 401 or 403).
    """

    def __init__(
        self,
        message: str,
        *,
        server: str,
        auth: bool = False,
        status: int | None = None,
        retryable: bool = False,
        url: str | None = None,
    ) -> None:
        super().__init__(message, status=status, retryable=retryable, url=url)
        self.server = server
        self.auth = auth


class EnvError(RkAgentError, RuntimeError):
    """An environment was used in a way it cannot support (e.g. ``step`` before ``reset``)."""


class RunLockedError(RkAgentError, RuntimeError):
    """A run directory is being written by another process, which holds its ``run.lock``.

    Two writers of one run would play the same episodes twice; the message names the holder
    and what to do.

    Attributes:
        path: the run directory.
        pid: the holder's process id, as it recorded itself (``None`` when it had not yet).
        host: the machine the holder runs on.
        command: the holder's command line (API keys left out).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        pid: int | None = None,
        host: str | None = None,
        command: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.pid = pid
        self.host = host
        self.command = command


class SandboxError(RkAgentError, RuntimeError):
    """The code-execution sandbox could not run at all (not: the code in it failed)."""


class WorkerError(RkAgentError, RuntimeError):
    """Worker processes were lost and none could be started in their place, or one broke its
    contract: rollout workers (`rk_agent.rollouts.ray_workers`; what finished is saved and the
    run can be resumed) or a rescore's (`rk_agent.runs.rescore_workers`; nothing is
    written).
    """


class NotAvailableError(RkAgentError, NotImplementedError):
    """A feature that is not available yet, or not on this machine. The message says which."""


EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "local": ("torch", "transformers", "gguf"),
    "train": ("torch", "transformers", "trl", "datasets", "accelerate"),
    "plot": ("matplotlib",),
    "ray": ("ray",),
}
"""The top-level modules each extra of rk-agent installs that `require_extra` checks (an
extra's optional packages, such as ``wandb`` in ``train``, are not checked)."""


def extra_install_hint(extra: str) -> str:
    """How to install rk-agent's ``extra``: pip, uv, and a checkout's ``uv sync``.

    Example:
        >>> extra_install_hint("plot")
        "pip install 'rk-agent[plot]' (uv add 'rk-agent[plot]'; in a checkout of rk-agent: uv sync --extra plot)"
    """  # noqa: E501 - a doctest's expected output is one line
    return (
        f"pip install 'rk-agent[{extra}]' (uv add 'rk-agent[{extra}]'; in a checkout of "
        f"rk-agent: uv sync --extra {extra})"
    )


def require_extra(
    extra: str, needed_for: str, *, modules: Iterable[str] | None = None, otherwise: str = ""
) -> None:
    """Raise `NotAvailableError` (one line, naming the install command) unless the modules of
    rk-agent's ``extra`` can be found. Nothing is imported (``importlib.util.find_spec``).

    Args:
        extra: the extra (a key of `EXTRA_MODULES`).
        needed_for: what needs it, the start of the message (``"rk-agent train"``).
        modules: the modules to check; default: all of `EXTRA_MODULES[extra]`.
        otherwise: a sentence appended: what to do instead (``"Or play a model on a server:
            ..."``).

    Example:
        >>> require_extra("plot", "--plot", modules=["no_such_module"])
        Traceback (most recent call last):
        ...
        rk_agent.errors.NotAvailableError: --plot needs no_such_module, which is not installed: pip install 'rk-agent[plot]' (uv add 'rk-agent[plot]'; in a checkout of rk-agent: uv sync --extra plot).
    """  # noqa: E501 - a doctest's expected output is one line
    wanted = EXTRA_MODULES[extra] if modules is None else tuple(modules)
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if not missing:
        return
    names = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
    verb = "is" if len(missing) == 1 else "are"
    message = (
        f"{needed_for} needs {names}, which {verb} not installed: {extra_install_hint(extra)}."
    )
    raise NotAvailableError(f"{message} {otherwise}".rstrip())


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest known name, or ``""`` if none is close."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def sentence(text: str) -> str:
    """``text`` ended as a sentence: a ``.`` added unless it already ends in ``.``, ``?`` or ``!``
    (a message that ends in "Did you mean 'x'?" gets no second stop).

    Example:
        >>> sentence("unknown key 'comand'. Did you mean 'command'?"), sentence("no key")
        ("unknown key 'comand'. Did you mean 'command'?", 'no key.')
    """
    text = text.rstrip()
    return text if text.endswith((".", "?", "!")) else f"{text}."


def kind_of(value: Any) -> str:
    """What a value that came in the wrong shape is, for "got ..." in a message: its type's
    name, but ``an empty list`` (string, object) for an empty one and ``null`` for ``None``.

    Example:
        >>> kind_of([]), kind_of([1]), kind_of({}), kind_of(None), kind_of(3)
        ('an empty list', 'list', 'an empty object', 'null', 'int')
    """
    if value is None:
        return "null"
    empties: dict[type, str] = {list: "list", tuple: "list", dict: "object", str: "string"}
    empty = empties.get(type(value))
    if empty is not None and not value:
        return f"an empty {empty}"
    return type(value).__name__
