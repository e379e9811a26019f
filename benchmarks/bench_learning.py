"""Learning, for real, on a CPU: the embedded 135M model on the ``tools`` env.

Three phases, each measured on the same held-out tasks (seeds 100000+, never trained on), greedy:

1. **before**: the embedded SmolLM2-135M as it ships;
2. **SFT**: warm-started on the reference solver's successful episodes (rejection sampling:
   `build_sft_data` keeps only solved ones), assistant-only loss;
3. **GRPO**: multi-turn GRPO from the SFT checkpoint, whole episodes with the environment's
   tokens masked out, rewarded by the environment's episode and step rewards.

Prints the success rate of each phase with its binomial standard error, a two-proportion z-score
of each change, and the wall time of each phase; writes everything to ``--out``/results.json.

Run: ``uv run python benchmarks/bench_learning.py`` (about 35 minutes on 2 cores), or
``--quick`` for a few-minute smoke run of the whole pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

HELD_OUT_SEED = 100_000
GRPO_SEED = 50_000
# The `tools` env restricted to its lookup-and-arithmetic questions and those two tools: the
# prompt is ~480 tokens instead of ~1,030, which halves every forward pass on a CPU. Each task
# still takes three tool calls (two lookups and a calculation, or three lookups) and an answer.
ENV_KWARGS: dict[str, Any] = {
    "kinds": [
        "population_ratio",
        "population_density",
        "combined_population",
        "larger_capital",
        "atomic_number_sum",
    ],
    "tool_names": ["lookup", "calculator"],
}


def _eval(model: str, n: int, max_turns: int, batch: int) -> tuple[float, float]:
    """Held-out success rate of ``model`` (greedy) and the wall time of the evaluation."""
    from rk_agent.envs.registry import make_env
    from rk_agent.rollouts.config import RolloutConfig
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.rollouts.hf_policy import HFPolicy
    from rk_agent.rollouts.policy import SamplingParams

    started = time.perf_counter()
    config = RolloutConfig(
        env="tools",
        env_kwargs=ENV_KWARGS,
        n=n,
        concurrency=batch,
        seed=HELD_OUT_SEED,
        max_turns=max_turns,
        sampling=SamplingParams(temperature=0, max_tokens=64),
    )
    policy = HFPolicy(model, max_batch_size=batch, device="cpu")
    try:
        result = asyncio.run(
            run_rollouts(
                config,
                policy=policy,
                make_env=lambda: make_env("tools", max_turns=max_turns, **ENV_KWARGS),
                env_name="tools",
            )
        )
    finally:
        policy.close()
    episodes = result.trajectories
    success = sum(bool(t.success) for t in episodes) / len(episodes)
    return success, time.perf_counter() - started


def _solver_episodes(n: int) -> list[Any]:
    from rk_agent.envs.registry import get_solver, make_env
    from rk_agent.rollouts.config import RolloutConfig
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.rollouts.testing import FunctionPolicy

    config = RolloutConfig(env="tools", env_kwargs=ENV_KWARGS, n=n, concurrency=16, seed=0)
    result = asyncio.run(
        run_rollouts(
            config,
            policy=FunctionPolicy(get_solver("tools")),
            make_env=lambda: make_env("tools", **ENV_KWARGS),
            env_name="tools",
        )
    )
    return list(result.trajectories)


def _cpu_args(config_cls: Any, out: Path, settings: dict[str, Any]) -> Any:
    """TRL's config with rk-agent's CPU defaults (fp32, no checkpointing), no saving or wandb."""
    from rk_agent.trainers.trl_args import build_trl_args

    values = {"save_strategy": "no", "report_to": [], "seed": 0, **settings}
    return build_trl_args(config_cls, values, output_dir=out, has_gpu=False)


def _sft(model: str, out: Path, tasks: int, epochs: float, lr: float) -> str:
    from trl import SFTConfig

    from rk_agent.envs.registry import make_env
    from rk_agent.trainers.run import save_final
    from rk_agent.trainers.sft import build_sft_trainer
    from rk_agent.trainers.sft_data import SFTFilter, build_sft_data

    tools = make_env("tools", **ENV_KWARGS).tool_schemas  # the restricted env's two tools
    episodes = _solver_episodes(tasks)
    data = build_sft_data(episodes, filter=SFTFilter(success_only=True), tools=tools)
    print(f"  SFT data: {data.report}", flush=True)
    settings = {"num_train_epochs": epochs, "learning_rate": lr, "lr_scheduler_type": "cosine",
                "warmup_steps": 5, "max_length": 1024, "logging_steps": 10}  # fmt: skip
    args = _cpu_args(SFTConfig, out / "sft", settings)
    trainer = build_sft_trainer(model, None, data.dataset, args)
    trainer.train()
    return str(save_final(trainer, out / "sft"))


def _grpo(model: str, out: Path, steps: int, lr: float, budget: int, max_turns: int) -> str:
    from trl import GRPOConfig

    from rk_agent.trainers.grpo import grpo_trainer
    from rk_agent.trainers.run import save_final

    settings = {"max_steps": steps, "per_device_train_batch_size": 8, "num_generations": 4,
                "max_completion_length": budget, "learning_rate": lr}  # fmt: skip
    args = _cpu_args(GRPOConfig, out / "grpo", settings)
    trainer = grpo_trainer(
        "tools",
        model=model,
        args=args,
        n_tasks=steps * 2,
        seed=GRPO_SEED,
        env_kwargs={"max_turns": max_turns, **ENV_KWARGS},
        max_tokens_per_turn=64,
    )
    trainer.train()
    for log in trainer.state.log_history:
        if "reward" in log:
            print(
                f"  step {log.get('step', '?')}: reward {log['reward']:.3f} "
                f"success {log.get('episodes/success_rate', float('nan')):.2f} "
                f"turns {log.get('episodes/turns_mean', float('nan')):.1f} "
                f"step_time {log.get('step_time', float('nan')):.1f}s",
                flush=True,
            )
    return str(save_final(trainer, out / "grpo"))


def _z(p1: float, p2: float, n: int) -> float:
    pooled = (p1 + p2) / 2
    se = math.sqrt(max(pooled * (1 - pooled) * 2 / n, 1e-12))
    return (p2 - p1) / se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench-learning")
    parser.add_argument("--eval-tasks", type=int, default=64)
    parser.add_argument("--sft-tasks", type=int, default=32)
    parser.add_argument("--sft-epochs", type=float, default=3.0)
    parser.add_argument("--sft-lr", type=float, default=2e-4)
    parser.add_argument("--grpo-steps", type=int, default=6)
    parser.add_argument("--grpo-lr", type=float, default=3e-6)
    parser.add_argument("--budget", type=int, default=288, help="max_completion_length")
    parser.add_argument("--max-turns", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16, help="episodes generated together")
    parser.add_argument("--quick", action="store_true", help="a few-minute smoke run")
    a = parser.parse_args()
    if a.quick:
        a.eval_tasks, a.sft_tasks, a.sft_epochs, a.grpo_steps = 8, 8, 1.0, 1
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from rk_agent.rollouts.local_model import embedded_model_path

    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    base = str(embedded_model_path())
    rows: list[dict[str, Any]] = []

    def measure(phase: str, model: str, train_s: float) -> None:
        success, eval_s = _eval(model, a.eval_tasks, a.max_turns, a.batch)
        rows.append({"phase": phase, "success": success, "train_s": train_s, "eval_s": eval_s})
        times = f"train {train_s:.0f}s, eval {eval_s:.0f}s"
        print(f"{phase}: success {success:.3f} ({times})", flush=True)

    total = time.perf_counter()
    measure("before", base, 0.0)
    started = time.perf_counter()
    sft_model = _sft(base, out, a.sft_tasks, a.sft_epochs, a.sft_lr)
    measure("after SFT", sft_model, time.perf_counter() - started)
    started = time.perf_counter()
    grpo_model = _grpo(sft_model, out, a.grpo_steps, a.grpo_lr, a.budget, a.max_turns)
    measure("after SFT + GRPO", grpo_model, time.perf_counter() - started)
    wall = time.perf_counter() - total

    n = a.eval_tasks
    print(f"\nLearning on `tools`, embedded SmolLM2-135M, {n} held-out tasks, greedy, 2 cores")
    print(f"{'phase':<18} {'success':>8} {'± s.e.':>7} {'z vs prev':>9} {'train':>8} {'eval':>7}")
    previous = None
    for row in rows:
        p = row["success"]
        se = math.sqrt(p * (1 - p) / n)
        z = "" if previous is None else f"{_z(previous, p, n):+.1f}"
        print(f"{row['phase']:<18} {p:>8.3f} {se:>7.3f} {z:>9} {row['train_s']:>7.0f}s "
              f"{row['eval_s']:>6.0f}s")  # fmt: skip
        previous = p
    print(f"whole pipeline: {wall / 60:.1f} min")
    settings = {k: v for k, v in vars(a).items() if k != "out"}
    (out / "results.json").write_text(
        json.dumps({"settings": settings, "phases": rows, "wall_s": wall}, indent=2)
    )


if __name__ == "__main__":
    main()
