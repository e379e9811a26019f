"""How the sandbox caps the number of processes a run may have (fork bombs).

Main names:
    process_cgroup: a fresh ``pids`` cgroup for one run, its members killed and it removed after.
    nproc_limit: the ``RLIMIT_NPROC`` value that allows a run ``n`` more tasks, where enforced.
    process_limit_backend: which of the two works on this machine.

``RLIMIT_NPROC`` is not enforced for root (in the first user namespace), so where this process
may create cgroups (root on a cgroup-v1 ``pids`` hierarchy mounted at ``/sys/fs/cgroup/pids``, or
a delegated cgroup-v2 subtree with the ``pids`` controller) each run gets its own ``pids`` cgroup
with ``pids.max``. Its members, including processes that left the run's process group with
``setsid()``, are killed when the run ends. Elsewhere ``RLIMIT_NPROC`` is used: it counts every
task of the user, so the limit is the user's current task count plus the run's allowance.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

__all__ = ["kill_members", "nproc_limit", "pids_max_hit", "process_cgroup", "process_limit_backend"]

logger = logging.getLogger("rk_agent.rewards.sandbox")

_CGROUP_PREFIX = "rk-sandbox-"
_runs = itertools.count()


def process_limit_backend() -> Literal["cgroup", "rlimit", "none"]:
    """How ``SandboxLimits.max_processes`` is enforced on this machine.

    ``"cgroup"``: a ``pids`` cgroup per run (the strongest: also catches ``setsid()`` escapes).
    ``"rlimit"``: ``RLIMIT_NPROC``. ``"none"``: neither works (root without a writable
    ``pids`` cgroup); only the process-group kill and the time limits remain.

    Example:
        >>> process_limit_backend() in ("cgroup", "rlimit", "none")
        True
    """
    with process_cgroup(1) as cgroup:
        if cgroup is not None:
            return "cgroup"
    return "rlimit" if nproc_limit(1) is not None else "none"


def nproc_limit(max_processes: int | None) -> int | None:
    """The ``RLIMIT_NPROC`` allowing ``max_processes`` more tasks, or ``None`` where useless."""
    if max_processes is None or not hasattr(os, "geteuid") or not _nproc_enforced():
        return None
    existing = _count_tasks(os.getuid())
    return None if existing is None else existing + max_processes


def _nproc_enforced() -> bool:
    """Whether the kernel enforces RLIMIT_NPROC for us (not for root in the first namespace)."""
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
# The pids cgroup of a run

_cgroup_lock = threading.Lock()
_cgroup_parent: Path | None = None
_cgroup_checked = False


def _find_cgroup_parent() -> Path | None:
    """The writable ``pids`` cgroup directory this process is in, if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
        elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/")
            try:
                if "pids" not in (candidate / "cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
        else:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    return None


def _cgroup_base() -> Path | None:
    global _cgroup_parent, _cgroup_checked
    with _cgroup_lock:
        if not _cgroup_checked:
            _cgroup_parent = _find_cgroup_parent()
            _cgroup_checked = True
            if _cgroup_parent is not None:
                _remove_stale_cgroups(_cgroup_parent)
        return _cgroup_parent


def _remove_stale_cgroups(parent: Path) -> None:
    """Remove empty cgroups left behind by sandboxing processes that died."""
    for child in parent.glob(f"{_CGROUP_PREFIX}*"):
        owner = child.name[len(_CGROUP_PREFIX) :].split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                child.rmdir()


@contextlib.contextmanager
def process_cgroup(max_processes: int | None) -> Iterator[Path | None]:
    """A fresh ``pids`` cgroup limited to ``max_processes`` tasks, removed on exit."""
    global _cgroup_parent
    base = _cgroup_base() if max_processes is not None else None
    if base is None:
        yield None
        return
    cgroup = base / f"{_CGROUP_PREFIX}{os.getpid()}-{next(_runs)}"
    try:
        cgroup.mkdir()
        (cgroup / "pids.max").write_text(str(max_processes))
    except OSError as exc:
        logger.info("no pids cgroup for the sandbox (%s); using RLIMIT_NPROC", exc)
        with contextlib.suppress(OSError):
            cgroup.rmdir()
        _cgroup_parent = None  # don't try again
        yield None
        return
    try:
        yield cgroup
    finally:
        _remove_cgroup(cgroup)


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
        kill_members(cgroup)
        time.sleep(0.005)


def kill_members(cgroup: Path) -> None:
    """SIGKILL every process in the cgroup."""
    try:
        pids = (cgroup / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGKILL)


def pids_max_hit(cgroup: Path) -> bool:
    """Whether a fork in the cgroup was refused because of ``pids.max``."""
    try:
        events = (cgroup / "pids.events").read_text().split()
    except OSError:
        return False
    return len(events) >= 2 and events[0] == "max" and events[1] != "0"
