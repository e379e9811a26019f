"""Reward server under load on loopback, against reward-kit 0.4.1's server and a bare endpoint.

Run: uv run python benchmarks/bench_reward_server.py [--seconds 5] [--concurrency 64 256]
     [--rounds 3] [--load-generator wrk|python] [--no-pin]

Five servers, each a uvicorn process of its own with one worker:

- ``ceiling``: a bare FastAPI ``POST /evaluate`` that returns a constant, no access log (the
  most one uvicorn worker serves here);
- ``reward-kit``: reward-kit 0.4.1's ``create_app`` under uvicorn (its ``POST /reward``, no
  access log), with the trivial reward as a plain function returning a dict (its fast path: a
  ``@reward_function`` result is logged as a warning on every request). reward-kit is not a
  dependency of rk-agent: it runs in an isolated environment of its own, as ``pip install
  reward-kit==0.4.1`` makes it (``uv run --isolated --no-project --with reward-kit==0.4.1``;
  ``mcp<2``: its import needs an older ``mcp``). It declares plain ``uvicorn``, so uvicorn parses
  HTTP with h11 there. (Without ``--isolated`` uv lays that environment over this project's
  virtual environment, and reward-kit's server found rk-agent's httptools.)
- ``reward-kit+httptools``: the same, with httptools added to its environment (the parser
  rk-agent's server uses; ``uvicorn[standard]`` would add it, and uvloop): for information, no
  target of its own;
- ``reward``: rk-agent's reward server (`rk_agent.server.serve_rewards`) **with its defaults**
  (threads, shedding, limits and logging as shipped) and a trivial sync reward (exact match
  of the reply against ``ground_truth``), so every request goes through validation, the thread
  pool and the `EvaluateResult` serialisation;
- ``raising``: the same server with a reward that raises on every tenth request (those must
  come back as 200 with ``is_score_valid: false``; they count as successes).

The load generator is another process with ``--concurrency`` keep-alive connections, for
``--seconds`` after a second of warm-up: ``wrk`` when it is on PATH (Debian/Ubuntu ``apt-get
install wrk``, macOS ``brew install wrk``; its script ``wrk_evaluate.lua`` checks every answer),
else (or with ``--load-generator python``) a Python asyncio process over raw sockets, which
spends two to three times wrk's CPU per request (about 50 us against 20 us here). With two CPUs
or more the load generator is pinned to the first CPU and every server to the others, so that
it never takes the server's core (``--no-pin``: the scheduler places them; on two cores the
generator then shares the server's). The servers run one after the other, interleaved
over ``--rounds`` rounds; the median round is reported. The CPU time of the load generator and
of the server process is measured too: the server's CPU per request is the figure that does
not depend on the load generator.

``--pools`` measures instead what a call of the trivial reward costs through the server's
thread pool and through a pool of worker processes (the process pool would let a hung reward be
killed; issue 25 item 7): 20,000 calls, 64 in flight, from an asyncio loop; calls/s and CPU per
call, the workers' CPU included.

Targets (issue 25): the reward server with its defaults at least 2x reward-kit's requests/s at
64 and at 256 connections, with no answer but 200 (issue 5's, kept: >= 80 % of the ceiling,
p99 < 50 ms at 64 connections).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.metadata
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from figures import figure

TARGET_RATIO = 0.80
TARGET_P99_MS = 50.0
TARGET_VS_REWARD_KIT = 2.0
KINDS = ("ceiling", "reward-kit", "reward-kit+httptools", "reward", "raising")
REWARD_KIT = [
    "uv", "run", "--isolated", "--no-project", "--with", "reward-kit==0.4.1", "--with", "mcp<2",
]  # fmt: skip
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}]
WRK_SCRIPT = Path(__file__).with_name("wrk_evaluate.lua")
WARM_UP_S = 1
Generator = Callable[[int, float, int, bool, str, "set[int] | None"], dict[str, Any]]
"""A load generator: (port, seconds, connections, raising, path, CPUs) -> its figures."""


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


def reward_kit_exact(messages: list[dict[str, Any]], ground_truth: Any = None, **_: Any) -> Any:
    """The trivial reward in reward-kit's contract: a dict with the score."""
    return {"score": float(messages[-1]["content"].strip() == ground_truth), "is_score_valid": True}


