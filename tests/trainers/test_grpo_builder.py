"""The one GRPOTrainer builder: what it fills in, wraps and attaches, and what it refuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import AlarmOptions
from rk_agent.trainers.grpo_builder import GRPOLoop, build_grpo_trainer


def _args(tmp_path: Path, **overrides: Any) -> Any:
    from trl import GRPOConfig

    values: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"), "per_device_train_batch_size": 2,
        "num_generations": 2, "max_completion_length": 8, "max_steps": 1, "use_cpu": True,
        "bf16": False, "gradient_checkpointing": False, "report_to": [], "save_strategy": "no",
    }  # fmt: skip
    values.update(overrides)
    return GRPOConfig(**values)


def zero(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    return [0.0] * len(prompts)


def one(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    return [1.0] * len(prompts)


def _loop(**changes: Any) -> GRPOLoop:
    from datasets import Dataset

    loop = GRPOLoop(
        name="my_trainer",
        train_dataset=Dataset.from_list([{"prompt": "2+2?"}, {"prompt": "3+3?"}]),
        reward_funcs=[zero, one],
        reward_weights=[1.0, 0.5],
    )
    for name, value in changes.items():
        setattr(loop, name, value)
    return loop


@pytest.mark.slow  # builds a real GRPOTrainer on the tiny model: seconds
def test_a_loop_gets_its_weights_its_checks_and_the_watch(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from rk_agent.trainers.hooked_trainer import HookedGRPOTrainer
    from rk_agent.trainers.reward_histograms import RewardHistogramCallback
    from rk_agent.trainers.watch import WatchCallback

    seen: list[tuple[str, str]] = []
    hooks: list[Any] = [print]
    loop = _loop(
        check_tokenizer=lambda tok, model: seen.append((type(tok).__name__, model)),
        batch_hooks=hooks,
        reward_histograms=True,
    )
    args = _args(tmp_path)
    trainer = build_grpo_trainer(loop, args=args, model=tiny_model_dir)
    assert seen == [(type(trainer.processing_class).__name__, str(tiny_model_dir))]
    assert args.reward_weights == [1.0, 0.5]  # the loop's, as none were given
    assert [f.__name__ for f in trainer.reward_funcs] == ["zero", "one"]
    first, second = trainer.callback_handler.callbacks[:2]  # ahead of the loggers
    assert isinstance(first, WatchCallback) and isinstance(second, RewardHistogramCallback)
    assert first.drift is None  # no tools named: no drift meter
    # the loop's hook, then the watch's recorder, opening each batch before its rewards
    assert isinstance(trainer, HookedGRPOTrainer) and trainer.rk_sampler is None
    assert trainer.rk_batch_hooks[0] is print and len(trainer.rk_batch_hooks) == 2
    assert hooks == [print]  # the loop's own list is left as it was

    quiet = _loop(batch_hooks=[])
    trainer = build_grpo_trainer(
        quiet, args=_args(tmp_path, reward_weights=[2.0, 0.0]), model=tiny_model_dir,
        watch=AlarmOptions(enabled=False),
    )  # fmt: skip
    assert trainer.args.reward_weights == [2.0, 0.0]
    kinds = {type(c) for c in trainer.callback_handler.callbacks}
    assert not kinds & {WatchCallback, RewardHistogramCallback}
    assert isinstance(trainer, HookedGRPOTrainer) and trainer.rk_batch_hooks == []


def test_a_loaded_model_needs_its_tokenizer(tmp_path: Path, tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    message = "my_trainer(model=<a loaded model>) also needs tokenizer=..."
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_grpo_trainer(_loop(), args=_args(tmp_path), model=model)


def test_reward_weights_of_the_wrong_length_are_refused_before_the_model_loads(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    message = (
        "reward_weights has 1 entries but there are 2 reward functions ['zero', 'one']; give "
        "one weight each, in that order, or leave reward_weights unset for the environment's "
        "weights."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_grpo_trainer(
            _loop(), args=_args(tmp_path, reward_weights=[1.0]), model=tiny_model_dir
        )


def test_the_loop_s_tokenizer_check_comes_before_the_model_loads(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    def refuse(tokenizer: Any, model: Any) -> None:
        raise ConfigError(f"no tools in the template of {model}")

    with pytest.raises(
        ConfigError, match=re.escape(f"no tools in the template of {tiny_model_dir}")
    ):
        build_grpo_trainer(
            _loop(check_tokenizer=refuse), args=_args(tmp_path), model=tiny_model_dir
        )
