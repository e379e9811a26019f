"""Rollout engine throughput against the OpenAI-compatible stub server on loopback.

Run: uv run python benchmarks/bench_engine.py [--episodes 1000] [--concurrency 128]

The stub server runs in its own process and plays a tool-using model: two tool calls, then an
answer, so every episode of the `tools` environment takes 3 turns. Two measurements:

1. 100 ms of model latency per call, concurrency 128: wall time against the latency-bound
   ideal ``episodes x turns x latency / concurrency`` (target: within 10 %).
   The same run with an in-process scripted policy (same latency, no HTTP) shows the engine's
   own scheduling apart from the HTTP client's CPU cost.
2. 0 ms latency: the harness's own CPU time per turn (target: under 1 ms), split into the
   engine + environment (measured with an in-process scripted policy, no HTTP) and the whole
   harness including the policy's HTTP client (`rk_agent.model_client`).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from figures import figure

from rk_agent.envs.registry import get_env_class
from rk_agent.policies.function_policy import tool_call
from rk_agent.policies.openai_policy import OpenAIPolicy
from rk_agent.policies.policy import Policy
from rk_agent.rollouts.config import RolloutConfig
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.testing.scripted_policy import ScriptedPolicy

TURNS = 3


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
    result = asyncio.run(main())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    failed = [t for t in result.trajectories if t.failure is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} episodes failed, e.g. {failed[0].failure}")
    return wall, cpu, sum(len(t.turns) for t in result.trajectories)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()

    with stub_server(args.latency) as url:
        policy = OpenAIPolicy("stub-model", base_url=url, max_concurrency=args.concurrency)
        play(policy, 32, args.concurrency)  # warm-up: imports, connections
        policy = OpenAIPolicy("stub-model", base_url=url, max_concurrency=args.concurrency)
        latency_wall, _, turns = play(policy, args.episodes, args.concurrency)
    ideal = args.episodes * TURNS * args.latency / args.concurrency
    print(
        f"latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}: "
        f"{args.episodes} episodes, {turns} turns in {latency_wall:.2f} s; ideal {ideal:.2f} s; "
        f"overhead {100 * (latency_wall / ideal - 1):+.1f} % (target within +10 %)"
    )

    script = [tool_call("calculator", {"expression": "1+1"})] * (TURNS - 1) + ["Answer: 42"]
    scripted_wall, _, _ = play(
        ScriptedPolicy(script, latency_s=args.latency), args.episodes, args.concurrency
    )
    print(
        f"same, in-process scripted policy with {args.latency * 1000:.0f} ms latency (no HTTP): "
        f"{scripted_wall:.2f} s; overhead {100 * (scripted_wall / ideal - 1):+.1f} %"
    )

    with stub_server(0.0) as url:
        policy = OpenAIPolicy("stub-model", base_url=url, max_concurrency=args.concurrency)
        play(policy, 32, args.concurrency)
        policy = OpenAIPolicy("stub-model", base_url=url, max_concurrency=args.concurrency)
        wall, cpu, turns = play(policy, args.episodes, args.concurrency)
    http_ms = 1000 * cpu / turns
    scripted = ScriptedPolicy(script)
    play(scripted, 32, args.concurrency)
    _, engine_cpu, engine_turns = play(scripted, args.episodes, args.concurrency)
    engine_ms = 1000 * engine_cpu / engine_turns
    print(
        f"latency 0 ms: harness CPU per turn {engine_ms:.3f} ms for engine + environment "
        f"(target < 1 ms); {http_ms:.3f} ms including the HTTP client "
        f"({turns} turns, {wall:.2f} s wall)"
    )
    over = latency_wall / ideal
    figure(f"wall over the ideal, c={args.concurrency}, {args.latency * 1000:.0f} ms", over, "x",
           "<= 1.10x", over <= 1.10)  # fmt: skip
    figure("same, scripted policy (no HTTP)", scripted_wall / ideal, "x", "", None)
    figure("harness CPU per turn incl. HTTP", http_ms, "ms", "< 0.4 ms (issue 26)", http_ms < 0.4)
    figure("engine + env CPU per turn (no HTTP)", engine_ms, "ms", "< 1 ms", engine_ms < 1)
    print(
        f"RESULT wall_s={latency_wall:.2f} ideal_s={ideal:.2f} "
        f"engine_cpu_ms_per_turn={engine_ms:.3f} client_cpu_ms_per_turn={http_ms:.3f}"
    )


if __name__ == "__main__":
    main()
