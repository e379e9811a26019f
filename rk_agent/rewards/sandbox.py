"""Run untrusted Python code in a resource-limited subprocess.

Main names:
    run_python: run a program with stdin, get a `SandboxResult`; safe to call from many threads.
    run_python_async: the same, awaitable.
    SandboxLimits: wall clock, CPU, memory, output, process and file-size limits.
    SandboxResult, SandboxStatus: what happened (``ok``, ``error``, ``timeout``, ``memory``,
        ``output_limit``, ``killed``) with captured, size-capped stdout and stderr.
    process_limit_backend: how this machine caps the number of processes.

How a run is contained (Linux is the target):

* The child is ``sys.executable -I -B -X utf8`` (isolated mode, no ``.pyc`` writes) started in a
  fresh session and process group, in a fresh temporary directory (also its ``HOME`` and
  ``TMPDIR``) that is deleted afterwards. It inherits **no environment variables**: only
  ``PATH``, ``LANG``/``LC_ALL``, ``HOME``, ``TMPDIR``, thread caps for numeric libraries, and what
  the caller passes in ``env``.
* A small bootstrap, run by the child before the code, joins the run's process cgroup and sets
  ``RLIMIT_AS`` (memory), ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_CORE=0`` and, where it
  works, ``RLIMIT_NPROC``. Doing this in the child rather than in a ``preexec_fn`` keeps the
  parent thread-safe.
* The parent reads stdout and stderr incrementally and kills the run once either passes
  ``max_output_bytes``: a 1 GB print never reaches the parent's memory. On timeout, output
  overflow and after every normal exit, the whole process group is killed, so background and
  forked processes die with the run.
* **Fork bombs.** ``RLIMIT_NPROC`` is not enforced for root, so when this process may create
  cgroups (root on a cgroup-v1 ``pids`` hierarchy, or a delegated cgroup-v2 subtree with the
  ``pids`` controller), each run gets its own ``pids`` cgroup with ``pids.max =
  max_processes``; its members, including processes that left the process group with
  ``setsid()``, are killed and the cgroup removed at the end. Otherwise ``RLIMIT_NPROC`` is set
  to the tasks this user already runs plus ``max_processes`` (effective for non-root users).
  `process_limit_backend` says which applies; with ``"none"`` (root without cgroups) only the
  process-group kill and the time limits stand between a fork bomb and the machine.

This is a guard against accidents and reward hacking by a policy model, not a security
boundary against a determined attacker: the code runs as the same user, can read what that
user can read and can reach the network. Run training in a container or VM.

Example:
    >>> result = run_python("print(int(input()) * 2)", stdin="21")
    >>> result.status, result.stdout
    (<SandboxStatus.OK: 'ok'>, '42\\n')
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import math
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.errors import SandboxError
from rk_agent.rewards._process_limits import (
    kill_members,
    nproc_limit,
    pids_max_hit,
    process_cgroup,
    process_limit_backend,
)

__all__ = [
    "SandboxLimits",
    "SandboxResult",
    "SandboxStatus",
    "process_limit_backend",
    "run_python",
    "run_python_async",
]

logger = logging.getLogger("rk_agent.rewards.sandbox")

_READ_CHUNK = 1 << 16
_POLL_S = 0.05  # how often a run whose pipes stay open is checked for having exited
_DRAIN_S = 0.2  # how long stragglers holding the pipes may keep them after the run ended
_SETUP_EXIT = 121  # exit code of a bootstrap that could not apply the limits
_SETUP_MARK = "rk-agent sandbox setup failed: "


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed run.

    Attributes:
        timeout_s: wall-clock limit in seconds.
        cpu_time_s: CPU-time limit in seconds (``RLIMIT_CPU``, rounded up to whole seconds);
            ``None`` means the same as ``timeout_s``.
        memory_mb: address-space limit in MiB (``RLIMIT_AS``); ``None`` for no limit.
        max_output_bytes: the most bytes kept of stdout, and of stderr; a run writing more is
            killed with status ``output_limit``.
        max_processes: the most tasks (processes and threads) the run may have at once, via a
            ``pids`` cgroup or ``RLIMIT_NPROC`` (see the module docs); ``None`` for no limit.
        max_file_size_mb: the largest file the run may write, in MiB (``RLIMIT_FSIZE``);
            ``None`` for no limit.

    Example:
        >>> SandboxLimits(timeout_s=2, memory_mb=256).cpu_seconds
        2
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    cpu_time_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    memory_mb: int | None = Field(default=1024, gt=0)
    max_output_bytes: int = Field(default=1 << 20, gt=0)
    max_processes: int | None = Field(default=64, gt=0)
    max_file_size_mb: int | None = Field(default=16, gt=0)

    @property
    def cpu_seconds(self) -> int:
        """The ``RLIMIT_CPU`` soft limit this run gets, in whole seconds."""
        return math.ceil(self.cpu_time_s if self.cpu_time_s is not None else self.timeout_s)


class SandboxStatus(str, enum.Enum):
    """How a sandboxed run ended."""

    OK = "ok"
    """The program exited with status 0."""
    ERROR = "error"
    """The program exited with a non-zero status (an exception, ``sys.exit(1)``, ...)."""
    TIMEOUT = "timeout"
    """The wall-clock or CPU-time limit was reached."""
    MEMORY = "memory"
    """The memory limit was reached (the program died of ``MemoryError``)."""
    OUTPUT_LIMIT = "output_limit"
    """The program wrote more than ``max_output_bytes`` to stdout or stderr."""
    KILLED = "killed"
    """The program died of a signal it was not sent by the sandbox (e.g. ``SIGSEGV``)."""


class SandboxResult(BaseModel):
    """What a sandboxed run did.

    Attributes:
        status: how it ended.
        reason: one line saying why, e.g. ``"exit code 1: ZeroDivisionError: division by zero"``.
        stdout: standard output (UTF-8, undecodable bytes replaced), at most
            ``max_output_bytes`` bytes of it.
        stderr: standard error, capped the same way.
        stdout_truncated: whether stdout was cut at the cap.
        stderr_truncated: whether stderr was cut at the cap.
        exit_code: the exit status, or ``None`` when the program died of a signal.
        signal: the name of the signal it died of (``"SIGKILL"``), else ``None``.
        timed_out: whether a time limit ended the run.
        wall_time_s: seconds from start to the end of the run.

    Example:
        >>> r = run_python("import sys; sys.exit(3)")
        >>> r.ok, r.exit_code, r.reason
        (False, 3, 'exit code 3')
    """

    status: SandboxStatus
    reason: str
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    wall_time_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the program exited with status 0 within the limits."""
        return self.status is SandboxStatus.OK