def serve(kind: str, port: int) -> None:
    if kind.startswith("reward-kit"):
        import uvicorn
        from reward_kit.server import create_app

        app = create_app(reward_kit_exact)
        uvicorn.run(app, host="127.0.0.1", port=port, access_log=False, log_level="warning")
        return
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
    serve_rewards(reward, host="127.0.0.1", port=port)  # the defaults, logging included


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that keeps a child (and every thread and child it starts) on ``cpus``."""
    return None if cpus is None else functools.partial(os.sched_setaffinity, 0, cpus)


def start_server(kind: str, cpus: set[int] | None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    python = [sys.executable]
    if kind == "reward-kit":
        python = [*REWARD_KIT, "python"]
    elif kind == "reward-kit+httptools":  # the httptools rk-agent runs with
        python = [*REWARD_KIT, "--with", f"httptools=={importlib.metadata.version('httptools')}",
                  "python"]  # fmt: skip
    process = subprocess.Popen(
        [*python, __file__, "--serve", kind, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pinned(cpus),
    )  # fmt: skip
    deadline = time.monotonic() + 120  # the first reward-kit run installs it
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process, port
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the {kind} server exited with {process.returncode}") from None
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the {kind} server did not start within 120 s")


def server_pid(process: subprocess.Popen[bytes]) -> int:
    """The process that serves: ``uv run`` starts the reward-kit server as its child."""
    found = [
        pid
        for task in Path(f"/proc/{process.pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    return int(found[0]) if found else process.pid


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def http_parser(pid: int) -> str:
    """Which HTTP parser a uvicorn server runs: httptools when its library is loaded."""
    return "httptools" if "httptools" in Path(f"/proc/{pid}/maps").read_text() else "h11"


# --------------------------------------------------------------------------------------------
# Load generators: wrk, else a Python process (`bench_reward_server.py --load PORT ...`)


def sample_body(ground_truth: str) -> str:
    return json.dumps({"messages": MESSAGES, "ground_truth": ground_truth})


def request_bytes(port: int, ground_truth: str, path: str = "/evaluate") -> bytes:
    body = sample_body(ground_truth).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def run_wrk(
    port: int, seconds: float, concurrency: int, raising: bool, path: str, cpus: set[int] | None
) -> dict[str, Any]:
    """One wrk run (one thread); its figures in the Python generator's form."""
    command = [
        "wrk", "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "--timeout", "10s",
        "-s", str(WRK_SCRIPT), f"http://127.0.0.1:{port}{path}", "--", path,
        sample_body("4"), sample_body("raise") if raising else "",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, preexec_fn=pinned(cpus)
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in out.stdout.splitlines() if line.startswith("WRK_RESULT ")]
    if not lines:
        raise RuntimeError(f"wrk printed no result: {out.stdout[-500:]} {out.stderr[-500:]}")
    found = json.loads(lines[-1].removeprefix("WRK_RESULT "))
    wall = found["duration_us"] / 1e6
    failed = found["non2xx"] + found["wrong"] + found["socket_errors"]
    if raising and abs(found["invalid"] - found["sent"] // 10) > concurrency:
        failed += abs(found["invalid"] - found["sent"] // 10)  # a raising sample answered valid
    return {
        "requests": found["requests"],
        "wall_s": wall,
        "client_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "rps": found["requests"] / wall,
        "p50_ms": found["p50_us"] / 1000,
        "p99_ms": found["p99_us"] / 1000,
        "ok": found["ok"] + found["invalid"],
        "invalid": found["invalid"],
        "failed": failed,
        "failures": [f for f in found["failures"].split("|") if f][:5],
    }


async def load(
    port: int, seconds: float, concurrency: int, raising: bool, path: str
) -> dict[str, Any]:
    normal, boom = request_bytes(port, "4", path), request_bytes(port, "raise", path)
    latencies: list[float] = []
    counts = {"ok": 0, "invalid": 0, "failed": 0}
    failures: list[str] = []
    next_index = 0
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal next_index
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
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
        "failed": counts["failed"] + len(errors),
        "failures": (failures + errors)[:5],
    }


def run_python(
    port: int, seconds: float, concurrency: int, raising: bool, path: str, cpus: set[int] | None
) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--load", str(port), "--seconds", str(seconds),
        "--concurrency", str(concurrency), "--path", path,
    ] + (["--raising"] if raising else [])  # fmt: skip
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, preexec_fn=pinned(cpus)
    )
    return dict(json.loads(out.stdout))


