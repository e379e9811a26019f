"""Where a server of rk-agent's may listen (loopback, or a port it can bind), and which names
a loopback server answers.

The reward server (`rk_agent.server`), the viewer (`rk_agent.view`) and the MCP server
(`rk_agent.mcp.serve`) follow one rule: a non-loopback address needs a credential (or an
explicit opt-out), and a port is checked before anything claims to be serving, so a bad one is
one line instead of a traceback.

A server on a loopback address answers only requests meant for this machine (`HostRule`): a
``Host`` that is a loopback name (``localhost``, ``127.x.x.x``, ``[::1]``, any port) or one the
user allowed (``--allow-host``), else **421**; and an ``Origin``, when a browser sends one,
of such a name too, else **403**. A page on another site can make a browser send requests to
``127.0.0.1``; with DNS rebinding its own name can even point there, and then it reads the
answers. Neither gets past this. (The MCP SDK does the same for ``rk-agent mcp serve``.)

Main names: `is_loopback`, `check_port`, `HostRule`, `LoopbackNames`.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import socket
from collections.abc import Iterable
from typing import Any

from rk_agent.errors import ConfigError

__all__ = ["HostRule", "LoopbackNames", "check_port", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (``127.x``, ``::1``).

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
        (True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to a public address


def check_port(host: str, port: int, *, flag: str = "--port") -> None:
    """Refuse a port outside 1..65535 or one this host cannot bind (in use, or privileged).

    Binds a throw-away socket the way uvicorn will (``SO_REUSEADDR``), so the problem is one
    line before anything claims to be serving.

    Args:
        host: the address to bind.
        port: the port.
        flag: the option the user typed it with, for the message.

    Raises:
        ConfigError: what was asked, what went wrong, and what to do.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"{flag} must be a TCP port from 1 to 65535, got {port!r}.")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host.strip("[]"), port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = "it is already in use (is another server running?)"
        elif exc.errno == errno.EACCES:
            why = "this user may not bind it (ports below 1024 need privileges)"
        else:
            why = exc.strerror or str(exc)
        raise ConfigError(
            f"cannot serve on {host}:{port}: {why}. Pick another port with {flag}, or stop "
            "the process that holds it."
        ) from None


_SEVERAL = b"(several)"
"""What a request that sent a header twice is taken to have sent: no name."""

_KNOWN = 64
"""Accepted ``Host`` and ``Origin`` values a `HostRule` remembers (the same few, every request)."""


class HostRule:
    """The names a server on a loopback address answers: loopback ones and ``allowed``.

    Args:
        allowed: more host names (no port), e.g. the name a local proxy or a tunnel forwards
            requests under.

    Example:
        >>> rule = HostRule()
        >>> rule.refusal(b"127.0.0.1:8000", None) is None
        True
        >>> rule.refusal(b"evil.example:8000", None)[0]
        421
        >>> rule.refusal(b"localhost:8000", b"https://evil.example")[0]
        403
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = frozenset(name.strip().lower().strip("[]") for name in allowed)
        self._known: set[bytes] = set()

    def refusal(self, host: bytes | None, origin: bytes | None) -> tuple[int, str] | None:
        """``(status, message)`` for a request with this ``Host`` and ``Origin`` (``None``
        when absent; `_SEVERAL` when sent twice), or ``None`` when it may be answered.

        A request without ``Host`` (HTTP/1.0) is answered: a browser always sends one.
        """
        if host is not None and host not in self._known:
            if not self._answers(_authority(host)):
                return 421, (
                    "this server listens on a loopback address and answers only its loopback "
                    f"names (localhost, 127.0.0.1, [::1]), but the request was for "
                    f"{_shown(host)} (its Host header): a web page may be trying to reach it "
                    "under its own name (DNS rebinding). Call it as http://127.0.0.1:PORT, or "
                    "start it with --allow-host NAME for a name of yours (a proxy, a tunnel)."
                )
            self._remember(host)
        if origin is not None and origin not in self._known:
            scheme, _, authority = origin.partition(b"://")
            if scheme.lower() not in (b"http", b"https") or not self._answers(
                _authority(authority)
            ):
                return 403, (
                    "this server answers only pages of this machine, but the request came "
                    f"from a page of {_shown(origin)} (its Origin header): a page on another "
                    "site may not call it. Call it from a program, or start it with "
                    "--allow-host NAME for pages served under a name of yours."
                )
            self._remember(origin)
        return None

    def _answers(self, name: str | None) -> bool:
        return name is not None and (is_loopback(name) or name in self.allowed)

    def _remember(self, value: bytes) -> None:
        if len(self._known) < _KNOWN:
            self._known.add(value)


def _authority(value: bytes) -> str | None:
    """The host name of a ``Host`` value or an origin's authority (``name[:port]``,
    ``[v6]:port``), lower case and without brackets; ``None`` when it is not one."""
    text = value.decode("latin-1").strip().lower()
    if text.startswith("["):
        name, bracket, port = text[1:].partition("]")
        if not bracket or (port and not (port[0] == ":" and port[1:].isdigit())):
            return None
        return name
    name, colon, port = text.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


def _shown(value: bytes) -> str:
    """A client's header value as a message shows it: short, quoted, escaped."""
    text = value.decode("latin-1")
    return repr(text[:100] + ("..." if len(text) > 100 else ""))


class LoopbackNames:
    """ASGI middleware: `HostRule` in front of ``app``, for a server on a loopback address.

    Refused requests get the status and ``{"detail": message}`` as JSON; WebSocket and
    lifespan messages pass (a refused WebSocket handshake is closed).

    Example:
        >>> app = LoopbackNames(make_app(catalog), allowed=["runs.example"])  # doctest: +SKIP
    """

    def __init__(self, app: Any, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.rule = HostRule(allowed)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            host = origin = None
            for name, value in scope["headers"]:
                if name == b"host":
                    host = value if host is None else _SEVERAL
                elif name == b"origin":
                    origin = value if origin is None else _SEVERAL
            refused = self.rule.refusal(host, origin)
            if refused is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                status, message = refused
                body = json.dumps({"detail": message}).encode()
                await send({"type": "http.response.start", "status": status, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
