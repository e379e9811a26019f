"""Tool-call overhead through MCP against the same tool as an in-process ``@tool``.

Run: uv run python benchmarks/bench_mcp.py [--calls 2000] [--stress-calls 4]

The tool is the ``tools`` environment's ``calculator``, called the way an environment calls it
(``Tool.run``): in process, and through rk-agent's own MCP server (``rk-agent mcp serve --env
tools``, a separate process) over stdio and over streamable HTTP on loopback, each time through
one shared `rk_agent.mcp.McpServers` connection. For concurrency 1 and 64 it prints the p50 and
p90 latency per call, and the p50 overhead (MCP p50 minus in-process p50). Targets: p50 overhead
under 2 ms over stdio and under 5 ms over HTTP, at concurrency 1.

Then 256 threads (256 concurrent episodes) call through one server at once, ``--stress-calls``
calls each, over both transports: every call must answer (target: 0 failures).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from figures import figure

from rk_agent.envs.tool import Tool
from rk_agent.envs.toolbox import calculator
from rk_agent.mcp import McpServers

SERVE = [sys.executable, "-m", "rk_agent", "mcp", "serve", "--env", "tools", "--no-task-tools"]
ARGUMENTS = {"expression": "round(84480000 / 357588, 1)"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server() -> Iterator[str]:
    """rk-agent's tools server on loopback HTTP; yields its URL."""
    port = _free_port()
    process = subprocess.Popen([*SERVE, "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        process.stderr.readline()  # "serving tools over MCP at ..."
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def latencies(call: Callable[[], Any], calls: int, concurrency: int) -> list[float]:
    """Per-call wall times of ``calls`` calls made by ``concurrency`` threads at once."""
    per_thread = max(1, calls // concurrency)
    times: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(concurrency)

    def work() -> None:
        mine = []
        start.wait()
        for _ in range(per_thread):
            began = time.perf_counter()
            result = call()
            mine.append(time.perf_counter() - began)
            if not result.ok:
                raise RuntimeError(result.content)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def stress(tool: Tool, episodes: int, calls: int) -> tuple[int, int]:
    """``episodes`` threads each making ``calls`` calls at once: (answered, failed)."""
    answered = failed = 0
    lock = threading.Lock()
    start = threading.Barrier(episodes)

    def episode(index: int) -> None:
        nonlocal answered, failed
        start.wait()
        for call in range(calls):
            result = tool.run({"expression": f"{index} * 1000 + {call}"})
            good = result.ok and result.content == str(index * 1000 + call)
            with lock:
                answered += good
                failed += not good

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(episodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answered, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--stress-calls", type=int, default=4)
    args = parser.parse_args()
    print(f"bench_mcp: {os.cpu_count()} CPUs, {args.calls} calls per measurement")

    with http_server() as url:
        config = {
            "stdio": {"command": SERVE[0], "args": SERVE[1:], "toolPrefix": "stdio_"},
            "http": {"url": url, "toolPrefix": "http_"},
        }
        with McpServers(config) as servers:
            tools = {t.name: t for t in servers.open_toolset().tools()}
            transports: dict[str, Tool] = {
                "in-process @tool": calculator,
                "MCP stdio": tools["stdio_calculator"],
                "MCP HTTP": tools["http_calculator"],
            }
            for tool in transports.values():  # warm up
                latencies(lambda tool=tool: tool.run(ARGUMENTS), 200, 1)
            print(f"\n{'transport':<18}{'conc.':>6}{'p50 ms':>10}{'p90 ms':>10}"
                  f"{'overhead p50 ms':>18}{'calls/s':>10}")  # fmt: skip
            for concurrency in (1, 64):
                base = None
                for label, tool in transports.items():
                    began = time.perf_counter()
                    times = latencies(
                        lambda tool=tool: tool.run(ARGUMENTS), args.calls, concurrency
                    )
                    rate = len(times) / (time.perf_counter() - began)
                    p50 = percentile(times, 0.5) * 1000
                    base = p50 if base is None else base
                    overhead = "" if label.startswith("in-process") else f"{p50 - base:.3f}"
                    p90 = percentile(times, 0.9) * 1000
                    print(f"{label:<18}{concurrency:>6}{p50:>10.3f}{p90:>10.3f}"
                          f"{overhead:>18}{rate:>10.0f}")  # fmt: skip
                    figure(f"{label} p50 at concurrency {concurrency}", p50, "ms", "", None)
            print()
            for label in ("MCP stdio", "MCP HTTP"):
                answered, failed = stress(transports[label], 256, args.stress_calls)
                print(f"{label}: 256 concurrent episodes x {args.stress_calls} calls: "
                      f"{answered} answered, {failed} failed")  # fmt: skip
                figure(f"{label}: calls lost of 256 x {args.stress_calls}", failed, "",
                       "0", failed == 0)  # fmt: skip


if __name__ == "__main__":
    main()
