"""The OpenEnv round trip: an environment played through ``rk-agent openenv serve`` and the
``openenv:`` client on loopback, against the same environment in process.

Run: uv run python benchmarks/bench_openenv.py [--episodes 400] [--concurrency 16] [--runs 3]

The environment is ``tools``, played by its reference solver (a `FunctionPolicy`: no model) with
the rollout engine: in process (``--env tools``), then through the server (a separate process,
``rk-agent openenv serve --env tools``) with ``--env openenv:ws://127.0.0.1:PORT``: one
WebSocket session per episode (connect, reset, whose answer lists the tools, then one step per
turn, close).
A step is one turn of an episode; the per-episode costs (the connection, the reset, the tool
list) are counted in, spread over the turns.

It prints, per step, the wall time and the CPU of the rollout process (the engine, the client,
its event loop) and of the server process, each run's figures and their medians. The harness
CPU per step is the two processes' CPU through the server minus the in-process run's CPU: what
the round trip costs on top of playing the environment. Then the two parts of it apart: a step
within an open session (one long episode of ``--steps`` tool calls, one step at a time), and a
session (``--sessions`` resets of one environment: connect, reset with the tools, close the
last one), each against the same in process. Target: under 1 ms per step on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from as_the_cli import as_the_rollout_command
from figures import figure

from rk_agent.envs.registry import get_env_class
from rk_agent.envs.sources import get_source
from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig

TARGET_MS = 1.0
_TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(max_sessions: int) -> Iterator[tuple[str, int]]:
    """``rk-agent openenv serve --env tools`` on loopback: (its ws:// URL, its pid)."""
    port = _free_port()
    command = [sys.executable, "-m", "rk_agent", "openenv", "serve", "--env", "tools",
               "--port", str(port), "--max-sessions", str(max_sessions),
               "--env-kwargs", '{"max_turns": 100000}']  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        if "serving tools over OpenEnv" not in line:
            raise RuntimeError(f"the server did not start: {line!r}")
        httpx.get(f"http://127.0.0.1:{port}/health", trust_env=False).raise_for_status()
        yield f"ws://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stderr.close()  # type: ignore[union-attr]


def cpu_of(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def play(env: str, episodes: int, concurrency: int) -> tuple[float, float, int]:
    """Play the episodes; return (wall seconds, CPU seconds of this process, turns played)."""
    env_class = get_env_class(env)
    solver = get_env_class("tools").reference_solver
    assert solver is not None
    policy = FunctionPolicy(solver)
    config = RolloutConfig(env=env, n=episodes, concurrency=concurrency, max_turns=8,
                           episode_timeout_s=120)  # fmt: skip

    async def main() -> Any:
        return await run_rollouts(config, policy=policy, make_env=env_class, env_name=env)

    wall, cpu = time.perf_counter(), time.process_time()
    with as_the_rollout_command():
        result = asyncio.run(main())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    bad = [t for t in result.trajectories if t.failure is not None or t.episode is None
           or t.episode.score != 1.0]  # fmt: skip
    if bad:
        raise RuntimeError(f"{len(bad)} episodes failed or were not solved, e.g. {bad[0]}")
    return wall, cpu, sum(len(t.turns) for t in result.trajectories)


def in_session(url: str | None, pid: int | None, steps: int) -> tuple[float, float, float]:
    """One long episode of ``steps`` tool calls, one environment, one step at a time: (wall,
    this process's CPU, the server's CPU) per step, in seconds."""
    from rk_agent.envs.registry import make_env
    from rk_agent.types import FunctionCall, Message, ToolCall

    env = make_env(f"openenv:{url}" if url else "tools", max_turns=steps + 100)
    call = ToolCall(id="c", function=FunctionCall(name="weekday",
                                                  arguments='{"date": "2024-02-29"}'))  # fmt: skip
    turn = Message(role="assistant", tool_calls=[call])
    try:
        env.reset(seed=0)
        for _ in range(50):  # warm-up
            env.play_turn(turn)
        served = cpu_of(pid) if pid else 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            env.play_turn(turn)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        served = (cpu_of(pid) - served) if pid else 0.0
    finally:
        env.close()
    return wall / steps, cpu / steps, served / steps


def per_session(url: str | None, pid: int | None, sessions: int) -> tuple[float, float]:
    """Resets of one environment, each a new session (the last one closed): (this process's
    CPU, the server's CPU) per reset, in seconds."""
    from rk_agent.envs.registry import make_env

    env = make_env(f"openenv:{url}" if url else "tools")
    try:
        for seed in range(20):
            env.reset(seed=seed)
        served = cpu_of(pid) if pid else 0.0
        cpu = time.process_time()
        for seed in range(sessions):
            env.reset(seed=seed)
        cpu = time.process_time() - cpu
        served = (cpu_of(pid) - served) if pid else 0.0
    finally:
        env.close()
    return cpu / sessions, served / sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000, help="steps of the long episode")
    parser.add_argument("--sessions", type=int, default=300, help="sessions opened and closed")
    args = parser.parse_args()
    get_source("openenv").require()
    print(f"bench_openenv: {os.cpu_count()} CPUs, {args.episodes} episodes of tools, "
          f"{args.concurrency} at once, {args.runs} runs")  # fmt: skip
    rows: dict[str, list[float]] = {k: [] for k in ("local", "wall", "client", "server", "over",
                                                     "local_wall")}  # fmt: skip
    with server(max(64, args.concurrency)) as (url, pid):
        remote = f"openenv:{url}"
        play(remote, 32, args.concurrency)  # warm-up: imports, the schema, the inline budgets
        play("tools", 32, args.concurrency)
        print(f"\n{'run':<6}{'in process ms':>15}{'wall ms':>10}{'client ms':>11}"
              f"{'server ms':>11}{'harness ms':>12}   (per step)")  # fmt: skip
        for run in range(args.runs):
            local_wall, local_cpu, local_turns = play("tools", args.episodes, args.concurrency)
            served = cpu_of(pid)
            wall, client, turns = play(remote, args.episodes, args.concurrency)
            served = cpu_of(pid) - served
            per = {
                "local": local_cpu / local_turns * 1e3,
                "local_wall": local_wall / local_turns * 1e3,
                "wall": wall / turns * 1e3,
                "client": client / turns * 1e3,
                "server": served / turns * 1e3,
            }
            per["over"] = per["client"] + per["server"] - per["local"]
            for key, value in per.items():
                rows[key].append(value)
            print(f"{run + 1:<6}{per['local']:>15.3f}{per['wall']:>10.3f}{per['client']:>11.3f}"
                  f"{per['server']:>11.3f}{per['over']:>12.3f}   ({turns} steps)")  # fmt: skip
        wall, client, served = in_session(url, pid, args.steps)
        local_wall, local, _ = in_session(None, None, args.steps)
        opened_client, opened_server = per_session(url, pid, args.sessions)
        local_reset, _ = per_session(None, None, args.sessions)
    step_over = (client + served - local) * 1e3
    session_over = (opened_client + opened_server - local_reset) * 1e3
    print(
        f"\nin one session, one step at a time ({args.steps} steps): {wall * 1e3:.3f} ms wall "
        f"({local_wall * 1e3:.3f} in process), {client * 1e3:.3f} ms client CPU + "
        f"{served * 1e3:.3f} ms server CPU against {local * 1e3:.3f} in process: harness "
        f"{step_over:.3f} ms CPU a step"
    )
    print(
        f"a session (connect, reset with the tools, close; {args.sessions} of them): "
        f"{opened_client * 1e3:.3f} ms client CPU + {opened_server * 1e3:.3f} ms server CPU "
        f"against a reset in process of {local_reset * 1e3:.3f}: harness {session_over:.3f} ms"
    )
    median = {key: statistics.median(values) for key, values in rows.items()}
    print(f"\nmedian per step: in process {median['local']:.3f} ms CPU "
          f"({median['local_wall']:.3f} ms wall); through openenv serve {median['wall']:.3f} ms "
          f"wall, {median['client']:.3f} ms client CPU + {median['server']:.3f} ms server CPU; "
          f"harness {median['over']:.3f} ms CPU (target under {TARGET_MS:g} ms)")  # fmt: skip
    figure("OpenEnv round trip: harness CPU per step (tools episodes, sessions included)",
           median["over"], "ms", f"under {TARGET_MS:g} ms", median["over"] < TARGET_MS)  # fmt: skip
    figure("OpenEnv round trip: harness CPU per step within a session", step_over, "ms",
           f"under {TARGET_MS:g} ms", step_over < TARGET_MS)  # fmt: skip
    figure("OpenEnv round trip: harness CPU per session", session_over, "ms", "", None)
    figure("OpenEnv round trip: wall per step", median["wall"], "ms", "", None)
    figure("OpenEnv round trip: client CPU per step", median["client"], "ms", "", None)
    figure("OpenEnv round trip: server CPU per step", median["server"], "ms", "", None)
    figure("OpenEnv in process: CPU per step", median["local"], "ms", "", None)


if __name__ == "__main__":
    main()
