"""A small MCP server for the tests, written with the SDK's MCPServer, run as its own process.

``python fixture_server.py [--http PORT] [--token T] [--expire-after N] [--tag X]
[--ignore-eof]``; stdio by default. ``--ignore-eof`` keeps the process alive after its stdin
closes (a badly behaved server: only a signal stops it). ``--tag`` is ignored: tests find the
process by it. A crash marker file (environment variable ``CRASH_MARKER``) lets a test crash the
server for good: ``crash_for_good`` writes it and exits, and a server started while it exists
exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("fixture")
_calls = {"count": 0}


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def boom() -> str:
    """Raise an error."""
    raise ValueError("the tool broke")


@server.tool()
async def hang(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "woke up"


@server.tool()
def count() -> int:
    """How many times this was called in this process (this call included)."""
    _calls["count"] += 1
    return _calls["count"]


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exit the process at once, without answering."""
    os._exit(3)


@server.tool()
def crash_once() -> str:
    """Crash the first time (leaving the marker file), answer once the marker exists."""
    marker = Path(os.environ["ONCE_MARKER"])
    if not marker.exists():
        marker.write_text("crashed")
        os._exit(3)
    return "ran after the crash"


@server.tool()
def crash_for_good() -> str:
    """Write the crash marker and exit: the server will not start again."""
    Path(os.environ["CRASH_MARKER"]).write_text("down")
    os._exit(3)


class _ExpiringToken:
    """401 for a wrong token, and for every request after the first ``expire_after``."""

    def __init__(self, app, token, expire_after):
        self.app, self.token, self.left = app, f"Bearer {token}".encode(), expire_after

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if self.left is not None and scope.get("method") == "POST":
                self.left -= 1
            if given != self.token or (self.left is not None and self.left < 0):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--token", default="secret-token")
    parser.add_argument("--expire-after", type=int)
    parser.add_argument("--tag")
    parser.add_argument("--ignore-eof", action="store_true")
    args = parser.parse_args()
    marker = os.environ.get("CRASH_MARKER")
    if marker and Path(marker).exists():
        sys.exit(1)
    if args.http is None:
        server.run("stdio")
        while args.ignore_eof:
            time.sleep(1)
        return
    import uvicorn

    app = _ExpiringToken(server.streamable_http_app(), args.token, args.expire_after)
    print(f"listening on {args.http}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
