"""The root ``rk-agent`` command: version, and the command groups mounted on it."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from rk_agent import __version__
from rk_agent.cli import (
    check,
    compare,
    doctor,
    envs,
    fireworks,
    mcp,
    openenv,
    preview,
    replay,
    rescore,
    rewards,
    rollout,
    serve,
    train,
    view,
)
from rk_agent.cli.command_list import WholeSentenceGroup
from rk_agent.errors import RkAgentError
from rk_agent.secrets import argv_secrets, hold_secrets

app = typer.Typer(
    cls=WholeSentenceGroup,
    name="rk-agent",
    help="Train LLM agents with reinforcement learning: rewards, environments, rollouts, trainers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is printed as written: brackets are not markup
    add_completion=False,
)
app.command(name="rollout")(rollout.rollout)
app.command(name="show")(rollout.show)
app.command(name="rescore")(rescore.rescore)
app.command(name="compare")(compare.compare)
app.command(name="replay")(replay.replay)
app.command(name="view")(view.view)
app.add_typer(envs.app, name="envs")
app.add_typer(rewards.app, name="rewards")
app.command(name="preview")(preview.preview)
app.command(name="serve")(serve.serve)
app.command(name="deploy")(fireworks.deploy)
app.add_typer(fireworks.app, name="fireworks")
app.add_typer(train.app, name="train")
app.add_typer(mcp.app, name="mcp")
app.add_typer(openenv.app, name="openenv")
app.command(name="doctor")(doctor.doctor)
app.add_typer(check.app, name="check")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rk-agent {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Train LLM agents with reinforcement learning."""


def main() -> None:
    """Entry point of the ``rk-agent`` console script: our errors print as one clear line."""
    # Keys typed on the command line are secrets like the environment's: redacted wherever
    # shown, and left out of what a deploy packs (rk_agent.secrets).
    hold_secrets(argv_secrets(sys.argv[1:]))
    try:
        app()
    except RkAgentError as exc:
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        raise SystemExit(2) from None
