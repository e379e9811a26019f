"""The reward server: one reward behind HTTP (FastAPI + uvicorn), wire-compatible with reward-kit.

Endpoints:

- ``POST /evaluate``: one sample (below) -> the `EvaluateResult` JSON;
- ``POST /reward``: the same (reward-kit's name for it);
- ``POST /batch``: ``{"samples": [sample, ...]}`` -> ``{"results": [EvaluateResult, ...]}``,
  each sample scored on its own, concurrently;
- ``GET /health``: ``{"status": "ok", "reward": name}``; ``"degraded"`` with worker threads
  stuck in the reward, **503** ``"unhealthy"`` once all are;
- ``GET /docs``: the OpenAPI docs (schema at ``/openapi.json``).

A sample has ``messages`` (OpenAI chat format), optional ``original_messages``, ``ground_truth``
and ``tools``; any other top-level field, and every entry of a ``kwargs`` object (which wins on a
clash), is passed to the reward as a keyword argument. This is exactly what
`rk_agent.rewards.remote.build_request` sends, so ``RewardFunction(mode="remote",
endpoint=".../evaluate")`` round-trips.

What each failure gets:

- the body is not a valid sample (no ``messages``, a role such as ``"robot"``, not JSON):
  **422**, FastAPI's ``{"detail": [{"loc": ["body", "messages", 0, "role"], "msg": ...}]}``;
- the sample does not fit the reward (a `RewardInputError` or `ConfigError`: a missing argument,
  an unknown option value, a ``sandbox`` other than the server's): **422**, same shape, ``loc``
  ``["body"]`` (``["body", "samples", i]`` in a batch; the whole batch fails, as every sample
  would fail alike);
- the reward raises: **200** with ``is_score_valid: false`` and ``error: "ValueError: ..."``;
- the reward runs past the per-sample timeout: **200** with ``is_score_valid: false`` and
  ``error: "TimeoutError: ..."``. A timeout is a property of the sample (code that loops
  forever), like an exception, so the client gets it at once and does not retry it;
- a server on a loopback address gets a request for another name (its ``Host``) or from a page
  of another site (its ``Origin``): **421** or **403** (`rk_agent.binding.HostRule`; DNS
  rebinding, pages that post to ``127.0.0.1``);
- a scoring endpoint gets a body whose ``Content-Type`` is not ``application/json``: **415**;
- a configured API key is missing or wrong: **401** (``/health`` and the docs stay open: they
  show the reward's name and the request schema, no data);
- the body is larger than the limit: **413** (checked on ``Content-Length`` and while reading a
  chunked body), and the connection closes;
- a request head or body that does not arrive in time (`serve_rewards`' deadlines): **408**,
  and the connection closes;
- a request head over 64 KiB or 100 header fields: **431**, and the connection closes
  (`rk_agent.server._heads`);
- a sample would wait for a thread past ``max_wait_s`` (or has), the body budget stays full,
  or every connection is busy: **503** with ``Retry-After: 1``.

Sync rewards run in a thread pool (``threads`` workers), async ones on the event loop, so a
slow reward does not hold up other requests. An async reward must not block (no
``time.sleep``): that stalls the loop. On SIGINT/SIGTERM uvicorn stops accepting connections
and finishes the requests in flight before exiting.

Main names:
    create_app: the FastAPI app for a reward.
    serve_rewards: run it with uvicorn (``rk-agent serve`` calls this).
    serving: run it in a background thread for tests and notebooks; yields the base URL.
    is_loopback: whether an address only accepts local connections.
    tls_options: HTTPS and mutual TLS (client certificates) settings.

Example:
    >>> from rk_agent import RewardFunction, reward_function
    >>> @reward_function
    ... def exact(response: str, ground_truth: str) -> float:
    ...     return float(response.strip() == ground_truth)
    >>> with serving(exact) as url:
    ...     remote = RewardFunction(mode="remote", endpoint=f"{url}/evaluate")
    ...     remote(messages=[{"role": "user", "content": "2+2?"},
    ...                      {"role": "assistant", "content": "4"}], ground_truth="4").score
    1.0
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from rk_agent.binding import HostRule, check_port, is_loopback
from rk_agent.errors import ConfigError
from rk_agent.gc_tuning import tune_for_serving
from rk_agent.rewards.decorator import AnyRewardFn
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.rewards.remote import API_KEY_ENV
from rk_agent.server._access import check_bind, tls_options
from rk_agent.server._budget import ByteBudget
from rk_agent.server._connections import (
    BACKLOG,
    ConnectionLimits,
    GuardedHttpToolsProtocol,
    fd_headroom,
    tls_loop,
)
from rk_agent.server._endpoints import (
    BatchRequest,
    BatchResponse,
    EvaluateRequest,
    RewardApp,
    RewardEndpoints,
    openapi_schema,
)
from rk_agent.server._logs import AnswerLog, limit_server_logs
from rk_agent.server._reward_caller import RewardCaller
from rk_agent.terminal_text import escaped_log_config
from rk_agent.trusted_json import trusted_validator

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT_S",
    "BatchRequest",
    "BatchResponse",
    "EvaluateRequest",
    "check_bind",
    "check_port",
    "create_app",
    "is_loopback",
    "load_served_reward",
    "serve_rewards",
    "serving",
    "tls_options",
]

logger = logging.getLogger("rk_agent.server")

DEFAULT_TIMEOUT_S = 20.0
"""Per-sample limit; below `RewardFunction`'s 30 s client timeout so the client sees the result."""

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024