# --------------------------------------------------------------------------------------------
# The benchmark


def measure(
    kind: str, seconds: float, concurrency: int, generator: Generator, cpus: tuple[Any, Any]
) -> dict[str, Any]:
    """One server, started fresh: warmed up, then loaded for ``seconds``."""
    client_cpus, server_cpus = cpus
    process, port = start_server(kind, server_cpus)
    path = "/reward" if kind.startswith("reward-kit") else "/evaluate"
    try:
        generator(port, WARM_UP_S, concurrency, False, path, client_cpus)
        server = server_pid(process)
        server_cpu = cpu_seconds(server)
        figures = generator(port, seconds, concurrency, kind == "raising", path, client_cpus)
        figures["server_cpu_s"] = cpu_seconds(server) - server_cpu
        figures["parser"] = http_parser(server)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return dict(figures)


# --------------------------------------------------------------------------------------------
# Threads or processes for the reward (`--pools`)


async def _through_threads(calls: int, in_flight: int) -> float:
    from rk_agent.server._reward_caller import ThreadPool

    pool = ThreadPool(min(32, (os.cpu_count() or 1) + 4))
    call = functools.partial(exact_match, "4", "4")
    await _drive(lambda: pool.submit(call), calls, in_flight)
    pool.close()
    return 0.0


async def _through_processes(calls: int, in_flight: int) -> float:
    from concurrent.futures import ProcessPoolExecutor

    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        await asyncio.gather(
            *(loop.run_in_executor(pool, exact_match, "4", "4") for _ in range(64))
        )
        workers = [p.pid for p in pool._processes.values()]
        before = sum(cpu_seconds(pid) for pid in workers)
        await _drive(lambda: loop.run_in_executor(pool, exact_match, "4", "4"), calls, in_flight)
        return sum(cpu_seconds(pid) for pid in workers) - before


def _pipe_worker(conn: Any) -> None:
    while (args := conn.recv()) is not None:
        conn.send(exact_match(*args))


async def _through_pipes(calls: int, in_flight: int) -> float:
    """The leanest process pool: one pipe per worker, calls pipelined, answers in order."""
    import collections
    import multiprocessing

    loop = asyncio.get_running_loop()
    workers = []
    for _ in range(os.cpu_count() or 1):
        ours, theirs = multiprocessing.get_context("fork").Pipe()
        process = multiprocessing.get_context("fork").Process(
            target=_pipe_worker, args=(theirs,), daemon=True
        )
        process.start()
        waiting: collections.deque[asyncio.Future[Any]] = collections.deque()

        def answered(conn: Any = ours, waiting: Any = waiting) -> None:
            while conn.poll():
                waiting.popleft().set_result(conn.recv())

        loop.add_reader(ours.fileno(), answered)
        workers.append((ours, process, waiting))
    turn = [0]

    def start() -> asyncio.Future[Any]:
        conn, _, waiting = workers[turn[0] % len(workers)]
        turn[0] += 1
        future = loop.create_future()
        waiting.append(future)
        conn.send(("4", "4"))
        return future

    before = sum(cpu_seconds(p.pid) for _, p, _ in workers)
    await _drive(start, calls, in_flight)
    spent = sum(cpu_seconds(p.pid) for _, p, _ in workers) - before
    for conn, process, _ in workers:
        loop.remove_reader(conn.fileno())
        conn.send(None)
        process.join()
    return spent


