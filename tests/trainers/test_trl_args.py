"""TRL options from flags and YAML: parsing, type, range and combination checks (with the real
TRL classes and with their snapshot stand-ins), device defaults, TRL's own errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.trainers.trl_args import (
    build_trl_args,
    check_trl_combinations,
    device_defaults,
    parse_cli_overrides,
    trl_config_class,
    trl_fields,
    validate_trl_values,
)
from rk_agent.trainers.trl_schema import snapshot_config_class


@pytest.fixture(scope="module")
def grpo() -> Any:
    from trl import GRPOConfig

    return GRPOConfig


@pytest.fixture(scope="module")
def sft() -> Any:
    from trl import SFTConfig

    return SFTConfig


@pytest.fixture(params=["trl", "snapshot"])
def grpo_either(request: pytest.FixtureRequest) -> Any:
    """TRL's GRPOConfig, then its snapshot stand-in: the checks must not tell them apart."""
    if request.param == "trl":
        return request.getfixturevalue("grpo")
    return snapshot_config_class("grpo")


def test_fields_and_classes(grpo: Any, sft: Any) -> None:
    assert trl_config_class("grpo") is grpo and trl_config_class("sft") is sft
    grpo_fields, sft_fields = trl_fields(grpo), trl_fields(sft)
    assert {"learning_rate", "num_generations", "report_to", "beta"} <= grpo_fields.keys()
    assert "num_generations" not in sft_fields and "max_length" in sft_fields
    assert grpo_fields["num_generations"].default == 8
    with pytest.raises(ConfigError, match="expected a TRL config class"):
        trl_fields(dict)


def test_flag_forms(grpo_either: Any) -> None:
    args = [
        "--learning-rate=1e-5", "--max_steps", "-1", "--bf16", "--no-use_vllm",
        "--report_to", "wandb", "tensorboard", "--weight_decay", "0.1",
        "--lr_scheduler_type", "cosine", "--run_name", "2024", "--hub_model_id", "me/a #1",
        "--reward_weights", "[1, 0.5]", "--generation_kwargs", '{"top_k": 5}',
        "--activation_checkpointing", "--max_steps", "5",
    ]  # fmt: skip
    assert parse_cli_overrides(args, grpo_either) == {
        "learning_rate": 1e-5,
        "max_steps": 5,  # given twice: the last wins
        "bf16": True,
        "use_vllm": False,
        "report_to": ["wandb", "tensorboard"],
        "weight_decay": 0.1,
        "lr_scheduler_type": "cosine",
        "run_name": "2024",  # a string option keeps its text
        "hub_model_id": "me/a #1",  # verbatim, not YAML (which would drop `#1`)
        "reward_weights": [1.0, 0.5],
        "generation_kwargs": {"top_k": 5},
        "activation_checkpointing": True,
    }


