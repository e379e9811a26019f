"""glibc malloc settings: freed large blocks go back to the OS (measured in real processes)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# 300 blocks of 1 MB, allocated after a large free (which raises glibc's dynamic mmap threshold,
# so they come from the heap) and freed below a block that keeps the heap's top in use: how many
# MB of them does the process keep?
PROGRAM = """
import sys
from rk_agent.trainers.allocator import return_freed_memory
from rk_agent.trainers.memory import resident_bytes
applied = return_freed_memory() if sys.argv[1] == "tuned" else None
warm = bytearray(4 * 2**20); del warm
blocks = [bytearray(2**20) for _ in range(300)]
pin = bytearray(2**20)
before = resident_bytes()
del blocks
print(applied, round((resident_bytes() - before) / 2**20 + 300))
"""


def _kept(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True,
                         check=True, env={**clean, **env}).stdout.split()  # fmt: skip
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_blocks_go_back_to_the_os_once_tuned() -> None:
    applied, kept = _kept("plain")
    assert applied == "None" and kept >= 250  # glibc keeps them on its heap
    applied, kept = _kept("tuned")
    assert applied == "True" and kept <= 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_users_own_malloc_settings_win() -> None:
    applied, _ = _kept("tuned", MALLOC_ARENA_MAX="4")
    assert applied == "False"
