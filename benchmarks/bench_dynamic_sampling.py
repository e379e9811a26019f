"""What dynamic sampling costs per GRPO step, and what it buys: groups with spread trained on.

Two real multi-turn GRPO runs of the same seed (``grpo_trainer`` on the ``tools`` env, a random
2-layer model; rk-agent's loop, or TRL's with ``--loop trl``), on a reward that, like the
learning benchmark's late steps, gives no spread on most tasks: on a ``--spread`` share of the
tasks (chosen by their ground truth, so fresh tasks follow the same rule) the score is read off
the reply, elsewhere it is 1.0 whatever the reply. One run without dynamic sampling, one with
it (``max_extra_draws`` = ``--extra``). For each, per step (the first left out as warm-up):
TRL's ``step_time``; the time in TRL's scoring (``_generate_and_score_completions``: playing
the episodes, scoring, normalising; each draw of the run with dynamic sampling), timed in
place; the groups with reward spread the step trained on (the run without: its groups with
spread, from its watch; the run with: kept); and the sampler's own work (the time in
``GroupSampler.generate`` outside TRL's scoring: choosing, joining the batches).

Figures: seconds per step of each run, groups with spread per step, the extra generation time
per extra group with spread (the generation time the run with dynamic sampling spent beyond the
other's, over the groups with spread it trained on beyond the other's), seconds of step per
group with spread (the ratio of the two runs is what dynamic sampling pays or costs), and the
sampler's own work (target: under 1 % of the step).

Run: ``uv run python benchmarks/bench_dynamic_sampling.py`` (about three minutes on 2 cores;
``--steps``, ``--batch``, ``--group``, ``--spread``, ``--extra``, ``--loop``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from figures import figure


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


def _reward(share: float) -> Callable[..., float]:
    """Spread on a ``share`` of the tasks (by their ground truth), none elsewhere."""

    def mostly_flat(messages: list[Any], ground_truth: Any = None, **kwargs: Any) -> float:
        if zlib.crc32(str(ground_truth).encode()) % 1000 >= share * 1000:
            return 1.0
        replies = [m.text for m in messages if m.role == "assistant"]
        return zlib.crc32((replies[-1] if replies else "").encode()) % 1000 / 1000

    return mostly_flat


def _run(options: argparse.Namespace, model: str, out: Path, dynamic: bool) -> dict[str, Any]:
    from trl import GRPOConfig, GRPOTrainer

    from rk_agent.runs.watch_log import read_watch
    from rk_agent.trainers.group_sampling import SamplingOptions
    from rk_agent.trainers.trl_args import build_trl_args

    values = {
        "max_steps": options.steps, "per_device_train_batch_size": options.batch,
        "num_generations": options.group, "max_completion_length": 96,
        "learning_rate": 1e-6, "save_strategy": "no", "report_to": [], "seed": 0,
    }  # fmt: skip
    args = build_trl_args(GRPOConfig, values, output_dir=out)
    sampling = SamplingOptions(dynamic=dynamic, max_extra_draws=options.extra)
    common: dict[str, Any] = {
        "model": model, "args": args, "n_tasks": 64, "env_kwargs": {"tool_names": ["lookup"]},
        "rewards": {"mostly_flat": _reward(options.spread)}, "sampling": sampling,
    }  # fmt: skip
    if options.loop == "trl":
        from rk_agent.trainers.trl_env import trl_grpo_trainer

        trainer = trl_grpo_trainer("tools", **common)
    else:
        from rk_agent.trainers.grpo import grpo_trainer

        trainer = grpo_trainer("tools", max_tokens_per_turn=24, **common)
    scored: list[float] = []  # the seconds of each of TRL's scorings, in order
    calls: list[int] = []  # how many scorings each step made (dynamic sampling)
    sampler_time: list[float] = []
    original = GRPOTrainer._generate_and_score_completions

    def scoring(self: Any, inputs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, inputs)
        finally:
            scored.append(time.perf_counter() - start)

    GRPOTrainer._generate_and_score_completions = scoring  # type: ignore[method-assign]
    try:
        if dynamic:
            generate = trainer.rk_sampler.generate

            def timed(*a: Any, **k: Any) -> Any:
                before, start = len(scored), time.perf_counter()
                batch = generate(*a, **k)
                sampler_time.append(time.perf_counter() - start - sum(scored[before:]))
                calls.append(len(scored) - before)
                return batch

            trainer.rk_sampler.generate = timed
        trainer.train()
    finally:
        GRPOTrainer._generate_and_score_completions = original  # type: ignore[method-assign]
    lines = read_watch(out)
    steps = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
    if dynamic:
        spread = [float(line["sampling"]["kept"]) for line in lines]
        per_step, at = [], 0
        for n in calls:
            per_step.append(sum(scored[at : at + n]))
            at += n
    else:
        spread = [line["groups"] * (1 - line["zero_spread"]) for line in lines]
        per_step = list(scored)
    drawn = [line["groups"] for line in lines]
    return {
        "step": steps[1:], "generation": per_step[1:], "spread": spread[1:],
        "drawn": drawn[1:], "sampler": sampler_time[1:],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="GRPO steps (first: warm-up)")
    parser.add_argument("--batch", type=int, default=16, help="episodes per step")
    parser.add_argument("--group", type=int, default=4, help="episodes per group")
    parser.add_argument("--spread", type=float, default=0.4, help="share of tasks with spread")
    parser.add_argument("--extra", type=int, default=3, help="max_extra_draws")
    parser.add_argument("--loop", choices=("rk", "trl"), default="rk")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = _tiny_model(Path(tmp) / "tiny")
        off = _run(options, model, Path(tmp) / "off", dynamic=False)
        on = _run(options, model, Path(tmp) / "on", dynamic=True)

    def median(run: dict[str, Any], key: str) -> float:
        return statistics.median(run[key]) if run[key] else 0.0

    groups = options.batch // options.group
    step_off, step_on = median(off, "step"), median(on, "step")
    gen_off, gen_on = median(off, "generation"), median(on, "generation")
    spread_off = statistics.fmean(off["spread"])
    spread_on = statistics.fmean(on["spread"])
    drawn_on = statistics.fmean(on["drawn"])
    sampler = median(on, "sampler")
    extra_kept = spread_on - spread_off
    per_extra = (gen_on - gen_off) / extra_kept if extra_kept > 0 else float("nan")
    per_group_off = step_off / spread_off if spread_off else float("inf")
    per_group_on = step_on / spread_on if spread_on else float("inf")
    timed = f"{len(on['step'])} steps timed (first left out)"
    print(f"random 2-layer model, CPU; tools env, {options.loop} loop; {groups} groups of "
          f"{options.group} a step; spread on {options.spread:.0%} of the tasks; "
          f"max_extra_draws {options.extra}; {timed}")  # fmt: skip
    print(f"{'':28} {'off':>10} {'on':>10}")
    print(f"{'step time (median)':28} {step_off:>9.2f}s {step_on:>9.2f}s")
    print(f"{'generation+scoring (median)':28} {gen_off:>9.2f}s {gen_on:>9.2f}s")
    print(f"{'groups drawn (mean)':28} {groups:>10.2f} {drawn_on:>10.2f}")
    print(f"{'groups with spread (mean)':28} {spread_off:>10.2f} {spread_on:>10.2f}")
    print(f"{'step per group with spread':28} {per_group_off:>9.2f}s {per_group_on:>9.2f}s")
    print(f"extra generation per extra group with spread: {per_extra:.2f} s")
    print(f"the sampler's own work per step (median): {sampler * 1000:.1f} ms = "
          f"{sampler / step_on:.3%} of the step")  # fmt: skip
    loop = f"{options.loop} loop"
    figure(f"dynamic sampling off: seconds per step ({loop})", step_off, "s", "", None)
    figure(f"dynamic sampling on: seconds per step ({loop})", step_on, "s", "", None)
    figure(f"dynamic sampling off: groups with spread per step ({loop})", spread_off, "groups",
           f"of {groups}", None)  # fmt: skip
    figure(f"dynamic sampling on: groups with spread per step ({loop})", spread_on, "groups",
           f"of {groups}", None)  # fmt: skip
    figure(f"dynamic sampling: extra generation per extra group with spread ({loop})",
           per_extra, "s", "", None)  # fmt: skip
    ratio = per_group_on / per_group_off if per_group_off else float("nan")
    figure(f"dynamic sampling: step time per group with spread, on / off ({loop})", ratio, "x",
           "< 1: it pays", None)  # fmt: skip
    share = sampler / step_on * 100 if step_on else 0.0
    figure(f"dynamic sampling: the sampler's own work, share of the step ({loop})", share, "%",
           "< 1 %", share < 1)  # fmt: skip


if __name__ == "__main__":
    main()
