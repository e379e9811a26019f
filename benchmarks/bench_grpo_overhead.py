"""Overhead of multi-turn GRPO: seconds per step against plain TRL GRPO, same token budget.

Run A is ``grpo_trainer`` on the ``guess`` env: whole episodes (several turns, the game's
feedback between them, the environment's tokens masked out). Run B is a plain TRL
``GRPOTrainer`` on the same prompts, single turn, every completion forced (``min_new_tokens``)
to the mean length of run A's completions, so both train on the same number of tokens per row.
Both use the same model, batch, group size and settings; the figure is the ratio of their median
``step_time`` (TRL's own per-step timer), the first step of each left out as warm-up.

Target: at most 1.15x. Run: ``uv run python benchmarks/bench_grpo_overhead.py`` (the embedded
135M model, a few minutes on 2 cores), or ``--tiny`` for a random 2-layer model.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import figure


def _args(out: str, steps: int, budget: int, **extra: Any) -> Any:
    """The same GRPO settings for both runs, plus rk-agent's CPU defaults (fp32, ...)."""
    from trl import GRPOConfig

    from rk_agent.trainers.trl_args import build_trl_args

    values = {"max_steps": steps, "per_device_train_batch_size": 8, "num_generations": 4,
              "max_completion_length": budget, "learning_rate": 1e-6, "save_strategy": "no",
              "report_to": [], "seed": 0, **extra}  # fmt: skip
    return build_trl_args(GRPOConfig, values, output_dir=out, has_gpu=False)


def _step_times(trainer: Any) -> list[float]:
    return [log["step_time"] for log in trainer.state.log_history if "step_time" in log][1:]


def _tiny_model(folder: Path) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from rk_agent.policies.local_model import embedded_tokenizer

    tokenizer = embedded_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="timed steps (plus one warm-up)")
    parser.add_argument("--budget", type=int, default=96, help="max_completion_length")
    parser.add_argument("--turn-tokens", type=int, default=16, help="most tokens per reply")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="a random 2-layer model")
    parser.add_argument(
        "--no-reuse-kv", action="store_true", help="re-prefill every turn in full (to compare)"
    )
    a = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from trl import GRPOTrainer

    from rk_agent.envs.registry import make_env
    from rk_agent.policies.local_model import embedded_model_path
    from rk_agent.trainers.grpo import grpo_trainer
    from rk_agent.trainers.tasks import env_dataset

    work = Path(tempfile.mkdtemp(prefix="rk-bench-overhead-"))
    model = _tiny_model(work / "tiny") if a.tiny else str(embedded_model_path())
    steps = a.steps + 1

    multi = grpo_trainer(
        "guess",
        model=model,
        args=_args(str(work / "multi"), steps, a.budget),
        n_tasks=steps * 2,
        env_kwargs={"max_turns": a.max_turns},
        max_tokens_per_turn=a.turn_tokens,
    )
    lengths: list[int] = []
    rollout = multi.rollout_func
    rollout.reuse_kv = not a.no_reuse_kv

    def measured(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out = rollout(prompts, trainer)
        lengths.extend(len(ids) for ids in out["completion_ids"])
        return out

    multi.rollout_func = measured
    started = time.perf_counter()
    multi.train()
    multi_wall = time.perf_counter() - started
    multi_times = _step_times(multi)
    completion = round(statistics.fmean(lengths))
    turns = statistics.fmean(
        log["episodes/turns_mean"]
        for log in multi.state.log_history
        if "episodes/turns_mean" in log
    )

    rng = random.Random(0)

    def noise(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        return [rng.random() for _ in prompts]  # varied rewards: a real backward pass

    dataset = env_dataset(make_env("guess"), n=steps * 2, seed=0).remove_columns(["task"])
    plain = GRPOTrainer(
        model=model,
        reward_funcs=[noise],
        args=_args(
            str(work / "plain"),
            steps,
            completion,
            generation_kwargs={"min_new_tokens": completion},
        ),
        train_dataset=dataset,
    )
    started = time.perf_counter()
    plain.train()
    plain_wall = time.perf_counter() - started
    plain_times = _step_times(plain)

    a_med, b_med = statistics.median(multi_times), statistics.median(plain_times)
    print(f"model: {'tiny random Llama' if a.tiny else 'embedded SmolLM2-135M'}; CPU; batch 8 "
          f"(2 tasks x 4 generations); {a.steps} timed steps each")  # fmt: skip
    reuse = "off" if a.no_reuse_kv else "on"
    print(f"multi-turn (guess, {turns:.1f} turns, {completion} completion tokens incl. env, "
          f"KV reuse {reuse}): "
          f"{a_med:.2f} s/step (steps {', '.join(f'{t:.2f}' for t in multi_times)}; "
          f"wall {multi_wall:.0f} s)")  # fmt: skip
    plain_steps = ", ".join(f"{t:.2f}" for t in plain_times)
    print(f"plain TRL single-turn ({completion} tokens forced): {b_med:.2f} s/step "
          f"(steps {plain_steps}; wall {plain_wall:.0f} s)")  # fmt: skip
    print(f"RESULT overhead {a_med / b_med:.2f}x (target <= 1.15x)")
    ratio = a_med / b_med
    label = "tiny model" if a.tiny else "embedded model"
    figure(f"multi-turn GRPO step over plain TRL ({label})", ratio, "x", "<= 1.15x", ratio <= 1.15)


if __name__ == "__main__":
    main()
