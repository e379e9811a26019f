"""Reward server under load on loopback, against a bare FastAPI endpoint (the ceiling).

Run: uv run python benchmarks/bench_reward_server.py [--requests 20000] [--concurrency 64]
     [--rounds 3]

Three servers, each a uvicorn process of its own with one worker and no access log:

- ``ceiling``: a bare FastAPI ``POST /evaluate`` that returns a constant;
- ``reward``: ``rk-agent``'s reward server (`rk_agent.server.serve_rewards`) with a
  trivial sync reward (exact match of the reply against ``ground_truth``), so every request
  goes through validation, the thread pool and the `EvaluateResult` serialisation;
- ``raising``: the same server with a reward that raises on every tenth request (those must
  come back as 200 with ``is_score_valid: false``; they count as successes).

The load generator is another process: ``--concurrency`` keep-alive connections over raw
asyncio sockets, ``--requests`` requests in all, latency measured per request. The servers run
one after the other, interleaved over ``--rounds`` rounds; the median round is reported. The
CPU time of the load generator and of the server process is measured too: on a small machine
the client may share the server's cores, and the server's CPU per request is the figure that
does not depend on that.

Targets (issue 5): reward server >= 80 % of the ceiling's throughput, p99 < 50 ms, zero failed
requests, with and without the raising reward.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

TARGET_RATIO = 0.80
TARGET_P99_MS = 50.0
KINDS = ("ceiling", "reward", "raising")
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}]


# --------------------------------------------------------------------------------------------
# Servers (each runs in its own process: `bench_reward_server.py --serve KIND --port P`)


def exact_match(response: str, ground_truth: str) -> float:
    """The trivial reward: 1.0 when the reply equals the ground truth."""
    return float(response.strip() == ground_truth)


def raising_match(response: str, ground_truth: str) -> float:
    """The trivial reward, but it raises when the ground truth says so (every tenth request)."""
    if ground_truth == "raise":
        raise ValueError("this sample makes the reward raise")
    return float(response.strip() == ground_truth)


def serve(kind: str, port: int) -> None:
    import logging

    # The raising reward logs each failure with its traceback; the cost of formatting it stays
    # in, but the lines go nowhere.
    logging.getLogger("rk_agent").addHandler(logging.NullHandler())
    logging.getLogger("rk_agent").propagate = False
    if kind == "ceiling":
        import uvicorn
        from fastapi import FastAPI

        app = FastAPI()

        @app.post("/evaluate")
        async def constant() -> dict[str, Any]:
            return {"score": 1.0, "is_score_valid": True}

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        uvicorn.run(app, host="127.0.0.1", port=port, access_log=False, log_level="warning")
        return
    from rk_agent.server import serve_rewards

    reward = exact_match if kind == "reward" else raising_match
    serve_rewards(reward, host="127.0.0.1", port=port, access_log=False, log_level="warning")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(kind: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port)],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process, port
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the {kind} server exited with {process.returncode}") from None
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the {kind} server did not start within 30 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------
# Load generator (its own process: `bench_reward_server.py --load PORT ...`)


def request_bytes(port: int, ground_truth: str) -> bytes:
    body = json.dumps({"messages": MESSAGES, "ground_truth": ground_truth}).encode()
    head = (
        f"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def load(port: int, total: int, concurrency: int, raising: bool) -> dict[str, Any]:
    normal, boom = request_bytes(port, "4"), request_bytes(port, "raise")
    latencies: list[float] = []
    counts = {"ok": 0, "invalid": 0, "failed": 0}
    failures: list[str] = []
    next_index = 0

    async def client() -> None:
        nonlocal next_index
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while next_index < total:
                index = next_index
                next_index += 1
                should_raise = raising and index % 10 == 9
                start = time.perf_counter()
                writer.write(boom if should_raise else normal)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head[9:12])
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length)
                latencies.append(time.perf_counter() - start)
                valid = b'"is_score_valid":true' in body
                if status == 200 and valid != should_raise:
                    counts["ok"] += 1
                    counts["invalid"] += not valid
                else:
                    counts["failed"] += 1
                    failures.append(f"{status} {body[:120]!r}")
        finally:
            writer.close()

    cpu = time.process_time()
    wall = time.perf_counter()
    results = await asyncio.gather(*(client() for _ in range(concurrency)), return_exceptions=True)
    wall = time.perf_counter() - wall
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    latencies.sort()
    return {
        "requests": len(latencies),
        "wall_s": wall,
        "client_cpu_s": time.process_time() - cpu,
        "rps": len(latencies) / wall,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        **counts,
        "failed": counts["failed"] + (total - len(latencies)),
        "failures": (failures + errors)[:5],
    }


def run_load(port: int, total: int, concurrency: int, raising: bool) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--load", str(port), "--requests", str(total),
        "--concurrency", str(concurrency),
    ] + (["--raising"] if raising else [])  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


# --------------------------------------------------------------------------------------------
# The benchmark


def measure(kind: str, total: int, concurrency: int) -> dict[str, Any]:
    process, port = start_server(kind)
    try:
        run_load(port, min(2000, total), concurrency, raising=False)  # warm up
        server_cpu = cpu_seconds(process.pid)
        figures = run_load(port, total, concurrency, raising=kind == "raising")
        figures["server_cpu_s"] = cpu_seconds(process.pid) - server_cpu
    finally:
        process.terminate()
        process.wait(timeout=30)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--load", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--raising", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    if args.load:
        figures = asyncio.run(load(args.load, args.requests, args.concurrency, args.raising))
        print(json.dumps(figures))
        return

    print(
        f"{args.requests} requests, {args.concurrency} concurrent keep-alive clients, "
        f"{args.rounds} round(s), {os.cpu_count()} CPUs; servers: 1 uvicorn worker each"
    )
    rounds: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for round_index in range(args.rounds):
        for kind in KINDS:
            figures = measure(kind, args.requests, args.concurrency)
            rounds[kind].append(figures)
            print(f"  round {round_index + 1} {kind:<8} {line(figures)}")
    median = {kind: _median_round(rounds[kind]) for kind in KINDS}
    print("\nmedian round:")
    ceiling = median["ceiling"]["rps"]
    verdicts = []
    for kind in KINDS:
        figures = median[kind]
        print(f"  {kind:<8} {line(figures)}")
        if kind == "ceiling":
            continue
        ratio = figures["rps"] / ceiling
        ok = ratio >= TARGET_RATIO and figures["p99_ms"] < TARGET_P99_MS and not figures["failed"]
        verdicts.append(ok)
        print(
            f"           {ratio:.0%} of the ceiling (target >= {TARGET_RATIO:.0%}), "
            f"p99 {figures['p99_ms']:.1f} ms (target < {TARGET_P99_MS:.0f} ms), "
            f"failed {figures['failed']} (target 0), invalid results {figures['invalid']}"
            f"{' (the raising tenth)' if kind == 'raising' else ''}: "
            f"{'MET' if ok else 'NOT MET'}"
        )
        for failure in figures["failures"]:
            print(f"           e.g. {failure}")
    print(
        "RESULT "
        + " ".join(
            f"{kind}_rps={median[kind]['rps']:.0f} {kind}_p99_ms={median[kind]['p99_ms']:.1f}"
            for kind in KINDS
        )
        + f" targets_met={all(verdicts)}"
    )


def line(figures: dict[str, Any]) -> str:
    per_request_us = 1e6 * figures["server_cpu_s"] / max(1, figures["requests"])
    return (
        f"{figures['rps']:7.0f} req/s  p50 {figures['p50_ms']:5.1f} ms  "
        f"p99 {figures['p99_ms']:5.1f} ms  failed {figures['failed']}  "
        f"server CPU {per_request_us:4.0f} us/req ({figures['server_cpu_s']:.1f} s), "
        f"client CPU {figures['client_cpu_s']:.1f} s of {figures['wall_s']:.1f} s wall"
    )


def _median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median throughput (the upper one of two middle rounds)."""
    return sorted(rounds, key=lambda f: f["rps"])[len(rounds) // 2]


if __name__ == "__main__":
    main()
