"""BFCL v4 multi-turn through rk-agent's engine: the reference solver on all 800 entries.

``bfcl:multi_turn`` (base, miss_func, miss_param, long_context; 200 entries each) played by the
environment's reference solver (the ground truth's calls, turn by turn) through the rollout
engine, ``--concurrency`` episodes at a time, each scored by bfcl-eval's own
``multi_turn_checker``: the pass rate (target 100 %), episodes/s, and the peak resident memory
of a fresh process that plays the first 200 entries and of one that plays all 800 (the same
environment, so the same entries loaded: the difference is what episodes leave behind; target
within 10 %). ``--repeats`` alternates the two sizes (medians).

``--hf N`` also plays the embedded model (SmolLM2-135M through `HFPolicy`, greedy, up to
``--max-tokens`` a reply, at most 16 replies an episode, 10 episodes at a time) on the first N
entries of ``multi_turn_base``
(CPU-heavy: a prompt holds every tool of the entry's classes, 3,100 to 5,000 tokens): its score,
wall time and peak memory, a first figure of rk-agent on a benchmark nobody here wrote (no
target).

Needs the bfcl extra (``uv sync --extra bfcl``).

Run: uv run python benchmarks/bench_bfcl.py [--concurrency 32] [--repeats 1] [--hf 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from collections import Counter

from as_the_cli import as_the_rollout_command
from figures import figure
from peak_rss import peak_rss_mb


def solver_child(n: int, concurrency: int, chunk: int) -> dict[str, float]:
    """Play the first ``n`` entries with the solver; with ``chunk``, ``chunk`` at a time through
    the engine's resume (``done=``: the slots already played), each chunk's trajectories
    counted and dropped, since `run_rollouts` returns every trajectory it played."""
    from rk_agent.envs.registry import get_solver
    from rk_agent.interop.bfcl_package import held_instances
    from rk_agent.policies.function_policy import FunctionPolicy
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.runs.config import RolloutConfig

    factory = RolloutConfig(env="bfcl:multi_turn", n=n).env.factory()  # entries loaded first
    policy = FunctionPolicy(get_solver("bfcl:multi_turn"))
    step = chunk or n
    episodes = passed = 0
    started = time.perf_counter()
    for end in range(step, n + step, step):
        end = min(end, n)
        config = RolloutConfig(env="bfcl:multi_turn", n=end, concurrency=concurrency)
        done = {f"{i}-0" for i in range(end - step if chunk else 0)}
        with as_the_rollout_command():
            result = asyncio.run(run_rollouts(config, policy=policy, make_env=factory, done=done))
        episodes += len(result.trajectories)
        passed += sum(bool(t.success) for t in result.trajectories)
        del result
        gc.collect()  # what a chunk left is garbage now, or it is kept: the figure tells which
    seconds = time.perf_counter() - started
    return {
        "episodes": episodes,
        "passed": passed,
        "seconds": seconds,
        "peak_mb": peak_rss_mb(),
        "held": len(held_instances()),
    }


def hf_child(n: int, max_tokens: int) -> dict[str, float]:
    from rk_agent.policies.hf_policy import HFPolicy
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.runs.config import RolloutConfig

    config = RolloutConfig.model_validate(
        {"env": "bfcl:multi_turn_base", "n": n, "concurrency": min(n, 10), "max_turns": 16,
         "episode_timeout_s": 7200, "sampling": {"temperature": 0.0, "max_tokens": max_tokens}}
    )  # fmt: skip
    policy = HFPolicy(max_batch_size=10)
    started = time.perf_counter()
    with as_the_rollout_command():
        result = asyncio.run(run_rollouts(config, policy=policy, make_env=config.env.factory()))
    seconds = time.perf_counter() - started
    played = result.trajectories
    turns = [m for t in played if t.episode for k, m in t.episode.metrics.items() if "turn_" in k]
    return {
        "episodes": len(played),
        "passed": sum(bool(t.success) for t in played),
        "failed": sum(t.failure is not None for t in played),
        "turns_passed": sum(m.score == 1.0 for m in turns),
        "turns": len(turns),
        "replies": sum(len(t.turns) for t in played),
        "calls": sum(len(turn.tool_calls) for t in played for turn in t.turns),
        "calls_ok": sum(c.ok for t in played for turn in t.turns for c in turn.tool_calls),
        "stops": dict(Counter(t.stop_reason.value for t in played)),
        "reasons": dict(
            Counter(
                str(t.episode.metrics["bfcl"].reason)
                for t in played
                if t.episode and "bfcl" in t.episode.metrics
            )
        ),
        "failures": [t.failure.message[:200] for t in played if t.failure],
        "seconds": seconds,
        "peak_mb": peak_rss_mb(),
    }


def run_child(*args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, timeout=7200
    )
    if done.returncode != 0:
        raise SystemExit(f"the child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=100, help="entries per engine call (memory)")
    parser.add_argument("--hf", type=int, default=0, help="entries the embedded model plays")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, n, extra, *rest = args.child
        play = {"solver": solver_child, "hf": hf_child}[kind]
        out = play(int(n), int(extra), *map(int, rest))
        print(json.dumps(out))
        return

    small, large, whole = [], [], []
    for _ in range(args.repeats):
        small.append(run_child("solver", "200", str(args.concurrency), str(args.chunk)))
        large.append(run_child("solver", "800", str(args.concurrency), str(args.chunk)))
        whole.append(run_child("solver", "800", str(args.concurrency), "0"))
    full = whole[-1]
    rate = 100.0 * full["passed"] / full["episodes"]
    per_second = statistics.median(r["episodes"] / r["seconds"] for r in whole)
    peak_small = statistics.median(r["peak_mb"] for r in small)
    peak_large = statistics.median(r["peak_mb"] for r in large)
    growth = 100.0 * (peak_large / peak_small - 1)
    print(f"reference solver on bfcl:multi_turn, concurrency {args.concurrency}:")
    print(f"  passed {full['passed']:.0f} of {full['episodes']:.0f} ({rate:.1f} %)")
    seconds = statistics.median(r["seconds"] for r in whole)
    print(f"  {per_second:.0f} episodes/s ({seconds:.2f} s in one run_rollouts call)")
    print(
        f"  peak RSS in {args.chunk}-entry chunks: {peak_small:.0f} MB at 200 entries, "
        f"{peak_large:.0f} MB at 800 ({growth:+.1f} %); instances left: {full['held']:.0f}"
    )
    print(f"  peak RSS of one call keeping all 800 trajectories: "
          f"{statistics.median(r['peak_mb'] for r in whole):.0f} MB")  # fmt: skip
    figure("bfcl solver pass rate (800 entries)", rate, "%", "100 %", rate == 100.0)
    figure("bfcl solver episodes/s (800 entries)", per_second, "episodes/s", "none", None)
    figure("bfcl peak RSS at 200 entries", peak_small, "MB", "none", None)
    figure("bfcl peak RSS at 800 entries", peak_large, "MB", "none", None)
    figure("bfcl peak RSS growth 200 -> 800", growth, "%", "within 10 %", abs(growth) <= 10)

    if args.hf:
        model = run_child("hf", str(args.hf), str(args.max_tokens))
        score = 100.0 * model["passed"] / model["episodes"]
        print(f"embedded model (SmolLM2-135M, greedy) on the first {args.hf} entries of "
              f"multi_turn_base: {model['passed']:.0f} passed ({score:.1f} %), "
              f"{model['turns_passed']:.0f} of {model['turns']:.0f} turns before a failure, "
              f"{model['replies']:.0f} replies, {model['calls']:.0f} calls, "
              f"{model['failed']:.0f} failed episodes; {model['seconds']:.0f} s, "
              f"peak RSS {model['peak_mb']:.0f} MB")  # fmt: skip
        figure(f"bfcl embedded model score ({args.hf} base entries)", score, "%", "none", None)
        figure(f"bfcl embedded model time ({args.hf} base entries)", model["seconds"], "s",
               "none", None)  # fmt: skip
        figure(f"bfcl embedded model peak RSS ({args.hf} base entries)", model["peak_mb"], "MB",
               "none", None)  # fmt: skip


if __name__ == "__main__":
    main()
