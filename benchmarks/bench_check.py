"""Wall time of `rk-agent check env code` and `rk-agent check env tools` (no model needed).

Each check runs the environment's contract check, then plays every probe of its kind as a
policy next to the reference solver and an honest wrong answer, `--episodes` episodes each
(10 by default, the command's default); the `code` env runs every reply in the real sandbox.
Timed as the command a user runs: a fresh `python -m rk_agent check env NAME --json` process.

Run: uv run python benchmarks/bench_check.py [--episodes 10] [--repeats 1]
Target: under 2 minutes each on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from figures import figure

TARGET_S = 120.0


def measure(env: str, episodes: int) -> tuple[float, dict[str, object]]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "check", "env", env, "--episodes", str(episodes),
         "--json"],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"rk-agent check env {env} failed ({done.returncode}): {done.stderr}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10, help="episodes per probe")
    parser.add_argument("--repeats", type=int, default=1, help="runs per env (median)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU cores; --episodes {args.episodes}")
    results = {}
    for env in ("code", "tools"):
        times, report = [], {}
        for _ in range(args.repeats):
            seconds, report = measure(env, args.episodes)
            times.append(seconds)
        rows = report["rows"]
        assert isinstance(rows, list)
        played = sum(int(r["cases"]) for r in rows)
        flags = [f["probe"] for f in report["flags"]] or "none"  # type: ignore[attr-defined]
        median = statistics.median(times)
        results[env] = median
        figure(f"rk-agent check env {env}", median, "s", f"< {TARGET_S:.0f} s", median < TARGET_S)
        print(
            f"rk-agent check env {env:<6} {median:7.1f} s  ({len(rows) - 2} probes; {played} "
            f"(row, seed) scores; flags: {flags}; target < {TARGET_S:.0f} s)"
        )
    print(
        f"RESULT check_env_code_s={results['code']:.1f} check_env_tools_s={results['tools']:.1f} "
        f"target_s={TARGET_S:.0f}"
    )


if __name__ == "__main__":
    main()
