"""``rk-agent openenv serve``: where the OpenEnv server listens, who may use it, and running it.

The rules are ``rk-agent mcp serve``'s (`rk_agent.mcp.serve`) and the reward server's
(`rk_agent.binding`):

- loopback by default; a non-loopback address needs a token (``--token-env VAR``: clients send
  ``Authorization: Bearer <token>``, on HTTP requests and on the WebSocket handshake) or
  ``--allow-public``, since anyone who can reach the machine could play, and so run, the
  environment's tools;
- on loopback, the ``Host`` header must name loopback (``127.0.0.1:*``, ``localhost:*``,
  ``[::1]:*``), else HTTP 421, and an ``Origin`` header, when sent, must be a loopback origin,
  else HTTP 403: a web page the user visits cannot reach the server through DNS rebinding, nor
  open a WebSocket to it (browsers send ``Origin`` on WebSocket handshakes and apply no CORS to
  them). A refused WebSocket handshake gets the same status;
- the port is checked before anything claims to be serving.

Main names: `serve_openenv`, `Guard`.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any

from rk_agent.binding import check_port, is_loopback
from rk_agent.envs.base import ChatEnv
from rk_agent.errors import ConfigError
from rk_agent.interop.openenv.server import OpenEnvApp

__all__ = ["Guard", "serve_openenv"]

_LOOPBACK_HOST = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+")
_LOOPBACK_ORIGIN = re.compile(r"http://(127\.0\.0\.1|localhost|\[::1\]):\d+")


class Guard:
    """ASGI middleware: the token, and on loopback the Host and Origin checks (see the module
    docstring), for HTTP requests and WebSocket handshakes alike.

    Args:
        app: the application it guards.
        token: the bearer token clients must send (``None``: none).
        loopback_only: check that Host and Origin name loopback.
    """

    def __init__(self, app: Any, *, token: str | None, loopback_only: bool) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.loopback_only = loopback_only

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = self._refusal(scope.get("headers") or [])
            if refusal is not None:
                await _refuse(scope, send, *refusal)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        if self.loopback_only:
            host = [v for k, v in headers if k == b"host"]
            if len(host) != 1 or not _LOOPBACK_HOST.fullmatch(host[0].decode("latin-1")):
                return 421, "Invalid Host header"
            origin = [v for k, v in headers if k == b"origin"]
            if origin and not all(_LOOPBACK_ORIGIN.fullmatch(o.decode("latin-1")) for o in origin):
                return 403, "Invalid Origin header"
        if self.expected is not None:
            given = [v for k, v in headers if k == b"authorization"]
            # Exactly one: with two, which one counts would be up to each proxy on the way.
            if len(given) != 1 or not secrets.compare_digest(given[0], self.expected):
                return 401, "invalid_token"
        return None


async def _refuse(scope: Any, send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    if "websocket.http.response" in (scope.get("extensions") or {}):
        start = {"type": "websocket.http.response.start", "status": status, "headers": headers}
        await send(start)
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "websocket.close", "code": 1008})  # the server answers the handshake 403


def serve_openenv(
    make_env: Callable[[], ChatEnv],
    *,
    name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allow_public: bool = False,
    max_sessions: int = 64,
    idle_timeout_s: float = 600.0,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve an environment over OpenEnv's protocol until Ctrl-C.

    Args:
        make_env: builds one environment (one per session; once first, as a check).
        name: its name (``/metadata``).
        host: the address to listen on (loopback by default).
        port: the port.
        token: the bearer token clients must send (``None``: none).
        allow_public: serve a non-loopback address without a token (a trusted network).
        max_sessions: sessions at once.
        idle_timeout_s: a session idle this long is closed.
        on_ready: called with the server's ``ws://`` URL once it listens.

    Raises:
        ConfigError: a non-loopback address without a token, a port that cannot be bound,
            bounds that are not positive, or an environment that cannot be built.
    """
    if not (token or allow_public or is_loopback(host)):
        raise ConfigError(
            f"refusing to serve OpenEnv on {host} without a token: anyone who can reach this "
            "machine could play the environment and call its tools. Set one with --token-env "
            "VAR (clients send 'Authorization: Bearer <token>'), bind --host 127.0.0.1, or "
            "pass --allow-public if the network is trusted."
        )
    if max_sessions < 1 or not idle_timeout_s > 0:
        raise ConfigError(
            f"--max-sessions must be at least 1 and --idle-timeout positive; got {max_sessions} "
            f"and {idle_timeout_s}."
        )
    check_port(host, port)
    make_env().close()  # a broken environment is one line now, not an error per session
    import uvicorn

    app = OpenEnvApp(make_env, name=name, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s)
    guarded = Guard(app, token=token, loopback_only=is_loopback(host))
    config = uvicorn.Config(
        guarded, host=host, port=port, log_level="warning", ws="websockets-sansio",
        lifespan="on", ws_ping_interval=20.0, ws_ping_timeout=20.0,
    )  # fmt: skip
    runner = uvicorn.Server(config)
    if on_ready is not None:
        startup = runner.startup
        shown = f"[{host}]" if ":" in host else host

        async def announce(sockets: Any = None) -> None:
            await startup(sockets)
            on_ready(f"ws://{shown}:{port}")

        runner.startup = announce  # type: ignore[method-assign]
    runner.run()
