"""The parent's side of a sandboxed run's pipes: feed stdin, collect capped output, watch time.

Main names:
    Capped: one output stream kept up to a byte cap.
    pump: feed stdin and read stdout, stderr and the data channel until the run ends, a stream
        passes its cap, or time is up.
    has_exited: whether the child ended, without reaping it.

Nothing here trusts what the program writes: every stream is read incrementally into a
`Capped` buffer, so a 1 GB print never reaches the parent's memory.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from typing import Literal

__all__ = ["Capped", "has_exited", "pump"]

_READ_CHUNK = 1 << 16
_POLL_S = 0.05  # how often a run whose pipes stay open is checked for having exited
_DRAIN_S = 0.2  # how long stragglers holding the pipes may keep them after the run ended

Stop = Literal["timeout", "output_limit"]


class Capped:
    """Collects one output stream up to a byte cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False

    def add(self, chunk: bytes) -> bool:
        """Keep what fits under the cap; ``False`` once the stream went past it."""
        room = self.cap - self.size
        if len(chunk) > room:
            chunk = chunk[:room]
            self.truncated = True
        self.chunks.append(chunk)
        self.size += len(chunk)
        return not self.truncated

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


def pump(
    proc: subprocess.Popen[bytes],
    data: bytes,
    streams: dict[int, Capped],
    deadline: float,
) -> Stop | None:
    """Feed ``data`` to stdin and read the ``streams`` (fd -> buffer) until the run is over.

    Returns ``"timeout"`` or ``"output_limit"`` when the run must be stopped, else ``None``
    once the child exited and its pipes closed (or stragglers kept them past a short drain).
    """
    if proc.stdin is None:
        raise OSError("the sandbox child was started without its stdin pipe")
    stdin_fd, pending = proc.stdin.fileno(), memoryview(data)
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        if pending:
            os.set_blocking(stdin_fd, False)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        while any(fd in selector.get_map() for fd in streams):
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if exited_at is not None and now >= exited_at + _DRAIN_S:
                break  # the run is over; something it left behind holds the pipes
            for key, _ in selector.select(min(deadline - now, _POLL_S)):
                if key.fd == stdin_fd:
                    pending = _feed(stdin_fd, pending)
                    if not pending:
                        selector.unregister(stdin_fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                elif not streams[key.fd].add(chunk):
                    return "output_limit"
            if exited_at is None and has_exited(proc):
                exited_at = time.monotonic()
    if not _wait_exit(proc, deadline):
        return "timeout"
    return None


def _feed(fd: int, pending: memoryview) -> memoryview:
    try:
        written = os.write(fd, pending[:_READ_CHUNK])
    except BlockingIOError:
        return pending
    except OSError:
        return pending[:0]  # the program closed its stdin: the rest is not wanted
    return pending[written:]


def has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child ended, without reaping it: its pid must stay taken until its group dies."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exit(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    delay = 0.0005
    while not has_exited(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, _POLL_S)
    return True