# The child runs this first (as ``python -c``): apply the limits, then run solution.py as
# ``__main__`` in a fresh module, with tracebacks that start at the user's code.
_BOOTSTRAP = f"""\
import json, os, resource, sys
try:
    _cfg = json.loads(sys.argv[1])
    if _cfg["cgroup"]:
        with open(_cfg["cgroup"], "w") as _f:
            _f.write(str(os.getpid()))
    for _name, _soft, _hard in _cfg["rlimits"]:
        resource.setrlimit(getattr(resource, _name), (_soft, _hard))
except BaseException as _exc:
    sys.stderr.write({_SETUP_MARK!r} + repr(_exc) + "\\n")
    sys.stderr.flush()
    os._exit({_SETUP_EXIT})
del _cfg
import builtins, gc, traceback, types
_main = types.ModuleType("__main__")
_main.__file__ = os.path.abspath("solution.py")
_main.__builtins__ = builtins
sys.modules["__main__"] = _main
sys.argv = ["solution.py"]
try:
    with open("solution.py", "rb") as _f:
        _code = compile(_f.read(), "solution.py", "exec")
    exec(_code, _main.__dict__)
except SystemExit:
    raise
except BaseException as _exc:
    if isinstance(_exc, MemoryError):
        _main.__dict__.clear()
        gc.collect()
    traceback.print_exception(type(_exc), _exc, _exc.__traceback__.tb_next)
    sys.exit(1)
"""


