"""Time of `import rk_agent` (and of importing the public API) in fresh interpreters.

Run: uv run python benchmarks/bench_import.py
Target: `import rk_agent` under 0.3 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

from figures import figure

SNIPPETS = {
    "import rk_agent": "import rk_agent",
    "from rk_agent import (reward_function, RewardFunction, EvaluateResult, combine)": (
        "from rk_agent import reward_function, RewardFunction, EvaluateResult, combine"
    ),
}


def measure(statement: str, runs: int = 7) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    samples = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
        for _ in range(runs)
    ]  # fmt: skip
    return statistics.median(samples)


def main() -> None:
    for label, statement in SNIPPETS.items():
        seconds = measure(statement)
        print(f"{label:<80} {seconds * 1000:7.1f} ms (median of 7; target < 300 ms)")
    seconds = measure("import rk_agent")
    print(f"RESULT import_s={seconds:.3f} target_s=0.3")
    figure("import rk_agent", seconds * 1000, "ms", "< 300 ms", seconds < 0.3)


if __name__ == "__main__":
    main()
