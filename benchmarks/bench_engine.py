"""Rollout engine throughput against the OpenAI-compatible stub server on loopback.

Run: uv run python benchmarks/bench_engine.py [--episodes 1000] [--concurrency 128] [--runs 3]
     [--high 512 2048]
     uv run python benchmarks/bench_engine.py --compare /tmp/before [--rounds 5]

The stub server runs in its own process and plays a tool-using model: two tool calls, then an
answer, so every episode of the `tools` environment takes 3 turns. The measurements:

1. 100 ms of model latency per call, concurrency 128, ``--runs`` times: wall time against the
   latency-bound ideal ``episodes x turns x latency / concurrency`` (target: within 10 %;
   min, median and max; the median is the figure). The same run with an in-process scripted
   policy (same latency, no HTTP) shows the engine's own scheduling apart from the HTTP
   client's CPU cost.
2. 0 ms latency: the harness's own CPU time per turn (targets: under 1 ms for the engine and
   environment, measured with an in-process scripted policy, no HTTP; under 0.4 ms for the
   whole harness including the policy's HTTP client, `rk_agent.model_client`), ``--runs``
   times (the median is the figure).
3. ``--high`` concurrencies (one process, 100 ms, ``max(episodes, 2 x concurrency)``
   episodes): the fraction of the ideal reached, and how busy the process kept its core
   (its CPU time over the wall time): past about 1 / (CPU per turn x turns per second asked
   for), one process is bound by its one core, and the rest is what ``--workers`` is for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from as_the_cli import as_the_rollout_command
from figures import figure

from rk_agent.envs.registry import get_env_class
from rk_agent.policies.function_policy import tool_call
from rk_agent.policies.openai_policy import OpenAIPolicy
from rk_agent.policies.policy import Policy
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig
from rk_agent.testing.scripted_policy import ScriptedPolicy

TURNS = 3
HERE = Path(__file__).resolve().parent
CHILD = "CHILD "


@contextmanager
def stub_server(latency_s: float) -> Iterator[str]:
    """Start the stub server in a subprocess; yield its base URL."""
    command = [
        sys.executable, "-m", "rk_agent.testing.stub_server", "--port", "0",
        "--latency", str(latency_s), "--tools", "--tool-turns", str(TURNS - 1),
        "--reply", "Answer: 42",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"the stub server did not start: {line!r}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def play(policy: Policy, episodes: int, concurrency: int) -> tuple[float, float, int]:
    """Play the episodes; return (wall seconds, CPU seconds of this process, turns played)."""
    env_class = get_env_class("tools")
    config = RolloutConfig(
        env="tools", n=episodes, concurrency=concurrency, max_turns=TURNS, episode_timeout_s=120
    )

    async def main() -> Any:
        try:
            return await run_rollouts(config, policy=policy, make_env=env_class, env_name="tools")
        finally:
            await policy.aclose()

    wall, cpu = time.perf_counter(), time.process_time()
    with as_the_rollout_command():
        result = asyncio.run(main())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    failed = [t for t in result.trajectories if t.failure is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} episodes failed, e.g. {failed[0].failure}")
    return wall, cpu, sum(len(t.turns) for t in result.trajectories)


def _spread(values: list[float]) -> str:
    """min / median / max."""
    ordered = sorted(values)
    return " / ".join(f"{v:.3g}" for v in (ordered[0], statistics.median(ordered), ordered[-1]))


def _child(url: str, episodes: int, concurrency: int) -> None:
    """One measured play in this process (after a warm-up: imports, connections), printed as
    ``CHILD {json}`` with where its ``rk_agent`` came from."""
    import rk_agent

    def served() -> OpenAIPolicy:
        return OpenAIPolicy("stub-model", base_url=url, max_concurrency=concurrency)

    play(served(), 64, concurrency)
    before = os.times()
    wall, cpu, turns = play(served(), episodes, concurrency)
    after = os.times()
    found = {
        "wall": wall, "cpu": cpu, "turns": turns, "rk_agent": rk_agent.__file__,
        "user": after.user - before.user, "sys": after.system - before.system,
    }  # fmt: skip
    print(CHILD + json.dumps(found), flush=True)


def _run_child(checkout: Path, url: str, episodes: int, concurrency: int) -> dict[str, Any]:
    """`_child` in a fresh process that imports ``checkout``'s ``rk_agent``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(HERE)])}
    command = [sys.executable, __file__, "--child", url, str(episodes), str(concurrency)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(CHILD)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the child playing {checkout} failed:\n{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(lines[-1].removeprefix(CHILD))
    if not Path(found["rk_agent"]).resolve().is_relative_to(checkout.resolve()):
        raise RuntimeError(f"the child meant for {checkout} imported {found['rk_agent']}")
    return found


def compare(other: Path, args: argparse.Namespace) -> None:
    """This checkout against ``other``, alternating in fresh processes (module docstring)."""
    checkouts = {"old": other, "new": HERE.parent}
    settings = [  # (name, latency, what is read off a play)
        ("0 ms: CPU ms per turn", 0.0, lambda r: 1000 * r["cpu"] / r["turns"]),
        (f"{args.latency * 1000:.0f} ms: episodes/s", args.latency,
         lambda r: args.episodes / r["wall"]),
    ]  # fmt: skip
    medians: dict[str, tuple[float, float]] = {}
    loads = [os.getloadavg()[0]]
    for name, latency, value in settings:
        found: dict[str, list[float]] = {"old": [], "new": []}
        with stub_server(latency) as url:
            for round_ in range(args.rounds):
                for label in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
                    result = _run_child(checkouts[label], url, args.episodes, args.concurrency)
                    found[label].append(value(result))
                    split = (
                        f" (user {1000 * result['user'] / result['turns']:.4g}, system "
                        f"{1000 * result['sys'] / result['turns']:.4g})"
                        if latency == 0 else ""
                    )  # fmt: skip
                    print(f"  {name}, round {round_ + 1}, {label}: {found[label][-1]:.4g}{split}",
                          flush=True)  # fmt: skip
        medians[name] = (statistics.median(found["old"]), statistics.median(found["new"]))
        loads.append(os.getloadavg()[0])
    print(f"{other} (old) against {HERE.parent} (new): {args.episodes} episodes, concurrency "
          f"{args.concurrency}, medians of {args.rounds} rounds; load average (1 min) "
          f"{' -> '.join(f'{load:.2f}' for load in loads)}")  # fmt: skip
    for name, (old, new) in medians.items():
        print(
            f"{name}: old {old:.4g}, new {new:.4g}, new against old {100 * (new / old - 1):+.1f} %"
        )
        figure(f"engine, c={args.concurrency}, {name}, new over old", round(new / old, 4), "x",
               "", None)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--high", type=int, nargs="*", default=[512, 2048])
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="another checkout of rk-agent to measure against",
    )
    parser.add_argument("--rounds", type=int, default=5, help="with --compare: rounds of both")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, episodes, concurrency = args.child
        _child(url, int(episodes), int(concurrency))
        return
    if args.compare:
        compare(args.compare, args)
        return
    script = [tool_call("calculator", {"expression": "1+1"})] * (TURNS - 1) + ["Answer: 42"]

    def served(url: str, concurrency: int) -> OpenAIPolicy:
        return OpenAIPolicy("stub-model", base_url=url, max_concurrency=concurrency)

    ideal = args.episodes * TURNS * args.latency / args.concurrency
    walls, scripted_walls = [], []
    high: list[tuple[int, int, float, float]] = []
    with stub_server(args.latency) as url:
        play(served(url, args.concurrency), 32, args.concurrency)  # warm-up: imports, connections
        for _ in range(args.runs):
            wall, _, turns = play(served(url, args.concurrency), args.episodes, args.concurrency)
            walls.append(wall)
            scripted = ScriptedPolicy(script, latency_s=args.latency)
            scripted_walls.append(play(scripted, args.episodes, args.concurrency)[0])
        for concurrency in args.high:
            episodes = max(args.episodes, 2 * concurrency)
            wall, cpu, _ = play(served(url, concurrency), episodes, concurrency)
            high.append((concurrency, episodes, wall, cpu))
    print(
        f"latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}: {args.episodes} "
        f"episodes, {turns} turns in {_spread(walls)} s (min / median / max of {args.runs}); "
        f"ideal {ideal:.2f} s; overhead {100 * (statistics.median(walls) / ideal - 1):+.1f} % "
        "(target within +10 %)"
    )
    print(
        f"same, in-process scripted policy with {args.latency * 1000:.0f} ms latency (no HTTP): "
        f"{_spread(scripted_walls)} s; overhead "
        f"{100 * (statistics.median(scripted_walls) / ideal - 1):+.1f} %"
    )
    for concurrency, episodes, wall, cpu in high:
        high_ideal = episodes * TURNS * args.latency / concurrency
        print(
            f"concurrency {concurrency}: {episodes} episodes in {wall:.2f} s, ideal "
            f"{high_ideal:.2f} s: {100 * high_ideal / wall:.0f} % of the ideal; the process "
            f"kept its core {100 * cpu / wall:.0f} % busy"
        )
        figure(f"fraction of the ideal, c={concurrency}, one process", high_ideal / wall, "x",
               "", None)  # fmt: skip

    http_ms, engine_ms = [], []
    with stub_server(0.0) as url:
        play(served(url, args.concurrency), 32, args.concurrency)
        for _ in range(args.runs):
            _, cpu, turns = play(served(url, args.concurrency), args.episodes, args.concurrency)
            http_ms.append(1000 * cpu / turns)
    scripted = ScriptedPolicy(script)
    play(scripted, 32, args.concurrency)
    for _ in range(args.runs):
        _, cpu, turns = play(scripted, args.episodes, args.concurrency)
        engine_ms.append(1000 * cpu / turns)
    print(
        f"latency 0 ms: harness CPU per turn {_spread(engine_ms)} ms for engine + environment "
        f"(target < 1 ms); {_spread(http_ms)} ms including the HTTP client (target < 0.4 ms)"
    )
    over = statistics.median(walls) / ideal
    figure(f"wall over the ideal, c={args.concurrency}, {args.latency * 1000:.0f} ms (median)",
           over, "x", "<= 1.10x", over <= 1.10)  # fmt: skip
    figure("same, scripted policy (no HTTP)", statistics.median(scripted_walls) / ideal, "x", "",
           None)  # fmt: skip
    http = statistics.median(http_ms)
    figure("harness CPU per turn incl. HTTP (median)", http, "ms", "< 0.4 ms (issue 26)",
           http < 0.4)  # fmt: skip
    engine = statistics.median(engine_ms)
    figure("engine + env CPU per turn (no HTTP)", engine, "ms", "< 1 ms", engine < 1)
    print(
        f"RESULT wall_s={statistics.median(walls):.2f} ideal_s={ideal:.2f} "
        f"engine_cpu_ms_per_turn={engine:.3f} client_cpu_ms_per_turn={http:.3f}"
    )


if __name__ == "__main__":
    main()