DEFAULT_MAX_BATCHES = 2
"""``/batch`` requests parsed and scored at once (the rest wait): bounds the parsed samples."""

DEFAULT_MAX_WAIT_S = 10.0
"""A sample that would wait longer than this for a worker thread is refused with 503."""

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 30.0
DEFAULT_MAX_CONNECTIONS = 1000
"""Open connections at most (lowered to fit the file descriptor limit, `fd_headroom`)."""

"""Allocations between two collections of the youngest objects while serving (Python's 700)."""


# --------------------------------------------------------------------------------------------
# The app


def create_app(
    reward: RewardLike,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    threads: int | None = None,
    max_queue: int | None = None,
    max_batches: int = DEFAULT_MAX_BATCHES,
    max_wait_s: float = DEFAULT_MAX_WAIT_S,
    body_budget_bytes: int | None = None,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    allowed_hosts: Sequence[str] | None = None,
) -> FastAPI:
    """The FastAPI app that serves ``reward`` (see the module docstring for the endpoints).

    Args:
        reward: a decorated reward, a callable, a registered name, ``module:fn`` or
            ``file.py::fn``.
        api_key: when set, every endpoint but ``/health`` and the docs needs the header
            ``Authorization: Bearer <api_key>`` (compared in constant time).
        max_body_bytes: larger request bodies get 413.
        timeout_s: seconds one sample may take to run (the wait for a free thread does not
            count); ``None`` for no limit.
        threads: most threads running sync rewards at once (default ``min(32, cpus + 4)``).
        max_queue: at most this many samples of a sync reward wait for a thread (default: no
            count; load is shed by ``max_wait_s``).
        max_batches: ``/batch`` requests parsed and scored at once; later ones wait.
        max_wait_s: a sample that would wait longer than this for a thread (the samples before
            it times the average run time, over the threads not stuck), or has waited this
            long, gets 503 with ``Retry-After`` (which `RewardFunction(mode="remote")`
            honours) instead of timing out.
        body_budget_bytes: request bodies held at once, all requests together (default 4 x
            ``max_body_bytes``); a body that does not fit waits, unread, up to
            ``body_timeout_s``, then gets 503.
        body_timeout_s: the longest wait for the body budget (`serve_rewards` also cuts a body
            that takes longer to arrive).
        allowed_hosts: ``None`` answers requests for any ``Host`` (a server on a public
            address, or behind a gateway that checks names, as on AWS Lambda); a list, even
            empty, answers loopback names and these only, and pages of those names only
            (`rk_agent.binding.HostRule`): what `serve_rewards` and `serving` set on a loopback
            address.

    Raises:
        ConfigError: a setting is out of range; UnknownNameError / RewardLoadError: the reward
            cannot be found.

    Example:
        >>> app = create_app("format", api_key="my-secret")
        >>> sorted(app.openapi()["paths"])
        ['/batch', '/evaluate', '/health', '/reward']
    """
    budget = body_budget_bytes or 4 * max_body_bytes
    _check_settings(api_key, max_body_bytes, timeout_s, threads, max_queue, max_batches)
    _check_limits(max_wait_s=max_wait_s, body_timeout_s=body_timeout_s)
    if budget < max_body_bytes:
        raise ConfigError(
            f"body_budget_bytes ({budget}) must be >= max_body_bytes ({max_body_bytes}): a body "
            "of the largest size must fit."
        )
    caller = RewardCaller(get_reward_function(reward), timeout_s, threads, max_wait_s, max_queue)
    for model in (EvaluateRequest, BatchRequest):  # built now, not by the first request
        trusted_validator(model)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        caller.pool.close()

    description = caller.reward.reward_spec.description
    app = RewardApp(
        title=f"rk-agent reward server: {caller.name}",
        description=description or "",
        lifespan=lifespan,
    )

    @app.get("/health", summary="Whether the server can score; 503 once every thread is stuck")
    async def health() -> dict[str, Any]:  # pragma: no cover - RewardEndpoints answers it
        return caller.health()[1]

    app.state.body_budget = ByteBudget(budget)  # read by tests and benchmarks
    app.state.caller = caller
    app.openapi = functools.partial(openapi_schema, app, caller.name)  # type: ignore[method-assign]
    app.endpoints = RewardEndpoints(
        None, caller=caller, api_key=api_key, max_body_bytes=max_body_bytes,
        max_batches=max_batches, budget=app.state.body_budget, budget_wait_s=body_timeout_s,
        answers=AnswerLog(),
        hosts=None if allowed_hosts is None else HostRule(allowed_hosts),
    )  # fmt: skip
    return app


