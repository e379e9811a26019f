"""Shared parts of the self-hosting tests: a reward file, and recording stand-ins for CLIs.

A stand-in is a small executable put first on ``PATH`` under the real tool's name (``gcloud``,
``sam``, ``docker``). It records its argv and working directory as one JSON line and exits 0,
which is all the documented contract of these CLIs that rk-agent relies on: it runs them with
an argv list and reads their exit status. The clouds themselves cannot be reached here.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

REWARDS = '''
from rk_agent import reward_function


@reward_function
def exact(response: str, ground_truth: str) -> float:
    """1.0 when the reply equals the ground truth."""
    return float(response.strip() == ground_truth)
'''

STAND_IN = """#!{python}
import json, os, sys
with open({record!r}, "a", encoding="utf-8") as out:
    out.write(json.dumps({{"argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]],
                          "cwd": os.getcwd()}}) + "\\n")
sys.exit(int(os.environ.get("STAND_IN_EXIT", "0")))
"""


@pytest.fixture
def rewards_file(tmp_path: Path) -> Path:
    path = tmp_path / "project" / "my_rewards.py"
    path.parent.mkdir()
    path.write_text(REWARDS)
    return path


class StandIns:
    """Recording stand-ins in one folder; ``env`` puts them first on PATH."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.record = folder / "calls.jsonl"
        folder.mkdir(exist_ok=True)

    def add(self, name: str) -> Path:
        path = self.folder / name
        path.write_text(STAND_IN.format(python=sys.executable, record=str(self.record)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    def calls(self) -> list[dict[str, object]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def env(self, **extra: str) -> dict[str, str]:
        """This environment with the stand-ins first on PATH, no server key unless in ``extra``."""
        env = {k: v for k, v in os.environ.items() if k != "RK_AGENT_SERVER_API_KEY"}
        return {**env, "PATH": f"{self.folder}{os.pathsep}{os.environ['PATH']}", **extra}


@pytest.fixture
def stand_ins(tmp_path: Path) -> StandIns:
    return StandIns(tmp_path / "bin")
