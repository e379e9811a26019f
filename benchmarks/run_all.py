"""Run every benchmark whose figures the docs quote, and list each figure with its target.

Run: uv run python benchmarks/run_all.py [--quick] [--only NAME ...]   (``make bench``)

Each benchmark runs in its own process, one after the other (they measure time: never two at
once); each prints ``FIGURE`` lines (`figures.figure`) that are collected here. The table at
the end has one row per figure: the benchmark, the figure, its value, its target, and whether
it was met. Quote figures from this table, at the commit it ran on (printed first): a later
change on a measured path makes them stale. ``--quick`` runs the shorter settings (for a smoke
test of the runner; not figures to quote). The exit status is 0 when every figure with a target
met it, 1 otherwise, 2 when a benchmark failed to run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from figures import PREFIX

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Bench:
    name: str
    args: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()  # replaces args with --quick


BENCHES = (
    Bench("bench_import"),
    Bench("bench_install_size"),
    Bench("bench_decorator"),
    Bench("bench_math", quick=("--pairs", "600", "--repeats", "2")),
    Bench("bench_engine", quick=("--episodes", "200", "--runs", "1", "--high", "512")),
    Bench("bench_engine_instructions", quick=("--episodes", "60")),
    Bench("bench_model_client", quick=("--requests", "600")),
    Bench("bench_ray_workers", quick=("--episodes", "200", "--workers", "2")),
    Bench("bench_sandbox_isolation", quick=("--runs", "20", "--rounds", "1")),
    Bench("bench_reward_server"),
    Bench("bench_server_instructions", quick=("--seconds", "3", "--kinds", "reward")),
    Bench("bench_check"),
    Bench("bench_check_tokens", quick=("--episodes", "16")),
    Bench("bench_rescore", quick=("--episodes", "2000", "--small", "500")),
    Bench("bench_view", quick=("--episodes", "10000", "--small", "1000", "--requests", "10")),
    Bench("bench_hf_batching", quick=("--rounds", "2")),
    Bench("bench_learning", args=("--warm-start",), quick=("--warm-start", "--quick")),
    Bench("bench_policy_memory", quick=("--batches", "4", "--marks", "4", "8", "--turns", "2")),
    Bench("bench_grpo_overhead", quick=("--tiny",)),
    Bench("bench_watch", args=("--tiny",)),
    Bench("bench_dynamic_sampling", quick=("--steps", "2")),
    Bench("bench_mcp"),
    Bench(
        "bench_openenv",
        quick=("--episodes", "64", "--runs", "1", "--steps", "200", "--sessions", "50"),
    ),
    Bench("bench_bfcl", quick=("--chunk", "200")),
    Bench(
        "bench_verifiers",
        quick=("--imports", "1", "--episodes", "20", "--resets", "2", "--exec-resets", "1"),
    ),
)


def commit() -> str:
    done = subprocess.run(
        ["git", "log", "-1", "--format=%h"], capture_output=True, text=True, cwd=HERE
    )
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True,
                           cwd=HERE).stdout.strip()  # fmt: skip
    return (done.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty else "")


def run(bench: Bench, quick: bool) -> tuple[list[dict[str, object]], str | None, float]:
    args = bench.quick if quick and bench.quick else bench.args
    command = [sys.executable, str(HERE / f"{bench.name}.py"), *args]
    print(f"\n$ python benchmarks/{bench.name}.py {' '.join(args)}", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
    assert process.stdout is not None
    figures: list[dict[str, object]] = []
    for line in process.stdout:
        if line.startswith(PREFIX):
            figures.append(json.loads(line[len(PREFIX) :]))
        else:
            print("  " + line, end="", flush=True)
    failed = None if process.wait() == 0 else f"exit status {process.returncode}"
    if failed is None and not figures:
        failed = "it printed no FIGURE line"
    return figures, failed, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter settings (not to quote)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these benchmarks only")
    args = parser.parse_args()
    chosen = [b for b in BENCHES if not args.only or b.name in args.only]
    unknown = set(args.only or ()) - {b.name for b in BENCHES}
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; known: {[b.name for b in BENCHES]}")
    print(f"commit: {commit()}")
    rows: list[tuple[str, dict[str, object]]] = []
    failures: list[str] = []
    for bench in chosen:
        figures, failed, seconds = run(bench, args.quick)
        print(f"  ({seconds:.0f} s)")
        rows += [(bench.name, f) for f in figures]
        if failed:
            failures.append(f"{bench.name}: {failed}")
    print(f"\nfigures at {commit()}" + (" (--quick: not to quote)" if args.quick else ""))
    width = max((len(f"{b}: {f['name']}") for b, f in rows), default=10)
    for bench, f in rows:
        met = {True: "met", False: "MISSED", None: "-"}[f["met"]]  # type: ignore[index]
        value = f"{f['value']:.4g} {f['unit']}".strip()
        print(f"{bench + ': ' + str(f['name']):<{width}}  {value:>14}  {met:>6}  {f['target']}")
    for failure in failures:
        print(f"FAILED {failure}")
    missed = any(f["met"] is False for _, f in rows)
    raise SystemExit(2 if failures else 1 if missed else 0)


if __name__ == "__main__":
    main()
