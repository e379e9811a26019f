"""The sandbox's vocabulary: how code is contained, what bounds a run, and how a run ended.

Main names:
    SandboxMode, sandbox_mode: ``"bwrap"`` (isolated, the default) or ``"process"`` (opt-in).
    SandboxLimits: wall clock, CPU, memory (per process and per run), output, processes, open
        files, file size and work-dir size.
    SandboxStatus, SandboxResult: how a run ended and what it did.

All of them are re-exported by `rk_agent.sandbox`, where they are documented in use.
"""

from __future__ import annotations

import enum
import math

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.errors import ConfigError, did_you_mean

__all__ = ["SandboxLimits", "SandboxMode", "SandboxResult", "SandboxStatus", "sandbox_mode"]

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
        >>> from rk_agent.sandbox import run_python
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
