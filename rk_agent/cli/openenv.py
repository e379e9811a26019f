"""``rk-agent openenv ...``: serve an rk-agent environment to OpenEnv clients and trainers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from rk_agent.cli.command_list import WholeSentenceGroup

if TYPE_CHECKING:
    from rk_agent.envs.base import ChatEnv
    from rk_agent.envs.env_setup import EnvFactory, EnvSetup

app = typer.Typer(
    cls=WholeSentenceGroup,
    help="OpenEnv: serve an environment over OpenEnv's protocol (HTTP, WebSocket sessions, MCP).",
    no_args_is_help=True,
)


@app.command("serve")
def serve(
    env: Annotated[
        str,
        typer.Option(
            "--env",
            help="The environment: a name (tools), module:Class, file.py::Class or SCHEME:REST.",
        ),
    ] = "tools",
    env_kwargs: Annotated[
        str | None, typer.Option("--env-kwargs", help="Its constructor's arguments, as JSON.")
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port.")] = 8000,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="The environment variable holding the bearer token clients must send "
            "(required off loopback).",
        ),
    ] = None,
    allow_public: Annotated[
        bool,
        typer.Option(
            "--allow-public",
            help="Serve a non-loopback address without a token (a trusted network only).",
        ),
    ] = False,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", help="Sessions (episodes) at once; more are refused.")
    ] = 64,
    idle_timeout: Annotated[
        float,
        typer.Option("--idle-timeout", help="Seconds after which an idle session is closed."),
    ] = 600.0,
) -> None:
    """Serve an environment to OpenEnv clients: one session per WebSocket, one episode each.

    OpenEnv's GenericEnvClient and MCPToolClient (and trainers that drive them) play it at
    ws://HOST:PORT: reset, list_tools, call_tool, a text action {"message": ...}, rewards and
    done. rk-agent plays it back with --env openenv:ws://HOST:PORT.
    """
    from rk_agent.cli.server_options import served_env
    from rk_agent.interop.openenv.serve import serve_openenv

    setup, token = served_env(env, env_kwargs, token_env)

    def announce(url: str) -> None:
        typer.echo(f"serving {env} over OpenEnv at {url} (sessions at {url}/ws)", err=True)

    serve_openenv(
        _builder(setup), name=env, host=host, port=port, token=token, allow_public=allow_public,
        max_sessions=max_sessions, idle_timeout_s=idle_timeout, on_ready=announce,
    )  # fmt: skip


def _builder(setup: EnvSetup) -> Callable[[], ChatEnv]:
    """One environment per session, built as a rollout's workers build theirs (an
    `EnvFactory`: the class found, its arguments checked and the rewards and tasks loaded once,
    on the first call, which ``serve_openenv`` makes as its check before serving)."""
    made: list[EnvFactory] = []

    def build() -> ChatEnv:
        if not made:
            made.append(setup.factory())
        return made[0]()

    return build
