"""The peak resident memory of this process itself, for benchmarks that measure a child.

``getrusage(RUSAGE_SELF).ru_maxrss`` of a process started by another is at least that
process's peak when it started the child: Linux carries the high-water mark across ``exec``. A
benchmark that played a model run in its own process (15 GB) then saw its child, the command
under test, report 15 GB. ``VmHWM`` in ``/proc/self/status`` is the peak of this process's own
memory map, which ``exec`` starts afresh; elsewhere ``ru_maxrss`` is what there is.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MB."""
    status = Path("/proc/self/status")
    if sys.platform == "linux" and status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Start this process's peak resident memory afresh (Linux: ``5`` to ``clear_refs``), so
    that `peak_rss_mb` gives the peak of what runs next; False where it cannot be reset."""
    clear_refs = Path("/proc/self/clear_refs")
    try:
        clear_refs.write_text("5")
    except OSError:
        return False
    return True
