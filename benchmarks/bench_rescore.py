"""Rescoring a big run: episodes per second, and peak memory at 1,000, 10,000 and 20,000 episodes.

A synthetic run is made from real episodes: the ``tools`` environment's reference solver plays
16 tasks with the real engine (3 or 4 turns, 2 or 3 tool calls each), and their lines are
repeated, each with its own id and task, to 10,000 episodes (about 5 kB a line). Each size
(``--small``, ``--episodes`` and twice that) is rescored in a fresh process
(`rk_agent.runs.rescore.rescore`, a cheap reward defined in this file: does the final reply
hold the ground truth) both ways: on worker processes, one per core (what ``rescore`` does for
a source of ``PARALLEL_BYTES`` or more: 10,000 episodes are 49 MB, 1,000 are under it and are
told ``workers=``), and in one process (``workers=0``). Each reports its wall time, its CPU time
(the workers' included) and the peak RSS of the process and of its largest worker. At
``--episodes`` the two alternate ``--repeats`` times (the median of each is reported), and the
new runs are compared byte for byte.

Targets (issue 27): over 2,000 episodes/s on 2 cores at ``--episodes``, and memory flat: the
peak RSS at ``--episodes`` within 10 % of the peak at ``--small``, and at twice ``--episodes``
within 10 % of the peak at ``--episodes`` (in one process; with workers, the process's and a
worker's alike).

Run: uv run python benchmarks/bench_rescore.py [--episodes 10000] [--small 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figure
from peak_rss import peak_rss_mb

TARGET_RATE = 2000.0
TARGET_GROWTH = 0.10


def cheap(messages: list, ground_truth: object) -> float:
    """The benchmark's reward: 1.0 when the final reply holds the ground truth."""
    return float(str(ground_truth) in (messages[-1].text or ""))


def _seed_episodes(folder: Path) -> list[dict]:
    from rk_agent.envs import get_solver
    from rk_agent.policies.function_policy import FunctionPolicy
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.config import RolloutConfig
    from rk_agent.runs.run_dir import read_trajectories

    config = RolloutConfig(env="tools", n=16, concurrency=8, output=str(folder))
    with prepare_run(config, policy=FunctionPolicy(get_solver("tools"))) as run:
        asyncio.run(run.play())
    return [json.loads(t.model_dump_json(exclude_none=True)) for t in read_trajectories(folder)]


def _synthetic_run(seed: list[dict], folder: Path, episodes: int) -> None:
    import yaml

    folder.mkdir()
    with (folder / "trajectories.jsonl").open("w") as out:
        for i in range(episodes):
            line = dict(seed[i % len(seed)], id=f"{i}-0", task_index=i, sample=0)
            line["task"] = dict(line["task"], id=f"task-{i}")
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    config = {"env": "tools", "n": episodes, "group_size": 1, "output": str(folder)}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))


def _child(source: str, output: str, workers: str) -> None:
    from rk_agent.runs.rescore import rescore

    started, cpu = time.perf_counter(), time.process_time()
    result = rescore(
        source, f"{Path(__file__).resolve()}::cheap", output=output,
        workers=None if workers == "auto" else int(workers),
    )  # fmt: skip
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "episodes": result.record.episodes, "seconds": seconds, "workers": result.workers,
        "cpu": cpu + children.ru_utime + children.ru_stime,
        "peak_mb": peak_rss_mb(),
        "worker_peak_mb": children.ru_maxrss / 1024,
    }))  # fmt: skip


def _measure(source: Path, output: Path, workers: str = "auto") -> dict:
    shutil.rmtree(output, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(source), str(output), workers],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _same(a: Path, b: Path) -> bool:
    """Whether two rescores of one source wrote the same run (their times apart)."""
    files = ("trajectories.jsonl", "summary.json")
    if any((a / name).read_bytes() != (b / name).read_bytes() for name in files):
        return False
    records = [json.loads((folder / "rescore.json").read_text()) for folder in (a, b)]
    return [dict(r, created_at=None) for r in records[:1]] == [
        dict(r, created_at=None) for r in records[1:]
    ]