async def _drive(start: Any, calls: int, in_flight: int) -> None:
    left = [calls]

    async def lane() -> None:
        while left[0] > 0:
            left[0] -= 1
            await start()

    await asyncio.gather(*(lane() for _ in range(in_flight)))


def pools(calls: int = 20_000, in_flight: int = 64) -> None:
    print(
        f"the trivial reward, {calls} calls, {in_flight} in flight, {os.cpu_count()} CPUs: the "
        "server's thread pool, a ProcessPoolExecutor, and one pipe per worker process"
    )
    kinds = (
        ("threads", _through_threads), ("processes", _through_processes),
        ("pipes", _through_pipes),
    )  # fmt: skip
    for name, run in kinds:
        cpu, wall = time.process_time(), time.perf_counter()
        workers_cpu = asyncio.run(run(calls, in_flight))
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu + workers_cpu
        print(
            f"  {name:<10} {calls / wall:8.0f} calls/s  {1e6 * cpu / calls:5.0f} us CPU per call "
            f"(workers {1e6 * workers_cpu / calls:.0f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="load per run, after warm-up")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--load-generator", choices=("wrk", "python"), help="default: wrk when on PATH"
    )
    parser.add_argument("--no-pin", action="store_true", help="leave CPUs to the scheduler")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--load", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--path", default="/evaluate", help=argparse.SUPPRESS)
    parser.add_argument("--raising", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pools", action="store_true", help="threads against processes")
    args = parser.parse_args()
    if args.pools:
        pools()
        return
    if args.serve:
        serve(args.serve, args.port)
        return
    if args.load:
        concurrency = args.concurrency[0]
        figures = asyncio.run(load(args.load, args.seconds, concurrency, args.raising, args.path))
        print(json.dumps(figures))
        return

    generator, name = choose_generator(args.load_generator)
    cpus = sorted(os.sched_getaffinity(0))
    split: tuple[Any, Any] = (None, None)
    where = "CPUs left to the scheduler"
    if len(cpus) >= 2 and not args.no_pin:
        split = ({cpus[0]}, set(cpus[1:]))
        where = f"load generator pinned to CPU {cpus[0]}, each server to CPU(s) {cpus[1:]}"
    print(
        f"{args.seconds:g} s of load per run after {WARM_UP_S} s of warm-up, {args.rounds} "
        f"round(s), {len(cpus)} CPUs; load from {name}; {where}; servers: 1 uvicorn worker each"
    )
    verdicts: list[bool] = []
    results: list[str] = []
    for concurrency in args.concurrency:
        print(f"\n{concurrency} concurrent keep-alive clients")
        rounds: dict[str, list[dict[str, Any]]] = {kind: [] for kind in args.kinds}
        for round_index in range(args.rounds):
            for kind in args.kinds:
                figures = measure(kind, args.seconds, concurrency, generator, split)
                rounds[kind].append(figures)
                print(f"  round {round_index + 1} {kind:<20} {line(figures)}", flush=True)
        median = {kind: _median_round(rounds[kind]) for kind in args.kinds}
        print(f"median round at {concurrency}:")
        for kind in args.kinds:
            print(f"  {kind:<20} {line(median[kind])}")
        if {"reward-kit", "reward", "raising", "ceiling"} <= set(median):
            verdicts.append(_verdict(median, concurrency))
        results += [
            f"c{concurrency}_{k.replace('-', '_').replace('+', '_')}_rps={median[k]['rps']:.0f}"
            for k in args.kinds
        ]
    print("RESULT " + " ".join(results) + f" targets_met={bool(verdicts) and all(verdicts)}")


def choose_generator(wanted: str | None) -> tuple[Generator, str]:
    """wrk when asked or found on PATH, else the Python generator (said so, with the cost)."""
    if wanted == "wrk" and shutil.which("wrk") is None:
        raise SystemExit("--load-generator wrk: wrk is not on PATH (apt-get install wrk)")
    if wanted != "python" and shutil.which("wrk") is not None:
        return run_wrk, "wrk (1 thread)"
    if wanted is None:
        print(
            "wrk is not on PATH (Debian/Ubuntu: apt-get install wrk; macOS: brew install wrk): "
            "the load comes from a Python asyncio process instead, which spends two to three "
            "times wrk's CPU per request"
        )
    return run_python, "a Python asyncio process"


def _verdict(median: dict[str, dict[str, Any]], concurrency: int) -> bool:
    """Print the targets at one concurrency; whether all were met."""
    ok = True
    for kind in ("reward", "raising"):
        figures = median[kind]
        times = figures["rps"] / median["reward-kit"]["rps"]
        met = times >= TARGET_VS_REWARD_KIT and not figures["failed"]
        extra = ""
        if concurrency <= 64:  # issue 5's targets, kept at 64 connections
            ratio = figures["rps"] / median["ceiling"]["rps"]
            met = met and ratio >= TARGET_RATIO and figures["p99_ms"] < TARGET_P99_MS
            extra = (
                f", {ratio:.0%} of the ceiling (target >= {TARGET_RATIO:.0%}), p99 "
                f"{figures['p99_ms']:.1f} ms (target < {TARGET_P99_MS:.0f} ms)"
            )
        label = f"{kind} at {concurrency} connections"
        figure(f"{label}: requests/s over reward-kit 0.4.1's, same run", times, "x",
               f">= {TARGET_VS_REWARD_KIT:g}x", times >= TARGET_VS_REWARD_KIT)  # fmt: skip
        figure(f"{label}: non-2xx or wrong answers", figures["failed"], "", "0",
               not figures["failed"])  # fmt: skip
        if "reward-kit+httptools" in median:
            over = figures["rps"] / median["reward-kit+httptools"]["rps"]
            figure(f"{label}: requests/s over reward-kit 0.4.1's given httptools, same run",
                   over, "x", "none (information)", None)  # fmt: skip
            extra += f"; {over:.2f}x reward-kit given httptools"
        print(
            f"  {kind}: {times:.2f}x reward-kit (target >= {TARGET_VS_REWARD_KIT:g}x), "
            f"non-2xx or wrong {figures['failed']} (target 0){extra}, invalid results "
            f"{figures['invalid']}{' (the raising tenth)' if kind == 'raising' else ''}: "
            f"{'MET' if met else 'NOT MET'}"
        )
        for failure in figures["failures"]:
            print(f"           e.g. {failure}")
        ok = ok and met
    per_request = {k: 1e6 * f["server_cpu_s"] / max(1, f["requests"]) for k, f in median.items()}
    figure(f"reward at {concurrency} connections: server CPU per request", per_request["reward"],
           "us", "none (the figure that does not depend on the load generator)", None)  # fmt: skip
    figure(f"reward-kit at {concurrency} connections: server CPU per request",
           per_request["reward-kit"], "us", "none", None)  # fmt: skip
    return ok


def line(figures: dict[str, Any]) -> str:
    per_request_us = 1e6 * figures["server_cpu_s"] / max(1, figures["requests"])
    return (
        f"{figures['rps']:7.0f} req/s  p50 {figures['p50_ms']:5.1f} ms  "
        f"p99 {figures['p99_ms']:5.1f} ms  failed {figures['failed']}  "
        f"server CPU {per_request_us:4.0f} us/req ({figures['server_cpu_s']:.1f} s, "
        f"{figures['parser']}), client CPU {figures['client_cpu_s']:.1f} s of "
        f"{figures['wall_s']:.1f} s wall"
    )


def _median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median throughput (the upper one of two middle rounds)."""
    return sorted(rounds, key=lambda f: f["rps"])[len(rounds) // 2]


if __name__ == "__main__":
    main()
