"""The training process's memory: resident now, its peak, and the machine's.

``rk-agent train`` keeps these figures in the run's record (``run.json``:
`rk_agent.runs.run_record`) after every optimizer step and adds them to every log line
(`rk_agent.trainers.callbacks`), so a run the OS killed for memory can be told from one killed
otherwise (`rk_agent.trainers.previous_run`).

Main names: `resident_bytes`, `peak_resident_bytes`, `machine_memory_bytes`, `memory_figures`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from pathlib import Path

__all__ = ["machine_memory_bytes", "memory_figures", "peak_resident_bytes", "resident_bytes"]


def resident_bytes() -> int | None:
    """This process's resident memory now, in bytes (``None`` where it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path("/proc/self/statm").read_text().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    return None


def peak_resident_bytes() -> int:
    """This process's peak resident memory so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = int(peak) if sys.platform == "darwin" else int(peak) * 1024  # Linux: KiB
    return max(peak, resident_bytes() or 0)  # the kernel updates its figure lazily


def machine_memory_bytes() -> int | None:
    """The machine's physical memory in bytes (``None`` where it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return None


def memory_figures() -> dict[str, int | None]:
    """The record's memory fields now: ``rss_bytes`` and ``peak_rss_bytes``
    (`rk_agent.runs.run_record.RunRecord`)."""
    return {"rss_bytes": resident_bytes(), "peak_rss_bytes": peak_resident_bytes()}