def _check_settings(
    api_key: str | None,
    max_body_bytes: int,
    timeout_s: float | None,
    threads: int | None,
    max_queue: int | None = None,
    max_batches: int = 1,
) -> None:
    if api_key is not None and not api_key.strip():
        raise ConfigError("the API key is empty: give a non-empty key, or none for no auth.")
    if max_body_bytes <= 0:
        raise ConfigError(f"max_body_bytes must be > 0, got {max_body_bytes}.")
    if timeout_s is not None and not timeout_s > 0:
        raise ConfigError(f"timeout_s must be > 0 seconds (or None for no limit), got {timeout_s}.")
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be >= 1, got {threads}.")
    if max_queue is not None and max_queue < 1:
        raise ConfigError(f"max_queue must be >= 1, got {max_queue}.")
    if max_batches < 1:
        raise ConfigError(f"max_batches must be >= 1, got {max_batches}.")


def _check_limits(**seconds: float) -> None:
    for name, value in seconds.items():
        if not value > 0:
            raise ConfigError(f"{name} must be > 0 seconds, got {value}.")


# --------------------------------------------------------------------------------------------
# Running it


@dataclass(frozen=True)
class _Settings:
    """What each uvicorn worker needs to build the app.

    With ``workers > 1`` it travels inside uvicorn's ``Config``, which each worker gets
    pickled through the pipe that starts it (``multiprocessing``'s spawn): never in an
    environment variable, which every process a reward starts would inherit, API key included.
    """

    reward: str | None
    config: str | None
    api_key: str | None
    max_body_bytes: int
    timeout_s: float | None
    threads: int | None
    max_queue: int | None = None
    max_batches: int = DEFAULT_MAX_BATCHES
    sandbox: str | None = None
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    body_budget_bytes: int | None = None
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    allowed_hosts: tuple[str, ...] | None = None

    def load_reward(self) -> AnyRewardFn:
        return load_served_reward(self.reward, self.config, sandbox=self.sandbox)

    def app(self, reward: AnyRewardFn | None = None) -> FastAPI:
        return create_app(
            reward or self.load_reward(), api_key=self.api_key,
            max_body_bytes=self.max_body_bytes, timeout_s=self.timeout_s, threads=self.threads,
            max_queue=self.max_queue, max_batches=self.max_batches, max_wait_s=self.max_wait_s,
            body_budget_bytes=self.body_budget_bytes, body_timeout_s=self.body_timeout_s,
            allowed_hosts=self.allowed_hosts,
        )  # fmt: skip

    def __repr__(self) -> str:  # a Config in a traceback or a log shows no key
        return f"_Settings(reward={self.reward!r}, config={self.config!r}, ...)"


def load_served_reward(
    reward: RewardLike | None, config: str | Path | None, *, sandbox: str | None = None
) -> AnyRewardFn:
    """The reward to serve: from a spec (name, ``module:fn``, ``file.py::fn``) or a YAML config.

    A reward that runs model code gets its sandbox mode fixed here (``sandbox``, default
    ``bwrap``), checked now, and not open to change by a request
    (`rk_agent.rewards.sandbox_choice.fix_sandbox`).

    Raises:
        ConfigError: neither or both given, or ``sandbox`` does not apply; UnknownNameError /
            RewardLoadError as in `get_reward_function`.
        SandboxError: the sandbox mode cannot run code here (the cause and the fix).
    """
    from rk_agent.rewards.sandbox_choice import fix_sandbox

    return fix_sandbox(_load_reward(reward, config), sandbox)


