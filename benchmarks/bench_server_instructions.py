"""Instructions per request of the reward server, counted by valgrind: a cost that other load
on the machine hardly moves.

Run: uv run python benchmarks/bench_server_instructions.py [--seconds 10] [--concurrency 64]
     [--kinds reward raising ceiling]

CPU time per request (``bench_reward_server.py``) grows when other processes share the cores;
the instructions a server runs per request hardly move (runs agree within about 4 %). Each
server of ``bench_reward_server.py`` that runs in this project's environment (``reward``,
``raising``, ``ceiling``; reward-kit's runs in an environment of its own) is started under
``valgrind --tool=callgrind`` with counting off; after a second of load it is switched on
(``callgrind_control -i on``) for ``--seconds`` of load from wrk (else the Python generator),
then off; the instructions counted over the requests answered is the figure. Only user space
counts: the kernel's share of a request (its system time, about a tenth of the CPU time here)
does not. Needs valgrind (``apt-get install valgrind``); under it a server answers about 200
requests/s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request

import bench_reward_server as bench
import callgrind
from figures import figure

KINDS = ("reward", "raising", "ceiling")
START_S = 300  # a server's start under valgrind (imports run some 20x slower)


def count(kind: str, seconds: float, concurrency: int, generator: bench.Generator) -> float:
    """Instructions per request of one server under callgrind."""
    port = bench.free_port()
    with tempfile.TemporaryDirectory() as folder:
        under, log = callgrind.prefix(folder)
        command = [*under, sys.executable, bench.__file__, "--serve", kind, "--port", str(port)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(port, process)
            generator(port, 1, concurrency, False, "/evaluate", None)  # warm-up, not counted
            callgrind.switch(process.pid, "on")
            figures = generator(port, seconds, concurrency, kind == "raising", "/evaluate", None)
            callgrind.switch(process.pid, "off")
        finally:
            process.terminate()
            process.wait(timeout=120)
        found = callgrind.collected(log)
    if figures["failed"] or found is None:
        raise RuntimeError(f"{kind}: {figures['failed']} failed answers, valgrind counted {found}")
    return found / figures["requests"]


def wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode}") from None
            time.sleep(0.5)
    raise RuntimeError(f"the server did not start under valgrind within {START_S} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    args = parser.parse_args()
    callgrind.require()
    generator, name = bench.choose_generator(None)
    print(
        f"instructions per request (user space, callgrind), {args.seconds:g} s of load from "
        f"{name} at {args.concurrency} connections per server"
    )
    for kind in args.kinds:
        per_request = count(kind, args.seconds, args.concurrency, generator)
        print(f"  {kind:<8} {per_request:10,.0f} instructions per request")
        figure(f"{kind} at {args.concurrency} connections: instructions per request (callgrind)",
               per_request, "", "none (the server's cost, whatever else runs)", None)  # fmt: skip


if __name__ == "__main__":
    main()