def test_single_values_of_union_fields(grpo_either: Any) -> None:
    parsed = parse_cli_overrides(
        ["--report_to", "none", "--bf16", "false", "--pad_to_multiple_of", "auto"], grpo_either
    )
    assert parsed == {"report_to": "none", "bf16": False, "pad_to_multiple_of": "auto"}
    assert parse_cli_overrides(["--pad_to_multiple_of=64", "--run_name=null"], grpo_either) == {
        "pad_to_multiple_of": 64,
        "run_name": None,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--learnin_rate", "1e-5"],
         "unknown GRPOConfig option '--learnin_rate'. Did you mean 'learning_rate'? Options are "
         "the fields of trl.GRPOConfig, e.g. --learning_rate 1e-5."),
        (["--learning_rate", "fast"], "--learning_rate expects a number, got 'fast'."),
        (["--max_steps", "1.5"], "--max_steps expects an integer, got 1.5."),
        (["--bf16", "maybe"], "--bf16 expects null or a boolean, got 'maybe'."),
        (["--lr_scheduler_type", "cosin"],
         "--lr_scheduler_type expects one of 'linear', 'cosine', 'cosine_with_restarts', "
         "'polynomial', 'constant', 'constant_with_warmup', 'inverse_sqrt', "
         "'reduce_lr_on_plateau', 'cosine_with_min_lr', 'cosine_warmup_with_min_lr', "
         "'warmup_stable_decay', 'greedy', got 'cosin'. Did you mean 'cosine'?"),
        (["--log_level", "verbose"],
         "--log_level expects one of 'detail', 'debug', 'info', 'warning', 'error', "
         "'critical', 'passive', got 'verbose'."),
        (["--reward_weights", "1", "x"], "--reward_weights expects null or a list of numbers, "
         "got [1.0, 'x']."),
        (["--learning_rate"],
         "--learning_rate needs a value (a number), e.g. --learning_rate VALUE."),
        (["--max_steps", "1", "2"],
         "--max_steps takes one value, got 2: 1 2. Quote a value that contains spaces."),
        (["--no-max_steps"], "--no-max_steps only works for a boolean option, without a value."),
        (["4"], "unexpected argument '4': TRL options are written --name value "
                "(e.g. --learning_rate 1e-5)."),
        (["--max_steps", "-2"],
         "--max_steps must be at least 1, or -1 (no limit: train num_train_epochs); got -2."),
        (["--learning_rate=-1"], "--learning_rate must be greater than 0; got -1.0."),
        (["--num_generations", "1"], "--num_generations must be at least 2; got 1."),
        (["--num_generations", "null"], "--num_generations must be at least 2; got None."),
        (["--top_p", "1.5"], "--top_p must be greater than 0 and at most 1; got 1.5."),
        (["--temperature", "0"], "--temperature must be greater than 0; got 0.0."),
        (["--save_total_limit", "0"], "--save_total_limit must be at least 1; got 0."),
        (["--vllm_gpu_memory_utilization", "1.2"],
         "--vllm_gpu_memory_utilization must be greater than 0 and at most 1; got 1.2."),
        (["--seed", "-1"], "--seed must be between 0 and 4294967295; got -1."),
        (["--logging_steps", "2.5"],
         "--logging_steps must be greater than 0 (a whole number of steps, or below 1 a "
         "fraction of the total steps); got 2.5."),
        (["--loss_type", "dapoo"],
         "--loss_type expects one of 'grpo', 'dr_grpo', 'dapo', 'bnpo', 'cispo', 'sapo', "
         "'luspo', 'vespo', got 'dapoo'. Did you mean 'dapo'?"),
        (["--scale_rewards", "true"],
         "--scale_rewards expects one of 'group', 'batch', 'none', got 'true'."),
    ],
)  # fmt: skip
def test_flag_errors(grpo_either: Any, args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_cli_overrides(args, grpo_either)


def test_values_in_range_pass(grpo_either: Any) -> None:
    args = ["--max_steps", "-1", "--logging_steps", "0.1", "--save_steps", "3.0", "--top_p", "1",
            "--beta", "0", "--save_total_limit", "null", "--warmup_steps", "0.05"]  # fmt: skip
    assert parse_cli_overrides(args, grpo_either) == {
        "max_steps": -1, "logging_steps": 0.1, "save_steps": 3.0, "top_p": 1.0, "beta": 0.0,
        "save_total_limit": None, "warmup_steps": 0.05,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"num_generations": 3, "per_device_train_batch_size": 4},
         "trl: the generation batch must hold whole groups of num_generations 3 completions, "
         "but it is per_device_train_batch_size 4 x gradient_accumulation_steps 1 (default) = 4. "
         "Make per_device_train_batch_size a multiple of 3 (e.g. --per_device_train_batch_size "
         "3), or change num_generations."),
        ({"per_device_train_batch_size": 6},
         "trl: the generation batch must hold whole groups of num_generations 4 (default) "
         "completions, but it is per_device_train_batch_size 6 x gradient_accumulation_steps 1 "
         "(default) = 6. Make per_device_train_batch_size a multiple of 4 (e.g. "
         "--per_device_train_batch_size 4), or change num_generations."),
        ({"generation_batch_size": 12, "steps_per_generation": 3},
         "trl: generation_batch_size and steps_per_generation cannot both be set: set one "
         "(generation_batch_size = per_device_train_batch_size x processes x "
         "steps_per_generation)."),
        ({"bf16": True, "fp16": True},
         "trl: bf16 and fp16 cannot both be true: pick one precision (--bf16 or --fp16)."),
    ],
)  # fmt: skip
def test_combinations_trl_rejects_fail_early(
    grpo_either: Any, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        check_trl_combinations(grpo_either, values)


def test_combinations_that_depend_on_the_device_are_left_to_trl(grpo_either: Any) -> None:
    # On a CPU the batch follows the group size (3); on a GPU TRL's batch of 8 would not hold
    # whole groups of 3. Only TRL, once it knows the device, can tell.
    check_trl_combinations(grpo_either, {"num_generations": 3})
    check_trl_combinations(grpo_either, {"num_generations": 8, "per_device_train_batch_size": 8})


def test_combinations_count_the_processes(
    grpo_either: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {"num_generations": 4, "per_device_train_batch_size": 2}
    with pytest.raises(ConfigError, match=re.escape("but it is per_device_train_batch_size 2 x")):
        check_trl_combinations(grpo_either, values)
    monkeypatch.setenv("WORLD_SIZE", "2")  # what `accelerate launch` sets in each process
    check_trl_combinations(grpo_either, values)


def test_yaml_values_are_checked_and_converted(grpo: Any, sft: Any) -> None:
    # PyYAML reads `1e-5` (no dot) as a string; the field's type turns it into a number.
    assert validate_trl_values(grpo, {"learning_rate": "1e-5", "max_steps": 4.0}) == {
        "learning_rate": 1e-5,
        "max_steps": 4,
    }
    with pytest.raises(ConfigError, match=re.escape("trl.num_generations expects null or an")):
        validate_trl_values(grpo, {"num_generations": "four"})
    with pytest.raises(
        ConfigError, match=re.escape("unknown SFTConfig option 'trl.num_generations'.")
    ):
        validate_trl_values(sft, {"num_generations": 4})


def test_cpu_defaults(grpo: Any, sft: Any) -> None:
    cpu = {
        "use_cpu": True, "bf16": False, "fp16": False, "activation_checkpointing": True,
        "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1,
        "dataloader_num_workers": 0, "dataloader_pin_memory": False,
        "logging_steps": 1, "save_steps": 50, "save_total_limit": 2,
    }  # fmt: skip
    assert device_defaults(sft, has_gpu=False) == cpu
    # GRPO: one row's activations at a time, one group of 4 per optimizer step.
    assert device_defaults(grpo, has_gpu=False) == {
        **cpu,
        "num_generations": 4,
        "max_completion_length": 256,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 4,
    }


def test_gpu_defaults(grpo: Any) -> None:
    common = {"fp16": False, "activation_checkpointing": True, "logging_steps": 1}
    common |= {"save_steps": 50, "save_total_limit": 2}
    assert device_defaults(grpo, has_gpu=True, bf16_supported=True) == {"bf16": True, **common}
    assert device_defaults(grpo, has_gpu=True, bf16_supported=False) == {"bf16": False, **common}


def test_build_applies_cpu_defaults_only_where_unset(grpo: Any, tmp_path: Path) -> None:
    args = build_trl_args(grpo, {"max_steps": 2, "learning_rate": "2e-5"}, output_dir=tmp_path)
    assert (args.max_steps, args.learning_rate, args.output_dir) == (2, 2e-5, str(tmp_path))
    assert args.use_cpu and not args.bf16 and args.activation_checkpointing
    assert (args.num_generations, args.per_device_train_batch_size) == (4, 1)
    assert (args.gradient_accumulation_steps, args.generation_batch_size) == (4, 4)
    assert args.max_completion_length == 256

    mine = build_trl_args(
        grpo, {"logging_steps": 5, "fp16": False, "num_generations": 8}, output_dir=tmp_path,
        has_gpu=False,
    )  # fmt: skip
    assert mine.logging_steps == 5
    # A bigger group gets a step that holds it, not a batch TRL would reject.
    assert (mine.num_generations, mine.per_device_train_batch_size) == (8, 1)
    assert (mine.gradient_accumulation_steps, mine.generation_batch_size) == (8, 8)

    # The user's batch settles the batch: no default of ours is mixed into it.
    batch = build_trl_args(grpo, {"per_device_train_batch_size": 4}, output_dir=tmp_path,
                           has_gpu=False)  # fmt: skip
    assert (batch.per_device_train_batch_size, batch.gradient_accumulation_steps) == (4, 1)
    steps = build_trl_args(grpo, {"gradient_accumulation_steps": 2, "num_generations": 2},
                           output_dir=tmp_path, has_gpu=False)  # fmt: skip
    assert (steps.per_device_train_batch_size, steps.gradient_accumulation_steps) == (8, 2)


def test_old_checkpointing_name_is_respected(sft: Any, tmp_path: Path) -> None:
    # transformers 5.23 renamed it; the old name still works and our default must not override it.
    args = build_trl_args(sft, {"gradient_checkpointing": True}, output_dir=tmp_path)
    assert args.activation_checkpointing is True


def test_trl_errors_become_config_errors(grpo: Any, tmp_path: Path) -> None:
    message = (
        "TRL rejected these GRPOConfig settings: generation_batch_size (6) must be divisible by "
        "num_generations (4). Change the option under `trl:` in the config file, or its --flag."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        build_trl_args(grpo, {"per_device_train_batch_size": 6}, output_dir=tmp_path)
    # transformers words this one as a list: it becomes one line.
    with pytest.raises(ConfigError, match=re.escape(
        "settings: --load_best_model_at_end requires the save and eval strategy to match, "
        "except when --save_strategy=\"best\", but found - Evaluation strategy: "
        "IntervalStrategy.NO - Save strategy: SaveStrategy.STEPS Change the option"
    )):  # fmt: skip
        build_trl_args(grpo, {"load_best_model_at_end": True}, output_dir=tmp_path)
    # The checks run again on the real class: a value the snapshot missed cannot slip through.
    with pytest.raises(ConfigError, match=re.escape("trl.num_generations must be at least 2")):
        build_trl_args(grpo, {"num_generations": 1}, output_dir=tmp_path)
    with pytest.raises(ConfigError, match=re.escape("Did you mean 'max_steps'?")):
        build_trl_args(grpo, {"max_step": 1}, output_dir=tmp_path)


def test_output_dir_is_set_once(grpo: Any, tmp_path: Path) -> None:
    same = build_trl_args(grpo, {"output_dir": str(tmp_path)}, output_dir=tmp_path)
    assert same.output_dir == str(tmp_path)
    with pytest.raises(ConfigError, match=re.escape("set output_dir once, at the top level")):
        build_trl_args(grpo, {"output_dir": "elsewhere"}, output_dir=tmp_path)


@pytest.mark.slow
def test_cpu_defaults_train_a_real_grpo_step(
    grpo: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """The arguments built with CPU defaults run TRL's GRPOTrainer as they are."""
    from datasets import Dataset
    from trl import GRPOTrainer

    values = parse_cli_overrides(
        ["--max_steps", "1", "--max_completion_length", "8", "--report_to", "none",
         "--save_strategy", "no"], grpo,
    )  # fmt: skip
    args = build_trl_args(grpo, values, output_dir=tmp_path / "out")
    data = Dataset.from_dict({"prompt": ["Say 7."] * 4})

    def has_seven(completions: list[str], **kwargs: Any) -> list[float]:
        return [float("7" in c) for c in completions]

    trainer = GRPOTrainer(
        model=str(tiny_model_dir), reward_funcs=has_seven, args=args, train_dataset=data
    )
    trainer.train()
    assert trainer.state.global_step == 1
    assert "rewards/has_seven/mean" in trainer.state.log_history[0]
    assert next(trainer.model.parameters()).dtype.is_floating_point
    assert str(next(trainer.model.parameters()).dtype) == "torch.float32"
