"""Launchers made ready ahead of runs: they hold nothing of a run, serve one run each, and
die with the process that made them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rk_agent.sandbox import SandboxMode, SandboxStatus, run_python
from rk_agent.sandbox._launch import spare_pids
from rk_agent.sandbox._process_limits import cgroup_controllers
from tests.sandbox.support import alive, marker, needs_bwrap

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux"),
    needs_bwrap,
]

# Runs both modes, prints its spares and the cgroups it made, then ends as argv[1] says.
SCRIPT = """
import json, os, signal, sys
from pathlib import Path
from rk_agent.sandbox._launch import spare_pids
from rk_agent.sandbox import run_python
for mode in ("bwrap", "process"):
    assert run_python("print(1)", sandbox=mode).stdout == "1\\n"
cgroups = [str(p) for p in Path("/sys/fs/cgroup").rglob(f"rk-sandbox-{os.getpid()}-*")]
print(json.dumps({"spares": sorted(spare_pids()), "cgroups": cgroups}), flush=True)
if sys.argv[1] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


@pytest.mark.parametrize("end", ["exits", "killed"])
def test_spares_do_not_outlive_the_process_that_made_them(end: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, end], capture_output=True, text=True, timeout=60
    )
    assert done.stderr == "" or end == "killed", done.stderr
    report = json.loads(done.stdout)
    assert report["spares"], "a run leaves a launcher ready for the next one"
    assert _gone_within(report["spares"], 5.0) == []
    if end == "exits" and cgroup_controllers():
        assert report["cgroups"], "the runs' launchers are in cgroups of their own"
        assert [c for c in report["cgroups"] if Path(c).exists()] == []


def test_a_spare_holds_nothing_of_any_run() -> None:
    token = marker()
    for mode in SandboxMode:
        result = run_python(f"print('{token}')", env={"MARK": token}, stdin=token, sandbox=mode)
        assert result.stdout == f"{token}\n"
    spares = spare_pids()
    assert spares
    for pid in spares:
        seen = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
        assert token.encode() not in seen


@pytest.mark.parametrize("mode", list(SandboxMode))
def test_each_launcher_serves_one_run(mode: SandboxMode) -> None:
    """Runs in a row get fresh processes and work dirs; a used one is gone."""
    code = "import os\nprint(os.getpid(), os.path.exists('mine'))\nopen('mine', 'w').write('x')"
    first, second = (run_python(code, sandbox=mode) for _ in range(2))
    assert first.status is SandboxStatus.OK and second.status is SandboxStatus.OK
    assert first.stdout.split()[1] == second.stdout.split()[1] == "False"
    if mode is SandboxMode.PROCESS:  # host pids (in mode bwrap, pids of the run's namespace)
        assert first.stdout.split()[0] != second.stdout.split()[0]
        assert not alive(int(first.stdout.split()[0]))
