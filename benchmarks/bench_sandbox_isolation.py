"""Per-run cost of the isolated sandbox (mode ``bwrap``) against the process sandbox.

Run: uv run python benchmarks/bench_sandbox_isolation.py [--runs 100] [--workers 2] [--rounds 3]

Two workloads, each in both modes, interleaved over ``--rounds`` rounds (the median round is
reported), ``--workers`` runs in flight at once (threads calling `run_python`):

- ``trivial``: ``print(int(input()) + 1)``, one `run_python` per run;
- ``10-test``: the ``code_execution`` reward on a correct ``add`` with 10 tests (fn_name
  cases), one harness process computing the 10 values, judged in the parent.

Reported per workload and mode: runs/s (wall clock, all workers), p50 and p99 latency of one
run, and the ratio of the bwrap latency to the process latency. A third mode,
``bwrap-open``, is bwrap as it was before issue 25: no seccomp filter, the root and ``/dev``
left writable (the same options less ``--seccomp`` and ``--remount-ro``, on launchers of their
own: another work-dir size keeps them apart); the ``filter`` column is bwrap's p50 over it.

Targets: bwrap per-run latency at most 1.5x the process mode's, and at least 50 isolated
runs/s on 2 cores for the trivial program (issue 12); the filter and the read-only root cost
at most 10 % per run (issue 25).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from figures import figure

from rk_agent.rewards.builtin.code_execution import code_execution_reward
from rk_agent.sandbox import SandboxLimits, _bwrap, isolation_report, run_python

LIMITS = SandboxLimits(timeout_s=5)
OPEN_LIMITS = LIMITS.model_copy(update={"max_disk_mb": LIMITS.max_disk_mb + 1})
MODES = ("process", "bwrap", "bwrap-open")


def _open_options(real: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """bwrap's options, less the filter and the read-only remounts for ``OPEN_LIMITS`` runs."""
    open_bytes = OPEN_LIMITS.max_disk_mb * 2**20

    def options(**kwargs: object) -> list[str]:
        args = real(**kwargs)
        if kwargs.get("disk_bytes") != open_bytes:
            return args
        out: list[str] = []
        skip = 0
        for arg in args:
            if skip:
                skip -= 1
            elif arg in ("--seccomp", "--remount-ro"):
                skip = 1
            else:
                out.append(arg)
        return out

    return options


def _mode(mode: str) -> tuple[str, SandboxLimits]:
    return ("bwrap", OPEN_LIMITS) if mode == "bwrap-open" else (mode, LIMITS)


TESTS = [{"fn_name": "add", "args": [i, 2 * i], "expected": 3 * i} for i in range(10)]
REPLY = [{"role": "assistant", "content": "```python\ndef add(a, b):\n    return a + b\n```"}]


def _trivial(mode: str) -> Callable[[], None]:
    sandbox, limits = _mode(mode)

    def one() -> None:
        result = run_python("print(int(input()) + 1)", stdin="41", limits=limits, sandbox=sandbox)
        if result.stdout != "42\n":
            raise RuntimeError(f"unexpected result: {result.reason}")

    return one


def _ten_tests(mode: str) -> Callable[[], None]:
    sandbox, limits = _mode(mode)

    def one() -> None:
        result = code_execution_reward(REPLY, ground_truth=TESTS, limits=limits, sandbox=sandbox)
        if result.score != 1.0:
            raise RuntimeError(f"unexpected result: {result.reason}")

    return one


def _measure(one: Callable[[], None], runs: int, workers: int) -> dict[str, float]:
    def timed(_: int) -> float:
        started = time.perf_counter()
        one()
        return time.perf_counter() - started

    one()  # warm up (the bwrap check runs once per process)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        latencies = sorted(pool.map(timed, range(runs)))
    wall = time.perf_counter() - started
    return {
        "runs_per_s": runs / wall,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per workload, mode, round")
    parser.add_argument("--workers", type=int, default=2, help="runs in flight at once")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is reported")
    args = parser.parse_args()
    report = isolation_report()
    print("\n".join(report.lines()))
    if not report.isolated:
        raise SystemExit("isolation does not work here: nothing to compare")
    _bwrap.bwrap_options = _open_options(_bwrap.bwrap_options)  # type: ignore[assignment]
    workloads = {"trivial": _trivial, "10-test": _ten_tests}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for name, make in workloads.items():
            for mode in MODES:
                stats = _measure(make(mode), args.runs, args.workers)
                results.setdefault((name, mode), []).append(stats)
    print(f"\n{args.runs} runs x {args.rounds} rounds, {args.workers} workers (median round)")
    print(f"{'workload':<9} {'mode':<10} {'runs/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'ratio':>6} {'filter':>7}")  # fmt: skip
    for name in workloads:
        median = {
            mode: {k: statistics.median(r[k] for r in results[(name, mode)]) for k in
                   ("runs_per_s", "p50_ms", "p99_ms")}
            for mode in MODES
        }  # fmt: skip
        for mode in MODES:
            row = median[mode]
            ratio = row["p50_ms"] / median["process"]["p50_ms"]
            cost = (
                f"{row['p50_ms'] / median['bwrap-open']['p50_ms']:6.2f}x" if mode == "bwrap" else ""
            )
            print(f"{name:<9} {mode:<10} {row['runs_per_s']:8.1f} {row['p50_ms']:8.1f} "
                  f"{row['p99_ms']:8.1f} {ratio:5.2f}x {cost:>7}")  # fmt: skip
        bwrap, open_, process = (median[m]["p50_ms"] for m in MODES[1:] + MODES[:1])
        figure(f"{name}: bwrap p50 over process", bwrap / process, "x", "<= 1.5x",
               bwrap / process <= 1.5)  # fmt: skip
        figure(f"{name}: seccomp + read-only root, p50 over bwrap-open", bwrap / open_, "x",
               "<= 1.10x", bwrap / open_ <= 1.10)  # fmt: skip
        if name == "trivial":
            rate = median["bwrap"]["runs_per_s"]
            figure("trivial: isolated runs/s", rate, "runs/s", ">= 50", rate >= 50)
    print(
        "\ntargets: bwrap p50 <= 1.5x process; trivial bwrap >= 50 runs/s on 2 cores; "
        "filter (bwrap p50 over bwrap-open) <= 1.10x"
    )


if __name__ == "__main__":
    main()
