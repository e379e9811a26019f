"""What TRL accepts beyond a value's type: ranges, fixed vocabularies, and combinations.

TRL's config classes type their fields (`rk_agent.trainers.trl_args` checks those) but accept
``--max_steps -2`` or ``--learning_rate -1`` and fail minutes later, or never. These rules,
written from TRL's and transformers' documentation and ``__post_init__`` checks, catch such
values before anything heavy is imported:

- `RANGES`: the numeric range of each option a user is likely to set (``max_steps`` is -1 or
  at least 1, ``top_p`` is in (0, 1], ...).
- `WORDS`: the values of string options that TRL's trainer accepts but its config does not
  declare as ``choices`` (``loss_type``, ``vllm_mode``, ...).
- `combination_problem`: the rules that tie options together (the generation batch holds
  whole groups of ``num_generations``, ``bf16`` and ``fp16`` exclude each other, ...).

Rules are per config class: ``"common"`` ones (transformers' ``TrainingArguments`` fields) hold
for both, ``"GRPOConfig"`` and ``"SFTConfig"`` ones for one.

Main names: `Range`, `RANGES`, `WORDS`, `range_problem`, `words_for`, `combination_problem`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RANGES",
    "WORDS",
    "Range",
    "combination_problem",
    "range_problem",
    "words_for",
]

COMMON = "common"


@dataclass(frozen=True)
class Range:
    """The numbers an option accepts: an interval, plus special values outside it.

    Attributes:
        low: the lower bound (``None``: none).
        low_open: the bound itself is excluded (``> low`` rather than ``>= low``).
        high: the upper bound (``None``: none).
        high_open: the bound itself is excluded.
        special: values accepted outside the interval, with what each means
            (``((-1, "no limit"),)``).
        whole_above_one: a value above 1 must be a whole number (transformers' steps options,
            where a value below 1 is a fraction of the total steps).
        none_ok: whether ``None`` is accepted (where the field's type allows it).
    """

    low: float | None = None
    low_open: bool = False
    high: float | None = None
    high_open: bool = False
    special: tuple[tuple[Any, str], ...] = ()
    whole_above_one: bool = False
    none_ok: bool = True

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is in the range (values that are not numbers are not judged)."""
        if value is None:
            return self.none_ok
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        if any(value == special for special, _ in self.special):
            return True
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return not (self.whole_above_one and value > 1 and value != int(value))

    def describe(self) -> str:
        """The range in words: ``"at least 1, or -1 (no limit)"``."""
        low = None if self.low is None else ("greater than " if self.low_open else "at least ")
        high = None if self.high is None else ("less than " if self.high_open else "at most ")
        if low and high and not (self.low_open or self.high_open):
            text = f"between {_num(self.low)} and {_num(self.high)}"
        else:
            parts = [f"{low}{_num(self.low)}" if low else ""]
            parts.append(f"{high}{_num(self.high)}" if high else "")
            text = " and ".join(p for p in parts if p)
        if self.whole_above_one:
            text += " (a whole number of steps, or below 1 a fraction of the total steps)"
        for special, meaning in self.special:
            text += f", or {special} ({meaning})"
        return text


def _num(value: float | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _at_least(low: float, **more: Any) -> Range:
    return Range(low=low, **more)


def _above(low: float, **more: Any) -> Range:
    return Range(low=low, low_open=True, **more)


_STEPS = Range(low=0, low_open=True, whole_above_one=True)
_FRACTION = Range(low=0, high=1)
_PORT = Range(low=1, high=65535)

RANGES: Mapping[str, Mapping[str, Range]] = {
    COMMON: {
        "per_device_train_batch_size": _at_least(1),
        "per_device_eval_batch_size": _at_least(1),
        "gradient_accumulation_steps": _at_least(1),
        "eval_accumulation_steps": _at_least(1),
        "num_train_epochs": _above(0),
        "max_steps": _at_least(1, special=((-1, "no limit: train num_train_epochs"),)),
        "learning_rate": _above(0),
        "weight_decay": _at_least(0),
        "adam_beta1": Range(low=0, high=1, high_open=True),
        "adam_beta2": Range(low=0, high=1, high_open=True),
        "adam_epsilon": _at_least(0),
        "max_grad_norm": _at_least(0),
        "warmup_steps": _at_least(0),
        "label_smoothing_factor": Range(low=0, high=1, high_open=True),
        "logging_steps": _STEPS,
        "save_steps": _STEPS,
        "eval_steps": _STEPS,
        "save_total_limit": _at_least(1),
        "seed": Range(low=0, high=2**32 - 1),
        "data_seed": Range(low=0, high=2**32 - 1),
        "dataloader_num_workers": _at_least(0),
        "dataloader_prefetch_factor": _at_least(1),
        "torch_empty_cache_steps": _at_least(1),
        "pad_to_multiple_of": _at_least(1),
    },
    "GRPOConfig": {
        "num_generations": _at_least(2, none_ok=False),
        "num_generations_eval": _at_least(1),
        "max_completion_length": _at_least(1),
        "generation_batch_size": _at_least(1),
        "steps_per_generation": _at_least(1),
        "temperature": _above(0),
        "top_p": Range(low=0, low_open=True, high=1),
        "top_k": _at_least(0),
        "min_p": _FRACTION,
        "repetition_penalty": _above(0),
        "beta": _at_least(0),
        "epsilon": _above(0),
        "epsilon_high": _above(0),
        "delta": _above(0),
        "num_iterations": _at_least(1),
        "top_entropy_quantile": _FRACTION,
        "ref_model_mixup_alpha": _FRACTION,
        "ref_model_sync_steps": _at_least(1),
        "vllm_gpu_memory_utilization": Range(low=0, low_open=True, high=1),
        "vllm_tensor_parallel_size": _at_least(1),
        "vllm_server_port": _PORT,
        "vllm_group_port": _PORT,
        "vllm_server_timeout": _above(0),
        "vllm_importance_sampling_clip_min": _at_least(0),
        "vllm_importance_sampling_clip_max": _above(0),
        "off_policy_mask_threshold": _above(0),
        "max_tool_calling_iterations": _at_least(0),
        "num_completions_to_print": _at_least(0),
    },
    "SFTConfig": {
        "max_length": _at_least(1),
        "dataset_num_proc": _at_least(1),
    },
}
"""``{config class name or "common": {option: Range}}``."""

WORDS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "GRPOConfig": {
        "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
        "scale_rewards": ("group", "batch", "none"),
        "importance_sampling_level": ("token", "sequence"),
        "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
        "vllm_mode": ("server", "colocate"),
        "vllm_model_impl": ("vllm", "transformers"),
        "vllm_importance_sampling_mode": (
            "token_truncate",
            "token_mask",
            "sequence_truncate",
            "sequence_mask",
        ),
    },
}
"""``{config class name: {string option: the values TRL's trainer accepts}}``."""


def _rule(table: Mapping[str, Mapping[str, Any]], class_name: str, option: str) -> Any:
    return table.get(class_name, {}).get(option, table.get(COMMON, {}).get(option))


def range_problem(class_name: str, option: str, value: Any) -> str | None:
    """What is wrong with ``value`` for ``option`` of ``class_name``, or ``None`` if nothing.

    Example:
        >>> range_problem("GRPOConfig", "max_steps", -2)
        'must be at least 1, or -1 (no limit: train num_train_epochs); got -2.'
    """
    rule: Range | None = _rule(RANGES, class_name, option)
    if rule is None or rule.admits(value):
        return None
    return f"must be {rule.describe()}; got {value!r}."


def words_for(class_name: str, option: str) -> tuple[str, ...] | None:
    """The values a string option accepts (per `WORDS`), or ``None`` where any string goes."""
    words: tuple[str, ...] | None = _rule(WORDS, class_name, option)
    return words


def combination_problem(
    class_name: str, values: Mapping[str, Any], *, given: Collection[str], world_size: int = 1
) -> str | None:
    """The first rule tying several options together that ``values`` break, or ``None``.

    These mirror the checks in the ``__post_init__`` of TRL's ``GRPOConfig`` and of
    transformers' ``TrainingArguments`` that need nothing but the values.

    Args:
        class_name: ``"GRPOConfig"``, ``"SFTConfig"`` (or another TrainingArguments class).
        values: every option's value as the run would see it (defaults filled in).
        given: the options the user set; the others are shown as defaults in messages.
        world_size: the training processes (``WORLD_SIZE`` under ``accelerate launch``).
    """

    def show(name: str) -> str:
        return f"{name} {_word(values[name])}" + ("" if name in given else " (default)")

    problem = _precision_problem(values) or _eval_problem(values, show)
    if problem is None and class_name == "GRPOConfig":
        problem = _grpo_batch_problem(values, show, world_size) or _grpo_logging_problem(values)
    return problem


def _word(value: Any) -> str:
    """A value as text; enum members (transformers' defaults) by their value."""
    return str(getattr(value, "value", value))


def _precision_problem(values: Mapping[str, Any]) -> str | None:
    if values.get("bf16") is True and values.get("fp16") is True:
        return "bf16 and fp16 cannot both be true: pick one precision (--bf16 or --fp16)."
    prefetch = values.get("dataloader_prefetch_factor")
    if values.get("dataloader_num_workers") == 0 and prefetch is not None:
        return (
            f"dataloader_prefetch_factor {prefetch} needs worker processes, but "
            "dataloader_num_workers is 0: set --dataloader_num_workers or drop the prefetch factor."
        )
    return None


def _eval_problem(values: Mapping[str, Any], show: Any) -> str | None:
    scheduler = _word(values.get("lr_scheduler_type"))
    evaluate, save = _word(values.get("eval_strategy")), _word(values.get("save_strategy"))
    if scheduler in ("reduce_lr_on_plateau", "greedy") and evaluate == "no":
        return (
            f"lr_scheduler_type {scheduler!r} follows the eval loss, but {show('eval_strategy')}: "
            "set --eval_strategy steps (or epoch), or another lr_scheduler_type."
        )
    if values.get("load_best_model_at_end") and save not in ("best", evaluate):
        return (
            f"load_best_model_at_end needs evaluations where checkpoints are saved, but "
            f"{show('eval_strategy')} and {show('save_strategy')}: set --eval_strategy {save} "
            "(or --save_strategy best)."
        )
    return None


def _grpo_batch_problem(values: Mapping[str, Any], show: Any, world_size: int) -> str | None:
    if values.get("auto_find_batch_size"):
        return (
            "auto_find_batch_size does not work with GRPO: a smaller batch would split the groups "
            "of num_generations completions. Lower per_device_train_batch_size instead."
        )
    per_device = values.get("per_device_train_batch_size")
    generations = values.get("num_generations")
    batch_size, steps = values.get("generation_batch_size"), values.get("steps_per_generation")
    if not isinstance(per_device, int) or not isinstance(generations, int) or generations < 1:
        return None
    processes = f" x {world_size} processes" if world_size > 1 else ""
    if batch_size is not None and steps is not None:
        return (
            "generation_batch_size and steps_per_generation cannot both be set: set one "
            "(generation_batch_size = per_device_train_batch_size x processes x "
            "steps_per_generation)."
        )
    if batch_size is not None:
        if batch_size % (per_device * world_size):
            return (
                f"{show('generation_batch_size')} must be a multiple of "
                f"{show('per_device_train_batch_size')}{processes}."
            )
        total, formula = batch_size, show("generation_batch_size")
    else:
        per_step = "steps_per_generation" if steps is not None else "gradient_accumulation_steps"
        total = per_device * world_size * int(values.get(per_step) or 1)
        formula = f"{show('per_device_train_batch_size')}{processes} x {show(per_step)} = {total}"
    if total % generations:
        return (
            f"the generation batch must hold whole groups of {show('num_generations')} "
            f"completions, but it is {formula}. Make per_device_train_batch_size a multiple of "
            f"{generations} (e.g. --per_device_train_batch_size {generations}), or change "
            "num_generations."
        )
    if _word(values.get("eval_strategy", "no")) != "no":
        eval_generations = values.get("num_generations_eval") or generations
        eval_batch = int(values.get("per_device_eval_batch_size") or 1) * world_size
        if eval_batch % eval_generations:
            return (
                f"the eval batch, {show('per_device_eval_batch_size')}{processes}, must hold "
                f"whole groups of {eval_generations} completions (num_generations_eval, else "
                "num_generations): make per_device_eval_batch_size a multiple of it."
            )
    return None


def _grpo_logging_problem(values: Mapping[str, Any]) -> str | None:
    if values.get("log_completions_hub_repo") is not None and not values.get("log_completions"):
        return (
            "log_completions_hub_repo needs log_completions: add --log_completions, or drop "
            "log_completions_hub_repo."
        )
    low = values.get("vllm_importance_sampling_clip_min")
    high = values.get("vllm_importance_sampling_clip_max")
    if low is not None and high is not None and low >= high:
        return (
            f"vllm_importance_sampling_clip_min ({low}) must be less than "
            f"vllm_importance_sampling_clip_max ({high})."
        )
    mode = _word(values.get("vllm_importance_sampling_mode"))
    if (
        values.get("vllm_importance_sampling_correction")
        and mode.endswith("_truncate")
        and low is None
        and high is None
    ):
        return (
            f"vllm_importance_sampling_mode {mode!r} clips the ratios, so it needs "
            "vllm_importance_sampling_clip_min or vllm_importance_sampling_clip_max (or "
            "--no_vllm_importance_sampling_correction)."
        )
    return None
