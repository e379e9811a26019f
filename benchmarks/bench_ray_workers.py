"""Rollouts on 1, 2 and 4 Ray workers against one process, with the stub server on loopback.

Run: uv run python benchmarks/bench_ray_workers.py [--episodes 1000] [--latency 0.1]

The setting is `bench_engine.py`'s: 1,000 episodes of the `tools` environment, 3 turns each, the
OpenAI-compatible stub server in its own process answering after 100 ms, played at concurrency
128 and 512. Each is played in this process (`run_rollouts`) and on 1, 2 and 4 workers
(`run_rollouts_on_workers`, ``concurrency`` shared among the workers), all against one local Ray
started once. For each it prints:

- the play time (the workers' start excluded: it is paid once per run, printed apart), and that
  time as a fraction of the latency-bound ideal ``episodes x turns x latency / concurrency``;
- throughput against the single process's;
- harness CPU per turn: this process's (the driver: with workers it only receives and writes
  episodes) and the workers' (each plays its share like the single process does), and the stub
  server's (the model server's share of the cores here; elsewhere it runs on other machines),
  measured from the first finished episode to the last; and how busy the machine's cores were
  then (every process on it), which says whether a run was bound by the cores it had.

Everything shares this machine's cores with the stub server, so read the figures with
``os.cpu_count()`` and the load average it prints.

``--step-cpu-ms 2`` plays a CPU-heavy variant of the environment instead
(``benchmarks/cpu_heavy_env.py``: each turn's step spends 2 ms of CPU in Python): then the
episodes, not the driver or the stub server, take most of the CPU, and what workers buy shows
even on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import TURNS, stub_server
from figures import figure

from rk_agent.policies.openai_policy import OpenAIPolicy
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.rollouts.ray_workers import ray_session, run_rollouts_on_workers
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.workers import RayOptions

STUB_PIDS: set[int] = set()


def ray_processes() -> tuple[list[psutil.Process], list[psutil.Process]]:
    """This process's rollout workers (Ray puts the class in their title), and Ray's others."""
    workers, others = [], []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.pid in STUB_PIDS:
                continue
            title = " ".join(process.cmdline())
        except psutil.Error:
            continue
        (workers if "RolloutWorker" in title else others).append(process)
    return workers, others


Snapshot = tuple[float, float, float, float, float, float]


def cpu_now() -> Snapshot:
    """CPU seconds so far: this process, the rollout workers, Ray's other processes, the stub
    server, and the whole machine's busy time (every process); then the wall clock."""
    workers, others = ray_processes()
    stub = [psutil.Process(pid) for pid in STUB_PIDS]
    machine = psutil.cpu_times()
    busy = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
    return (
        time.process_time(), cpu_seconds(workers), cpu_seconds(others), cpu_seconds(stub),
        busy, time.perf_counter(),
    )  # fmt: skip


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


class CpuWindow:
    """CPU of the driver and of the workers between the first and the last finished episode."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0
        self.turns = 0
        self.start: Snapshot | None = None
        self.end: Snapshot | None = None

    def on_episode(self, trajectory: Trajectory) -> None:
        self.count += 1
        if self.count == 1:
            self.start = cpu_now()
            return
        self.turns += len(trajectory.turns)
        if self.count == self.total:
            self.end = cpu_now()

    def per_turn_ms(self) -> tuple[float, float, float, float]:
        """CPU milliseconds per turn: the driver, the workers, Ray's other processes, the stub
        server."""
        if self.start is None or self.end is None or not self.turns:
            return float("nan"), float("nan"), float("nan"), float("nan")
        return tuple(  # type: ignore[return-value]
            1000 * (end - start) / self.turns
            for start, end in zip(self.start[:4], self.end[:4], strict=True)
        )

    def machine_busy(self) -> float:
        """The share of the machine's cores that were busy (any process) in the window."""
        if self.start is None or self.end is None:
            return float("nan")
        wall = self.end[5] - self.start[5]
        return (self.end[4] - self.start[4]) / (wall * (os.cpu_count() or 1))


HEAVY_ENV = f"{Path(__file__).with_name('cpu_heavy_env.py')}::CpuHeavyToolsEnv"