def _load_reward(reward: RewardLike | None, config: str | Path | None) -> AnyRewardFn:
    if (reward is None) == (config is None):
        raise ConfigError(
            "give the reward to serve: a registered name, 'module:fn' or 'file.py::fn' "
            "(e.g. `rk-agent serve my_rewards.py::fn`), or --config rewards.yaml; not both."
        )
    if config is not None:
        from rk_agent.rewards.config import load_reward_config

        return load_reward_config(config)
    assert reward is not None
    return get_reward_function(reward)


def serve_rewards(
    reward: RewardLike | None = None,
    *,
    config: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    api_key: str | None = None,
    allow_public: bool = False,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    threads: int | None = None,
    access_log: bool = False,
    log_level: str = "info",
    max_queue: int | None = None,
    max_batches: int = DEFAULT_MAX_BATCHES,
    sandbox: str | None = None,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    client_ca: str | Path | None = None,
    max_wait_s: float = DEFAULT_MAX_WAIT_S,
    body_budget_bytes: int | None = None,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    allowed_hosts: Sequence[str] = (),
    tune_gc: bool = False,
) -> None:
    """Serve a reward with uvicorn until SIGINT/SIGTERM (in-flight requests finish first).

    Args:
        reward: the reward (see `create_app`); or give ``config``.
        config: a YAML file with a ``reward:`` key (`rk_agent.rewards.config`).
        host: the address to bind; anything but loopback needs ``api_key`` or ``allow_public``.
        port: the TCP port.
        workers: uvicorn worker processes. Above 1 the reward must be given by name or path
            (each worker loads it); the settings, API key included, reach each worker through
            the pipe that starts it, never through the environment.
        api_key, timeout_s, max_body_bytes, threads, max_queue, max_batches, max_wait_s,
            body_budget_bytes: as in `create_app`.
        allow_public: serve a non-loopback address without a key.
        access_log: uvicorn's line per request (off: it costs about a third of the throughput
            of a trivial reward). Answers other than 2xx are logged either way, and a summary
            of all answers every 10 s; lines a client can cause are rate-limited.
        header_timeout_s, body_timeout_s: a request head must arrive within
            ``header_timeout_s`` of the connection opening (or of the previous answer), its
            body within ``body_timeout_s`` of the head; else 408 and the connection closes.
        max_connections: open connections at most, lowered to fit the file descriptor limit
            (``ulimit -n`` less 384); past it a new connection replaces the oldest one without
            a complete request head, or gets 503.
        allowed_hosts: on a loopback ``host``, more names to answer besides the loopback ones
            (``--allow-host``: the name a local proxy or a tunnel forwards requests under);
            any other ``Host`` gets 421 and a page of another site 403
            (`rk_agent.binding.HostRule`). A public address answers any name.
        log_level: uvicorn's log level.
        sandbox: for a reward that runs model code: ``"bwrap"`` (isolated, the default) or
            ``"process"`` (no isolation, opt-in), fixed for every request (see
            `load_served_reward`).
        tls_cert, tls_key, client_ca: serve HTTPS, and with ``client_ca`` require client
            certificates signed by it (mutual TLS, which counts as authentication: a public
            address needs no key then); see `tls_options`.

        tune_gc: tune this process's garbage collector once the app is built
            (`rk_agent.gc_tuning.tune_for_serving`: what start-up built frozen out of the
            collector's reach, which halves the p99 latency under load, and the youngest objects
            collected every 20,000 allocations instead of 700). ``rk-agent serve`` says
            ``True``; a library call leaves its caller's collector alone unless told. With
            ``workers > 1`` each worker process (the server's own) is tuned either way.

    Raises:
        ConfigError: a non-loopback host without a key, a bad setting, or ``workers > 1`` with
            a reward given as an object.
        SandboxError: the sandbox mode cannot run code here (the cause and the fix).
    """
    import uvicorn

    if api_key is not None and not api_key.strip():
        api_key = None
    tls = tls_options(tls_cert, tls_key, client_ca)
    check_bind(host, api_key, allow_public or client_ca is not None)
    _check_settings(api_key, max_body_bytes, timeout_s, threads, max_queue, max_batches)
    check_port(host, port)
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an int >= 1, got {workers!r}.")
    if workers > 1 and reward is not None and not isinstance(reward, str):
        raise ConfigError(
            "workers > 1 start separate processes that each load the reward: give it as a "
            "name, 'module:fn' or 'file.py::fn' (or a --config file), not as an object."
        )
    _check_limits(header_timeout_s=header_timeout_s, body_timeout_s=body_timeout_s)
    if max_connections < 1:
        raise ConfigError(f"max_connections must be >= 1, got {max_connections}.")
    settings = _Settings(
        reward if isinstance(reward, str) else None, str(config) if config else None,
        api_key, max_body_bytes, timeout_s, threads, max_queue, max_batches, sandbox,
        max_wait_s, body_budget_bytes, body_timeout_s,
        tuple(allowed_hosts) if is_loopback(host) else None,
    )  # fmt: skip
    loaded = load_served_reward(reward, config, sandbox=sandbox)
    limits = ConnectionLimits(
        header_timeout_s=header_timeout_s, body_timeout_s=body_timeout_s,
        max_connections=min(max_connections, fd_headroom()),
    )  # fmt: skip
    options: dict[str, Any] = {
        "host": host, "port": port, "access_log": access_log, "log_level": log_level,
        "timeout_graceful_shutdown": None, **tls,
    }  # fmt: skip
    limit_server_logs()
    if workers == 1:
        app = settings.app(loaded)
        if tune_gc:
            tune_for_serving()
        uvicorn.Server(_uvicorn_config(app, limits, **options)).run()
        return
    from uvicorn.supervisors import Multiprocess

    worker_app = functools.partial(_app_of_worker, settings)  # pickled into each worker
    multi = _uvicorn_config(worker_app, limits, factory=True, workers=workers, **options)
    Multiprocess(multi, sockets=[multi.bind_socket()]).run()


