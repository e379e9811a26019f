"""Instructions per turn of the rollout engine, counted by valgrind: the harness's cost that
other load on the machine hardly moves.

Run: uv run python benchmarks/bench_engine_instructions.py [--episodes 300] [--concurrency 32]

``bench_engine.py``'s CPU time per turn grows by half when other tenants share the host; the
instructions the process runs per turn do not (runs agree within about 1 %). This plays
``bench_engine.py``'s episodes (the `tools` environment, 3 turns, 0 ms of model latency) under
``valgrind --tool=callgrind`` with counting off, plays a warm-up (imports, connections, the
first calls of every step and tool), switches counting on (``callgrind_control -i on``) for
``--episodes`` episodes and off again; the instructions over the turns played is the figure.
Two kinds: ``scripted`` (an in-process `ScriptedPolicy`: engine, environment and rewards) and
``http`` (`OpenAIPolicy` against the stub server, which runs in a process of its own and is
not counted: the whole harness, its HTTP client included). The ``tools`` environment declares
its steps and tools inline (``inline_steps``, ``@tool(inline=True)``), so they run on the event
loop under valgrind as in a normal run. Only user space counts. Needs valgrind
(``apt-get install valgrind``); each kind takes about half a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

import bench_engine as bench
import callgrind
from figures import figure

KINDS = ("scripted", "http")


def count(kind: str, episodes: int, concurrency: int) -> tuple[float, int]:
    """(instructions per turn, turns counted) of one kind, played under callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        under, log = callgrind.prefix(folder)
        command = [
            *under, sys.executable, __file__, "--play", kind, "--episodes", str(episodes),
            "--concurrency", str(concurrency),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        found = callgrind.collected(log)
    turns = re.findall(r"^TURNS (\d+)$", done.stdout, flags=re.MULTILINE)
    if done.returncode != 0 or found is None or not turns:
        raise RuntimeError(
            f"{kind}: exit {done.returncode}, valgrind counted {found}: {done.stderr}"
        )
    return found / int(turns[-1]), int(turns[-1])


def play(kind: str, episodes: int, concurrency: int) -> None:
    """The counted process: a warm-up, then ``episodes`` episodes with counting on."""
    from rk_agent.policies.function_policy import tool_call
    from rk_agent.policies.openai_policy import OpenAIPolicy
    from rk_agent.testing.scripted_policy import ScriptedPolicy

    script = [tool_call("calculator", {"expression": "1+1"})] * (bench.TURNS - 1) + ["Answer: 42"]

    def counted(make: Any) -> int:
        bench.play(make(), 64, concurrency)  # warm-up, not counted
        policy = make()
        callgrind.switch(os.getpid(), "on")
        _, _, turns = bench.play(policy, episodes, concurrency)
        callgrind.switch(os.getpid(), "off")
        return turns

    if kind == "scripted":
        turns = counted(lambda: ScriptedPolicy(script))
    else:
        with bench.stub_server(0.0) as url:
            turns = counted(lambda: OpenAIPolicy("stub-model", base_url=url,
                                                 max_concurrency=concurrency))  # fmt: skip
    print(f"TURNS {turns}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--play", choices=KINDS, help=argparse.SUPPRESS)  # the counted process
    args = parser.parse_args()
    if args.play:
        play(args.play, args.episodes, args.concurrency)
        return
    callgrind.require()
    print(
        f"instructions per turn (user space, callgrind), {args.episodes} episodes of "
        f"{bench.TURNS} turns at concurrency {args.concurrency}, 0 ms latency"
    )
    labels = {"scripted": "engine + env (scripted policy, no HTTP)",
              "http": "whole harness incl. HTTP client (OpenAIPolicy)"}  # fmt: skip
    for kind in args.kinds:
        per_turn, turns = count(kind, args.episodes, args.concurrency)
        print(f"  {labels[kind]:<48} {per_turn:10,.0f} instructions per turn ({turns} turns)")
        figure(f"{labels[kind]}: instructions per turn (callgrind)", per_turn, "",
               "none (the harness's cost, whatever else runs)", None)  # fmt: skip


if __name__ == "__main__":
    main()
