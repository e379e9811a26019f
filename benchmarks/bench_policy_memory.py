"""Peak memory of a rollout of the embedded model (`HFPolicy`) as the run gets longer.

Plays the ``tools`` environment (its lookup-and-arithmetic questions, two tools: the learning
benchmark's prompts of ~480 tokens) with the embedded SmolLM2-135M, greedy, ``--turns`` turns
of ``--max-tokens`` at most, ``max_batch_size`` (and concurrency) 8 and 32, and records the
process's peak resident memory (``VmHWM``) when the 100th, 320th and 1,000th episodes finish,
and the episodes per second. Each batch size plays in a fresh process.

``--compare DIR`` runs the same children a second time against another checkout of rk-agent
(``git worktree add /tmp/before <commit>``), in the same sitting, and prints the ratio of the
two: how the figures moved from that commit to this one.

Targets (issue 41): the peak at 1,000 episodes within 10 % of the peak at 100, under 4 GB at
``max_batch_size`` 32, and episodes/s within 10 % of the compared checkout's.

Runs:
- ``uv run python benchmarks/bench_policy_memory.py`` (about an hour on 2 cores);
- ``--marks 20 60 --batches 8`` for a few minutes;
- ``--compare /tmp/before``: the same against an older checkout, one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from figures import figure

_MARKS = (100, 320, 1000)
_GB = 1e9


def _hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status (not Linux?)")


def _child(
    batch: int, marks: list[int], turns: int, max_tokens: int, kv_bytes: int | None
) -> dict[str, Any]:
    """Play ``max(marks)`` episodes at ``batch``; peak RSS at each mark; episodes/s."""
    import asyncio

    from bench_learning import ENV_KWARGS, HELD_OUT_SEED

    from rk_agent.envs.registry import make_env
    from rk_agent.policies.hf_policy import HFPolicy
    from rk_agent.policies.policy import SamplingParams
    from rk_agent.rollouts.engine import run_rollouts

    try:
        from rk_agent.runs.config import RolloutConfig
    except ImportError:  # a checkout from before rk_agent.runs
        from rk_agent.rollouts.config import RolloutConfig  # type: ignore[no-redef]

    total = max(marks)
    peaks: dict[int, int] = {}
    done = 0

    def on_episode(_: Any) -> None:
        nonlocal done
        done += 1
        if done in marks:
            peaks[done] = _hwm_bytes()

    config = RolloutConfig(
        env="tools", env_kwargs=ENV_KWARGS, n=total, concurrency=batch, seed=HELD_OUT_SEED,
        max_turns=turns, sampling=SamplingParams(temperature=0, max_tokens=max_tokens),
    )  # fmt: skip
    kv = {"kv_cache_bytes": kv_bytes} if kv_bytes else {}  # an older checkout may not take it
    policy = HFPolicy(max_batch_size=batch, device="cpu", **kv)
    started = time.perf_counter()
    try:
        asyncio.run(
            run_rollouts(
                config,
                policy=policy,
                make_env=lambda: make_env("tools", max_turns=turns, **ENV_KWARGS),
                env_name="tools",
                on_episode=on_episode,
            )
        )
    finally:
        policy.close()
    elapsed = time.perf_counter() - started
    return {"peaks": {str(k): v for k, v in sorted(peaks.items())}, "episodes_s": total / elapsed}


def _run_child(batch: int, a: argparse.Namespace, checkout: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    command = [sys.executable, __file__, "--child", str(batch), "--turns", str(a.turns),
               "--max-tokens", str(a.max_tokens), "--marks", *map(str, a.marks)]  # fmt: skip
    if a.kv_gb:
        command += ["--kv-gb", str(a.kv_gb)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("CHILD ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the child at batch {batch} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(lines[-1].removeprefix("CHILD ")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--marks", type=int, nargs="+", default=list(_MARKS))
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--kv-gb", type=float, help="HFPolicy's kv_cache_bytes in GiB (default: the policy's own)"
    )
    parser.add_argument("--compare", type=Path, help="another checkout of rk-agent to run too")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = parser.parse_args()
    a.marks = sorted(set(a.marks))
    if a.child is not None:
        kv_bytes = int(a.kv_gb * 2**30) if a.kv_gb else None
        result = _child(a.child, a.marks, a.turns, a.max_tokens, kv_bytes)
        print("CHILD " + json.dumps(result), flush=True)
        return
    runs = [("this checkout", None)] + ([("compared", a.compare)] if a.compare else [])
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for batch in a.batches:
        for label, checkout in runs:
            result = results[(label, batch)] = _run_child(batch, a, checkout)
            peaks = ", ".join(f"{k}: {v / _GB:.2f} GB" for k, v in result["peaks"].items())
            print(f"{label:>14}, max_batch_size {batch}: peak RSS after {peaks}; "
                  f"{result['episodes_s']:.3f} episodes/s", flush=True)  # fmt: skip
    first, last = str(a.marks[0]), str(a.marks[-1])
    for batch in a.batches:
        mine = results[("this checkout", batch)]
        growth = mine["peaks"][last] / mine["peaks"][first] - 1
        peak = mine["peaks"][last] / _GB
        figure(f"HFPolicy peak RSS at {last} episodes, batch {batch}", round(peak, 2), "GB",
               "under 4 GB at batch 32", peak < 4 if batch == 32 else None)  # fmt: skip
        figure(f"HFPolicy peak RSS growth {first} -> {last} episodes, batch {batch}",
               round(100 * growth, 1), "%", "within 10 %", growth <= 0.10)  # fmt: skip
        figure(f"HFPolicy episodes/s, batch {batch}", round(mine["episodes_s"], 3), "episodes/s",
               "none of its own", None)  # fmt: skip
        if ("compared", batch) in results:
            other = results[("compared", batch)]
            speed = mine["episodes_s"] / other["episodes_s"]
            memory = mine["peaks"][last] / other["peaks"][last]
            figure(f"HFPolicy episodes/s against the compared checkout, batch {batch}",
                   round(speed, 3), "x", "at least 0.9x", speed >= 0.9)  # fmt: skip
            figure(f"HFPolicy peak RSS against the compared checkout, batch {batch}",
                   round(memory, 3), "x", "none of its own", None)  # fmt: skip


if __name__ == "__main__":
    main()
