"""TRL's rules beyond types: ranges, vocabularies, combinations, each checked against TRL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.trainers.trl_args import _class_defaults, trl_fields
from rk_agent.trainers.trl_rules import (
    RANGES,
    WORDS,
    Range,
    combination_problem,
    range_problem,
    words_for,
)
from rk_agent.trainers.trl_schema import snapshot_config_class

FIELDS = {
    "GRPOConfig": set(trl_fields(snapshot_config_class("grpo"))),
    "SFTConfig": set(trl_fields(snapshot_config_class("sft"))),
}
FIELDS["common"] = FIELDS["GRPOConfig"] & FIELDS["SFTConfig"]


@pytest.mark.parametrize("table", [RANGES, WORDS], ids=["RANGES", "WORDS"])
def test_every_rule_names_a_field_of_its_class(table: Any) -> None:
    for owner, rules in table.items():
        assert set(rules) <= FIELDS[owner], (owner, set(rules) - FIELDS[owner])


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (Range(low=1), "at least 1"),
        (Range(low=0, low_open=True), "greater than 0"),
        (Range(low=0, high=1), "between 0 and 1"),
        (Range(low=0, low_open=True, high=1), "greater than 0 and at most 1"),
        (Range(low=0, high=1, high_open=True), "at least 0 and less than 1"),
        (Range(low=0.5, special=((-1, "off"),)), "at least 0.5, or -1 (off)"),
    ],
)
def test_ranges_in_words(rule: Range, words: str) -> None:
    assert rule.describe() == words


@pytest.mark.parametrize(
    ("owner", "option", "value", "problem"),
    [
        ("GRPOConfig", "max_steps", -1, None),
        ("GRPOConfig", "max_steps", 0,
         "must be at least 1, or -1 (no limit: train num_train_epochs); got 0."),
        ("SFTConfig", "max_steps", 5, None),
        ("GRPOConfig", "save_total_limit", None, None),
        ("GRPOConfig", "num_generations", None, "must be at least 2; got None."),
        ("GRPOConfig", "pad_to_multiple_of", "auto", None),  # not a number: the type decides
        ("GRPOConfig", "beta", 0.0, None),
        ("GRPOConfig", "warmup_steps", -0.1, "must be at least 0; got -0.1."),
        ("GRPOConfig", "top_p", 0.0, "must be greater than 0 and at most 1; got 0.0."),
        ("GRPOConfig", "adam_beta2", 1.0, "must be at least 0 and less than 1; got 1.0."),
        ("GRPOConfig", "save_steps", 0.5, None),
        ("GRPOConfig", "save_steps", 20.0, None),
        ("SFTConfig", "max_length", 0, "must be at least 1; got 0."),
        ("SFTConfig", "num_generations", 1, None),  # not an SFT option: no rule
        ("GRPOConfig", "bf16", True, None),
    ],
)  # fmt: skip
def test_range_problem(owner: str, option: str, value: Any, problem: str | None) -> None:
    assert range_problem(owner, option, value) == problem


def test_words_are_those_trl_documents() -> None:
    """Each word appears in the option's TRL help text, and TRL's default is one of them."""
    grpo = trl_fields(pytest.importorskip("trl").GRPOConfig)
    for option, words in WORDS["GRPOConfig"].items():
        help_text = grpo[option].metadata["help"]
        for word in words:
            assert re.search(rf"[`']{word}[`']", help_text), (option, word)
        assert grpo[option].default in words, option
    assert words_for("GRPOConfig", "loss_type") == WORDS["GRPOConfig"]["loss_type"]
    assert words_for("SFTConfig", "loss_type") is None  # SFT declares its own choices


def _values(kind: str, **given: Any) -> dict[str, Any]:
    return {**_class_defaults(snapshot_config_class(kind)), **given}


# Each bad combination is one the real config class rejects too (checked below).
BAD = [
    ("grpo", {"num_generations": 3, "per_device_train_batch_size": 4},
     "the generation batch must hold whole groups of num_generations 3 completions, but it is "
     "per_device_train_batch_size 4 x gradient_accumulation_steps 1 (default) = 4. Make "
     "per_device_train_batch_size a multiple of 3 (e.g. --per_device_train_batch_size 3), or "
     "change num_generations."),
    ("grpo", {"num_generations": 4, "per_device_train_batch_size": 2,
              "steps_per_generation": 3},
     "the generation batch must hold whole groups of num_generations 4 completions, but it is "
     "per_device_train_batch_size 2 x steps_per_generation 3 = 6. Make "
     "per_device_train_batch_size a multiple of 4 (e.g. --per_device_train_batch_size 4), or "
     "change num_generations."),
    ("grpo", {"generation_batch_size": 12, "per_device_train_batch_size": 8},
     "generation_batch_size 12 must be a multiple of per_device_train_batch_size 8."),
    ("grpo", {"generation_batch_size": 12, "per_device_train_batch_size": 4},
     "the generation batch must hold whole groups of num_generations 8 (default) completions, "
     "but it is generation_batch_size 12. Make per_device_train_batch_size a multiple of 8 "
     "(e.g. --per_device_train_batch_size 8), or change num_generations."),
    ("grpo", {"generation_batch_size": 16, "steps_per_generation": 2},
     "generation_batch_size and steps_per_generation cannot both be set: set one "
     "(generation_batch_size = per_device_train_batch_size x processes x "
     "steps_per_generation)."),
    ("grpo", {"eval_strategy": "steps", "eval_steps": 5, "per_device_eval_batch_size": 6},
     "the eval batch, per_device_eval_batch_size 6, must hold whole groups of 8 completions "
     "(num_generations_eval, else num_generations): make per_device_eval_batch_size a "
     "multiple of it."),
    ("grpo", {"auto_find_batch_size": True},
     "auto_find_batch_size does not work with GRPO: a smaller batch would split the groups of "
     "num_generations completions. Lower per_device_train_batch_size instead."),
    ("grpo", {"log_completions_hub_repo": "me/completions"},
     "log_completions_hub_repo needs log_completions: add --log_completions, or drop "
     "log_completions_hub_repo."),
    ("grpo", {"vllm_importance_sampling_clip_min": 2.0, "vllm_importance_sampling_clip_max": 2.0},
     "vllm_importance_sampling_clip_min (2.0) must be less than "
     "vllm_importance_sampling_clip_max (2.0)."),
    ("grpo", {"vllm_importance_sampling_mode": "token_truncate",
              "vllm_importance_sampling_clip_max": None},
     "vllm_importance_sampling_mode 'token_truncate' clips the ratios, so it needs "
     "vllm_importance_sampling_clip_min or vllm_importance_sampling_clip_max (or "
     "--no_vllm_importance_sampling_correction)."),
    ("sft", {"bf16": True, "fp16": True},
     "bf16 and fp16 cannot both be true: pick one precision (--bf16 or --fp16)."),
    ("sft", {"dataloader_prefetch_factor": 2},
     "dataloader_prefetch_factor 2 needs worker processes, but dataloader_num_workers is 0: "
     "set --dataloader_num_workers or drop the prefetch factor."),
    ("sft", {"lr_scheduler_type": "reduce_lr_on_plateau"},
     "lr_scheduler_type 'reduce_lr_on_plateau' follows the eval loss, but eval_strategy no "
     "(default): set --eval_strategy steps (or epoch), or another lr_scheduler_type."),
    ("sft", {"load_best_model_at_end": True, "eval_strategy": "epoch"},
     "load_best_model_at_end needs evaluations where checkpoints are saved, but eval_strategy "
     "epoch and save_strategy steps (default): set --eval_strategy steps (or --save_strategy "
     "best)."),
]  # fmt: skip

GOOD = [
    ("grpo", {}),
    ("grpo", {"num_generations": 4, "per_device_train_batch_size": 2,
              "gradient_accumulation_steps": 2}),
    ("grpo", {"generation_batch_size": 16, "per_device_train_batch_size": 4}),
    ("grpo", {"steps_per_generation": 4, "per_device_train_batch_size": 2}),
    ("grpo", {"eval_strategy": "steps", "eval_steps": 5, "num_generations_eval": 2,
              "per_device_eval_batch_size": 6}),
    ("grpo", {"log_completions_hub_repo": "me/c", "log_completions": True}),
    ("sft", {"bf16": True}),
    ("sft", {"load_best_model_at_end": True, "eval_strategy": "steps", "eval_steps": 10,
             "save_steps": 10}),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "given", "problem"), BAD, ids=[str(b[1]) for b in BAD])
def test_bad_combinations(kind: str, given: dict[str, Any], problem: str) -> None:
    owner = snapshot_config_class(kind).__name__
    assert combination_problem(owner, _values(kind, **given), given=given.keys()) == problem


@pytest.mark.parametrize(("kind", "given"), GOOD, ids=[str(g[1]) for g in GOOD])
def test_good_combinations(kind: str, given: dict[str, Any]) -> None:
    owner = snapshot_config_class(kind).__name__
    assert combination_problem(owner, _values(kind, **given), given=given.keys()) is None


def test_processes_count_in_the_batch() -> None:
    given = {"num_generations": 4, "per_device_train_batch_size": 2}
    values = _values("grpo", **given)
    assert combination_problem("GRPOConfig", values, given=given, world_size=2) is None
    assert "per_device_train_batch_size 2 x 3 processes x gradient_accumulation_steps 1 " in str(
        combination_problem("GRPOConfig", values, given=given, world_size=3)
    )


def test_trl_agrees(tmp_path: Path) -> None:
    """Every bad combination above is one TRL rejects; every good one, TRL accepts."""
    from rk_agent.trainers.trl_args import trl_config_class

    for kind, given, _ in BAD:
        with pytest.raises(ValueError):  # TRL's own wording
            trl_config_class(kind)(output_dir=str(tmp_path), use_cpu=True, **given)
    for kind, given in GOOD:
        trl_config_class(kind)(output_dir=str(tmp_path), use_cpu=True, **given)
