"""The watch's cost per GRPO step (`rk_agent.trainers.watch`), against the step itself.

A real multi-turn GRPO run (``grpo_trainer`` on the ``tools`` env, rk-agent's loop, the watch on
as always) is timed step by step: TRL's own ``step_time``, and the time spent in the watch's
callback (``on_step_end``: the outcomes, the signals, the alarms, the token drift check, the
``watch.jsonl`` line; ``on_log``: the figures added to the log), timed in place; the token drift
check (`rk_agent.trainers.drift_rate`, the step's episodes re-rendered and re-tokenized) is
also reported on its own. The watch's other cost, its wrappers
around the reward functions (they keep each batch's scores and trajectories), is timed apart on
the run's own trajectories, as the wrapped call minus the bare one, times the number of reward
functions. The first step is left out as warm-up. For scale, the signals of a 1,024-episode
batch (the run's episodes repeated) are timed too.

Target: the watch under 1 % of the step. Run: ``uv run python benchmarks/bench_watch.py`` (the
embedded 135M model: minutes per step on 2 CPU cores, fast on a GPU), or ``--tiny`` for a random
2-layer model (about two minutes on 2 cores; the shortest steps, so the hardest case for the
ratio).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
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


class _Timed:
    """Times every call of a bound method, in place."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self.method = method
        self.seconds: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.method(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)


def _per_call(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a random 2-layer model")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps (first: warm-up)")
    parser.add_argument("--batch", type=int, default=16, help="episodes per step")
    parser.add_argument("--group", type=int, default=4, help="episodes per group")
    options = parser.parse_args()

    from trl import GRPOConfig

    from rk_agent.policies.local_model import DEFAULT_MODEL
    from rk_agent.runs.run_dir import read_trajectories
    from rk_agent.runs.watch import outcome_of, watch_signals
    from rk_agent.trainers.grpo import grpo_trainer
    from rk_agent.trainers.trl_args import build_trl_args
    from rk_agent.trainers.watch import WatchCallback, WatchRecorder

    with tempfile.TemporaryDirectory() as tmp:
        model = _tiny_model(Path(tmp) / "tiny") if options.tiny else DEFAULT_MODEL
        out = str(Path(tmp) / "run")
        values = {
            "max_steps": options.steps, "per_device_train_batch_size": options.batch,
            "num_generations": options.group, "max_completion_length": 192,
            "learning_rate": 1e-6, "save_strategy": "no", "report_to": [], "seed": 0,
        }  # fmt: skip
        args = build_trl_args(GRPOConfig, values, output_dir=out)  # CPU or GPU, as found
        trainer = grpo_trainer("tools", model=model, args=args, n_tasks=64, max_tokens_per_turn=48)
        watch = next(c for c in trainer.callback_handler.callbacks if isinstance(c, WatchCallback))
        step_end, on_log = _Timed(watch.on_step_end), _Timed(watch.on_log)
        drift: list[Any] = []

        def step_end_and_drift(*args: Any, **kwargs: Any) -> Any:
            result = step_end(*args, **kwargs)
            drift.append(watch.last_drift)
            return result

        watch.on_step_end, watch.on_log = step_end_and_drift, on_log  # type: ignore[method-assign]
        trainer.train()
        step_times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h][1:]
        callback = [a + b for a, b in zip(step_end.seconds, on_log.seconds, strict=False)][1:]
        trajectories = read_trajectories(Path(out) / "trajectories.jsonl")

    rows = trajectories[: options.batch]
    ids = [[0] * 100 for _ in rows]

    def bare(*_: Any, **kwargs: Any) -> list[float | None]:
        return [1.0] * len(kwargs["trajectory"])

    [wrapped] = WatchRecorder().wrap([bare])
    kwargs = {"prompts": [""] * len(rows), "completions": [""] * len(rows),
              "trajectory": rows, "completion_ids": ids}  # fmt: skip
    wrapper = max(0.0, _per_call(lambda: wrapped(**kwargs), 2000)
                  - _per_call(lambda: bare(**kwargs), 2000))  # fmt: skip
    n_funcs = len(trainer.reward_funcs)
    big = [trajectories[i % len(trajectories)] for i in range(1024)]
    groups = [big[i : i + options.group] for i in range(0, len(big), options.group)]
    signals_1024 = _per_call(lambda: watch_signals([[outcome_of(t) for t in g] for g in groups]), 5)

    step = statistics.median(step_times)
    cost = statistics.median(callback) + n_funcs * wrapper
    checked = [d for d in drift[1:] if d is not None]
    drift_s = statistics.median(d.seconds for d in checked)
    turns = statistics.median(d.turns for d in checked)
    name = "random 2-layer model" if options.tiny else "embedded 135M model"
    device = "CPU" if args.use_cpu else "GPU"
    timed = f"{len(step_times)} steps timed (first left out)"
    print(f"model: {name} on {device}; tools env, rk loop, {options.batch} episodes per step "
          f"in groups of {options.group}, {timed}")  # fmt: skip
    print(f"GRPO step (TRL step_time, median): {step * 1000:.0f} ms")
    print(f"watch callback per step (on_step_end + on_log, median): "
          f"{statistics.median(callback) * 1000:.3f} ms")  # fmt: skip
    print(f"reward-function wrappers: {wrapper * 1e6:.1f} us per call x {n_funcs} functions")
    print(f"signals of a 1,024-episode batch: {signals_1024 * 1000:.1f} ms")
    print(f"token drift check per step (median, in the callback): {drift_s * 1000:.1f} ms for "
          f"{turns:g} turns = {drift_s / step:.3%} of the step; drift rates "
          f"{[round(d.turns_drifted / max(1, d.turns), 3) for d in checked]}")  # fmt: skip
    print(f"RESULT watch {cost * 1000:.3f} ms per step = {cost / step:.4%} of the step "
          "(target < 1%)")  # fmt: skip
    label = "tiny model" if options.tiny else "embedded model"
    share = cost / step * 100
    figure(f"watch per GRPO step, share of the step ({label})", share, "%", "< 1 %", share < 1)
    figure(f"watch per GRPO step ({label})", cost * 1000, "ms", "", None)
    figure("watch signals of 1,024 episodes", signals_1024 * 1000, "ms", "", None)
    drift_share = drift_s / step * 100
    figure(f"token drift check per GRPO step, share of the step ({label})", drift_share, "%",
           "< 1 %", drift_share < 1)  # fmt: skip
    figure(f"token drift check per GRPO step ({label})", drift_s * 1000, "ms", "", None)


if __name__ == "__main__":
    main()