def run_python(
    code: str,
    *,
    stdin: str = "",
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
) -> SandboxResult:
    """Run a Python program in a subprocess sandbox and return what it did.

    The program's failures (exceptions, timeouts, memory or output overflow, crashes) are
    reported in the result, never raised. Safe to call from many threads at once.

    Args:
        code: the program's source, run as ``__main__`` from ``solution.py`` in a fresh
            temporary working directory.
        stdin: text fed to the program's standard input.
        limits: resource limits; `SandboxLimits()` defaults when ``None``.
        env: extra environment variables for the child, on top of the minimal environment.

    Returns:
        A `SandboxResult`.

    Raises:
        SandboxError: the sandbox itself could not run (not a POSIX system, the interpreter
            cannot start, or a limit cannot be applied on this platform).

    Example:
        >>> run_python("while True: pass", limits=SandboxLimits(timeout_s=1)).status.value
        'timeout'
    """
    _require_posix()
    limits = limits or SandboxLimits()
    with tempfile.TemporaryDirectory(prefix="rk-sandbox-", ignore_cleanup_errors=True) as workdir:
        Path(workdir, "solution.py").write_text(code, encoding="utf-8", errors="surrogatepass")
        with process_cgroup(limits.max_processes) as cgroup:
            config = {
                "cgroup": str(cgroup / "cgroup.procs") if cgroup else None,
                "rlimits": _rlimits(limits, use_nproc=cgroup is None),
            }
            argv = [sys.executable, "-I", "-B", "-X", "utf8", "-c", _BOOTSTRAP, json.dumps(config)]
            started = time.monotonic()
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=workdir,
                    env=_child_env(workdir, env),
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                raise SandboxError(
                    f"cannot start the sandbox interpreter {argv[0]}: {exc}"
                ) from exc
            try:
                data = stdin.encode(errors="replace")
                stopped, out, err = _communicate(proc, data, limits, started)
            finally:
                _kill_everything(proc, cgroup)
            wall = time.monotonic() - started
            hit_pids_max = cgroup is not None and pids_max_hit(cgroup)
    return _result(proc.returncode, stopped, out, err, wall, limits, hit_pids_max)


async def run_python_async(
    code: str,
    *,
    stdin: str = "",
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
) -> SandboxResult:
    """`run_python` in a worker thread, for asyncio code.

    Cancelling the awaiting task does not stop the run early; it still ends within its limits.

    Example:
        >>> import asyncio
        >>> asyncio.run(run_python_async("print('hi')")).stdout
        'hi\\n'
    """
    return await asyncio.to_thread(run_python, code, stdin=stdin, limits=limits, env=env)


# --------------------------------------------------------------------------------------------
# Setting up a run


def _require_posix() -> None:
    if sys.platform == "win32" or not hasattr(os, "killpg"):
        raise SandboxError(
            f"the code sandbox needs a POSIX system with process groups and the `resource` "
            f"module (Linux is the target); this is {sys.platform!r}. Run code-executing "
            "rewards on Linux (a container, WSL or a remote worker)."
        )


