"""``rk-agent envs ...``: the environment registry from the command line."""

from __future__ import annotations

import typer

from rk_agent.cli.command_list import WholeSentenceGroup

app = typer.Typer(
    cls=WholeSentenceGroup, help="Environments: list what is registered.", no_args_is_help=True
)


@app.command("list")
def list_environments() -> None:
    """List every registered environment (built-ins and installed packages)."""
    from rich.table import Table

    from rk_agent.cli.console import make_console
    from rk_agent.envs.registry import list_envs

    table = Table(title="Registered environments")
    table.add_column("name", style="bold cyan")
    table.add_column("description")
    for name, description in list_envs().items():
        table.add_row(name, description)
    make_console().print(table)
