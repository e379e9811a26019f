"""The docs' sample errors for unknown names are what the command prints today.

A ```text block line ``$ uv run rk-agent ARGS`` followed by ``error: ... Did you mean ...`` is
run (in an empty folder: these fail before any work); the real error must start with the
sample, up to a closing ``...`` where the sample cuts it short. A new environment or reward
then shows up in the docs' samples, or this fails.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
COMMAND = re.compile(r"^\$ uv run rk-agent (?P<args>.+)$")


def samples() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines[:-1]):
            match = COMMAND.match(line)
            reply = lines[number + 1]
            if match and reply.startswith("error: ") and "Did you mean" in reply:
                found.append((f"{page.name}:{number + 1}", match["args"], reply))
    return found


SAMPLES = samples()


def test_the_docs_have_such_samples() -> None:
    assert len(SAMPLES) >= 2


@pytest.mark.parametrize(("where", "args", "sample"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_a_sample_error_is_the_real_one(tmp_path: Path, where: str, args: str, sample: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", *shlex.split(args)], capture_output=True, text=True,
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    real = out.stderr.strip()
    assert out.returncode == 2, real
    assert real.startswith(sample.removesuffix("...").rstrip()), (
        f"{where}: the command prints {real}"
    )
    assert list(tmp_path.iterdir()) == []
