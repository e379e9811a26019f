"""``rk-agent view`` on a big run: server time per page, and memory.

A synthetic run is made from real episodes: the ``tools`` environment's reference solver plays
16 tasks with the real engine (3 turns, 2 tool calls each), and their lines are repeated, each
with its own id, task and question, in groups of 4, to 100,000 episodes (about 3 kB a line; a
third of them marked failed with a lower reward, so filters have something to choose). In a
fresh process, the viewer's app (`rk_agent.view.app.make_app`) answers requests in-process
(Starlette's test client: the server's time, no network):

- the **first open** of the run page, which indexes the trajectories file in one streaming
  pass, and the peak RSS after it, against the same at 10,000 episodes;
- the **run page** (turning pages of the whole list) and a **filtered episode list** (failures
  whose question holds a word, with a reward bound that changes on every request, so each is
  filtered anew), each requested ``--requests`` times after the first open: p50 and p95;
- an **episode page** (one line read back and rendered), p95.

Targets (issue 29): the run page and a filtered list under 200 ms at the 95th percentile after
the first open; memory flat: the index holds a few fields per episode, not the episodes (from
10,000 to 100,000 episodes the peak RSS grows by under a quarter of what the file grows).

Run: uv run python benchmarks/bench_view.py [--episodes 100000] [--small 10000] [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_rescore import _seed_episodes  # the same real episodes
from figures import figure

TARGET_MS = 200.0
TARGET_GROWTH = 0.25  # peak RSS growth over trajectories-file growth, 10k to 100k episodes
GROUP = 4


def _synthetic_run(seed: list[dict], folder: Path, episodes: int) -> int:
    import yaml

    folder.mkdir()
    with (folder / "trajectories.jsonl").open("w") as out:
        for i in range(episodes):
            task, sample = divmod(i, GROUP)
            line = dict(seed[task % len(seed)], id=f"{task}-{sample}", task_index=task)
            line["sample"] = sample
            messages = [dict(m) for m in line["task"]["messages"]]
            messages[-1]["content"] = f"(variant {task}) {messages[-1]['content']}"
            line["task"] = dict(line["task"], id=f"task-{task}", messages=messages)
            if i % 3 == 0:
                line["success"] = False
                line["episode"] = dict(line["episode"], score=(i % 10) / 20)
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    config = {"env": "tools", "n": episodes // GROUP, "group_size": GROUP}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return (folder / "trajectories.jsonl").stat().st_size


def _timed(client: object, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)  # type: ignore[attr-defined]
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")
    return elapsed


def _child(folder: str, requests: int) -> None:
    from fastapi.testclient import TestClient

    from rk_agent.view.app import make_app
    from rk_agent.view.catalog import find_runs

    catalog = find_runs([folder])
    client = TestClient(make_app(catalog))
    key = Path(folder).name
    client.get("/static/view.css")  # the app's own start-up, apart from the run
    first = _timed(client, f"/run/{key}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run_page = [_timed(client, f"/run/{key}?page={1 + 37 * i}") for i in range(requests)]
    filtered = [
        _timed(
            client, f"/run/{key}?outcome=failure&text=weeks&min_reward=0.{i % 5}&page={i % 3 + 1}"
        )
        for i in range(requests)
    ]
    tasks = len(catalog.runs[key].index()) // GROUP
    episode = [
        _timed(client, f"/run/{key}/episode/{97 * i % tasks}-{i % GROUP}") for i in range(requests)
    ]
    print(json.dumps({
        "first_ms": first, "peak_mb": peak_mb,
        "run_page": run_page, "filtered": filtered, "episode": episode,
    }))  # fmt: skip


def _measure(folder: Path, requests: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(folder), str(requests)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed = _seed_episodes(root / "seed")
        size = _synthetic_run(seed, root / "big", args.episodes)
        small_size = _synthetic_run(seed, root / "small", args.small)
        small = _measure(root / "small", args.requests)
        big = _measure(root / "big", args.requests)
    run_p95, filtered_p95 = _p95(big["run_page"]), _p95(big["filtered"])
    print(f"synthetic run: {args.episodes:,} episodes, {size / 1e6:.0f} MB of trajectories")
    print(
        f"first open (index built): {big['first_ms'] / 1000:.2f} s; peak RSS "
        f"{big['peak_mb']:.0f} MB (at {args.small:,} episodes: {small['first_ms'] / 1000:.2f} s, "
        f"{small['peak_mb']:.0f} MB)"
    )
    for name, values in (("run page", big["run_page"]), ("filtered list", big["filtered"]),
                         ("episode page", big["episode"])):  # fmt: skip
        print(
            f"{name}: p50 {statistics.median(values):.1f} ms, p95 {_p95(values):.1f} ms "
            f"({len(values)} requests)"
        )
    target = f"under {TARGET_MS:.0f} ms at p95 after the first open"
    size_name = f"{args.episodes // 1000}k episodes"
    figure(f"view run page p95 ({size_name})", round(run_p95, 1), "ms", target, run_p95 < TARGET_MS)
    figure(
        f"view filtered list p95 ({size_name})",
        round(filtered_p95, 1), "ms", target, filtered_p95 < TARGET_MS,
    )  # fmt: skip
    figure(f"view episode page p95 ({size_name})", round(_p95(big["episode"]), 1), "ms", "-", None)
    figure(f"view first open ({size_name})", round(big["first_ms"] / 1000, 2), "s", "-", None)
    growth = big["peak_mb"] - small["peak_mb"]
    file_growth = (size - small_size) / 2**20
    print(f"peak RSS grew {growth:.0f} MB while the file grew {file_growth:.0f} MB")
    figure(f"view peak RSS ({size_name})", round(big["peak_mb"]), "MB", "-", None)
    ratio = growth / file_growth
    figure(
        "view peak RSS growth / file growth", round(ratio, 3), "ratio",
        f"under {TARGET_GROWTH} (the index, not the episodes)", ratio < TARGET_GROWTH,
    )  # fmt: skip


if __name__ == "__main__":
    main()