def _uvicorn_config(app: Any, limits: ConnectionLimits, **options: Any) -> Any:
    """uvicorn's settings, with the guarded protocol (`rk_agent.server._connections`)."""
    import uvicorn

    if options.get("ssl_certfile"):  # the handshake held to the head deadline too
        options.setdefault("loop", tls_loop(limits))
    # A client's path, a reward's error: uvicorn's lines show them escaped, in every worker.
    options.setdefault("log_config", escaped_log_config(uvicorn.config.LOGGING_CONFIG))
    config = uvicorn.Config(
        app, http=GuardedHttpToolsProtocol, backlog=BACKLOG, server_header=False, **options
    )  # no "server: uvicorn" on every answer: it names the software and costs its bytes
    config.connection_limits = limits  # type: ignore[attr-defined]  # read by the protocol
    return config


def _app_of_worker(settings: _Settings) -> FastAPI:
    """The app of one uvicorn worker (``workers > 1``): uvicorn's factory, with the settings
    it was pickled with."""
    limit_server_logs()  # each worker is a fresh process
    app = settings.app()
    tune_for_serving()  # a worker process is the server's own
    return app


@contextlib.contextmanager
def serving(
    app_or_reward: FastAPI | RewardLike,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    client_ca: str | Path | None = None,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    **options: Any,
) -> Iterator[str]:
    """Run a reward server in a background thread; yield its base URL (``http://host:port``).

    For tests and notebooks. ``options`` go to `create_app` (on a loopback ``host``,
    ``allowed_hosts`` defaults to ``()``: loopback names only, as `serve_rewards`); a ready
    FastAPI app is served as it is. ``tls_cert``/``tls_key`` serve HTTPS (the URL starts
    ``https://``), ``client_ca`` requires client certificates (`tls_options`);
    ``header_timeout_s``, ``body_timeout_s`` and ``max_connections`` as in `serve_rewards`
    (``body_timeout_s`` also goes to `create_app`).
    Leaving the block shuts the server down
    (in-flight requests finish first).

    Example:
        >>> with serving("format", api_key="k") as url:
        ...     url.startswith("http://127.0.0.1:")
        True
    """
    import uvicorn

    if isinstance(app_or_reward, FastAPI):
        app = app_or_reward
    else:
        options.setdefault("allowed_hosts", () if is_loopback(host) else None)
        app = create_app(app_or_reward, body_timeout_s=body_timeout_s, **options)
    tls = tls_options(tls_cert, tls_key, client_ca)
    limits = ConnectionLimits(
        header_timeout_s=header_timeout_s, body_timeout_s=body_timeout_s,
        max_connections=min(max_connections, fd_headroom()),
    )  # fmt: skip
    config = _uvicorn_config(
        app, limits, host=host, port=port, log_level="warning", access_log=False, **tls
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="rk-reward-server", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise ConfigError(f"the reward server could not start on {host}:{port}.")
        thread.join(0.01)
    bound = server.servers[0].sockets[0].getsockname()
    try:
        scheme = "https" if tls else "http"
        yield f"{scheme}://{f'[{host}]' if ':' in host else host}:{bound[1]}"
    finally:
        server.should_exit = True
        thread.join()
