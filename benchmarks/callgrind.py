"""Counting a process's instructions under valgrind's callgrind, for the ``*_instructions``
benchmarks: a cost that other load on the machine hardly moves.

The counted process starts under `prefix` with counting off; `switch` turns it on and off
around what is measured (``callgrind_control -i``), and `collected` reads the count from the
log once the process has ended. Only user space counts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path


def require() -> None:
    """Exit with a clear line when valgrind is not installed."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not on PATH (apt-get install valgrind): nothing to count")


def prefix(folder: str | Path) -> tuple[list[str], Path]:
    """The command prefix that runs a process under callgrind with counting off, writing its
    output in ``folder``; and the log file to read the count from."""
    log = Path(folder) / "valgrind.log"
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--log-file={log}",
        f"--callgrind-out-file={folder}/callgrind.out",
    ]  # fmt: skip
    return command, log


def switch(pid: int, state: str) -> None:
    """Turn counting ``"on"`` or ``"off"`` in the process ``pid``."""
    subprocess.run(["callgrind_control", "-i", state, str(pid)], check=True, capture_output=True)


def collected(log: Path) -> int | None:
    """The instructions the ended process counted, from its log (``None``: none reported)."""
    found = re.findall(r"Collected : (\d+)", log.read_text())
    return int(found[-1]) if found else None
