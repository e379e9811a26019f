"""Step time and peak memory of ``--loop trl`` (TRL's tool loop) against ``--loop rk``.

Both loops train the same model on the same ``tools`` env tasks with the same GRPO settings:
batch, group size, token budget (``max_completion_length``, a whole episode's tokens), turns
and learning rate, with rk-agent's CPU defaults for the rest. ``rk`` is ``grpo_trainer``
(rk-agent's episode loop as TRL's ``rollout_func``); ``trl`` is ``trl_grpo_trainer`` (TRL's
``environment_factory`` tool loop, generating with transformers). Each loop runs in its own
subprocess, so their peak resident memory (``resource.getrusage``) is their own; the figure per
loop is the median of TRL's ``step_time`` over the timed steps, one warm-up step left out.

The embedded model calls no tool before training, so its episodes are one turn long either way;
give ``--model`` a warm-started checkpoint (``benchmarks/bench_learning.py`` makes one) to time
multi-turn episodes.

Run: ``uv run python benchmarks/bench_loops.py`` (the embedded SmolLM2-135M, CPU; tens of
minutes on 2 cores), or ``--tiny --steps 1`` for a quick check with a random 2-layer model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The learning benchmark's setting: lookup-and-arithmetic questions and those two tools, a
# ~480-token prompt instead of ~1,030.
ENV_KWARGS: dict[str, Any] = {
    "kinds": ["population_ratio", "population_density", "combined_population",
              "larger_capital", "atomic_number_sum"],
    "tool_names": ["lookup", "calculator"],
}  # fmt: skip
LOOPS = ("rk", "trl")
_RESULT = "RESULT "


def _mean(logs: list[dict[str, Any]], key: str) -> float | None:
    values = [log[key] for log in logs if key in log]
    return statistics.fmean(values) if values else None


def worker(a: argparse.Namespace) -> None:
    """Train ``a.worker``'s loop and print one ``RESULT {json}`` line."""
    from trl import GRPOConfig

    from rk_agent.trainers.memory import peak_resident_bytes
    from rk_agent.trainers.trl_args import build_trl_args

    steps = a.steps + 1
    values = {"max_steps": steps, "per_device_train_batch_size": a.batch,
              "num_generations": a.generations, "max_completion_length": a.budget,
              "learning_rate": 1e-6, "save_strategy": "no", "report_to": [], "seed": 0,
              "logging_steps": 1}  # fmt: skip
    args = build_trl_args(GRPOConfig, values, output_dir=a.out, has_gpu=False)
    common: dict[str, Any] = {
        "args": args,
        "model": a.model,
        "n_tasks": steps * a.batch // a.generations,
        "env_kwargs": {**ENV_KWARGS, "max_turns": a.max_turns},
    }
    if a.worker == "rk":
        from rk_agent.trainers.grpo import grpo_trainer

        trainer = grpo_trainer("tools", **common)
    else:
        from rk_agent.trainers.trl_env import trl_grpo_trainer

        trainer = trl_grpo_trainer("tools", **common)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    logs = [log for log in trainer.state.log_history if "step_time" in log]
    result = {
        "loop": a.worker,
        "step_times": [log["step_time"] for log in logs][1:],
        "wall_s": wall,
        "peak_rss_bytes": peak_resident_bytes(),
        "completion_tokens": _mean(logs, "completions/mean_length"),
        "turns": _mean(logs, "episodes/turns_mean"),
        "tool_calls": _mean(logs, "episodes/tool_calls_per_episode"),
    }
    print(_RESULT + json.dumps(result), flush=True)


def _run(loop: str, a: argparse.Namespace, model: str, work: Path) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--worker", loop, "--model", model,
        "--out", str(work / loop), "--steps", str(a.steps), "--budget", str(a.budget),
        "--batch", str(a.batch), "--generations", str(a.generations),
        "--max-turns", str(a.max_turns),
    ]  # fmt: skip
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(_RESULT)]
    if done.returncode != 0 or not lines:
        sys.exit(f"the {loop} loop failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return dict(json.loads(lines[-1][len(_RESULT) :]))


def _line(result: dict[str, Any]) -> str:
    times = result["step_times"]
    extra = ""
    if result["turns"] is not None:
        extra = f", {result['turns']:.1f} turns, {result['tool_calls']:.1f} tool calls"
    return (
        f"--loop {result['loop']:<3}: {statistics.median(times):.2f} s/step (steps "
        f"{', '.join(f'{t:.2f}' for t in times)}); peak RSS "
        f"{result['peak_rss_bytes'] / 1024**3:.2f} GB; {result['completion_tokens']:.0f} "
        f"trained tokens per episode{extra}; wall {result['wall_s']:.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps (plus one warm-up)")
    parser.add_argument("--budget", type=int, default=128, help="max_completion_length")
    parser.add_argument("--batch", type=int, default=8, help="per_device_train_batch_size")
    parser.add_argument("--generations", type=int, default=4, help="num_generations")
    parser.add_argument("--max-turns", type=int, default=4, help="the env's max_turns")
    parser.add_argument("--model", help="a model folder (default: the embedded SmolLM2-135M)")
    parser.add_argument("--tiny", action="store_true", help="a random 2-layer model")
    parser.add_argument("--worker", choices=LOOPS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:
        worker(a)
        return

    from bench_grpo_overhead import _tiny_model  # this folder: the same random 2-layer model

    from rk_agent.policies.local_model import embedded_model_path

    work = Path(tempfile.mkdtemp(prefix="rk-bench-loops-"))
    if a.model:
        model, name = a.model, a.model
    elif a.tiny:
        model, name = _tiny_model(work / "tiny"), "tiny random Llama"
    else:
        model, name = str(embedded_model_path()), "embedded SmolLM2-135M"
    print(f"model: {name}; CPU; tools env ({', '.join(ENV_KWARGS['tool_names'])}); batch "
          f"{a.batch} ({a.batch // a.generations} tasks x {a.generations} generations); "
          f"max_completion_length {a.budget}; max_turns {a.max_turns}; {a.steps} timed "
          "steps each (median TRL step_time), each loop in its own process",
          flush=True)  # fmt: skip
    results = {}
    for loop in LOOPS:
        results[loop] = _run(loop, a, model, work)
        print(_line(results[loop]), flush=True)
    rk, trl = (statistics.median(results[loop]["step_times"]) for loop in LOOPS)
    memory = results["trl"]["peak_rss_bytes"] / results["rk"]["peak_rss_bytes"]
    print(f"RESULT trl/rk step time {trl / rk:.2f}x; peak memory {memory:.2f}x")


if __name__ == "__main__":
    main()
