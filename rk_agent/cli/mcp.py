"""``rk-agent mcp ...``: serve an environment over MCP, and list the tools of MCP servers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rk_agent.cli.command_list import WholeSentenceGroup
from rk_agent.cli.console import echo

app = typer.Typer(
    cls=WholeSentenceGroup,
    help="MCP (Model Context Protocol): serve an environment to MCP agents, list MCP tools.",
    no_args_is_help=True,
)


@app.command("serve")
def serve(
    env: Annotated[
        str,
        typer.Option(
            "--env", help="The environment: a name (tools), module:Class or file.py::Class."
        ),
    ] = "tools",
    env_kwargs: Annotated[
        str | None, typer.Option("--env-kwargs", help="Its constructor's arguments, as JSON.")
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http", help="Serve streamable HTTP on HOST:PORT (path /mcp) instead of stdio."
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="With --http: the environment variable holding the bearer token clients "
            "must send.",
        ),
    ] = None,
    allow_public: Annotated[
        bool,
        typer.Option(
            "--allow-public",
            help="With --http: serve a non-loopback address without a token (a trusted "
            "network only).",
        ),
    ] = False,
    task_tools: Annotated[
        bool,
        typer.Option(
            "--task-tools/--no-task-tools",
            help="Also offer start_task and submit_answer (the task and its reward as tools).",
        ),
    ] = True,
) -> None:
    """Serve an environment's tools (and its task and reward) to agents that speak MCP.

    Over stdio by default, so an mcpServers entry can start it:
    {"command": "rk-agent", "args": ["mcp", "serve", "--env", "tools"]}.
    """
    from rk_agent.cli.server_options import served_env
    from rk_agent.mcp.serve import serve_env

    setup, token = served_env(env, env_kwargs, token_env)

    def announce(url: str) -> None:
        echo(f"serving {env} over MCP at {url}", err=True)

    serve_env(
        setup.make, http=http, token=token, allow_public=allow_public, task_tools=task_tools,
        on_ready=announce,
    )  # fmt: skip


@app.command("tools")
def tools(
    config: Annotated[Path, typer.Argument(help="An mcpServers JSON file.")],
) -> None:
    """Connect to the servers of an mcpServers file and list the tools a model would see."""
    from rich.table import Table

    from rk_agent.cli.console import make_console
    from rk_agent.mcp.servers import McpServers

    with McpServers(config) as servers:
        table = Table(title=f"MCP tools of {config}")
        table.add_column("tool (as the model sees it)", style="bold cyan")
        table.add_column("server")
        table.add_column("name on the server")
        for exposed, (server, remote) in servers.tool_names().items():
            table.add_row(exposed, server, remote)
        make_console().print(table)
