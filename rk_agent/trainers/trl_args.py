"""TRL's own training arguments (``GRPOConfig``, ``SFTConfig``) from YAML and the command line.

Every field of the TRL config class is an option: under ``trl:`` in a train config file, or as
an extra flag in the Hugging Face style (``--learning_rate 1e-5``, ``--learning-rate=1e-5``,
``--bf16`` for true, ``--no_bf16`` for false, ``--report_to wandb tensorboard`` for a list).
Values are checked against the field's type, its ``choices``, its range and the rules that tie
options together (`rk_agent.trainers.trl_rules`), so a typo or a bad value fails before a model
is loaded, with the option named. Every function here takes the real TRL class or its snapshot
stand-in (`rk_agent.trainers.trl_schema`), which checks the same without importing TRL. Settings
the user leaves out get `device_defaults`: fp32, activation checkpointing and small batches
on a CPU; bf16 and checkpointing on a GPU.

Main names: `trl_config_class`, `trl_fields`, `parse_cli_overrides`, `validate_trl_values`,
`check_trl_combinations`, `device_defaults`, `build_trl_args`.

Example::

    from trl import GRPOConfig
    values = parse_cli_overrides(["--learning-rate=1e-5", "--max_steps", "4"], GRPOConfig)
    args = build_trl_args(GRPOConfig, values, output_dir="runs/demo")
"""

from __future__ import annotations

import dataclasses
import enum
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

from rk_agent.errors import ConfigError, did_you_mean
from rk_agent.trainers.trl_rules import combination_problem, range_problem, words_for

if TYPE_CHECKING:
    from trl import GRPOConfig, SFTConfig

__all__ = [
    "build_trl_args",
    "check_trl_combinations",
    "device_defaults",
    "parse_cli_overrides",
    "trl_config_class",
    "trl_fields",
    "validate_trl_values",
]

_NONE = type(None)
_MISSING = object()


def trl_config_class(kind: Literal["grpo", "sft"]) -> type[GRPOConfig] | type[SFTConfig]:
    """TRL's config class for a training kind: ``GRPOConfig`` or ``SFTConfig`` (imports TRL)."""
    if kind == "grpo":
        from trl import GRPOConfig

        return GRPOConfig
    if kind == "sft":
        from trl import SFTConfig

        return SFTConfig
    raise ConfigError(f"unknown training kind {kind!r}; expected 'grpo' or 'sft'.")


