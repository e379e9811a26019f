"""Installed size of a ``deploy --target docker`` context for a reward that imports nothing heavy.

The context (`rk_agent.selfhost.docker.docker_context`) is written to a temporary folder, and
its ``requirements.txt`` installed into a fresh virtual environment with the image's own
command (``uv pip install -r requirements.txt --overrides overrides.txt``; files copied, not
linked from uv's cache, as in an image). The figure is the size of the venv's files beside the
interpreter (the ``python:3.11-slim`` base the image starts from is not counted), then the
largest packages. ``--offline`` installs from uv's cache only. With ``--extra local``, the
same context with ``rk-agent[local]`` (the local model: torch), for comparison.

Run: uv run python benchmarks/bench_install_size.py [--offline] [--extra local]
Target: under 400 MB (issue 40 item 1; measured, not asserted).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from figures import figure

from rk_agent.selfhost.docker import docker_context

REWARD = '''
from rk_agent import EvaluateResult, reward_function


@reward_function
def exact(response: str, ground_truth: str) -> EvaluateResult:
    """1.0 when the reply ends with the ground truth."""
    ok = response.strip().endswith(ground_truth)
    return EvaluateResult(score=float(ok), reason="matches" if ok else "differs")
'''
TARGET_MB = 400.0


def install_context(folder: Path, venv: Path, *, offline: bool, extra: str | None) -> None:
    """Install the context's requirements into a fresh venv, as its Dockerfile does."""
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    requirements = folder / "requirements.txt"
    if extra:  # the same wheel with an extra: `./wheels/x.whl[local]`
        lines = requirements.read_text().splitlines()
        requirements.write_text("".join(f"{line}[{extra}]\n" for line in lines))
    python = str(venv / "bin" / "python")
    command = ["uv", "pip", "install", "-q", "--python", python, "--link-mode", "copy",
               "-r", "requirements.txt", "--overrides", "overrides.txt"]  # fmt: skip
    if offline:
        command.append("--offline")
    subprocess.run(command, cwd=folder, check=True)


def sizes(venv: Path) -> tuple[int, Counter[str]]:
    """Total bytes of the venv's files (links not followed), and bytes per top-level entry of
    site-packages (a package, its ``.libs`` folder, its ``.dist-info``)."""
    total = 0
    per: Counter[str] = Counter()
    site = next((venv / "lib").glob("python3*/site-packages"))
    for root, _, files in os.walk(venv):
        for name in files:
            path = Path(root) / name
            if path.is_symlink():
                continue
            size = path.stat().st_size
            total += size
            if site in path.parents:
                per[path.relative_to(site).parts[0]] += size
    return total, per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="install from uv's cache only")
    parser.add_argument("--extra", help="install rk-agent with this extra (e.g. local)")
    parser.add_argument("--top", type=int, default=12, help="largest packages to list")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rk-bench-install-") as tmp:
        base = Path(tmp)
        (base / "project").mkdir()
        reward_file = base / "project" / "my_rewards.py"
        reward_file.write_text(REWARD)
        context = docker_context(f"{reward_file}::exact")
        folder = context.write(base / "ctx")
        print(f"context: {', '.join(context.names)}")
        print(f"requirements.txt: {context.files['requirements.txt'].strip()}")
        install_context(folder, base / "venv", offline=args.offline, extra=args.extra)
        total, per = sizes(base / "venv")
    mb = total / 1e6
    label = f"rk-agent[{args.extra}]" if args.extra else "rk-agent (core)"
    print(f"\ninstalled size of a docker context ({label}): {mb:.0f} MB (target < 400 MB)")
    print(f"largest of {len(per)} entries in site-packages:")
    for name, size in per.most_common(args.top):
        print(f"  {size / 1e6:8.1f} MB  {name}")
    if not args.extra:
        figure("docker context installed size", round(mb, 1), "MB", "< 400 MB", mb < TARGET_MB)


if __name__ == "__main__":
    main()
