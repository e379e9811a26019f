"""``rk-agent serve``: serve a reward over HTTP (see `rk_agent.server`)."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer

from rk_agent.cli.console import echo
from rk_agent.cli.server_options import AllowHost
from rk_agent.errors import ConfigError
from rk_agent.rewards.remote import API_KEY_ENV


def serve(
    reward: Annotated[
        str | None,
        typer.Argument(
            help="The reward: a registered name (math), package.module:fn or file.py::fn.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="YAML file with a `reward:` key, instead of REWARD."),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to bind. Anything but loopback needs an API key (or --allow-public).",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port.")] = 8000,
    workers: Annotated[
        int, typer.Option("--workers", "-w", help="Worker processes (each loads the reward).")
    ] = 1,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar=API_KEY_ENV,
            help="Require 'Authorization: Bearer KEY' on every endpoint but /health and the "
            f"docs. Default: ${API_KEY_ENV}. Never printed.",
            show_default=False,
            show_envvar=False,
        ),
    ] = None,
    allow_public: Annotated[
        bool,
        typer.Option(
            "--allow-public", help="Serve a non-loopback address without an API key (trusted net)."
        ),
    ] = False,
    allow_host: AllowHost = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds one sample may take; past it the sample gets an invalid result "
            "(200, is_score_valid false).",
        ),
    ] = 20.0,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", help="Largest request body, in MiB (413 above).")
    ] = 10.0,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads", help="Threads for sync rewards per worker (default: min(32, CPUs + 4))."
        ),
    ] = None,
    max_wait: Annotated[
        float,
        typer.Option(
            "--max-wait",
            help="Seconds a sample may wait for a thread; one that would wait longer (the samples "
            "before it times their run time) gets 503 with Retry-After.",
        ),
    ] = 10.0,
    max_queue: Annotated[
        int | None,
        typer.Option(
            "--max-queue",
            help="Also refuse (503) once this many samples wait for a thread (default: no count, "
            "only --max-wait).",
        ),
    ] = None,
    max_batches: Annotated[
        int,
        typer.Option("--max-batches", help="/batch requests parsed and scored at once."),
    ] = 2,
    body_budget_mb: Annotated[
        float | None,
        typer.Option(
            "--body-budget-mb",
            help="Request bodies held at once, all requests together, in MiB (default: 4 x "
            "--max-body-mb); a body that does not fit waits unread.",
        ),
    ] = None,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout",
            help="Seconds a connection may take to send a request head (408 and closed after).",
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout",
            help="Seconds a request body may take to arrive (408 and closed after).",
        ),
    ] = 30.0,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            help="Open connections at most (lowered to fit `ulimit -n`); past it a new one "
            "replaces the oldest without a complete request head.",
        ),
    ] = 1000,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log/--no-access-log",
            help="uvicorn's line per request (costly). Off, answers other than 2xx still get a "
            "line, and all answers a summary every 10 s.",
        ),
    ] = False,
    sandbox: Annotated[
        str | None,
        typer.Option(
            "--sandbox",
            help="Where rewards that run model code (code_execution) run it: bwrap (isolated, "
            "the default) or process (no isolation; opt-in). Requests cannot change it. See "
            "`rk-agent doctor`.",
        ),
    ] = None,
    tunnel: Annotated[
        bool,
        typer.Option(
            "--tunnel",
            help="Expose the server at a public URL through an installed tunnel client "
            "(cloudflared, else ngrok) and print it. Needs an API key (or --allow-public).",
        ),
    ] = False,
    tunnel_client: Annotated[
        str | None,
        typer.Option("--tunnel-client", help="With --tunnel: cloudflared or ngrok."),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option("--tls-cert", help="Serve HTTPS with this certificate (PEM; with --tls-key)."),
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="The private key of --tls-cert (PEM).")
    ] = None,
    client_ca: Annotated[
        Path | None,
        typer.Option(
            "--client-ca",
            help="Mutual TLS: require every client to present a certificate signed by this CA "
            "(PEM). Counts as authentication, like an API key.",
        ),
    ] = None,
) -> None:
    """Serve a reward over HTTP: POST /evaluate (and /reward), /batch; GET /health, /docs.

    Any RL service, or RewardFunction(mode="remote", endpoint="http://HOST:PORT/evaluate"),
    can call it. Stop it with Ctrl-C or SIGTERM: requests in flight finish first.
    """
    from rk_agent.server import (
        check_bind,
        check_port,
        is_loopback,
        load_served_reward,
        serve_rewards,
        tls_options,
    )

    key = api_key if api_key and api_key.strip() else None
    if max_body_mb <= 0:
        raise ConfigError(f"--max-body-mb must be > 0, got {max_body_mb:g}.")
    if timeout <= 0:
        raise ConfigError(f"--timeout must be > 0 seconds, got {timeout:g}.")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}.")
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {threads}.")
    if max_queue is not None and max_queue < 1:
        raise ConfigError(f"--max-queue must be >= 1, got {max_queue}.")
    if max_batches < 1:
        raise ConfigError(f"--max-batches must be >= 1, got {max_batches}.")
    for flag, seconds in (
        ("--max-wait", max_wait), ("--header-timeout", header_timeout),
        ("--body-timeout", body_timeout),
    ):  # fmt: skip
        if not seconds > 0:
            raise ConfigError(f"{flag} must be > 0 seconds, got {seconds:g}.")
    if max_connections < 1:
        raise ConfigError(f"--max-connections must be >= 1, got {max_connections}.")
    if body_budget_mb is not None and body_budget_mb < max_body_mb:
        raise ConfigError(
            f"--body-budget-mb must be >= --max-body-mb ({max_body_mb:g}), got "
            f"{body_budget_mb:g}: a body of the largest size must fit."
        )
    tls = tls_options(tls_cert, tls_key, client_ca)
    if tunnel and tls:
        raise ConfigError(
            "expected --tunnel or --tls-cert, got both: a tunnel ends TLS at its own edge, so "
            "client certificates never reach this server. Use --tunnel with --api-key."
        )
    if tunnel and not key and not allow_public:
        raise ConfigError(
            "refusing to open a public tunnel without an API key: anyone with the URL could "
            f"call the reward. Set a key with --api-key or {API_KEY_ENV}, or pass --allow-public."
        )
    if tunnel:
        from rk_agent.selfhost.tunnel import find_tunnel_client

        client = find_tunnel_client(tunnel_client)  # none installed: say so before serving
    check_bind(host, key, allow_public or client_ca is not None)
    check_port(host, port)
    loaded = load_served_reward(reward, config, sandbox=sandbox)
    shown_host = f"[{host}]" if ":" in host else host
    auth = " and ".join(
        [*(["bearer key"] if key else []), *(["client certificate"] if client_ca else [])]
    )
    auth = f"auth on ({auth})" if auth else "auth off"
    if not key and not client_ca and (tunnel or not is_loopback(host)):
        auth += ", open to the network (--allow-public)"
    scheme = "https" if tls else "http"
    echo(
        f"Serving reward {loaded.reward_spec.name!r} at {scheme}://{shown_host}:{port}/evaluate "
        f"(also /reward, /batch, /health, /docs); {workers} worker{'s' * (workers > 1)}, {auth}"
        f"{_sandbox_note(loaded)}."
    )
    options: dict[str, Any] = {
        # One worker serves the reward already loaded; more load it themselves from the spec.
        "config": config if workers > 1 else None, "host": host, "port": port,
        "workers": workers, "api_key": key, "allow_public": allow_public,
        "timeout_s": timeout, "max_body_bytes": int(max_body_mb * 1024 * 1024),
        "threads": threads, "access_log": access_log, "max_queue": max_queue,
        "max_batches": max_batches, "sandbox": sandbox, "tls_cert": tls_cert,
        "tls_key": tls_key, "client_ca": client_ca, "max_wait_s": max_wait,
        "body_budget_bytes": int(body_budget_mb * 1024 * 1024) if body_budget_mb else None,
        "header_timeout_s": header_timeout, "body_timeout_s": body_timeout,
        "max_connections": max_connections, "allowed_hosts": list(allow_host or ()),
        "tune_gc": True,  # this process is the server's (rk_agent.gc_tuning)
    }  # fmt: skip
    with contextlib.ExitStack() as stack:
        if tunnel:
            from rk_agent.selfhost.tunnel import open_tunnel

            local = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown_host}:{port}"
            opened = stack.enter_context(open_tunnel(local, client=client))
            # SIGTERM must end the tunnel client too: exit through the `with`, not at once
            # (uvicorn restores this handler and re-raises the signal once it has stopped).
            previous = signal.signal(signal.SIGTERM, _exit_on_signal)
            stack.callback(signal.signal, signal.SIGTERM, previous)
            echo(
                f"Public URL: {opened.public_url}/evaluate (through {opened.client.name}; it "
                "stops with the server)."
            )
            # The tunnel forwards requests under its public name: answer that name too.
            options["allowed_hosts"].append(urlsplit(opened.public_url).hostname or "")
        serve_rewards(loaded if workers == 1 else reward, **options)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _sandbox_note(reward: object) -> str:
    from rk_agent.rewards.sandbox_choice import describe, fixed_sandbox

    mode = fixed_sandbox(reward)
    return "" if mode is None else f"; model code runs in {describe(mode)}"
