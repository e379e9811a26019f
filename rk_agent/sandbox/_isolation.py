"""What the code sandbox can do on this machine, checked for real: ``rk-agent doctor``'s report.

Main names:
    isolation_report: run a trivial program under bubblewrap and say what works and what not.
    IsolationReport: the answer (a wire type: ``rk-agent doctor --json`` prints it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Literal

from pydantic import BaseModel

from rk_agent.errors import SandboxError
from rk_agent.sandbox import _bwrap
from rk_agent.sandbox._process_limits import cgroup_controllers, nproc_enforced

__all__ = ["IsolationReport", "isolation_report"]


class IsolationReport(BaseModel):
    """Whether untrusted code can run isolated here, and how a run's resources are bounded.

    Attributes:
        isolated: mode ``"bwrap"`` works: code runs in its own namespaces.
        problem: when it does not, the cause and the fix; else ``None``.
        platform: ``sys.platform``.
        uid: the user rk-agent runs as.
        bwrap: the bwrap binary's path, when found.
        bwrap_version: its ``--version``.
        cgroups: the controllers each run gets a cgroup of (``pids``, ``memory``).
        process_limit: how ``max_processes`` is enforced in mode ``bwrap``: ``"cgroup"``,
            ``"rlimit"`` or ``"none"``.
        run_memory: how a run's total memory is bounded: ``"cgroup"`` or ``"per-process"``
            (``memory_mb`` times ``max_processes``, plus the work dir).
    """

    isolated: bool
    problem: str | None = None
    platform: str
    uid: int
    bwrap: str | None = None
    bwrap_version: str | None = None
    cgroups: list[str]
    process_limit: Literal["cgroup", "rlimit", "none"]
    run_memory: Literal["cgroup", "per-process"]

    def lines(self) -> list[str]:
        """The report as short lines for a terminal."""
        head = "isolation: works (mode 'bwrap')" if self.isolated else "isolation: NOT available"
        out = [head]
        if self.problem:
            out.append(f"  problem: {self.problem}")
        out.append(f"  platform: {self.platform}, uid {self.uid}")
        out.append(f"  bwrap: {self.bwrap or 'not found'} ({self.bwrap_version or 'no version'})")
        out.append(f"  per-run cgroups: {', '.join(self.cgroups) or 'none'}")
        out.append(f"  process cap: {self.process_limit}")
        memory = (
            "a memory cgroup per run (processes and work dir together)"
            if self.run_memory == "cgroup"
            else "per process only: memory_mb x max_processes, plus the work dir"
        )
        out.append(f"  run memory bound: {memory}")
        return out


def isolation_report() -> IsolationReport:
    """Check, with a real run, whether isolation works here, and how runs are bounded.

    Example:
        >>> isolation_report().platform == sys.platform
        True
    """
    problem = _bwrap.probe_failure()
    path: str | None = None
    version: str | None = None
    try:
        path = str(_bwrap.bwrap_path())
        done = subprocess.run([path, "--version"], capture_output=True, env={}, timeout=10)
        version = done.stdout.decode(errors="replace").strip() or None
    except (SandboxError, OSError, subprocess.TimeoutExpired):
        pass
    linux = sys.platform.startswith("linux")
    controllers: list[str] = sorted(str(c) for c in cgroup_controllers()) if linux else []
    if "pids" in controllers:
        nproc: Literal["cgroup", "rlimit", "none"] = "cgroup"
    else:
        nproc = "rlimit" if nproc_enforced() else "none"
    return IsolationReport(
        isolated=problem is None,
        problem=problem,
        platform=sys.platform,
        uid=os.getuid() if hasattr(os, "getuid") else -1,
        bwrap=path,
        bwrap_version=version,
        cgroups=controllers,
        process_limit=nproc,
        run_memory="cgroup" if "memory" in controllers else "per-process",
    )
