"""An exclusive lock on a run directory, so that one process at a time writes it.

A writer holds the run's lock file (``run.lock``) with ``flock``, an advisory lock of the
operating system, for as long as it writes the run, and records itself in the file: pid, host,
command line (API keys left out) and start time (`LockHolder`). A second writer (a second
``--resume`` of the run, or another run given the same ``--output``) cannot take the lock and
gets a `RunLockedError` naming the holder and what to do.

The operating system releases a ``flock`` when the process that took it ends, however it ends:
a holder killed by ``kill -9`` or the out-of-memory killer leaves no stale lock, only its record
in the file. The next writer takes the lock at once and finds that record
(`RunLock.previous`: a holder that ended without releasing). A clean release empties the file.
The file itself is never deleted: deleting a lock file lets a third process lock a fresh file
while another still holds the old one. The descriptor is not inherited by child processes (a
sandboxed program that outlives its parent cannot keep the lock).

Readers (``rk-agent show``, SFT and RFT data) never take the lock: every append is whole lines,
and a reader skips a last line that is still being written.

``flock`` works on local filesystems, and on NFS under Linux (as a POSIX lock).

Main names: `RunLock`, `LockHolder`, `process_alive`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import socket
import sys
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ValidationError

from rk_agent.errors import ConfigError, RunLockedError
from rk_agent.secrets import redact_argv

__all__ = ["LockHolder", "RunLock", "process_alive"]


class LockHolder(BaseModel):
    """The process that holds (or last held) a run's lock, as it recorded itself.

    Attributes:
        pid: its process id.
        host: the machine (a pid means nothing on another one).
        command: its command line, API keys replaced by ``***``.
        started_at: when it took the lock (UTC).
    """

    pid: int
    host: str
    command: str
    started_at: datetime

    @classmethod
    def this_process(cls) -> LockHolder:
        """The record of the calling process, now."""
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            command=_command_line(sys.argv),
            started_at=datetime.now(UTC),
        )

    def describe(self) -> str:
        """One line, e.g. ``pid 12 on box (`rk-agent rollout --resume r`, since 2026-01-01 12:00:00
        UTC)``."""
        since = self.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"pid {self.pid} on {self.host} (`{self.command}`, since {since})"

    def is_alive(self) -> bool | None:
        """Whether its process still exists (``None``: it runs on another host, unknown)."""
        if self.host != socket.gethostname():
            return None
        return process_alive(self.pid)


class RunLock:
    """The held lock of one run directory. Take it with `RunLock.acquire`; `release` it (or let
    the process end).

    Attributes:
        file: the lock file.
        holder: this process's record, written into the file.
        previous: the record found in the file when the lock was taken: a holder that ended
            without releasing it (killed), or ``None``.
    """

    def __init__(
        self, file: Path, handle: IO[bytes], holder: LockHolder, previous: LockHolder | None
    ) -> None:
        self.file = file
        self.holder = holder
        self.previous = previous
        # Released when the object is collected or the interpreter exits, if not before.
        self._finalizer = weakref.finalize(self, _release, handle)

    @classmethod
    def acquire(cls, file: str | os.PathLike[str]) -> RunLock:
        """Take the lock of ``file``'s run directory now, or fail at once.

        Raises:
            RunLockedError: another process (or another `RunLock` of this one) holds it; the
                message names the holder and what to do.
            ConfigError: the lock file cannot be created (a read-only or missing folder).
        """
        path = Path(file)
        try:
            handle = path.open("a+b")  # created when missing; never truncated by opening
        except OSError as exc:
            raise ConfigError(
                f"cannot create the lock file {path}: {exc.strerror or exc}. The run directory "
                "must be a writable folder."
            ) from exc
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            handle.close()
            raise _locked_error(path.parent, holder) from None
        except BaseException:
            handle.close()
            raise
        previous = _read_holder(handle)
        me = LockHolder.this_process()
        _rewrite(handle, me.model_dump_json().encode("utf-8"))
        return cls(path, handle, me, previous)

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._finalizer.alive

    def release(self) -> None:
        """Empty the record and release the lock (safe to call twice)."""
        self._finalizer()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    @staticmethod
    def recorded_holder(file: str | os.PathLike[str]) -> LockHolder | None:
        """The holder recorded in a lock file, without taking the lock (``None``: none, or the
        file is missing or unreadable). A record left by a killed holder is returned too: check
        `LockHolder.is_alive`."""
        try:
            with Path(file).open("rb") as handle:
                return _read_holder(handle)
        except OSError:
            return None


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _release(handle: IO[bytes]) -> None:
    try:
        with contextlib.suppress(OSError):
            _rewrite(handle, b"")
    finally:
        handle.close()  # closing the last descriptor releases the flock


def _read_holder(handle: IO[bytes]) -> LockHolder | None:
    handle.seek(0)
    data = handle.read()
    if not data.strip():
        return None
    try:
        return LockHolder.model_validate_json(data)
    except ValidationError:
        return None


def _rewrite(handle: IO[bytes], data: bytes) -> None:
    handle.seek(0)
    handle.truncate(0)
    handle.write(data)
    handle.flush()


def _locked_error(folder: Path, holder: LockHolder | None) -> RunLockedError:
    if holder is None:  # it took the lock a moment ago and has not written its record yet
        who = "another process (it has not recorded its pid yet)"
    elif holder.pid == os.getpid() and holder.host == socket.gethostname():
        who = "this process itself (close the first RunDir or run before opening it again)"
    else:
        who = holder.describe()
    kill = f" (`kill {holder.pid}`)" if holder is not None else ""
    return RunLockedError(
        f"{folder} is being written by {who}. Two writers of one run would play the same "
        f"episodes twice. Wait for it to end, or stop it{kill} and then finish the run with "
        f"`rk-agent rollout --resume {folder}`; to start a separate run, choose another "
        "--output.",
        path=str(folder),
        pid=holder.pid if holder else None,
        host=holder.host if holder else None,
        command=holder.command if holder else None,
    )


def _command_line(argv: list[str]) -> str:
    """``argv`` as one shell line, ``rk-agent`` for the CLI's entry points, keys as ``***``."""
    if not argv:
        return "python"
    script = Path(argv[0])
    program = shlex.quote(script.name)
    if script.name == "-c":  # python -c CODE: the code is not in argv
        program = "python -c ..."
    elif script.name == "__main__.py":  # python -m PACKAGE
        package = script.parent.name
        program = "rk-agent" if package == "rk_agent" else f"python -m {package}"
    return " ".join([program, *map(shlex.quote, redact_argv(argv[1:]))])
