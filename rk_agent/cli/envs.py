"""``rk-agent envs ...``: the environment registry from the command line."""

from __future__ import annotations

import typer

from rk_agent.cli.command_list import WholeSentenceGroup

app = typer.Typer(
    cls=WholeSentenceGroup, help="Environments: list what is registered.", no_args_is_help=True
)


@app.command("list")
def list_environments() -> None:
    """List every registered environment (built-ins and installed packages), then the sources
    of environments from elsewhere (named SCHEME:REST), each with whether it is installed."""
    from rich.table import Table

    from rk_agent.cli.console import make_console
    from rk_agent.envs.registry import list_envs
    from rk_agent.envs.sources import list_sources

    table = Table(title="Registered environments")
    table.add_column("name", style="bold cyan")
    table.add_column("description")
    for name, description in list_envs().items():
        table.add_row(name, description)
    console = make_console()
    console.print(table)
    sources = Table(title="Environments from elsewhere (--env SCHEME:REST)")
    sources.add_column("name", style="bold cyan")
    sources.add_column("installed")
    sources.add_column("description")
    for info in list_sources():
        installed = "yes" if info.installed else f"no: {info.install}"
        sources.add_row(info.form, installed, info.summary)
    console.print(sources)
