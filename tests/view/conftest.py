"""Runs made by the real engine, and the viewer serving them on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer

MARKUP = (
    '<img src=x onerror="window.__rk_xss = 1"> <script>window.__rk_xss = 2</script> '
    "<b>bold?</b>\nAnswer: 7"
)
"""What the stub model answers: markup and script that must show as text and never run."""


def _rollout(output: Path, *flags: str) -> None:
    command = [sys.executable, "-m", "rk_agent", "rollout", "--env", "tools", "--n", "4"]
    subprocess.run([*command, *flags, "--output", str(output)], check=True, capture_output=True)


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two runs of the ``tools`` env on the same 4 tasks: ``solver`` (the reference
    solver, groups of 2: every episode solved) and ``stub`` (a stub model that calls a tool
    with placeholder arguments, then answers with markup: every episode failed)."""
    root = tmp_path_factory.mktemp("runs")
    _rollout(root / "solver", "--provider", "solver", "--group-size", "2")
    with StubServer(call_first_tool_then_answer(MARKUP)) as server:
        _rollout(root / "stub", "--base-url", server.base_url, "--model", "stub-model")
    return root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(paths: list[Path]) -> Iterator[str]:
    """The viewer over ``paths``, served by uvicorn on loopback in a thread: its base URL."""
    import uvicorn

    from rk_agent.view.app import make_app
    from rk_agent.view.catalog import find_runs

    port = free_port()
    config = uvicorn.Config(
        make_app(find_runs(paths)), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def viewer(runs_root: Path) -> Iterator[str]:
    """The viewer over ``runs_root``: its base URL."""
    with serving([runs_root]) as url:
        yield url
