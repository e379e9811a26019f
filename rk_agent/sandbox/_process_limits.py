"""How the sandbox bounds a whole run: its number of processes (fork bombs) and its memory.

Main names:
    new_run_cgroup: fresh ``pids`` and ``memory`` cgroups for one run.
    RunCgroup: those cgroups: the files a process joins them by, their limits, what they
        recorded, and their removal (members killed first).
    cgroup_controllers: which of ``pids`` and ``memory`` this process may create cgroups for.
    nproc_limit: the ``RLIMIT_NPROC`` value that allows a run ``n`` more tasks, where enforced.
    process_limit_backend: how ``max_processes`` is enforced here.

Where this process may create cgroups (root on cgroup-v1 hierarchies mounted at
``/sys/fs/cgroup/<controller>``, or a delegated cgroup-v2 subtree with the controller enabled)
each run gets its own cgroup per controller: ``pids.max`` bounds its tasks, and
``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1) bounds all its memory: processes, the
pages of its private work directory (a tmpfs) and the kernel's inodes for its files. Members,
including processes that left the run's session with ``setsid()``, are killed when the run ends.

Elsewhere ``RLIMIT_NPROC`` caps the tasks (enforced for non-root users only), and the memory of
a run is bounded by the per-process limit times the process cap (see
`rk_agent.sandbox.SandboxLimits.memory_bound_mb`).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "RunCgroup",
    "cgroup_controllers",
    "new_run_cgroup",
    "nproc_limit",
    "process_limit_backend",
]

logger = logging.getLogger("rk_agent.sandbox")

Controller = Literal["pids", "memory"]
_CGROUP_PREFIX = "rk-sandbox-"
_ROOT = Path("/sys/fs/cgroup")
_runs = itertools.count()


def process_limit_backend() -> Literal["cgroup", "rlimit", "none"]:
    """How ``SandboxLimits.max_processes`` is enforced on this machine.

    ``"cgroup"``: a ``pids`` cgroup per run (the strongest: also catches ``setsid()`` escapes).
    ``"rlimit"``: ``RLIMIT_NPROC``. ``"none"``: neither works (root without a writable
    ``pids`` cgroup); only the kill at the end of the run and the time limits remain.

    Example:
        >>> process_limit_backend() in ("cgroup", "rlimit", "none")
        True
    """
    if "pids" in cgroup_controllers():
        return "cgroup"
    return "rlimit" if nproc_enforced() else "none"


def nproc_limit(max_processes: int | None) -> int | None:
    """The ``RLIMIT_NPROC`` allowing ``max_processes`` more tasks, or ``None`` where useless."""
    if max_processes is None or not hasattr(os, "geteuid") or not nproc_enforced():
        return None
    existing = _count_tasks(os.getuid())
    return None if existing is None else existing + max_processes


def nproc_enforced() -> bool:
    """Whether the kernel enforces RLIMIT_NPROC for us (not for root in the first namespace)."""
    if not hasattr(os, "geteuid"):
        return False
    if os.geteuid() != 0:
        return True
    try:
        first = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return False
    return first[:2] != ["0", "0"]


def _count_tasks(uid: int) -> int | None:
    """The number of tasks (threads included) owned by ``uid``, or ``None`` without /proc."""
    count = 0
    try:
        entries = os.scandir("/proc")
    except OSError:
        return None
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid == uid:
                    count += sum(1 for _ in os.scandir(f"/proc/{entry.name}/task"))
            except OSError:
                continue  # the process ended meanwhile
    return count


# --------------------------------------------------------------------------------------------
# Finding where we may create cgroups

_lock = threading.Lock()
_parents: dict[Controller, Path] | None = None


def cgroup_controllers() -> frozenset[Controller]:
    """The controllers this process can give each run a cgroup of (``pids``, ``memory``).

    Example:
        >>> cgroup_controllers() <= {"pids", "memory"}
        True
    """
    return frozenset(_cgroup_parents())


def _cgroup_parents() -> dict[Controller, Path]:
    global _parents
    with _lock:
        if _parents is None:
            _parents = {}
            for controller in ("pids", "memory"):
                parent = _find_parent(controller)
                if parent is not None and _usable(parent, controller):
                    _parents[controller] = parent
        return _parents


def _find_parent(controller: Controller) -> Path | None:
    """The writable cgroup directory of ``controller`` this process is in, if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            candidate = _ROOT / controller / path.lstrip("/")
        elif controllers == "" and (_ROOT / "cgroup.controllers").exists():
            candidate = _ROOT / path.lstrip("/")
            try:
                if controller not in (candidate / "cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
        else:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    return None


def _usable(parent: Path, controller: Controller) -> bool:
    """Remove stale cgroups of dead sandboxing processes; check that a new one can be made."""
    for child in parent.glob(f"{_CGROUP_PREFIX}*"):
        owner = child.name[len(_CGROUP_PREFIX) :].split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                child.rmdir()
    probe = parent / f"{_CGROUP_PREFIX}{os.getpid()}-probe-{next(_runs)}"
    try:
        probe.mkdir()
        _write_limit(probe, controller, 1 << 30 if controller == "memory" else 1)
    except OSError as exc:
        logger.info("no %s cgroup for the sandbox (%s)", controller, exc)
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return True


def _write_limit(cgroup: Path, controller: Controller, value: int) -> None:
    if controller == "pids":
        (cgroup / "pids.max").write_text(str(value))
    elif (cgroup / "memory.max").exists():  # v2
        (cgroup / "memory.max").write_text(str(value))
        with contextlib.suppress(OSError):
            (cgroup / "memory.swap.max").write_text("0")
    else:  # v1
        (cgroup / "memory.limit_in_bytes").write_text(str(value))
        with contextlib.suppress(OSError):  # absent without swap accounting
            (cgroup / "memory.memsw.limit_in_bytes").write_text(str(value))


# --------------------------------------------------------------------------------------------
# The cgroups of one run


@dataclass(frozen=True)
class RunCgroup:
    """The cgroups of one run (one directory per controller; one in all on cgroup v2).

    Attributes:
        dirs: controller -> its cgroup directory.
    """

    dirs: dict[Controller, Path]

    @property
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a process joins the run by writing its pid to."""
        return sorted({d / "cgroup.procs" for d in self.dirs.values()})

    def set_limits(self, max_tasks: int | None, memory_bytes: int | None) -> None:
        """Bound the run's tasks and memory, once, on fresh cgroups (``None``: no bound).

        Raises:
            OSError: a limit could not be written.
        """
        for controller, directory in self.dirs.items():
            limit = max_tasks if controller == "pids" else memory_bytes
            if limit is not None:
                _write_limit(directory, controller, limit)

    def kill(self) -> None:
        """SIGKILL every process in the run's cgroups."""
        for directory in set(self.dirs.values()):
            _kill_members(directory)

    def remove(self) -> None:
        """Kill what is left in the cgroups and remove them."""
        for directory in set(self.dirs.values()):
            _remove_cgroup(directory)

    def pids_max_hit(self) -> bool:
        """Whether a fork in the run was refused because of ``pids.max``."""
        if "pids" not in self.dirs:
            return False
        try:
            events = (self.dirs["pids"] / "pids.events").read_text().split()
        except OSError:
            return False
        return len(events) >= 2 and events[0] == "max" and events[1] != "0"

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run for going over its memory limit."""
        if "memory" not in self.dirs:
            return False
        directory = self.dirs["memory"]
        for name in ("memory.events", "memory.oom_control"):
            try:
                fields = (directory / name).read_text().split()
            except OSError:
                continue
            counts = dict(zip(fields[::2], fields[1::2], strict=False))
            return counts.get("oom_kill", "0") != "0"
        return False


def new_run_cgroup() -> RunCgroup | None:
    """Fresh, empty cgroups for one run, one per controller available here (limits unset:
    see `RunCgroup.set_limits`); ``None`` when there are none. `RunCgroup.remove` removes them.
    """
    dirs: dict[Controller, Path] = {}
    name = f"{_CGROUP_PREFIX}{os.getpid()}-{next(_runs)}"
    try:
        for controller, parent in _cgroup_parents().items():
            directory = parent / name
            if directory not in dirs.values():
                directory.mkdir()
            dirs[controller] = directory
    except OSError as exc:
        logger.warning("could not set up the sandbox's cgroups (%s); using rlimits only", exc)
        RunCgroup(dirs).remove()
        return None
    return RunCgroup(dirs) if dirs else None


def _remove_cgroup(cgroup: Path) -> None:
    deadline = time.monotonic() + 5.0
    while True:
        try:
            cgroup.rmdir()
            return
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                logger.warning("could not remove sandbox cgroup %s: %s", cgroup, exc)
                return
        _kill_members(cgroup)
        time.sleep(0.005)


def _kill_members(cgroup: Path) -> None:
    try:
        pids = (cgroup / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGKILL)
