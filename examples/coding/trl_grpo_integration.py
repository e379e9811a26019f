"""Train with the coding reward in TRL's GRPOTrainer, through ``get_trl_adapter()``.

Run it from the repository root (CPU is enough)::

    uv run python examples/coding/trl_grpo_integration.py --max-steps 1
    uv run python examples/coding/trl_grpo_integration.py --dry-run

The reward is rk-agent's built-in ``code_execution`` (each completion's code runs in the
sandbox against the problem's tests), wrapped for TRL with
``RewardFunction("code_execution").get_trl_adapter()``. The dataset is ``problems.jsonl``:
a conversational ``prompt`` column and a ``ground_truth`` column (the tests, as JSON text),
which TRL passes to the reward for each completion.

``--model tiny`` (the default) builds a tiny random Llama with the embedded SmolLM2 tokenizer,
so a real GRPO step runs in seconds with no download; its completions are noise, so expect
rewards of 0. ``--model smollm2-135m`` trains the embedded 135M instruct model instead, and
any other value is a local checkpoint folder. ``--dry-run`` trains nothing: it calls the
adapter the way TRL does, on the reference and the buggy solutions, and prints the rewards.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dataset.py beside this file

from dataset import answer, load_problems

from rk_agent import RewardFunction


def trl_rows() -> list[dict[str, Any]]:
    """One TRL row per problem: the prompt messages and the tests as JSON text."""
    return [
        {"prompt": p["messages"], "ground_truth": json.dumps(p["ground_truth"])}
        for p in load_problems()
    ]


def dry_run() -> int:
    """Call the adapter as GRPOTrainer does, with reference and buggy completions."""
    adapter = RewardFunction("code_execution").get_trl_adapter()
    problems = load_problems()
    rows = trl_rows()
    keys = ("reference_solution", "buggy_solution")
    completions = [[{"role": "assistant", "content": answer(p[k])}] for p in problems for k in keys]
    rewards = adapter(
        prompts=[r["prompt"] for r in rows for _ in range(2)],
        completions=completions,
        ground_truth=[r["ground_truth"] for r in rows for _ in range(2)],
    )
    for i, problem in enumerate(problems):
        print(f"{problem['id']:<15} reference {rewards[2 * i]:.3f}  buggy {rewards[2 * i + 1]:.3f}")
    return 0


def tiny_model(folder: Path) -> Path:
    """A random 2-layer Llama (hidden 64) with the embedded tokenizer, saved as a checkpoint."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from rk_agent.policies.local_model import embedded_tokenizer

    torch.manual_seed(0)
    tokenizer = embedded_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train(args: argparse.Namespace) -> int:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    with tempfile.TemporaryDirectory(prefix="rk-grpo-coding-") as tmp:
        if args.model == "tiny":
            model = str(tiny_model(Path(tmp) / "model"))
        elif args.model == "smollm2-135m":
            from rk_agent.policies.local_model import embedded_model_path

            model = str(embedded_model_path())
        else:
            model = args.model
        config = GRPOConfig(
            output_dir=args.output_dir or str(Path(tmp) / "out"),
            per_device_train_batch_size=args.num_generations,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_steps=args.max_steps,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            bf16=False,
            activation_checkpointing=False,
            save_strategy="no",
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[RewardFunction("code_execution").get_trl_adapter()],
            args=config,
            train_dataset=Dataset.from_list(trl_rows()),
        )
        trainer.train()
    steps = [log for log in trainer.state.log_history if "rewards/code_execution/mean" in log]
    for log in steps:
        mean = log["rewards/code_execution/mean"]
        print(f"step {log['step']}: rewards/code_execution/mean={mean:.3f}")
    print(f"GRPO ran {trainer.state.global_step} step(s) on the CPU with the code_execution reward")
    return 0 if trainer.state.global_step == args.max_steps else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--model", default="tiny", help="tiny (default), smollm2-135m, or a checkpoint folder")
    add("--max-steps", type=int, default=1, help="GRPO steps (default 1)")
    add("--num-generations", type=int, default=4, help="completions per prompt")
    add("--max-completion-length", type=int, default=32, help="tokens per completion")
    add("--output-dir", default=None, help="where TRL writes (default: a temp dir)")
    add("--dry-run", action="store_true", help="score known solutions; train nothing")
    args = parser.parse_args(argv)
    return dry_run() if args.dry_run else train(args)


if __name__ == "__main__":
    sys.exit(main())
