"""The program a sandboxed run starts with, and the settings it applies before the user's code.

Main names:
    BOOTSTRAP: the bootstrap's source (run as ``python -I -S -c``).
    INIT: what runs before it in mode ``bwrap``: the PID namespace's init, rk-agent's own.
    python_argv: the interpreter's command line running them.
    settings: one run's settings, as the bootstrap reads them from a pipe.
    child_env: the minimal environment of a sandboxed program.
    SETUP_EXIT, SETUP_MARK: how a bootstrap that could not apply the limits says so.
    CHANNEL_FD, BWRAP_TASKS.

The bootstrap reads its settings from a pipe (``marshal``: no module to import), writes the
code to ``solution.py`` in the work dir, applies the rlimits, keeps the data channel on fd 3
and closes every other inherited descriptor, adds the run's environment variables, the
interpreter's site-packages to ``sys.path`` (the directories ``site`` adds, ``.pth`` path lines
included; ``.pth`` import lines are not run) and ``exit``/``quit`` to builtins, then runs the
code as ``__main__`` in a fresh module. Skipping ``site`` (``-S``) saves 2-3 ms a run, and
``json``/``traceback`` are not imported unless needed (5-8 ms more).

**The init** (mode ``bwrap``). The first process of the run's PID namespace holds the
namespace: when it dies, the kernel kills every process in it, and it dies when its parent
(bubblewrap's monitor, outside) dies. bubblewrap's own init is dumpable and runs as the program's
uid, so the program could open its ``/proc/1/mem`` read-write (the seccomp filter refuses
``ptrace``, not that) and rewrite it: clear its parent-death signal, and a daemon outlives the
run and its caller wherever no cgroup kills it. So bubblewrap runs the interpreter as pid 1
(``--as-pid-1``), and `INIT` makes it not dumpable (``prctl(PR_SET_DUMPABLE, 0)``: no
``/proc/1/mem``, ``/proc/1/fd`` or ``/proc/1/environ`` for a process without
``CAP_SYS_PTRACE``, which the sandbox has none of), forks the process that goes on to the
bootstrap and the program, closes every descriptor, takes no signal from inside (an init gets
only those it handles: none), reaps what is left to it, and exits with the program's status
(``128 + N`` for a signal ``N``, as bubblewrap's init does) when the program's process ends.
It holds nothing of the run: it starts before the run is handed to its launcher.
"""

from __future__ import annotations

import functools
import marshal
import site
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rk_agent.sandbox import _bwrap
from rk_agent.sandbox._process_limits import nproc_enforced, nproc_limit
from rk_agent.sandbox._types import SandboxLimits, SandboxMode

__all__ = [
    "BOOTSTRAP",
    "BWRAP_TASKS",
    "CHANNEL_FD",
    "INIT",
    "SETUP_EXIT",
    "SETUP_MARK",
    "child_env",
    "python_argv",
    "settings",
]

SETUP_EXIT = 121  # exit code of a bootstrap that could not apply the limits
SETUP_MARK = "rk-agent sandbox setup failed: "
CHANNEL_FD = 3
BWRAP_TASKS = 2  # processes of a run besides the program's: bwrap's monitor and the init
_MIB = 1 << 20

# argv: the settings fd, the data channel's fd, and a bound above every inherited fd.
# Tracebacks start at the user's code.
BOOTSTRAP = f"""\
import marshal, os, resource, sys
try:
    _fd, _channel, _bound = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    _raw = b""
    while _chunk := os.read(_fd, 1 << 16):
        _raw += _chunk
    _cfg = marshal.loads(_raw)
    with open("solution.py", "wb") as _f:
        _f.write(_cfg["code"])
    for _name, _soft, _hard in _cfg["rlimits"]:
        resource.setrlimit(getattr(resource, _name), (_soft, _hard))
    if _cfg["channel"]:
        os.dup2(_channel, {CHANNEL_FD})
    os.closerange({CHANNEL_FD + 1} if _cfg["channel"] else {CHANNEL_FD}, _bound)
    os.environ.update(_cfg["env"])
    sys.path.extend(_cfg["path"])
    import builtins, _sitebuiltins
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
except BaseException as _exc:
    sys.stderr.write({SETUP_MARK!r} + repr(_exc) + "\\n")
    sys.stderr.flush()
    os._exit({SETUP_EXIT})
_source = _cfg["code"]
del _fd, _channel, _bound, _raw, _chunk, _cfg
import gc
_main = type(sys)("__main__")
_main.__file__ = os.path.abspath("solution.py")
_main.__builtins__ = builtins
sys.modules["__main__"] = _main
sys.argv = ["solution.py"]
try:
    _code = compile(_source, "solution.py", "exec")
    del _source
    exec(_code, _main.__dict__)
except SystemExit:
    raise
except BaseException as _exc:
    if isinstance(_exc, MemoryError):
        _main.__dict__.clear()
        gc.collect()
    try:
        import traceback
        traceback.print_exception(type(_exc), _exc, _exc.__traceback__.tb_next)
    except BaseException:
        sys.stderr.write(type(_exc).__name__ + ": " + str(_exc) + "\\n")
    sys.exit(1)
"""


