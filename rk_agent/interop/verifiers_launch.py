"""Starting verifiers' tool servers: as verifiers does (``exec``), or forked from a warm process.

verifiers starts a tool server as ``python -m <the toolset's module>`` (its module ends with
``if __name__ == "__main__": MyToolset.run()``), and does so for every rollout. Each such
process imports ``verifiers.v1`` first, which takes seconds (7.5 s on an idle 2-core machine,
over 15 s on a loaded one): for rk-agent's episodes, that is most of an episode. So there are
two ways here:

- ``exec`` (`start_exec`): verifiers' own, a fresh ``python -m MODULE``;
- ``fork`` (`Forker`, the default): one helper process per rk-agent process imports
  ``verifiers.v1`` once, then, for each server, imports the toolset's module (once) and forks;
  the child calls the toolset class's ``run()``, which is what ``python -m`` of a toolset
  module does. A server then starts in tens of milliseconds. The helper is single-threaded when
  it forks (``verifiers.v1`` starts no thread on import); a toolset module that starts threads
  or initialises a GPU on import is better started with ``exec``.

Either way the server gets the same environment (``VF_CONFIG``, ``MCP_PORT_FILE``, the state
channel's ``VF_STATE_URL`` and ``VF_STATE_SECRET``, ``TMPDIR``), runs in a session of its own,
writes its output to a log file, and dies with its parent (verifiers' servers ask for SIGKILL
when their parent dies; the helper is spawned with `rk_agent.processes.spawn`, so it dies with
this process and is stopped at exit).

Main names: `Started`, `start_exec`, `Forker`, `forker`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rk_agent.errors import EnvError
from rk_agent.processes import Child, spawn

__all__ = ["Forker", "Started", "forker", "start_exec"]

_HELPER = r"""
import importlib, json, os, signal, sys, tempfile, traceback
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the servers
import verifiers.v1
try:  # what a server imports as it starts (verifiers.v1.mcp.server.ServerBase._serve)
    import httpx, uvicorn, mcp.server.mcpserver, mcp.server.transport_security
except ImportError:
    pass
out = sys.stdout.buffer
def answer(value):
    out.write(json.dumps(value).encode() + b"\n")
    out.flush()
answer({"ready": True})
while True:
    line = sys.stdin.buffer.readline()
    if not line:
        break
    request = json.loads(line)
    try:
        target = importlib.import_module(request["module"])
        for part in request["qualname"].split("."):
            target = getattr(target, part)
    except BaseException as exc:
        answer({"error": f"{type(exc).__name__}: {exc}"})
        continue
    pid = os.fork()
    if pid:
        answer({"pid": pid})
        continue
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        sys.argv = [request["module"]]
        target.run()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
"""


class Started:
    """A started tool server: a child of ours (``exec``) or of the helper (``fork``)."""

    def __init__(self, pid: int, child: Child[Any] | None = None) -> None:
        self.pid = pid
        self._child = child

    def exit_status(self) -> int | str | None:
        """``None`` while it runs; its status once it exited (``"?"`` when not ours to read)."""
        if self._child is not None:
            return self._child.popen.poll()
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return "?"
        except PermissionError:  # the pid now belongs to another user's process
            return "?"
        return None

    def stop(self, grace_s: float = 2.0) -> None:
        """SIGTERM to its process group, then SIGKILL after ``grace_s``."""
        if self._child is not None:
            self._child.stop(grace_s)
            return
        for signum in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.pid, 0)
                except (ProcessLookupError, PermissionError):
                    return
                time.sleep(0.01)


def start_exec(module: str, env: dict[str, str], log: Path) -> Started:
    """``python -m module``, as verifiers starts a tool server."""
    with log.open("ab") as out:
        child = spawn(
            [sys.executable, "-m", module],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, grace_s=2.0,
        )  # fmt: skip
    return Started(child.pid, child)


class Forker:
    """The helper that forks tool servers from a process that imported verifiers once.

    Args:
        start_timeout_s: how long the helper may take to import verifiers.
    """

    def __init__(self, start_timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._dir = tempfile.mkdtemp(prefix="rk-vf-forker-")
        self._log = Path(self._dir) / "helper.log"
        with self._log.open("ab") as err:
            self._child: Child[bytes] = spawn(
                [sys.executable, "-c", _HELPER],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, grace_s=2.0,
            )  # fmt: skip
        self._buffer = b""
        self._read(start_timeout_s, "import verifiers.v1")

    def start(
        self, module: str, qualname: str, env: dict[str, str], log: Path, timeout_s: float
    ) -> Started:
        """Fork a server whose class is ``module:qualname``, with ``env`` and output to ``log``.

        Raises:
            EnvError: the helper died, timed out, or could not import the class.
        """
        request = {"module": module, "qualname": qualname, "env": env, "log": str(log)}
        with self._lock:
            stdin = self._child.popen.stdin
            assert stdin is not None
            try:
                stdin.write(json.dumps(request).encode() + b"\n")
                stdin.flush()
            except OSError:
                raise EnvError(self._dead("starting a tool server")) from None
            answer = self._read(timeout_s, f"import {module}")
        if "error" in answer:
            raise EnvError(
                f"the tool server {module}:{qualname} could not be loaded: {answer['error']}"
            )
        return Started(int(answer["pid"]))

    def alive(self) -> bool:
        """Whether the helper still runs."""
        return self._child.popen.poll() is None

    def stop(self) -> None:
        """Stop the helper (the servers it forked get SIGKILL: they die with their parent)."""
        self._child.stop()

    def _read(self, timeout_s: float, doing: str) -> dict[str, Any]:
        stdout = self._child.popen.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EnvError(
                    f"the tool-server helper did not {doing} within {timeout_s:g} s "
                    f"({self._tail()})"
                )
            ready, _, _ = select.select([stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise EnvError(self._dead(doing))
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _dead(self, doing: str) -> str:
        return f"the tool-server helper exited while it would {doing}: {self._tail()}"

    def _tail(self) -> str:
        try:
            text = self._log.read_text(errors="replace").strip()
        except OSError:
            text = ""
        return text[-2000:] or "it wrote nothing"


_FORKER: Forker | None = None
_FORKER_LOCK = threading.Lock()


def forker(start_timeout_s: float) -> Forker:
    """This process's helper, started on first use (and again if it died)."""
    global _FORKER
    with _FORKER_LOCK:
        if _FORKER is None or not _FORKER.alive():
            _FORKER = Forker(start_timeout_s)
        return _FORKER
