"""Give memory that training frees back to the OS: glibc malloc settings for long runs.

A training step allocates and frees gigabytes of tensors (generation's KV caches, then each
micro-batch's activations). PyTorch's CPU tensors come from ``malloc``, and glibc's ``malloc``
keeps much of what is freed: after the first large frees it raises its mmap threshold (up to
32 MB), so later large tensors are carved from the heap, whose free space it rarely returns;
and every thread that allocates (the generation worker, PyTorch's) gets an arena of its own.
Measured on the README's smoke run, the training process then sat at 3.4 GB between steps
instead of 2.4 GB, and its peak was higher by as much.

`return_freed_memory` fixes the threshold (allocations of 256 KB and more are mapped on their
own and unmapped when freed), trims the heap when 256 KB are free at its top, and caps the
arenas at two. It changes where memory comes from, not what is computed. It does nothing off
Linux/glibc, or when the user set glibc's own variables (``MALLOC_ARENA_MAX``,
``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``): theirs win.

Main names: `return_freed_memory`.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["return_freed_memory"]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_USER_SETTINGS = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def return_freed_memory(threshold_bytes: int = 256 * 1024, arenas: int = 2) -> bool:
    """Set glibc's malloc to give large freed blocks back to the OS (see the module docstring).

    Call it early (before training starts; best before threads allocate): it applies to the
    allocations made after it. Calling it again is harmless.

    Args:
        threshold_bytes: blocks this large or larger are mapped and unmapped on their own, and
            the heap is trimmed once this much is free at its top.
        arenas: the most malloc arenas (per-thread heaps).

    Returns:
        Whether the settings were applied (``False`` off glibc or when the user set them).
    """
    if not sys.platform.startswith("linux") or any(v in os.environ for v in _USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = [
        mallopt(_M_MMAP_THRESHOLD, threshold_bytes),
        mallopt(_M_TRIM_THRESHOLD, threshold_bytes),
        mallopt(_M_ARENA_MAX, arenas),
    ]
    return all(result == 1 for result in applied)
