"""``rk-agent view`` on big runs: server time per page, the first open, and memory.

A synthetic run is made from real episodes: the ``tools`` environment's reference solver plays
16 tasks with the real engine (3 turns, 2 tool calls each), and their lines are repeated, each
with its own id, task and question, in groups of 4, to 100,000 episodes (about 5 kB a line; a
third of them marked failed with a lower reward, so filters have something to choose). It is
written twice: as a rollout run, and as a training run of 100 steps of 1,000 episodes
(``metadata.train_step``; from step 51 on no episode is marked failed, so every group has zero
spread), whose ``watch.jsonl`` and run record the trainer's own writers fill with the watch's
signals of each step's groups and the alarms they raise (answer collapse at step 3: copies
answer alike; zero spread at step 53). In a fresh
process per run, the viewer's app (`rk_agent.view.app.make_app`) answers requests in-process
(Starlette's test client: the server's time, no network):

- the **first open** of the run page: its first answer (the page saying how far the index got,
  after ``index_wait_s``, 1 s), then the time until the run page itself is drawn (the index
  built in one streaming pass in a thread of its own, the histograms drawn once), and the peak
  RSS after it, against the same at 10,000 episodes;
- the rollout run: the **run page** (turning pages of the whole list) and a **filtered episode
  list** (failures whose question holds a word, with a reward bound that changes on every
  request, so each is filtered anew), each requested ``--requests`` times after the first
  open: p50 and p95; an **episode page** (one line read back and rendered), p95;
- the training run: its **run page** (the charts of 100 steps, the histograms, a page of the
  list) and an **alarm-filtered list** (the episodes of the groups behind the zero-spread
  alarm, with a reward bound that changes on every request), p50 and p95.

Targets (issue 29): the run page and a filtered list under 200 ms at the 95th percentile after
the first open; memory flat: the index holds a few fields per episode, not the episodes (from
10,000 to 100,000 episodes the peak RSS grows by under a quarter of what the file grows).

Run: uv run python benchmarks/bench_view.py [--episodes 100000] [--small 10000] [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_rescore import _seed_episodes  # the same real episodes
from figures import figure
from peak_rss import peak_rss_mb

TARGET_MS = 200.0
TARGET_GROWTH = 0.25  # peak RSS growth over trajectories-file growth, 10k to 100k episodes
GROUP = 4
STEPS = 100  # of the training run
SPREAD_UNTIL = 50  # the training run's last step with failed episodes


def _lines(seed: list[dict], episodes: int, steps: int = 0) -> Any:
    """The synthetic run's lines, and whether each is marked failed (module docstring)."""
    per_step = episodes // steps if steps else episodes
    for i in range(episodes):
        step, row = divmod(i, per_step)
        task, sample = divmod(row if steps else i, GROUP)
        line = dict(seed[task % len(seed)], id=f"{task}-{sample}", task_index=task)
        line["sample"] = sample
        messages = [dict(m) for m in line["task"]["messages"]]
        messages[-1]["content"] = f"(variant {task}) {messages[-1]['content']}"
        line["task"] = dict(line["task"], id=f"task-{task}", messages=messages)
        failed = i % 3 == 0 and (not steps or step < SPREAD_UNTIL)
        if failed:
            line["success"] = False
            line["episode"] = dict(line["episode"], score=(i % 10) / 20)
        if steps:
            line["metadata"] = dict(line.get("metadata") or {}, train_step=step)
        yield line, failed