def _line(size: int, line_kb: float, r: dict, how: str) -> str:
    worker = f" (a worker: {r['worker_peak_mb']:.1f} MB)" if r["workers"] else ""
    return (
        f"{size:>6} episodes ({line_kb:.1f} kB a line), {how}: {r['seconds']:.2f} s "
        f"({r['cpu']:.2f} s CPU), {size / r['seconds']:,.0f} episodes/s, peak RSS "
        f"{r['peak_mb']:.1f} MB{worker}"
    )


def _median(found: list[dict]) -> dict:
    return sorted(found, key=lambda r: r["seconds"])[len(found) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    cores = len(os.sched_getaffinity(0))
    ways = {"workers": str(min(cores, 8) if cores >= 2 else 0), "one process": "0"}
    sizes = (args.small, args.episodes, 2 * args.episodes)
    runs: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        seed = _seed_episodes(folder / "seed")
        kb = {}
        for size in sizes:
            source = folder / f"run-{size}"
            _synthetic_run(seed, source, size)
            kb[size] = (source / "trajectories.jsonl").stat().st_size / size / 1024
            for _ in range(args.repeats if size == args.episodes else 1):  # alternating
                for way, workers in ways.items():
                    out = folder / f"out-{size}-{workers}"
                    runs.setdefault((way, size), []).append(_measure(source, out, workers))
        same = _same(*(folder / f"out-{args.episodes}-{w}" for w in ways.values()))
    results = {key: _median(found) for key, found in runs.items()}
    for way in ways:
        for size in sizes:
            how = f"{results[way, size]['workers']} workers" if ways[way] != "0" else way
            median = ", median" if size == args.episodes and args.repeats > 1 else ""
            print(_line(size, kb[size], results[way, size], how + median))
    rates = {
        way: [round(args.episodes / r["seconds"]) for r in runs[way, args.episodes]] for way in ways
    }
    print(f"  each repeat at {args.episodes:,}, episodes/s: {rates}")
    print(f"  the new runs at {args.episodes:,} are the same, byte for byte: {same}")
    rate, alone = (args.episodes / results[way, args.episodes]["seconds"] for way in ways)
    print(f"target: over {TARGET_RATE:,.0f} episodes/s; peak RSS within {TARGET_GROWTH:.0%} from "
          f"{args.small:,} to {args.episodes:,} and from {args.episodes:,} to "
          f"{2 * args.episodes:,}")  # fmt: skip
    figure(
        f"rescore, {args.episodes:,} episodes", rate, "episodes/s",
        f"> {TARGET_RATE:,.0f}", rate > TARGET_RATE,
    )  # fmt: skip
    figure(f"rescore in one process, {args.episodes:,} episodes", alone, "episodes/s", "", None)
    figure(f"rescore on workers against one process, {args.episodes:,} episodes", rate / alone,
           "x", "the same run", same)  # fmt: skip
    memories = (("one process", "peak_mb", "rescore in one process"),
                ("workers", "peak_mb", "rescore on workers"),
                ("workers", "worker_peak_mb", "rescore worker"))  # fmt: skip
    for way, key, who in memories:
        small, big, double = (results[way, size][key] for size in sizes)
        growth, doubled = big / small - 1, double / big - 1
        print(f"  {who} peak RSS: {small:.1f}, {big:.1f} ({growth:+.1%}), {double:.1f} MB "
              f"({doubled:+.1%})")  # fmt: skip
        figure(f"{who} peak RSS, {args.small:,} episodes", small, "MB", "", None)
        figure(
            f"{who} peak RSS, {args.episodes:,} episodes", big, "MB",
            f"within {TARGET_GROWTH:.0%} of {args.small:,}", growth <= TARGET_GROWTH,
        )  # fmt: skip
        figure(
            f"{who} peak RSS, {2 * args.episodes:,} episodes", double, "MB",
            f"within {TARGET_GROWTH:.0%} of {args.episodes:,}", doubled <= TARGET_GROWTH,
        )  # fmt: skip


if __name__ == "__main__":
    main()