def play(
    url: str, episodes: int, concurrency: int, workers: int | None, step_cpu_ms: float = 0.0
) -> tuple[float, float, CpuWindow]:
    """One run; returns (play seconds, worker start seconds, CPU window)."""
    env: dict[str, Any] = {"env": "tools"}
    if step_cpu_ms:
        env = {"env": HEAVY_ENV, "env_kwargs": {"step_cpu_ms": step_cpu_ms}}
    config = RolloutConfig(
        **env, n=episodes, concurrency=concurrency, max_turns=TURNS,
        episode_timeout_s=120, workers=workers,
    )  # fmt: skip
    policy = OpenAIPolicy("stub-model", base_url=url, max_concurrency=concurrency)
    window = CpuWindow(episodes)
    engine: Callable[..., Any] = run_rollouts if workers is None else run_rollouts_on_workers

    async def main() -> Any:
        try:
            return await engine(
                config, policy=policy, make_env=config.env.factory(), on_episode=window.on_episode
            )
        finally:
            await policy.aclose()

    wall = time.perf_counter()
    result = asyncio.run(main())
    wall = time.perf_counter() - wall
    failed = [t for t in result.trajectories if t.failure is not None]
    if failed or len(result.trajectories) != episodes:
        raise RuntimeError(f"{len(failed)} failed of {len(result.trajectories)}: {failed[:1]}")
    startup = getattr(result, "startup_s", 0.0)
    return wall - startup, startup, window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--step-cpu-ms", type=float, default=0.0,
        help="a CPU-heavy environment instead: each turn's step spends this much CPU in Python "
        "(benchmarks/cpu_heavy_env.py)",
    )  # fmt: skip
    args = parser.parse_args()

    load = os.getloadavg()
    print(f"{os.cpu_count()} cores; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    started = time.perf_counter()
    with stub_server(args.latency) as url:
        STUB_PIDS.update(p.pid for p in psutil.Process().children())  # before Ray starts
        with ray_session(RayOptions(), max(args.workers)):
            print(f"Ray started in {time.perf_counter() - started:.1f} s (once, not counted below)")
            play(url, 64, 32, None, args.step_cpu_ms)  # warm-up: imports, connections
            results = []
            for concurrency in args.concurrency:
                ideal = args.episodes * TURNS * args.latency / concurrency
                single = None
                for workers in [None, *args.workers]:
                    seconds, startup, window = play(
                        url, args.episodes, concurrency, workers, args.step_cpu_ms
                    )
                    single = single or seconds
                    driver_ms, worker_ms, ray_ms, stub_ms = window.per_turn_ms()
                    label = "1 process" if workers is None else f"{workers} workers"
                    print(
                        f"concurrency {concurrency:4d}, {label:>9}: {seconds:6.2f} s "
                        f"(ideal {ideal:.2f} s: {100 * ideal / seconds:5.1f} % of ideal), "
                        f"{single / seconds:4.2f}x one process; CPU per turn: driver "
                        f"{driver_ms:.3f} ms, workers {worker_ms:.3f} ms, Ray {ray_ms:.3f} ms, "
                        f"stub server {stub_ms:.3f} ms; cores busy "
                        f"{100 * window.machine_busy():.0f} %"
                        + (f"; workers started in {startup:.1f} s" if workers else "")
                    )
                    cpu_ms = (driver_ms, worker_ms, ray_ms, stub_ms, window.machine_busy())
                    results.append((concurrency, workers, seconds, ideal, *cpu_ms))
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for (
        concurrency,
        workers,
        seconds,
        ideal,
        driver_ms,
        worker_ms,
        ray_ms,
        stub_ms,
        busy,
    ) in results:
        print(
            f"RESULT concurrency={concurrency} workers={workers or 0} play_s={seconds:.2f} "
            f"fraction_of_ideal={ideal / seconds:.3f} driver_cpu_ms_per_turn={driver_ms:.3f} "
            f"worker_cpu_ms_per_turn={worker_ms:.3f} ray_cpu_ms_per_turn={ray_ms:.3f} "
            f"stub_cpu_ms_per_turn={stub_ms:.3f} cores_busy={busy:.2f}"
        )
        where = "1 process" if workers is None else f"{workers} workers"
        figure(f"c={concurrency}, {where}: fraction of the ideal", ideal / seconds, "",
               ">= 0.70 at c=128 with 2 workers" if (concurrency, workers) == (128, 2) else "",
               ideal / seconds >= 0.70 if (concurrency, workers) == (128, 2) else None)  # fmt: skip
        figure(f"c={concurrency}, {where}: driver CPU per turn", driver_ms, "ms", "", None)


if __name__ == "__main__":
    main()
