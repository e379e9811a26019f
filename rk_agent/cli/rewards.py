"""``rk-agent rewards ...``: the reward registry from the command line."""

from __future__ import annotations

import typer

from rk_agent.cli.command_list import WholeSentenceGroup

app = typer.Typer(
    cls=WholeSentenceGroup, help="Reward functions: list what is registered.", no_args_is_help=True
)


@app.command("list")
def list_rewards() -> None:
    """List every registered reward (built-ins, your registrations, installed packages)."""
    from rich.table import Table

    from rk_agent.cli.console import make_console
    from rk_agent.rewards.registry import list_reward_functions

    table = Table(title="Registered rewards", show_lines=False)
    table.add_column("name", style="bold cyan")
    table.add_column("description")
    for name, description in list_reward_functions().items():
        table.add_row(name, description)
    make_console().print(table)
