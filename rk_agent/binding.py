"""Where a server of rk-agent's may listen: loopback, or a port it can bind.

The reward server (`rk_agent.server`) and the MCP server (`rk_agent.mcp.serve`) follow one
rule: a non-loopback address needs a credential (or an explicit opt-out), and a port is checked
before anything claims to be serving, so a bad one is one line instead of a traceback.

Main names: `is_loopback`, `check_port`.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from rk_agent.errors import ConfigError

__all__ = ["check_port", "is_loopback"]


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