# argv[3]: a bound above every inherited fd. The names it leaves are deleted in the program's
# process before the bootstrap runs.
INIT = f"""\
import os, sys
try:
    import _ctypes  # not ctypes: its package costs as much again, at every run
    class _Int(_ctypes._SimpleCData):
        _type_ = "i"
    class _Call(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = _Int
    class _Libc:
        _handle = _ctypes.dlopen(None)
    _prctl = _Call(("prctl", _Libc))
    if _prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    _program = os.fork()
except BaseException as _exc:
    sys.stderr.write({SETUP_MARK!r} + "init: " + repr(_exc) + "\\n")
    sys.stderr.flush()
    os._exit({SETUP_EXIT})
if _program:
    import _signal
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    os.closerange(0, int(sys.argv[3]))
    while True:
        _pid, _status = os.wait()
        if _pid == _program:
            _code = os.waitstatus_to_exitcode(_status)
            os._exit(_code if _code >= 0 else 128 - _code)
_prctl(4, 1, 0, 0, 0)  # the program's own process is as dumpable as any other
del _ctypes, _Int, _Call, _Libc, _prctl, _program
"""


def python_argv(settings_fd: int, channel_fd: int, fd_bound: int, *, init: bool) -> list[str]:
    """The interpreter running `BOOTSTRAP` (after `INIT` when ``init``: mode ``bwrap``):
    isolated (``-I``), no ``site`` (``-S``), no ``.pyc`` writes, UTF-8 mode."""
    source = INIT + BOOTSTRAP if init else BOOTSTRAP
    return [sys.executable, "-I", "-S", "-B", "-X", "utf8", "-c", source,
            str(settings_fd), str(channel_fd), str(fd_bound)]  # fmt: skip


def settings(
    code: str,
    limits: SandboxLimits,
    mode: SandboxMode,
    *,
    data_channel: bool,
    env: Mapping[str, str] | None,
    pids_cgroup: bool,
) -> bytes:
    """One run's settings, as the bootstrap reads them (``marshal``).

    Args:
        code: the program.
        limits: its limits (the rlimits are applied inside).
        mode: the sandbox mode (how ``max_processes`` maps to ``RLIMIT_NPROC``).
        data_channel: keep the data channel open on fd 3.
        env: the run's own environment variables, on top of `child_env`.
        pids_cgroup: a ``pids`` cgroup caps the run's tasks (no ``RLIMIT_NPROC`` needed).
    """
    return marshal.dumps(
        {
            "code": code.encode("utf-8", errors="surrogatepass"),
            "rlimits": _rlimits(limits, mode, pids_cgroup=pids_cgroup),
            "channel": data_channel,
            "env": dict(env or {}),
            "path": list(_site_paths(mode)),
        }
    )


def child_env(home: str) -> dict[str, str]:
    """The environment a sandboxed interpreter starts with (the run's own variables are added
    by the bootstrap)."""
    return {
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
        nproc = limits.max_processes + BWRAP_TASKS if nproc_enforced() else None
    else:
        nproc = nproc_limit(limits.max_processes)
    if nproc is not None:
        out.append(("RLIMIT_NPROC", nproc, nproc))
    return out


@functools.cache
def _site_paths(mode: SandboxMode) -> tuple[str, ...]:
    """What ``site`` adds to ``sys.path`` under ``-I``: the site-packages directories and the
    directories named by their ``.pth`` files (whose ``import`` lines are not run). Mode
    ``bwrap``: only those it can see; not even the names of the others (a project's, from an
    editable install's ``.pth`` file)."""
    found: list[str] = []
    for directory in site.getsitepackages():
        if not Path(directory).is_dir() or directory in found:
            continue
        found.append(directory)
        for pth in sorted(Path(directory).glob("*.pth")):
            try:
                lines = pth.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                path = str((Path(directory) / line).resolve())
                if Path(path).is_dir() and path not in found:
                    found.append(path)
    if mode is SandboxMode.BWRAP:
        return tuple(path for path in found if _bwrap.visible(path))
    return tuple(found)