def trl_fields(config_cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The settable fields of a TRL config class (any `TrainingArguments` dataclass), by name."""
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise ConfigError(f"expected a TRL config class such as GRPOConfig, got {config_cls!r}.")
    return {f.name: f for f in dataclasses.fields(config_cls) if f.init}


def _field_type(config_cls: type, field: dataclasses.Field[Any]) -> Any:
    if not isinstance(field.type, str):
        return field.type
    try:  # a module with `from __future__ import annotations` stores the type as text
        return typing.get_type_hints(config_cls)[field.name]
    except Exception:  # an unresolvable annotation: accept any value, TRL checks it
        return Any


class _Mismatch(Exception):
    """A value does not fit a type (internal; becomes a ConfigError naming the option)."""


def _members(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _rank(tp: Any) -> int:
    """Order of trial in a union: the most specific types first, plain strings last."""
    order = [_NONE, bool, int, float]
    if tp in order:
        return order.index(tp)
    return 9 if tp is str else 5


def _convert(value: Any, tp: Any) -> Any:
    """``value`` converted to ``tp`` when it fits, else `_Mismatch`."""
    members = _members(tp)
    if len(members) > 1:
        if any(_is_enum(m) for m in members):  # `SchedulerType | str`: the str is the enum's
            members = tuple(m for m in members if m is not str)
        for member in sorted(members, key=_rank):
            try:
                return _convert(value, member)
            except _Mismatch:
                continue
        raise _Mismatch
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if tp is _NONE:
        if value is None:
            return None
    elif origin is Literal:
        if any(value == a and type(value) is type(a) for a in typing.get_args(tp)):
            return value
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        return _to_int(value)
    elif tp is float:
        return _to_float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif _is_enum(tp):
        if isinstance(value, tp) or value in {m.value for m in tp}:
            return value
    elif tp is list or origin is list:
        if isinstance(value, (list, tuple)):
            (item,) = typing.get_args(tp) or (Any,)
            return [_convert(v, item) for v in value]
    elif tp is dict or origin is dict:
        if isinstance(value, Mapping):
            return dict(value)
    elif isinstance(tp, type) and isinstance(value, tp):
        return value
    raise _Mismatch


def _to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise _Mismatch


def _to_float(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):  # YAML 1.1 reads `1e-5` (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    raise _Mismatch


def _describe(tp: Any) -> str:
    """A type in words, for error messages."""
    members = _members(tp)
    if len(members) > 1:
        if any(_is_enum(m) for m in members):
            members = tuple(m for m in members if m is not str)
        return " or ".join(_describe(m) for m in sorted(members, key=_rank))
    origin = typing.get_origin(tp)
    if _is_enum(tp):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if tp is list or origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return f"a list of {_describe(item).removeprefix('a ').removeprefix('an ')}s"
    if tp is dict or origin is dict:
        return "a mapping"
    words = {_NONE: "null", bool: "a boolean", int: "an integer", float: "a number"}
    words.update({str: "a string", Any: "any value"})
    return words.get(tp, getattr(tp, "__name__", str(tp)))


def _check(config_cls: type, field: dataclasses.Field[Any], value: Any, where: str) -> Any:
    tp = _field_type(config_cls, field)
    try:
        converted = _convert(value, tp)
    except _Mismatch:
        raise ConfigError(
            f"{where} expects {_describe(tp)}, got {value!r}.{_hint(tp, value)}"
        ) from None
    owner = config_cls.__name__
    choices = field.metadata.get("choices") or words_for(owner, field.name)
    if choices is not None and converted is not None and converted not in list(choices):
        shown = ", ".join(repr(c) for c in choices)
        close = did_you_mean(str(converted), [str(c) for c in choices])
        raise ConfigError(f"{where} expects one of {shown}, got {converted!r}.{close}")
    problem = range_problem(owner, field.name, converted)
    if problem is not None:
        raise ConfigError(f"{where} {problem}")
    return converted


def _hint(tp: Any, value: Any) -> str:
    enums = [m for m in _members(tp) if _is_enum(m)]
    if enums and isinstance(value, str):
        return did_you_mean(value, [m.value for e in enums for m in e])
    return ""


def _unknown(config_cls: type, name: str, flag: str) -> ConfigError:
    names = trl_fields(config_cls)
    return ConfigError(
        f"unknown {config_cls.__name__} option {flag!r}.{did_you_mean(name, names)} "
        f"Options are the fields of trl.{config_cls.__name__}, e.g. --learning_rate 1e-5."
    )


def validate_trl_values(
    config_cls: type, values: Mapping[str, Any], *, where: str = "trl"
) -> dict[str, Any]:
    """Check option names and value types against the config class; return converted values.

    Strings that YAML leaves unparsed (``1e-5``) become numbers where the field wants one.

    Raises:
        ConfigError: an unknown option (with "did you mean"), or a value of the wrong type
            (naming the option, the expected type and the value).
    """
    fields = trl_fields(config_cls)
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name not in fields:
            raise _unknown(config_cls, name, f"{where}.{name}")
        checked[name] = _check(config_cls, fields[name], value, f"{where}.{name}")
    return checked


def check_trl_combinations(
    config_cls: type, values: Mapping[str, Any], *, where: str = "trl"
) -> None:
    """Check the rules that tie TRL options together, before TRL itself is imported.

    The rules (`rk_agent.trainers.trl_rules.combination_problem`) see the values as a run
    would: the user's, over the device defaults, over the class's defaults. Which device
    defaults apply is known only once torch is imported, so a rule counts as broken when it
    fails both with the CPU defaults and with TRL's own (a GPU run's batch sizes); a setting
    that fails on one device only is left to TRL when the run builds its arguments. The number
    of processes is ``WORLD_SIZE`` (set by ``accelerate launch``), else 1.

    Args:
        config_cls: ``trl.GRPOConfig``, ``trl.SFTConfig`` or their snapshot stand-ins
            (`rk_agent.trainers.trl_schema`).
        values: the options the user set, already checked by `validate_trl_values`.
        where: where the options come from, for the message.

    Raises:
        ConfigError: a combination TRL rejects (which one, and what to change).
    """
    user = dict(values)
    base = _class_defaults(config_cls)
    problems = [
        combination_problem(config_cls.__name__, every, given=user.keys(), world_size=_processes())
        for every in (
            {**base, **_defaults_for(config_cls, user, False), **user},
            {**base, **user},
        )
    ]
    if problems[0] is not None and problems[1] is not None:
        raise ConfigError(f"{where}: {problems[0]}")


def _processes() -> int:
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _class_defaults(config_cls: type) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for name, field in trl_fields(config_cls).items():
        if field.default is not dataclasses.MISSING:
            defaults[name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[name] = field.default_factory()
    return defaults


def parse_cli_overrides(args: Sequence[str], config_cls: type) -> dict[str, Any]:
    """Parse Hugging Face-style extra flags into values for the config class.

    ``--name value``, ``--name=value`` and ``--name-with-dashes`` all work; a bare boolean
    flag means true and ``--no_name`` false; a list field takes several values
    (``--report_to wandb tensorboard``) or a YAML list (``--report_to '[wandb]'``). Values are
    read as YAML scalars and checked against the field's type.

    Args:
        args: the extra command-line arguments, e.g. ``["--learning_rate", "1e-5", "--bf16"]``.
        config_cls: ``trl.GRPOConfig``, ``trl.SFTConfig`` or another TrainingArguments class.

    Returns:
        ``{field name: value}`` for the flags given (a flag given twice: the last wins).

    Raises:
        ConfigError: an argument that is not a flag, an unknown option (with "did you mean"),
            or a value that does not fit the field.

    Example:
        >>> from trl import GRPOConfig
        >>> parse_cli_overrides(["--learning-rate=1e-5", "--bf16"], GRPOConfig)
        {'learning_rate': 1e-05, 'bf16': True}
    """
    fields = trl_fields(config_cls)
    parsed: dict[str, Any] = {}
    for flag, tokens in _group_flags(args):
        name = flag[2:].replace("-", "_")
        negated = name.startswith("no_") and name not in fields and name[3:] in fields
        field = fields.get(name[3:] if negated else name)
        if field is None:
            raise _unknown(config_cls, name, flag)
        tp = _field_type(config_cls, field)
        if negated:
            if bool not in _members(tp) or tokens:
                raise ConfigError(f"{flag} only works for a boolean option, without a value.")
            parsed[field.name] = False
        else:
            parsed[field.name] = _flag_value(config_cls, field, tp, flag, tokens)
    return parsed


def _group_flags(args: Sequence[str]) -> list[tuple[str, list[str]]]:
    groups: list[tuple[str, list[str]]] = []
    for arg in args:
        if arg.startswith("--") and len(arg) > 2:
            flag, eq, value = arg.partition("=")
            groups.append((flag, [value] if eq else []))
        elif groups:
            groups[-1][1].append(arg)
        else:
            raise ConfigError(
                f"unexpected argument {arg!r}: TRL options are written --name value "
                "(e.g. --learning_rate 1e-5)."
            )
    return groups


def _flag_value(
    config_cls: type, field: dataclasses.Field[Any], tp: Any, flag: str, tokens: list[str]
) -> Any:
    members = _members(tp)
    if not tokens:
        if "const" in field.metadata:
            return field.metadata["const"]
        if bool in members:
            return True
        raise ConfigError(f"{flag} needs a value ({_describe(tp)}), e.g. {flag} VALUE.")
    if len(tokens) > 1:
        lists = [m for m in members if m is list or typing.get_origin(m) is list]
        if not lists:
            raise ConfigError(
                f"{flag} takes one value, got {len(tokens)}: {' '.join(tokens)}. "
                "Quote a value that contains spaces."
            )
        (item,) = typing.get_args(lists[0]) or (Any,)
        value: Any = [_read_scalar(t, item) for t in tokens]
    else:
        value = _read_scalar(tokens[0], tp)
    return _check(config_cls, field, value, flag)


def _read_scalar(text: str, tp: Any) -> Any:
    """A command-line token read as YAML; text stays text where the type takes a string."""
    import yaml

    try:
        value = yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text
    if isinstance(value, str):
        return text  # YAML would drop quotes and `# comments`; a string option gets it verbatim
    try:
        return _convert(value, tp)
    except _Mismatch:
        takes_str = any(m is str or _is_enum(m) for m in _members(tp))
        return text if takes_str else value


def _checkpointing_option(config_cls: type) -> str:
    """transformers >= 5.23 renamed ``gradient_checkpointing`` to ``activation_checkpointing``."""
    names = trl_fields(config_cls)
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else ("gradient_checkpointing")
    )


def device_defaults(
    config_cls: type, has_gpu: bool | None = None, *, bf16_supported: bool | None = None
) -> dict[str, Any]:
    """TRL settings that suit the machine, for the options a user leaves out.

    On a CPU (no CUDA device), for a small model such as the embedded 135M one, sized so that the
    README's smoke run (``rk-agent train grpo --env tools``: a ~1,040-token prompt plus a
    256-token episode per row) stays within a few GB (see ``benchmarks/bench_train_memory.py``):

    - ``use_cpu=True``: train on the CPU even where an MPS or other device is visible.
    - ``bf16=False, fp16=False``: fp32. TRL turns bf16 on by default; on a CPU bf16 was 25-30%
      slower than fp32 here, and fp16 needs a GPU.
    - ``activation_checkpointing=True`` (``gradient_checkpointing`` before transformers 5.23):
      a row's activations are most of a step's memory (about 3 GB for one 1,300-token row of
      the 135M model); recomputing them costs about 12 % of the training time.
    - GRPO: ``per_device_train_batch_size=1`` with ``gradient_accumulation_steps`` equal to the
      group size: one GRPO group per optimizer step, exactly as a batch of 4 would give, but one
      row's activations in memory at a time (a batch of 4 rows grew past 13 GB).
      ``num_generations=4`` (TRL: 8; the smallest group whose mean and spread still give a
      useful advantage) and ``max_completion_length=256`` (TRL: 512; generation is most of a
      CPU step and grows with it).
    - SFT: ``per_device_train_batch_size=4`` (TRL: 8) and ``gradient_accumulation_steps=1``.
    - ``dataloader_num_workers=0, dataloader_pin_memory=False``: worker processes compete with
      torch for the few cores, and pinned memory needs an accelerator.

    On a GPU: ``bf16`` where the GPU supports it (else fp32: fp16 loss scaling is fragile in
    RL), and ``activation_checkpointing=True`` (memory is the limit; TRL's choice too).

    On both: ``logging_steps=1`` (RL steps are slow and noisy; every point counts),
    ``save_steps=50`` with ``save_total_limit=2`` (a run can resume from a recent checkpoint
    without filling the disk: a 135M model's checkpoint with optimizer state is about 1.5 GB).

    The learning rate is not a device matter and is left to the config file (TRL's GRPO
    default of 1e-6 suits billion-parameter models; ``configs/train/grpo_tools.yaml`` sets
    1e-5 for the 135M model).

    Args:
        config_cls: the TRL config class (GRPO defaults apply when it has ``num_generations``).
        has_gpu: whether a CUDA device is present; ``None`` asks torch.
        bf16_supported: whether that GPU does bf16; ``None`` asks torch.

    Returns:
        ``{option: value}``, to fill in the options the user did not set.
    """
    if has_gpu is None:
        import torch

        has_gpu = torch.cuda.is_available()
    checkpointing = _checkpointing_option(config_cls)
    common: dict[str, Any] = {"logging_steps": 1, "save_steps": 50, "save_total_limit": 2}
    if has_gpu:
        if bf16_supported is None:
            import torch

            bf16_supported = torch.cuda.is_bf16_supported()
        return {"bf16": bool(bf16_supported), "fp16": False, checkpointing: True, **common}
    defaults: dict[str, Any] = {
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        checkpointing: True,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "dataloader_num_workers": 0,
        "dataloader_pin_memory": False,
        **common,
    }
    if _is_grpo(config_cls):
        defaults |= {
            "num_generations": 4,
            "max_completion_length": 256,
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4,
        }
    return defaults


def _is_grpo(config_cls: type) -> bool:
    return "num_generations" in trl_fields(config_cls)


# Options that one user setting decides together: setting any of them keeps defaults off all.
_LINKED = (
    frozenset({"bf16", "fp16"}),
    frozenset({"activation_checkpointing", "gradient_checkpointing"}),
    frozenset({"per_device_train_batch_size", "generation_batch_size", "steps_per_generation"}),
)
# GRPO's generation batch is per_device_train_batch_size x gradient_accumulation_steps (or
# steps_per_generation, or generation_batch_size): the user's choice of any decides them all.
_GRPO_BATCH = frozenset(
    {
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "generation_batch_size",
        "steps_per_generation",
    }
)


def _defaults_for(
    config_cls: type, user: Mapping[str, Any], has_gpu: bool | None
) -> dict[str, Any]:
    defaults = {k: v for k, v in device_defaults(config_cls, has_gpu).items() if k not in user}
    linked = (*_LINKED, _GRPO_BATCH) if _is_grpo(config_cls) else _LINKED
    for group in linked:
        if group & user.keys():
            for name in group:
                defaults.pop(name, None)
    # A GRPO step must hold whole groups: with the user's group size, one group per step.
    if "num_generations" in user and "gradient_accumulation_steps" in defaults:
        defaults["gradient_accumulation_steps"] = user["num_generations"]
    return defaults


def build_trl_args(
    config_cls: type[GRPOConfig] | type[SFTConfig],
    values: Mapping[str, Any],
    *,
    output_dir: str | Path,
    has_gpu: bool | None = None,
) -> Any:
    """Build TRL's config from the user's values plus `device_defaults` for the rest.

    Args:
        config_cls: ``trl.GRPOConfig`` or ``trl.SFTConfig``.
        values: the options the user set (from ``trl:`` in the config file and the flags).
        output_dir: where TRL writes checkpoints; it wins over an ``output_dir`` in ``values``
            only if they agree.
        has_gpu: injected for tests; ``None`` asks torch.

    Returns:
        An instance of ``config_cls``.

    Raises:
        ConfigError: an unknown option or a wrong type (see `validate_trl_values`), or a
            combination TRL itself rejects (its message, and where to change it).
    """
    user = validate_trl_values(config_cls, values)
    given = user.pop("output_dir", None)
    if given is not None and Path(given) != Path(output_dir):
        raise ConfigError(
            f"trl.output_dir is {given!r} but the run's output_dir is {str(output_dir)!r}; "
            "set output_dir once, at the top level of the train config (or --output-dir)."
        )
    kwargs = {**_defaults_for(config_cls, user, has_gpu), **user}
    try:
        return config_cls(output_dir=str(output_dir), **kwargs)
    except ValueError as exc:
        reason = " ".join(str(exc).split())  # one line: some of transformers' messages are lists
        raise ConfigError(
            f"TRL rejected these {config_cls.__name__} settings: {reason} "
            "Change the option under `trl:` in the config file, or its --flag."
        ) from exc
