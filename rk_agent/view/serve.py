"""Serving the viewer: where it may listen, and the server behind ``rk-agent view``.

The rule is the other servers' (`rk_agent.binding`): loopback by default; a non-loopback
address needs a token (or an explicit ``allow_public`` on a trusted network), and the port is
checked before anything claims to be serving. On a loopback address the viewer answers only
loopback names and pages of them (`rk_agent.binding.LoopbackNames`): a page on another site,
even one whose name DNS rebinding points at ``127.0.0.1``, reads no run.

Main names: `serve_view`, `check_address`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rk_agent.binding import LoopbackNames, check_port, is_loopback
from rk_agent.errors import ConfigError
from rk_agent.terminal_text import escaped_log_config

__all__ = ["check_address", "serve_view"]


def check_address(host: str, port: int, *, token: str | None, allow_public: bool) -> None:
    """Refuse a non-loopback ``host`` without a token (or ``allow_public``), and a bad port.

    Raises:
        ConfigError: what was asked, why it is refused, and what to do.
    """
    if not (token or allow_public or is_loopback(host)):
        raise ConfigError(
            f"refusing to serve the viewer on {host} without a token: anyone who can reach "
            "this machine could read your runs. Set one with --token-env VAR (open the page "
            "once with ?token=<token>), bind --host 127.0.0.1, or pass --allow-public if the "
            "network is trusted."
        )
    check_port(host, port)


def serve_view(
    paths: Iterable[str | Path],
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allow_public: bool = False,
    allowed_hosts: Iterable[str] = (),
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Find the runs under ``paths`` and serve their pages until interrupted.

    Args:
        paths: run directories, folders of runs, or trajectories files.
        host, port: where to listen.
        token: the token every request must carry; required off loopback unless
            ``allow_public``.
        allow_public: serve a non-loopback address without a token.
        allowed_hosts: on a loopback ``host``, more host names to answer (``--allow-host``);
            any other ``Host`` gets 421 and a page of another site 403.
        on_ready: called with the page's URL once the server listens.

    Raises:
        ConfigError: a path holds no run, or the address is refused (`check_address`).
    """
    import uvicorn

    from rk_agent.view.app import make_app
    from rk_agent.view.catalog import find_runs

    catalog = find_runs(paths)
    check_address(host, port, token=token, allow_public=allow_public)
    app: Any = make_app(catalog, token=token)
    if is_loopback(host):
        app = LoopbackNames(app, allowed_hosts)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning",
        log_config=escaped_log_config(uvicorn.config.LOGGING_CONFIG),  # a run's text, escaped
    )  # fmt: skip
    server = uvicorn.Server(config)
    if on_ready is not None:
        startup = server.startup
        shown = f"[{host}]" if ":" in host else host

        async def announce(sockets: Any = None) -> None:
            await startup(sockets)
            on_ready(f"http://{shown}:{port}/")

        server.startup = announce  # type: ignore[method-assign]
    server.run()
