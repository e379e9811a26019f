"""What each piece of hand-made machinery buys on a figure a user sees, against the library way.

Run: uv run python benchmarks/bench_machinery.py [--quick] [--rounds 3]
     [--only engine server rescore start bridge]

Issue 39 item 3: a piece written by hand stays only where it gains materially (over ~10 %) on a
figure a user sees. Every measurement runs the shipped code (``shipped``) and the same code with
one piece swapped for the library way (a *variant*, applied by patching the running process:
nothing in the package changes), in fresh processes, alternating in one sitting, ``--rounds``
times; the median of each is reported with its ratio to ``shipped``'s median of the same
sitting (the machine is shared and noisy: compare ratios, not figures of other sittings).

The setups are the other benchmarks' own:

- ``engine`` (`bench_engine`): the ``tools`` environment (3 turns an episode) played by
  `OpenAIPolicy` against the stub model server in its own process. Episodes/s at 1 s of model
  latency (concurrency 128: latency-bound, as real models are), at 100 ms (concurrency 128, and
  512, where one process is bound by its core), and the harness's CPU per turn at 0 ms.
  Variants: ``aiohttp`` (`rk_agent.http1` -> the model client's ``aiohttp`` session),
  ``threads`` / ``inline`` (every env step and tool declared blocking, on a worker thread /
  declared not, on the loop; the guess from run-time medians, ``inline_budget``, was measured
  against both at 739c948 and went), ``no-gc`` (`rk_agent.gc_tuning`,
  what ``rk-agent rollout`` does -> the collector as the process has it).
- ``server`` (`bench_reward_server`): the reward server with its defaults and the trivial exact
  match, loaded by ``wrk`` (64 keep-alive connections; the load generator pinned to one core,
  the server to the other); requests/s and the server's CPU per request. Variants:
  ``executor`` (the server's own `ThreadPool` -> ``loop.run_in_executor`` on a
  `concurrent.futures.ThreadPoolExecutor`, what ``anyio.to_thread`` also does), ``pydantic``
  (``validate_trusted_json`` -> ``model_validate_json``), ``no-gc`` (no freeze, no threshold:
  ``tune_gc=False``).
- ``rescore`` (`bench_rescore`): a synthetic run of ``tools`` episodes rescored with a cheap
  reward; wall time. Variants: ``one-process`` (`rk_agent.runs.rescore_workers`' process pool
  -> the plain loop in this process, ``workers=0``), ``pydantic`` (reading the trajectories
  through ``model_validate_json``), ``no-gc`` (no freeze in the workers).
- ``start`` (`bench_import`): ``import rk_agent`` and ``python -m rk_agent --help`` in fresh
  interpreters. Variants of `rk_agent._lazy.attach_stub`: ``pep562`` (the same PEP 562
  ``__getattr__`` from a literal table, no stub parsed), ``eager`` (every public name imported
  by ``__init__``, plain imports).
- ``bridge``: a sync function (a reward calling an LLM judge) asking the stub model server
  from 16 threads through `rk_agent.model_client.SyncModelClient` (`rk_agent.loop_thread`: its
  own loop thread and ``run_coroutine_threadsafe``) against ``portal`` (anyio's blocking
  portal) and ``asyncio-run`` (``asyncio.run`` per call, as `rk_agent.envs.tool` ran an async
  tool); calls/s at 100 ms and at 0 ms of model latency.

Pieces already replaced by the library way are no longer variants here: ``semaphore``
(``rk_agent.limiter`` -> ``asyncio.Semaphore``) and, on the engine, ``pydantic``
(``rk_agent.trusted_json``'s ``build_trusted`` -> the models' own constructors) were measured at
739c948, the commit before they went
(docs/development.md, "Hand-made machinery: what it buys").

``--quick`` runs smaller sizes twice (a few minutes); the default runs the full sizes three
times (about 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from figures import figure

HERE = Path(__file__).resolve()
SECTIONS = ("engine", "server", "rescore", "start", "bridge")
ENGINE_VARIANTS = ("shipped", "aiohttp", "threads", "inline", "no-gc")
SERVER_VARIANTS = ("shipped", "executor", "pydantic", "no-gc")
RESCORE_VARIANTS = ("shipped", "one-process", "pydantic", "no-gc")
START_VARIANTS = ("shipped", "pep562", "eager")
BRIDGE_VARIANTS = ("shipped", "portal", "asyncio-run")
TURNS = 3


# --------------------------------------------------------------------------------------------
# Variants: the library way, patched into a fresh process before it does its work


def _use_pydantic() -> None:
    """Every trusted read goes through the model's own validator (what ``model_validate_json``
    runs)."""
    import rk_agent.trusted_json

    def own(model: Any) -> Any:
        if not model.__pydantic_complete__:
            model.model_rebuild()
        return model.__pydantic_validator__

    rk_agent.trusted_json.trusted_validator = own  # type: ignore[assignment]


def _use_aiohttp() -> None:
    """The model client speaks to plain-HTTP servers through its ``aiohttp`` transport too."""
    from rk_agent import model_client

    def aiohttp_only(endpoint: Any, headers: Any, max_connections: int) -> Any:
        timeout = endpoint.timeout_s or None
        return model_client._AiohttpTransport(endpoint, headers, max_connections, timeout, {})

    model_client._transport_for = aiohttp_only  # type: ignore[assignment]


def _declare_steps(inline: bool) -> None:
    """Every env step and sync tool declared inline (or not): ``inline_steps`` and each tool's
    ``inline``, whatever the classes say."""
    import importlib

    base = importlib.import_module("rk_agent.envs.base")
    tool = importlib.import_module("rk_agent.envs.tool")  # the module, not the decorator
    base.ChatEnv.inline_steps = inline
    given = tool.Tool.__init__

    def declared(self: Any, *args: Any, **options: Any) -> None:
        given(self, *args, **{**options, "inline": inline})

    tool.Tool.__init__ = declared  # type: ignore[method-assign]
    for name in ("toolbox", "tools_env", "math_env", "guess_env"):
        module = importlib.import_module(f"rk_agent.envs.{name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, base.ChatEnv):
                value.inline_steps = inline
            if isinstance(value, tool.Tool) and not value.is_async:
                value.inline = inline


def _no_gc_tuning() -> None:
    """The collector as the process has it: the entry points' tuning (`rk_agent.gc_tuning`)
    turned into nothing (the engine and the server's children ask for it as the CLI does)."""
    from rk_agent import gc_tuning
    from rk_agent.runs import rescore_workers

    gc_tuning.fewer_gc_pauses = contextlib.nullcontext  # type: ignore[assignment]
    gc_tuning.tune_for_serving = lambda: None
    rescore_workers.freeze_inherited = lambda: None


class _ExecutorPool:
    """The server's `ThreadPool` interface over ``loop.run_in_executor`` (a stdlib
    `ThreadPoolExecutor`), keeping what the shedding and ``/health`` read."""

    def __init__(self, size: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.size = size
        self._executor = ThreadPoolExecutor(size, thread_name_prefix="rk-reward")
        self._waiting = 0
        self.running: dict[int, float] = {}
        self.service_s = 0.0
        self.completed = 0

    def queued(self) -> int:
        return max(0, self._waiting)

    def submit(self, fn: Callable[[], Any], started: list[float] | None = None) -> Any:
        self._waiting += 1

        def run() -> Any:
            self._waiting -= 1
            begun = time.monotonic()
            if started is not None:
                started.append(begun)
            me = threading.get_ident()
            self.running[me] = begun
            try:
                return fn()
            finally:
                self.running.pop(me, None)
                took = time.monotonic() - begun
                self.service_s += (1.0 if not self.completed else 0.05) * (took - self.service_s)
                self.completed += 1

        return asyncio.get_running_loop().run_in_executor(self._executor, run)

    def stuck(self, after_s: float) -> int:
        now = time.monotonic()
        return sum(1 for begun in list(self.running.values()) if now - begun > after_s)

    def close(self) -> None:
        self._executor.shutdown(wait=False)


def _use_executor() -> None:
    from rk_agent.server import _reward_caller

    _reward_caller.ThreadPool = _ExecutorPool  # type: ignore[misc,assignment]


PATCHES: dict[str, Callable[[], None]] = {
    "shipped": lambda: None,
    "pydantic": _use_pydantic,
    "aiohttp": _use_aiohttp,
    "threads": lambda: _declare_steps(False),
    "inline": lambda: _declare_steps(True),
    "no-gc": _no_gc_tuning,
    "executor": _use_executor,
    "one-process": lambda: None,  # told to `rescore` as workers=0
}


# --------------------------------------------------------------------------------------------
# Children: one measurement each, in a fresh process (`--child KIND VARIANT ...`)


def _engine_child(variant: str, url: str, latency: str, concurrency: str, episodes: str) -> None:
    PATCHES[variant]()
    from bench_engine import play

    from rk_agent import gc_tuning
    from rk_agent.policies.openai_policy import OpenAIPolicy

    def policy() -> OpenAIPolicy:
        return OpenAIPolicy("stub-model", base_url=url, max_concurrency=int(concurrency))

    with gc_tuning.fewer_gc_pauses():  # as `rk-agent rollout` plays
        if float(latency) < 0.5:  # imports, first connections, the budgets' trials
            play(policy(), 64, int(concurrency))
        wall, cpu, turns = play(policy(), int(episodes), int(concurrency))
    print(json.dumps({"wall": wall, "cpu": cpu, "turns": turns}))


def _serve_child(variant: str, port: str) -> None:
    PATCHES[variant]()
    from bench_reward_server import exact_match

    from rk_agent.server import serve_rewards

    # tuned as `rk-agent serve` does, but for `no-gc`
    serve_rewards(exact_match, host="127.0.0.1", port=int(port), tune_gc=variant != "no-gc")


def _rescore_child(variant: str, source: str, output: str) -> None:
    PATCHES[variant]()
    import resource

    from rk_agent.runs.rescore import rescore

    started = time.perf_counter()
    rescore(
        source, f"{HERE.parent / 'bench_rescore.py'}::cheap", output=output,
        workers=0 if variant == "one-process" else 2,
    )  # fmt: skip
    wall = time.perf_counter() - started
    ours, children = (resource.getrusage(who) for who in (0, -1))  # SELF, CHILDREN
    cpu = ours.ru_utime + ours.ru_stime + children.ru_utime + children.ru_stime
    print(json.dumps({"wall": wall, "cpu": cpu}))


def _start_child(variant: str, table: str, statement: str) -> None:
    """Time ``statement`` with `attach_stub` replaced as ``variant`` says."""
    import importlib
    import types

    if variant != "shipped":
        exports = json.loads(Path(table).read_text())
        lazy = types.ModuleType("rk_agent._lazy")

        def attach_stub(package: str, init_file: str, *, extra: tuple[str, ...] = ()) -> Any:
            names = exports[package]
            namespace = sys.modules[package].__dict__
            if variant == "eager":
                for name, module in names.items():
                    namespace[name] = getattr(importlib.import_module(module), name)

            def __getattr__(name: str) -> Any:
                if name not in names:
                    raise AttributeError(f"module {package!r} has no attribute {name!r}")
                value = namespace[name] = getattr(importlib.import_module(names[name]), name)
                return value

            everything = sorted({*names, *extra})
            return __getattr__, lambda: list(everything), everything

        lazy.attach_stub = attach_stub  # type: ignore[attr-defined]
        sys.modules["rk_agent._lazy"] = lazy
    started = time.perf_counter()
    if statement == "cli":
        sys.argv = ["rk-agent", "--help"]
        with (
            Path(os.devnull).open("w") as devnull,
            contextlib.redirect_stdout(devnull),
            contextlib.suppress(SystemExit),
        ):
            importlib.import_module("rk_agent.cli").main()
    else:
        exec(statement)
    print(time.perf_counter() - started, file=sys.stderr)


def _child(kind: str, *args: str) -> None:
    {"engine": _engine_child, "serve": _serve_child, "rescore": _rescore_child,
     "start": _start_child}[kind](*args)  # fmt: skip


def _run_child(*args: str, stderr: bool = False) -> Any:
    done = subprocess.run(
        [sys.executable, str(HERE), "--child", *args], capture_output=True, text=True, check=True
    )
    if stderr:
        return float(done.stderr.strip().splitlines()[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Sections


def _alternate(variants: tuple[str, ...], rounds: int) -> list[str]:
    """Each round runs every variant once, each round starting one further along."""
    return [variants[(r + i) % len(variants)] for r in range(rounds) for i in range(len(variants))]


def engine(rounds: int, quick: bool) -> dict[str, dict[str, float]]:
    from bench_engine import stub_server

    settings = [  # (name, latency, concurrency, episodes, figure)
        ("1 s, c=128", 1.0, 128, 128 if quick else 256, "eps"),
        ("100 ms, c=128", 0.1, 128, 512 if quick else 1000, "eps"),
        ("100 ms, c=512", 0.1, 512, 1024 if quick else 2048, "eps"),
        ("0 ms, c=128", 0.0, 128, 500 if quick else 1000, "cpu"),
    ]
    table: dict[str, dict[str, float]] = {}
    for name, latency, concurrency, episodes, kind in settings:
        found: dict[str, list[float]] = {v: [] for v in ENGINE_VARIANTS}
        with stub_server(latency) as url:
            for variant in _alternate(ENGINE_VARIANTS, rounds):
                r = _run_child("engine", variant, url, str(latency), str(concurrency),
                               str(episodes))  # fmt: skip
                value = episodes / r["wall"] if kind == "eps" else 1000 * r["cpu"] / r["turns"]
                found[variant].append(value)
                print(f"  engine {name} {variant:<10} {value:8.2f}", flush=True)
        label = f"engine {name}: " + ("episodes/s" if kind == "eps" else "CPU ms per turn")
        table[label] = {v: statistics.median(values) for v, values in found.items()}
    return table


def server(rounds: int, quick: bool) -> dict[str, dict[str, float]]:
    from bench_reward_server import WARM_UP_S, cpu_seconds, free_port, pinned, run_wrk

    cpus = sorted(os.sched_getaffinity(0))
    client, served = ({cpus[0]}, set(cpus[1:])) if len(cpus) >= 2 else (None, None)
    seconds = 2.0 if quick else 4.0
    found: dict[str, list[tuple[float, float]]] = {v: [] for v in SERVER_VARIANTS}
    for variant in _alternate(SERVER_VARIANTS, rounds):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, str(HERE), "--child", "serve", variant, str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pinned(served),
        )  # fmt: skip
        try:
            _wait_for(port)
            run_wrk(port, WARM_UP_S, 64, False, "/evaluate", client)
            before = cpu_seconds(process.pid)
            r = run_wrk(port, seconds, 64, False, "/evaluate", client)
            per_request = 1e6 * (cpu_seconds(process.pid) - before) / max(1, r["requests"])
        finally:
            process.terminate()
            process.wait(timeout=30)
        if r["failed"]:
            raise RuntimeError(f"server {variant}: {r['failed']} failed, e.g. {r['failures']}")
        found[variant].append((r["rps"], per_request))
        print(f"  server {variant:<10} {r['rps']:8.0f} req/s {per_request:6.0f} us CPU/req",
              flush=True)  # fmt: skip
    return {
        "reward server, 64 connections: requests/s": {
            v: statistics.median(x[0] for x in values) for v, values in found.items()
        },
        "reward server: CPU us per request": {
            v: statistics.median(x[1] for x in values) for v, values in found.items()
        },
    }


def _wait_for(port: int) -> None:
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the server on port {port} did not start")


def rescore(rounds: int, quick: bool) -> dict[str, dict[str, float]]:
    from bench_rescore import _seed_episodes, _synthetic_run

    episodes = 4000 if quick else 10_000
    found: dict[str, list[float]] = {v: [] for v in RESCORE_VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "run"
        _synthetic_run(_seed_episodes(folder / "seed"), source, episodes)
        for variant in _alternate(RESCORE_VARIANTS, rounds):
            output = folder / f"out-{variant}-{len(found[variant])}"
            r = _run_child("rescore", variant, str(source), str(output))
            found[variant].append(r["wall"])
            print(f"  rescore {variant:<12} {r['wall']:6.2f} s ({r['cpu']:.2f} s CPU)", flush=True)
    return {
        f"rescore of {episodes:,} episodes: wall s": {
            v: statistics.median(values) for v, values in found.items()
        }
    }


def start(rounds: int, quick: bool) -> dict[str, dict[str, float]]:
    from rk_agent._lazy import _stub_exports

    packages = ("rk_agent", "rk_agent.cli", "rk_agent.envs", "rk_agent.rewards",
                "rk_agent.server", "rk_agent.sandbox", "rk_agent.testing", "rk_agent.tool_calls",
                "rk_agent.mcp")  # fmt: skip
    root = Path(__file__).resolve().parents[1]
    exports = {
        p: _stub_exports(root / p.replace(".", "/") / "__init__.pyi") for p in packages
    }  # every package whose __init__ calls attach_stub
    repeats = 3 * rounds + 1 if quick else 5 * rounds
    table = {}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(exports, out)
    try:
        for label, statement in (
            ("import rk_agent", "import rk_agent"),
            ("rk-agent --help", "cli"),
        ):
            found: dict[str, list[float]] = {v: [] for v in START_VARIANTS}
            for variant in _alternate(START_VARIANTS, repeats):
                found[variant].append(_run_child("start", variant, out.name, statement,
                                                 stderr=True))  # fmt: skip
            table[f"{label}: ms"] = {v: 1000 * statistics.median(x) for v, x in found.items()}
            said = ", ".join(f"{v} {t:.0f} ms" for v, t in table[f"{label}: ms"].items())
            print(f"  {label}: {said}", flush=True)
    finally:
        Path(out.name).unlink()
    return table


def _judge_rate(variant: str, url: str, calls: int, threads: int) -> float:
    """Calls/s of a sync function asking the model server from ``threads`` threads."""
    import concurrent.futures

    from anyio.from_thread import start_blocking_portal
    from bench_model_client import BODY

    from rk_agent.endpoint_errors import Endpoint
    from rk_agent.model_client import ModelClient, SyncModelClient

    endpoint = Endpoint(url=url, model="stub-model", timeout_s=60)

    def drive(ask: Callable[[], Any]) -> float:
        ask()  # the first connection, the loop
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            started = time.perf_counter()
            for reply in pool.map(lambda _: ask(), range(calls)):
                assert reply["choices"], reply
            return calls / (time.perf_counter() - started)

    if variant == "shipped":
        sync = SyncModelClient(endpoint, max_connections=threads)
        try:
            return drive(lambda: sync.request("POST", "/chat/completions", BODY))
        finally:
            sync.close()
    if variant == "portal":
        with start_blocking_portal(name="rk-bench-portal") as portal:
            client = ModelClient(endpoint, max_connections=threads)
            try:
                return drive(lambda: portal.call(client.request, "POST", "/chat/completions", BODY))
            finally:
                portal.call(client.aclose)

    async def once() -> Any:
        client = ModelClient(endpoint, max_connections=1)
        try:
            return await client.request("POST", "/chat/completions", BODY)
        finally:
            await client.aclose()

    return drive(lambda: asyncio.run(once()))


def bridge(rounds: int, quick: bool) -> dict[str, dict[str, float]]:
    from bench_engine import stub_server

    calls, threads = (160 if quick else 400), 16
    table = {}
    for latency in (0.1, 0.0):
        found: dict[str, list[float]] = {v: [] for v in BRIDGE_VARIANTS}
        with stub_server(latency) as url:
            for variant in _alternate(BRIDGE_VARIANTS, rounds):
                rate = _judge_rate(variant, url, calls, threads)
                found[variant].append(rate)
                print(f"  bridge {latency * 1000:.0f} ms {variant:<12} {rate:7.0f} calls/s",
                      flush=True)  # fmt: skip
        table[f"sync judge calls, {threads} threads, {latency * 1000:.0f} ms: calls/s"] = {
            v: statistics.median(x) for v, x in found.items()
        }
    return table


# --------------------------------------------------------------------------------------------


LOWER_IS_BETTER = ("CPU", "wall s", ": ms")


def report(table: dict[str, dict[str, float]]) -> None:
    """Each figure: the shipped median, and each variant's median as a ratio to it (above 1:
    the variant is better; the machinery's gain is 1 / that ratio - 1)."""
    print("\nfigure | shipped | variant: value (shipped's gain over it)")
    for label, values in table.items():
        shipped = values["shipped"]
        lower = any(word in label for word in LOWER_IS_BETTER)
        parts = []
        for variant, value in values.items():
            if variant == "shipped":
                continue
            gain = (value / shipped if lower else shipped / value) - 1
            parts.append(f"{variant} {value:.3g} ({gain:+.0%})")
            figure(f"machinery: {label}, shipped over {variant}", gain + 1, "x",
                   "keep the piece only above 1.10x", None)  # fmt: skip
        print(f"{label} | {shipped:.3g} | " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, two rounds")
    parser.add_argument("--rounds", type=int, help="rounds of alternation (default 3; quick 2)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    rounds = args.rounds or (2 if args.quick else 3)
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load {load[0]:.1f}; {rounds} rounds"
          f"{', quick' if args.quick else ''}")  # fmt: skip
    sections = {"engine": engine, "server": server, "rescore": rescore, "start": start,
                "bridge": bridge}  # fmt: skip
    table: dict[str, dict[str, float]] = {}
    for name in args.only:
        started = time.perf_counter()
        table.update(sections[name](rounds, args.quick))
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
    report(table)


if __name__ == "__main__":
    main()
