"""Real MCP servers for the tests: tests/mcp/fixture_server.py over stdio or loopback HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rk_agent.retry import RetryPolicy

SERVER = Path(__file__).with_name("fixture_server.py")
FAST_RETRY = RetryPolicy(max_retries=2, base_s=0.01, max_s=0.05, jitter="none")


def stdio_server(
    tag: str | None = None, *, ignore_eof: bool = False, **extra: Any
) -> dict[str, Any]:
    """The fixture server's entry in mcpServers (stdio), with rk-agent keys in ``extra``."""
    args = (
        [str(SERVER)] + (["--tag", tag] if tag else []) + (["--ignore-eof"] if ignore_eof else [])
    )
    return {"command": sys.executable, "args": args, **extra}


def processes_tagged(tag: str) -> list[int]:
    """Ids of live processes whose command line or environment holds ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if (tag.encode() in cmdline or tag.encode() in environ) and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(tag: str, limit_s: float = 20.0) -> list[int]:
    """Wait (bounded) until no process holds ``tag``; the ones left, if any."""
    deadline = time.monotonic() + limit_s
    while (left := processes_tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def tag() -> str:
    return f"rk-mcp-test-{uuid.uuid4().hex}"


def start_http(*args: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port), *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.readline()  # "listening on ..."
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def http_url() -> Iterator[str]:
    """The fixture server on loopback HTTP, token ``secret-token``."""
    process, url = start_http()
    yield url
    stop(process)


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(10)
    if process.stdout is not None:
        process.stdout.close()
