"""Per-reward histograms reach wandb on the step TRL logs (wandb offline, the real callback)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from rk_agent.trainers.reward_histograms import (
    RewardHistogramCallback,
    ScoreBuffer,
    histogram_logs,
    record_scores,
)
from rk_agent.trainers.wandb_setup import finish_wandb


def answer(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
    return [1.0, 0.0, None, 0.5]


def fmt(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
    return [1.0, 1.0, math.nan, 1.0]


async def judge(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
    return [0.0]


def test_recorded_functions_keep_names_results_and_scores() -> None:
    buffer = ScoreBuffer()
    wrapped = record_scores([answer, fmt, judge], buffer)
    assert [f.__name__ for f in wrapped] == ["answer", "fmt", "judge"]
    assert wrapped[2] is judge  # async: left to TRL as it is
    assert wrapped[0](None, None) == [1.0, 0.0, None, 0.5]
    wrapped[1](None, None)
    wrapped[0](None, None)
    taken = buffer.take()
    assert taken == {"answer": [1.0, 0.0, None, 0.5] * 2, "fmt": [1.0, 1.0, None, 1.0]}
    assert buffer.take() == {}


def test_histogram_logs_count_invalid_scores_apart() -> None:
    logs = histogram_logs({"answer": [1.0, None, None], "broken": [None]}, list)
    assert logs == {
        "rewards/answer/histogram": [1.0],
        "rewards/answer/invalid_count": 2,
        "rewards/broken/invalid_count": 1,
    }


def test_histograms_join_trls_log_step_in_wandb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wandb = pytest.importorskip("wandb")
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.integrations import WandbCallback
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
                        "WANDB_SILENT": "true", "WANDB_PROJECT": "rk-test"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    buffer = ScoreBuffer()
    reward_funcs = record_scores([answer, fmt], buffer)
    for fn in reward_funcs:
        fn(None, None)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=["wandb"])
    state = TrainerState()
    callbacks = [DefaultFlowCallback(), RewardHistogramCallback(buffer), WandbCallback()]
    handler = CallbackHandler(callbacks, None, None, None, None)
    try:
        handler.on_train_begin(args, state, TrainerControl())
        state.global_step = 1
        handler.on_log(args, state, TrainerControl(), {"loss": 0.25})
        summary = wandb.run.summary
        answer_hist = dict(summary["rewards/answer/histogram"])
        assert answer_hist["_type"] == "histogram"
        assert sum(answer_hist["values"]) == 3  # 1.0, 0.0, 0.5; the None apart
        assert summary["rewards/answer/invalid_count"] == 1
        assert sum(dict(summary["rewards/fmt/histogram"])["values"]) == 3
        assert summary["rewards/fmt/invalid_count"] == 1  # NaN is invalid, not a score
        assert summary["train/loss"] == 0.25 and summary["_step"] == 0  # one step, together
        assert buffer.take() == {}
    finally:
        finish_wandb()  # the run and wandb's service: later tests start afresh
    assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))


def test_nothing_is_logged_without_wandb(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    buffer = ScoreBuffer()
    buffer.add("answer", [1.0])
    callback = RewardHistogramCallback(buffer)
    callback.on_log(SimpleNamespace(report_to=[]), SimpleNamespace(), None, {})
    assert buffer.take() == {"answer": [1.0]}  # kept: nobody asked for histograms


@pytest.mark.slow
def test_a_grpo_step_logs_each_reward_as_a_histogram(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wandb = pytest.importorskip("wandb")
    from trl import GRPOConfig

    from rk_agent.trainers.grpo import grpo_trainer

    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
                        "WANDB_SILENT": "true", "WANDB_PROJECT": "rk-test"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, max_steps=1, use_cpu=True, bf16=False, report_to=["wandb"],
        logging_steps=1, save_strategy="no", seed=0, gradient_checkpointing=False,
    )  # fmt: skip
    trainer = grpo_trainer("math", model=tiny_model_dir, args=args, n_tasks=4, multi_turn=False)
    names = [f.__name__ for f in trainer.reward_funcs]
    try:
        trainer.train()
        summary = wandb.run.summary
        logged = set(summary.keys())
        assert {f"rewards/{name}/invalid_count" for name in names} <= logged
        for name in names:
            counted = summary[f"rewards/{name}/invalid_count"]
            if f"rewards/{name}/histogram" in logged:
                counted += sum(dict(summary[f"rewards/{name}/histogram"])["values"])
            assert counted == 4, name  # one score per completion of the step
    finally:
        finish_wandb()  # the run and wandb's service: later tests start afresh
