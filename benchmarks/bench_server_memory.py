"""Peak resident memory of the reward server under concurrent large ``/batch`` requests.

Run: uv run python benchmarks/bench_server_memory.py [--clients 8] [--mb 4]

Starts ``rk-agent serve format`` (a subprocess on loopback) once per setting of
``--max-batches`` (2, the default, and one per client, which is what the server did before the
limit), sends ``--clients`` concurrent ``/batch`` requests of about ``--mb`` MB each (samples
with replies of ``--reply-chars``; short ones make many samples per request), and prints the
server's resident memory at rest and its peak (``VmHWM``), and the wall time of the burst.
Every request must come back 200 with one result per sample.

Target (issue 14): memory bounded per request and in total; before the limit, 8 concurrent
4 MB batches took the server from 76 MB to 1.3 GB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def _body(megabytes: float, reply_chars: int) -> bytes:
    reply = "<think>" + "x" * reply_chars + "</think><answer>4</answer>"
    sample = {"messages": [{"role": "user", "content": "2+2?"},
                           {"role": "assistant", "content": reply}]}  # fmt: skip
    count = max(1, int(megabytes * 1024 * 1024 / len(json.dumps(sample))))
    return json.dumps({"samples": [sample] * count}).encode()


async def _post(port: int, body: bytes) -> tuple[int, int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    payload = raw.split(b"\r\n\r\n", 1)[1]
    return status, len(json.loads(payload).get("results", [])) if status == 200 else 0


async def _burst(port: int, body: bytes, clients: int) -> list[tuple[int, int]]:
    return list(await asyncio.gather(*(_post(port, body) for _ in range(clients))))


def _measure(
    max_batches: int, clients: int, megabytes: float, reply_chars: int
) -> dict[str, float]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "serve", "format", "--port", str(port),
         "--no-access-log", "--max-body-mb", str(megabytes * 2), "--max-batches",
         str(max_batches)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_ready(f"http://127.0.0.1:{port}", process)
        rest = _memory_mb(process.pid, "VmRSS")
        body = _body(megabytes, reply_chars)
        started = time.perf_counter()
        answers = asyncio.run(_burst(port, body, clients))
        wall = time.perf_counter() - started
        peak = _memory_mb(process.pid, "VmHWM")
        samples = json.loads(body)["samples"]
        if any(status != 200 or count != len(samples) for status, count in answers):
            raise SystemExit(f"max_batches={max_batches}: a request failed: {answers}")
        return {"rest_mb": rest, "peak_mb": peak, "wall_s": wall, "body_mb": len(body) / 2**20}
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument(
        "--reply-chars",
        type=int,
        default=100,
        help="length of each sample's reply (small: many samples)",
    )
    a = parser.parse_args()
    samples = len(json.loads(_body(a.mb, a.reply_chars))["samples"])
    print(f"{a.clients} concurrent /batch requests of ~{a.mb:g} MB ({samples} samples each), "
          "`rk-agent serve format`")  # fmt: skip
    print(f"{'--max-batches':>14} {'at rest':>9} {'peak':>9} {'burst':>8}")
    for max_batches in (2, a.clients):
        row = _measure(max_batches, a.clients, a.mb, a.reply_chars)
        print(f"{max_batches:>14} {row['rest_mb']:>6.0f} MB {row['peak_mb']:>6.0f} MB "
              f"{row['wall_s']:>6.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
