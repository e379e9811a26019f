"""Real OpenEnv servers for the tests: openenv 0.10.0 in an environment of its own, on loopback.

rk-agent's environment keeps mcp 2.x; openenv's fastmcp needs ``mcp<2``, so OpenEnv's server
(`openenv_envs.py`) and its client run in a separate virtual environment: the one
``$RK_OPENENV_VENV`` names (``.ci/run`` makes it), else one made here once, in the user's cache,
with uv (``uv venv`` + ``uv pip install openenv==0.10.0``, at most 5 minutes). A test that needs it
is skipped, saying why, only when it cannot be made.

Also: `guess_and_words_reply`, the reply function of a stub model that plays both test games
(binary search with the ``guess`` tool; the word game by elimination), for `StubServer`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

OPENENV = "openenv==0.10.0"
HERE = Path(__file__).parent
ENVS_SCRIPT = HERE / "openenv_envs.py"
WORDS = ["crane", "slate", "pious", "mango", "light", "quart", "dwarf", "brick", "vivid", "nymph"]
_MADE_S = 300


def openenv_python() -> Path:
    """The Python of an environment with ``openenv==0.10.0`` (made once if need be), or skip."""
    given = os.environ.get("RK_OPENENV_VENV")
    venv = Path(given) if given else _cache() / "openenv-0.10.0"
    python = venv / "bin" / "python"
    if _has_openenv(python):
        return python
    if given:
        pytest.skip(f"RK_OPENENV_VENV={given} has no {OPENENV} (make it as .ci/run does)")
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip(f"no {OPENENV} environment: set RK_OPENENV_VENV, or install uv to make one")
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / "openenv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist's workers make it once
        if not _has_openenv(python):
            environ = {**os.environ, "VIRTUAL_ENV": str(venv)}
            try:
                made = [uv, "venv", "-q", "--allow-existing", "-p", sys.executable, str(venv)]
                subprocess.run(made, check=True, capture_output=True, timeout=_MADE_S)
                installed = [uv, "pip", "install", "-q", OPENENV]
                subprocess.run(installed, check=True, capture_output=True, timeout=_MADE_S,
                               env=environ)  # fmt: skip
            except (subprocess.SubprocessError, OSError) as exc:
                detail = getattr(exc, "stderr", b"") or b""
                pytest.skip(f"could not make an environment with {OPENENV}: {exc} "
                            f"{detail.decode(errors='replace')[-300:]}")  # fmt: skip
    if not _has_openenv(python):
        pytest.skip(f"could not make an environment with {OPENENV} at {venv}")
    return python


def _cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "rk-agent-tests"


def _has_openenv(python: Path) -> bool:
    if not python.exists():
        return False
    check = "import importlib.metadata as m; print(m.version('openenv'))"
    out = subprocess.run([str(python), "-c", check], capture_output=True, text=True, timeout=60)
    return out.returncode == 0 and out.stdout.strip() == OPENENV.split("==")[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[Any] | None, timeout_s: float = 90) -> None:
    """Wait until ``url/health`` answers (OpenEnv's imports take seconds on a busy machine)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}): {_output(process)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} was not healthy in {timeout_s} s")


def _output(process: subprocess.Popen[Any]) -> str:
    with contextlib.suppress(Exception):
        return process.communicate(timeout=5)[1][-2000:]
    return ""


@contextlib.contextmanager
def openenv_server(kind: str, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """OpenEnv's own server (`openenv_envs.py`) of game ``kind`` on a free loopback port:
    ``(http URL, process)``; stopped at the end."""
    python = openenv_python()
    port = free_port()
    process = subprocess.Popen(
        [str(python), str(ENVS_SCRIPT), kind, "--port", str(port), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url, process
    finally:
        stop(process)


def stop(process: subprocess.Popen[Any]) -> None:
    """End a server this test started (its process group), by its id."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def counts(url: str) -> dict[str, Any]:
    """What the test server says it built, closed and played (``GET /counts``)."""
    return httpx.get(f"{url}/counts", timeout=10, trust_env=False).json()


def wait_for(predicate: Any, timeout_s: float = 30, every_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return bool(predicate())


# ---------------------------------------------------------------- the stub model's play


def guess_and_words_reply(request: dict[str, Any]) -> dict[str, Any]:
    """A model that plays both games: binary search with ``guess``; the word game by guessing
    the first word of the list that fits every feedback so far."""
    messages = request.get("messages") or []
    tools = [t["function"]["name"] for t in request.get("tools") or []]
    if "guess" in tools:
        low, high, last = 1, 100, None
        for message in messages:
            if message.get("role") == "assistant" and message.get("tool_calls"):
                last = json.loads(message["tool_calls"][0]["function"]["arguments"])["n"]
            if message.get("role") == "tool" and last is not None:
                if message["content"] == "correct":
                    return {"content": f"Found it: {last}."}
                if message["content"] == "higher":
                    low = last + 1
                elif message["content"] == "lower":
                    high = last - 1
        return {"tool_calls": [{"name": "guess", "arguments": {"n": (low + high) // 2}}]}
    feedback = [
        m["content"] for m in messages
        if m.get("role") == "user" and re.fullmatch(r"[a-z]{5}: [GYX]{5}.*", m.get("content", ""))
    ]  # fmt: skip
    fits = [w for w in WORDS if all(_marks(f[:5], w) == f[7:12] for f in feedback)]
    return {"content": f"[{fits[0] if fits else 'crane'}]"}


def _marks(guess: str, secret: str) -> str:
    """The game's feedback for ``guess`` if ``secret`` were the word (as `openenv_envs.py`)."""
    return "".join(
        "G" if guess[i] == c else "Y" if c in guess else "X" for i, c in enumerate(secret)
    )
