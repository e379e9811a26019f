"""``rk-agent view``: a local, read-only web page of runs and episodes (see `rk_agent.view`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from rk_agent.cli.console import echo
from rk_agent.cli.server_options import AllowHost
from rk_agent.errors import ConfigError


def view(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run directories, folders of runs, or trajectories files (default: runs/).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="Address to bind. Anything but loopback needs --token-env VAR."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port.")] = 8765,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="The environment variable holding a token every request must carry (open "
            "the page once with ?token=<token>). Never printed.",
        ),
    ] = None,
    allow_public: Annotated[
        bool,
        typer.Option(
            "--allow-public",
            help="Serve a non-loopback address without a token (a trusted network only).",
        ),
    ] = False,
    allow_host: AllowHost = None,
) -> None:
    """Browse runs in a web page: every run and its alarms, a run's episodes with filters and
    histograms, a training run's figures per step as charts (updating while it trains), one
    episode turn by turn, and two runs compared. Read-only; prints the URL and serves until
    Ctrl-C."""
    from rk_agent.view.serve import serve_view

    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise ConfigError(f"--token-env {token_env}: that environment variable is not set.")

    def announce(url: str) -> None:
        echo(f"rk-agent view: {url}  (Ctrl-C to stop)")

    serve_view(
        paths or [Path("runs")],
        host=host,
        port=port,
        token=token,
        allow_public=allow_public,
        allowed_hosts=allow_host or (),
        on_ready=announce,
    )