def _child_env(workdir: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        # Numeric libraries start one thread per core otherwise, each reserving address space.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env


def _rlimits(limits: SandboxLimits, *, use_nproc: bool) -> list[tuple[str, int, int]]:
    mib = 1 << 20
    cpu = limits.cpu_seconds
    # The soft CPU limit sends SIGXCPU; the hard one, a second later, SIGKILL.
    out = [("RLIMIT_CORE", 0, 0), ("RLIMIT_CPU", cpu, cpu + 1)]
    if limits.memory_mb is not None:
        out.append(("RLIMIT_AS", limits.memory_mb * mib, limits.memory_mb * mib))
    if limits.max_file_size_mb is not None:
        size = limits.max_file_size_mb * mib
        out.append(("RLIMIT_FSIZE", size, size))
    nproc = nproc_limit(limits.max_processes) if use_nproc else None
    if nproc is not None:
        out.append(("RLIMIT_NPROC", nproc, nproc))
    return out


# --------------------------------------------------------------------------------------------
# Running and ending a run


class _Capped:
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


def _communicate(
    proc: subprocess.Popen[bytes], data: bytes, limits: SandboxLimits, started: float
) -> tuple[SandboxStatus | None, _Capped, _Capped]:
    """Feed stdin, collect capped output, until the run ends, a limit is hit or time is up."""
    if proc.stdin is None or proc.stdout is None or proc.stderr is None:
        raise SandboxError("the sandbox child was started without its pipes")
    out, err = _Capped(limits.max_output_bytes), _Capped(limits.max_output_bytes)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    deadline = started + limits.timeout_s
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
                return SandboxStatus.TIMEOUT, out, err
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
                    return SandboxStatus.OUTPUT_LIMIT, out, err
            if exited_at is None and _has_exited(proc):
                exited_at = time.monotonic()
    if not _wait_exit(proc, deadline):
        return SandboxStatus.TIMEOUT, out, err
    return None, out, err


def _feed(fd: int, pending: memoryview) -> memoryview:
    try:
        written = os.write(fd, pending[:_READ_CHUNK])
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):
        return pending[:0]  # the program closed its stdin: the rest is not wanted
    return pending[written:]


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child ended, without reaping it: its pid must stay taken until its group dies."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exit(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    delay = 0.0005
    while not _has_exited(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, _POLL_S)
    return True


def _kill_everything(proc: subprocess.Popen[bytes], cgroup: Path | None) -> None:
    """Kill the run's process group (and cgroup), reap the child and close the pipes."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Processes forked while the group was being killed, or after the leader died.
    for _ in range(100):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            break
        time.sleep(0.001)
    if cgroup is not None:
        kill_members(cgroup)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _result(
    returncode: int,
    stopped: SandboxStatus | None,
    out: _Capped,
    err: _Capped,
    wall: float,
    limits: SandboxLimits,
    hit_pids_max: bool,
) -> SandboxResult:
    stderr = err.text()
    if returncode == _SETUP_EXIT and stderr.startswith(_SETUP_MARK):
        raise SandboxError(
            f"the sandbox could not apply its limits on this platform ({stderr.strip()}); set "
            "the offending SandboxLimits field to None, or run on Linux"
        )
    status, reason = _classify(returncode, stopped, stderr, limits, out, err)
    if hit_pids_max and status is not SandboxStatus.OK:
        reason += f" (the run hit its limit of {limits.max_processes} processes)"
    exit_code = returncode if returncode >= 0 and stopped is None else None
    signal_name = _signal_name(-returncode) if returncode < 0 and stopped is None else None
    return SandboxResult(
        status=status,
        reason=reason,
        stdout=out.text(),
        stderr=stderr,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        exit_code=exit_code,
        signal=signal_name,
        timed_out=status is SandboxStatus.TIMEOUT,
        wall_time_s=round(wall, 4),
    )


def _classify(
    returncode: int,
    stopped: SandboxStatus | None,
    stderr: str,
    limits: SandboxLimits,
    out: _Capped,
    err: _Capped,
) -> tuple[SandboxStatus, str]:
    if stopped is SandboxStatus.TIMEOUT:
        return stopped, f"timed out after {limits.timeout_s:g} s (wall clock)"
    if stopped is SandboxStatus.OUTPUT_LIMIT:
        stream = "stdout" if out.truncated else "stderr"
        return stopped, f"output limit: wrote more than {limits.max_output_bytes} bytes to {stream}"
    if returncode == 0:
        return SandboxStatus.OK, "ok"
    if returncode < 0:
        name = _signal_name(-returncode)
        if -returncode == getattr(signal, "SIGXCPU", None):
            return SandboxStatus.TIMEOUT, f"CPU time limit of {limits.cpu_seconds} s exceeded"
        return SandboxStatus.KILLED, f"killed by {name}"
    last = _last_line(stderr)
    if last.startswith("MemoryError"):
        return SandboxStatus.MEMORY, f"memory limit of {limits.memory_mb} MiB exceeded ({last})"
    return SandboxStatus.ERROR, f"exit code {returncode}" + (f": {last}" if last else "")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