def _synthetic_run(seed: list[dict], folder: Path, episodes: int) -> int:
    import yaml

    folder.mkdir()
    with (folder / "trajectories.jsonl").open("w") as out:
        for line, _ in _lines(seed, episodes):
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    config = {"env": "tools", "n": episodes // GROUP, "group_size": GROUP}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return (folder / "trajectories.jsonl").stat().st_size


def _training_run(seed: list[dict], folder: Path, episodes: int) -> None:
    """The training run, its watch and record written by the trainer's writers."""
    import dataclasses

    from rk_agent.runs.alarms import AlarmWatch
    from rk_agent.runs.run_record import RunKind, RunRecord, write_run_record
    from rk_agent.runs.trajectory import Trajectory
    from rk_agent.runs.watch import outcome_of, watch_signals
    from rk_agent.runs.watch_log import append_watch_line
    from rk_agent.types import RunStatus

    folder.mkdir()
    record = RunRecord.start(RunKind.TRAINING, global_step=0)
    write_run_record(folder, record)
    outcomes = {}  # of the seeds, as each is written: a line's outcome depends on nothing else
    watch = AlarmWatch()
    step_outcomes: list[Any] = []
    with (folder / "trajectories.jsonl").open("w") as out:
        for line, failed in _lines(seed, episodes, STEPS):
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
            key = (line["task_index"] % len(seed), failed, line["episode"]["score"])
            if key not in outcomes:
                outcomes[key] = outcome_of(Trajectory.model_validate(line))
            step_outcomes.append(dataclasses.replace(outcomes[key]))
            if len(step_outcomes) == episodes // STEPS:
                step = line["metadata"]["train_step"] + 1
                groups = [step_outcomes[i : i + GROUP] for i in range(0, len(step_outcomes), GROUP)]
                signals = watch_signals(groups)
                append_watch_line(folder, step, signals, watch.observe(step, signals))
                step_outcomes = []
    done = record.refreshed(status=RunStatus.FINISHED, global_step=STEPS, alarms=watch.raised)
    write_run_record(folder, done)


def _timed(client: object, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)  # type: ignore[attr-defined]
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")
    return elapsed


def _first_open(client: Any, key: str) -> tuple[float, int, float]:
    """The first answer's time and status, and the time until the run page is drawn (ms)."""
    started = time.perf_counter()
    first = client.get(f"/run/{key}")
    answered = (time.perf_counter() - started) * 1000
    while not client.get(f"/run/{key}/progress").json()["ready"]:
        time.sleep(0.1)
    page = client.get(f"/run/{key}")
    if page.status_code != 200:
        raise SystemExit(f"/run/{key} once indexed: HTTP {page.status_code}")
    return answered, first.status_code, (time.perf_counter() - started) * 1000


def _child(folder: str, requests: int) -> None:
    from fastapi.testclient import TestClient

    from rk_agent.view.app import make_app
    from rk_agent.view.catalog import find_runs

    catalog = find_runs([folder])
    client = TestClient(make_app(catalog))
    key = Path(folder).name
    client.get("/static/view.css")  # the app's own start-up, apart from the run
    answered, status, first = _first_open(client, key)
    peak_mb = peak_rss_mb()  # its own: ru_maxrss would carry the parent's, which wrote the run
    result: dict[str, Any] = {
        "answered_ms": answered, "answered_status": status, "first_ms": first, "peak_mb": peak_mb,
    }  # fmt: skip
    result["run_page"] = [_timed(client, f"/run/{key}?page={1 + 37 * i}") for i in range(requests)]
    if catalog.runs[key].kind == "training":
        result["filtered"] = [
            _timed(client, f"/run/{key}?alarm=zero_spread&min_reward=0.{i % 9}&page={i % 3 + 1}")
            for i in range(requests)
        ]
    else:
        result["filtered"] = [
            _timed(
                client,
                f"/run/{key}?outcome=failure&text=weeks&min_reward=0.{i % 5}&page={i % 3 + 1}",
            )
            for i in range(requests)
        ]
        tasks = len(catalog.runs[key].index()) // GROUP
        result["episode"] = [
            _timed(client, f"/run/{key}/episode/{97 * i % tasks}-{i % GROUP}")
            for i in range(requests)
        ]
    print(json.dumps(result))


def _measure(folder: Path, requests: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(folder), str(requests)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def _report(name: str, values: list[float], size_name: str, target: bool = True) -> None:
    p95 = _p95(values)
    print(
        f"{name}: p50 {statistics.median(values):.1f} ms, p95 {p95:.1f} ms ({len(values)} requests)"
    )
    goal = f"under {TARGET_MS:.0f} ms at p95 after the first open" if target else "-"
    met = p95 < TARGET_MS if target else None
    figure(f"view {name} p95 ({size_name})", round(p95, 1), "ms", goal, met)


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
        (root / "big" / "trajectories.jsonl").unlink()  # one big file on disk at a time
        _training_run(seed, root / "train", args.episodes)
        train = _measure(root / "train", args.requests)
    size_name = f"{args.episodes // 1000}k episodes"
    print(f"synthetic run: {args.episodes:,} episodes, {size / 1e6:.0f} MB of trajectories")
    for name, run in (("rollout run", big), ("training run", train)):
        print(
            f"{name}, first open: answered in {run['answered_ms'] / 1000:.2f} s (HTTP "
            f"{run['answered_status']}: how far the index got), the run page drawn after "
            f"{run['first_ms'] / 1000:.2f} s; peak RSS {run['peak_mb']:.0f} MB"
        )
    print(
        f"at {args.small:,} episodes: the run page drawn after {small['first_ms'] / 1000:.2f} s, "
        f"peak RSS {small['peak_mb']:.0f} MB"
    )
    _report("run page", big["run_page"], size_name)
    _report("filtered list", big["filtered"], size_name)
    _report("episode page", big["episode"], size_name, target=False)
    _report("training run page", train["run_page"], size_name)
    _report("alarm-filtered list", train["filtered"], size_name)
    first_answer = round(big["answered_ms"] / 1000, 2)
    figure(f"view first open, first answer ({size_name})", first_answer, "s", "-", None)
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
