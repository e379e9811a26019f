"""Memory and time of the README's training smoke run: ``rk-agent train grpo --env tools``.

Runs the command exactly as the README gives it (embedded SmolLM2-135M, the CPU defaults, wandb
offline), in its own process, with ``--max_steps`` set by ``--steps`` (default 4, the smoke run;
``--steps 20`` shows how memory evolves over a longer run). Reads the run's log: every step logs
``memory/rss_gb`` (the training process's resident memory after the step) and
``memory/peak_rss_gb``, and TRL's ``step_time``. Prints one line per step, then the peak
resident memory, the median seconds per step, and the growth of resident memory from the second
step to the last (flat memory: close to 0).

The figures cover the training process; wandb logs from a helper process of its own.

Run: ``uv run python benchmarks/bench_train_memory.py [--steps 20] [--extra "--flag value"]``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="--max_steps of the run")
    parser.add_argument("--out", default="runs/bench-train-memory")
    parser.add_argument("--extra", default="", help="more flags for rk-agent train grpo")
    a = parser.parse_args()

    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "rk_agent", "train", "grpo", "--env", "tools",
               "--output-dir", str(out), "--max_steps", str(a.steps),
               "--save_steps", str(max(a.steps, 1)), *shlex.split(a.extra)]  # fmt: skip
    print("$ rk-agent " + " ".join(command[3:]), flush=True)
    started = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if run.returncode != 0:
        print(run.stdout[-3000:], run.stderr[-3000:], sep="\n")
        raise SystemExit(f"the run failed with exit code {run.returncode}")
    state = json.loads((out / f"checkpoint-{a.steps}" / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "memory/rss_gb" in h and "step_time" in h]

    print(f"\n{'step':>4} {'s/step':>8} {'RSS GB':>7} {'peak GB':>8}")
    for h in steps:
        print(f"{h['step']:>4} {h['step_time']:>8.1f} {h['memory/rss_gb']:>7.2f} "
              f"{h['memory/peak_rss_gb']:>8.2f}")  # fmt: skip
    peak = max(h["memory/peak_rss_gb"] for h in steps)
    seconds = statistics.median(h["step_time"] for h in steps)
    growth = steps[-1]["memory/rss_gb"] - steps[min(1, len(steps) - 1)]["memory/rss_gb"]
    printed = next((line for line in run.stdout.splitlines() if "peak resident" in line), "")
    print(f"\npeak resident memory: {peak:.2f} GB (the run's own report: {printed})")
    print(f"median step time: {seconds:.1f} s; whole command: {wall:.0f} s")
    print(f"resident memory, step 2 -> step {steps[-1]['step']}: {growth:+.2f} GB")


if __name__ == "__main__":
    main()
