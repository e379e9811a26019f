"""Rescoring a big run: episodes per second, and peak memory at 1,000, 10,000 and 20,000 episodes.

A synthetic run is made from real episodes: the ``tools`` environment's reference solver plays
16 tasks with the real engine (3 or 4 turns, 2 or 3 tool calls each), and their lines are
repeated, each with its own id and task, to 10,000 episodes (about 5 kB a line). Each size
(``--small``, ``--episodes`` and twice that) is then rescored in a fresh process
(`rk_agent.rollouts.rescore.rescore`, a cheap reward defined in this file: does the final reply
hold the ground truth) and reports its wall time, its CPU time and its peak RSS.

Targets (issue 27): over 2,000 episodes/s on 2 cores at ``--episodes``, and memory flat: the
peak RSS at ``--episodes`` within 10 % of the peak at ``--small``, and at twice ``--episodes``
within 10 % of the peak at ``--episodes``.

Run: uv run python benchmarks/bench_rescore.py [--episodes 10000] [--small 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figure

TARGET_RATE = 2000.0
TARGET_GROWTH = 0.10


def cheap(messages: list, ground_truth: object) -> float:
    """The benchmark's reward: 1.0 when the final reply holds the ground truth."""
    return float(str(ground_truth) in (messages[-1].text or ""))


def _seed_episodes(folder: Path) -> list[dict]:
    from rk_agent.envs import get_solver
    from rk_agent.policies.function_policy import FunctionPolicy
    from rk_agent.rollouts.config import RolloutConfig
    from rk_agent.rollouts.run_dir import read_trajectories
    from rk_agent.rollouts.runner import prepare_run

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


def _child(source: str, output: str) -> None:
    from rk_agent.rollouts.rescore import rescore

    started, cpu = time.perf_counter(), time.process_time()
    result = rescore(source, f"{Path(__file__).resolve()}::cheap", output=output)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "episodes": result.record.episodes, "seconds": seconds, "cpu": cpu, "peak_mb": peak_mb,
    }))  # fmt: skip


def _measure(source: Path, output: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(source), str(output)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    sizes = (args.small, args.episodes, 2 * args.episodes)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        seed = _seed_episodes(folder / "seed")
        results = {}
        for size in sizes:
            _synthetic_run(seed, folder / f"run-{size}", size)
            line_kb = (folder / f"run-{size}" / "trajectories.jsonl").stat().st_size / size / 1024
            results[size] = _measure(folder / f"run-{size}", folder / f"out-{size}")
            r = results[size]
            print(
                f"{size:>6} episodes ({line_kb:.1f} kB a line): {r['seconds']:.2f} s "
                f"({r['cpu']:.2f} s CPU), {size / r['seconds']:,.0f} episodes/s, "
                f"peak RSS {r['peak_mb']:.1f} MB"
            )
    small, big, double = (results[size] for size in sizes)
    rate = args.episodes / big["seconds"]
    growth = big["peak_mb"] / small["peak_mb"] - 1
    doubled = double["peak_mb"] / big["peak_mb"] - 1
    print(
        f"target: over {TARGET_RATE:,.0f} episodes/s; peak RSS within {TARGET_GROWTH:.0%} "
        f"from {args.small:,} to {args.episodes:,} ({growth:+.1%}) and from {args.episodes:,} "
        f"to {2 * args.episodes:,} ({doubled:+.1%})"
    )
    figure(
        f"rescore, {args.episodes:,} episodes", rate, "episodes/s",
        f"> {TARGET_RATE:,.0f}", rate > TARGET_RATE,
    )  # fmt: skip
    figure(f"rescore peak RSS, {args.small:,} episodes", small["peak_mb"], "MB", "", None)
    figure(
        f"rescore peak RSS, {args.episodes:,} episodes", big["peak_mb"], "MB",
        f"within {TARGET_GROWTH:.0%} of {args.small:,}", growth <= TARGET_GROWTH,
    )  # fmt: skip
    figure(
        f"rescore peak RSS, {2 * args.episodes:,} episodes", double["peak_mb"], "MB",
        f"within {TARGET_GROWTH:.0%} of {args.episodes:,}", doubled <= TARGET_GROWTH,
    )  # fmt: skip


if __name__ == "__main__":
    main()
