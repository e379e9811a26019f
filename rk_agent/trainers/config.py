"""The training configuration: every option of ``rk-agent train grpo|sft``, from YAML and flags.

A YAML file gives any option; flags override it (dotted names for nested ones, such as
``wandb.mode``); TRL's own options live under ``trl:`` and come from extra flags such as
``--learning_rate 1e-5`` (see `rk_agent.trainers.trl_args`). The resolved configuration is
saved with the run as ``rk_agent_config.yaml``, secrets redacted. A run resumes from the last
complete checkpoint in its output directory. The environment options (``env``, ``env_kwargs``,
``tasks``, ``rewards``, ``max_turns``, ``seed``) are flat keys in files and flags and one
`rk_agent.envs.env_setup.EnvSetup` in the config (``config.env``), shared with rollouts;
``sft_filter`` is an `rk_agent.trainers.sft_filter.SFTFilter`, checked when the config is read.

Main names: `TrainConfig`, `WandbSettings`, `load_train_config`, `save_train_config`,
`last_checkpoint`, `resume_checkpoint`.

Example::

    config = load_train_config(
        "configs/train/grpo_tools.yaml", {"kind": "grpo"}, {"learning_rate": 2e-5}
    )
    save_train_config(config)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from rk_agent.config_files import (
    apply_overrides,
    flag_problems,
    read_yaml_mapping,
    rebase_paths,
    validation_problems,
)
from rk_agent.envs.env_setup import (
    ENV_KEYS,
    EnvConfig,
    EnvSetup,
    env_override_key,
    flat_location,
    nest_env_keys,
)
from rk_agent.errors import ConfigError, did_you_mean
from rk_agent.runs.alarms import AlarmOptions
from rk_agent.runs.run_trust import TRAINING_CONFIG_FILE, sign_config
from rk_agent.secrets import redact, secret_values
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT
from rk_agent.trainers.group_sampling import SamplingOptions, check_sampling
from rk_agent.trainers.sft_filter import SFT_FILTER_FIELDS, SFTFilter

__all__ = [
    "CONFIG_FILE",
    "TrainConfig",
    "WandbSettings",
    "last_checkpoint",
    "load_train_config",
    "resume_checkpoint",
    "save_train_config",
]

CONFIG_FILE = TRAINING_CONFIG_FILE
"""The name of the resolved configuration saved in a run's output directory."""

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


class WandbSettings(BaseModel):
    """Weights & Biases logging (see `rk_agent.trainers.wandb_setup`).

    Attributes:
        enabled: ``None`` logs when wandb is installed; ``False`` never; ``True`` requires it.
        project: the W&B project.
        mode: ``online``, ``offline`` or ``disabled``; ``None`` is online when an API key is
            found and offline (upload later with ``wandb sync``) when not.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    project: str = "rk-agent"
    mode: Literal["online", "offline", "disabled"] | None = None


class TrainConfig(EnvConfig):
    """Everything a training run needs. Saved as the run's ``rk_agent_config.yaml``.

    The environment options are given flat, as in a config file (``TrainConfig(kind="grpo",
    env="math", max_turns=2)``), or as one `EnvSetup` (``env=EnvSetup(...)``); a flat key wins
    over the same field of a setup given too. Saved, they are flat again. Read them from
    ``config.env`` (``config.env.seed``).

    Attributes:
        kind: ``grpo`` (reinforcement learning on an environment) or ``sft`` (supervised
            fine-tuning on trajectories).
        env: the environment (`EnvSetup`): ``env`` (short name, Gymnasium id,
            ``file.py::Class`` or ``module:Class``), ``env_kwargs`` (keyword arguments for its
            constructor), ``tasks`` (a JSONL dataset of tasks instead of the environment's
            generator), ``tasks_columns`` (the task field each of its columns holds),
            ``rewards`` (episode rewards replacing the environment's: names or
            paths), ``max_turns`` (assistant turns per episode; ``None``: the environment's
            default) and ``seed`` (the first task seed).
        model: model name, hub id or local folder; ``None`` is the embedded default model.
        multi_turn: GRPO plays whole episodes (tool calls and their results); ``False``
            trains on single-turn prompts from the tasks.
        loop: who plays multi-turn GRPO episodes. ``"rk"``: rk-agent's episode loop
            (`rk_agent.trainers.rollout.EpisodeRollout` as TRL's ``rollout_func``), for any
            environment, generating with the trainer's model or a served vLLM. ``"trl"``: TRL's
            own tool loop through ``environment_factory`` (`rk_agent.trainers.trl_env`), for
            tool environments; ``use_vllm``, ``vllm_mode`` and the other generation options
            then work exactly as TRL documents them.
        n_tasks: training tasks, drawn with seeds ``seed`` .. ``seed + n_tasks - 1``.
        tool_call_format: GRPO: the text tool-call format the model writes its calls in
            (`rk_agent.tool_calls`: ``hermes``, the default, or ``llama3_json``): the rk
            loop's policy reads replies with it and TRL's loop checks replies in it, and a
            malformed call's feedback is its note in both. Checked by
            `rk_agent.trainers.preflight`, once the environment's code has loaded (it may
            register a format).
        trajectories: SFT's source: a rollout run directory or a trajectories JSONL file.
        sft_filter: which trajectories SFT keeps (`SFTFilter`).
        trust_run: SFT: build the environment of ``trajectories`` to read its tools even when
            it names code and the run is not one rk-agent wrote here
            (`rk_agent.trainers.sft_data.check_tools_trust`; flag ``--trust-run``).
        output_dir: the run directory (default ``runs/train-<kind>-<env>-<timestamp>``, where
            SFT's ``<env>`` is the one its trajectories were played in).
        resume: ``"auto"`` resumes from the last checkpoint in ``output_dir`` if there is one;
            ``True`` requires one; ``False`` starts afresh; a path names the checkpoint.
        wandb: Weights & Biases logging.
        watch: GRPO's watch: the alarms' thresholds and ``stop_on_alarm``
            (`rk_agent.runs.alarms.AlarmOptions`).
        sampling: GRPO's dynamic sampling and task retirement, both off by default
            (`rk_agent.trainers.group_sampling.SamplingOptions`: ``dynamic``,
            ``max_extra_draws``, ``retire_after``, ``retire_keep``).
        trl: options of TRL's ``GRPOConfig`` / ``SFTConfig`` (``learning_rate``, ``max_steps``,
            ...); options left out get device defaults.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["grpo", "sft"]
    env: EnvSetup = Field(default_factory=EnvSetup)
    model: str | None = None
    multi_turn: bool = True
    loop: Literal["rk", "trl"] = "rk"
    n_tasks: int = Field(default=64, ge=1)
    tool_call_format: str = DEFAULT_TOOL_CALL_FORMAT
    trajectories: str | None = None
    sft_filter: SFTFilter = Field(default_factory=SFTFilter)
    trust_run: bool = False
    output_dir: str | None = None
    resume: bool | str = "auto"
    wandb: WandbSettings = Field(default_factory=WandbSettings)
    watch: AlarmOptions = Field(default_factory=AlarmOptions)
    sampling: SamplingOptions = Field(default_factory=SamplingOptions)
    trl: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _resolve(self) -> TrainConfig:
        if self.kind == "sft" and not self.trajectories:
            raise PydanticCustomError(
                "sft_source",
                "sft needs trajectories: a rollout run directory or a trajectories JSONL file "
                "(--trajectories RUN_DIR)",
            )
        if self.output_dir is None:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            env = self.env.name if self.kind == "grpo" else _played_env(str(self.trajectories))
            self.output_dir = f"runs/train-{self.kind}-{_slug(env)}-{stamp}"
        return self


def _played_env(trajectories: str) -> str:
    """The environment SFT's trajectories were played in, as their first one records it; the
    file's (or run folder's) name when that cannot be read (the preflight then says why)."""
    import json

    from rk_agent.runs.run_dir import TRAJECTORIES_FILE

    path = Path(trajectories).expanduser()
    file = path / TRAJECTORIES_FILE if path.is_dir() else path
    try:
        with file.open(encoding="utf-8") as lines:
            first = next((line for line in lines if line.strip()), "")
        env = json.loads(first).get("env") if first else None
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        env = None
    return env if isinstance(env, str) and env else (path.stem or path.resolve().name)


def _slug(env: str) -> str:
    """A folder-name-safe form of an env spec: ``pkg.mod:MyEnv`` -> ``MyEnv``."""
    tail = re.split(r"::|:|/", env)[-1].removesuffix(".py")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", tail).strip("-.") or "env"


def load_train_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    trl_overrides: dict[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
) -> TrainConfig:
    """Read a YAML config (optional), apply flag overrides, and check every option's value.

    rk-agent's options are checked by `TrainConfig` (types and ranges); TRL's by their names,
    types, choices, ranges and combinations (`rk_agent.trainers.trl_args`), against the
    snapshot of TRL's config classes (`rk_agent.trainers.trl_schema`), so nothing heavy is
    imported. Files and names that must exist are checked by
    `rk_agent.trainers.preflight.check_train_inputs`.

    Args:
        path: a YAML file of `TrainConfig` options.
        overrides: options from flags; dotted names reach nested ones (``"wandb.mode"``);
            ``None`` values (flags not given) are skipped. The environment's are flat, as in a
            file (``"env"``, ``"max_turns"``).
        trl_overrides: TRL options from extra flags (`rk_agent.trainers.trl_args.
            parse_cli_overrides`), applied over the file's ``trl:`` section. An
            ``output_dir`` here moves to the top level.
        flags: option -> the flag it was typed as, where the two differ
            (``{"watch.zero_spread_share": "--alarm-zero-spread"}``; others are
            ``--name-with-dashes``); with it, a bad value given on the command line is named
            by its flag and value (`rk_agent.config_files.flag_problems`).

    Raises:
        ConfigError: the file cannot be read or parsed, an option is unknown (with "did you
            mean") or invalid (named), ``sft_filter`` is not a mapping of its fields or has a
            bad value (the message lists the fields and their values), a TRL option has the
            wrong type or is out of range, TRL options do not fit together, or do not fit
            dynamic sampling (`rk_agent.trainers.group_sampling.check_sampling`).
    """
    data = {}
    if path is not None:  # its relative paths are read from its folder
        data = rebase_paths(
            read_yaml_mapping(path), path, specs=("env", "rewards", "env.rewards"),
            files=("tasks", "env.tasks", "trajectories", "model"),
        )  # fmt: skip
    data = nest_env_keys(data)  # then a flag reaches into an `env:` mapping the file gave
    apply_overrides(data, {env_override_key(k): v for k, v in (overrides or {}).items()})
    where = f" in {path}" if path else ""
    trl = data.get("trl") or {}
    if not isinstance(trl, dict):
        raise ConfigError(f"invalid train config{where}: trl must be a mapping of TRL options.")
    trl = {**trl, **(trl_overrides or {})}
    if "output_dir" in trl:
        data["output_dir"] = str(trl.pop("output_dir"))
    data["trl"] = trl
    _check_names(data, _option_names(), "", where)
    if isinstance(data.get("wandb"), dict):
        _check_names(data["wandb"], _option_names(WandbSettings, "wandb."), "wandb.", where)
    if isinstance(data.get("watch"), dict):
        _check_names(data["watch"], _option_names(AlarmOptions, "watch."), "watch.", where)
    if isinstance(data.get("sampling"), dict):
        prefix = "sampling."
        _check_names(data["sampling"], _option_names(SamplingOptions, prefix), prefix, where)
    if isinstance(data.get("env"), dict):
        _check_names(data["env"], _option_names(EnvSetup, "env."), "env.", where)
    _check_sft_filter(data.get("sft_filter", {}), where)
    try:
        config = TrainConfig.model_validate(data)
    except ValidationError as exc:
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        typed = flag_problems(exc, given, flags, flat_location) if flags is not None else None
        if typed is not None:
            raise ConfigError(typed) from exc
        problems = validation_problems(exc, flat_location)
        if any(error["loc"][:1] == ("sft_filter",) for error in exc.errors()):
            problems += f". sft_filter takes: {SFT_FILTER_FIELDS}"
        raise ConfigError(f"invalid train config{where}: {problems}.") from exc
    from rk_agent.trainers.trl_args import check_trl_combinations, validate_trl_values
    from rk_agent.trainers.trl_schema import schema_class

    config_cls = schema_class(config.kind)
    config.trl = validate_trl_values(config_cls, config.trl)
    check_trl_combinations(config_cls, config.trl)
    if config.kind == "grpo":
        check_sampling(config.sampling, config.trl)
    return config


def _option_names(model: type[BaseModel] = BaseModel, prefix: str = "") -> list[str]:
    """The options of ``model`` as a file spells them (default: `TrainConfig`'s, flat)."""
    if prefix:
        return [prefix + name for name in model.model_fields]
    names: list[str] = []
    for name in TrainConfig.model_fields:
        names.extend(ENV_KEYS if name == "env" else [name])
    return names


def _check_sft_filter(value: Any, where: str) -> None:
    """``sft_filter`` is a mapping of `SFTFilter`'s fields (their values are pydantic's)."""
    if not isinstance(value, dict | SFTFilter):
        shown = "null" if value is None else f"{type(value).__name__} {value!r}"
        raise ConfigError(
            f"invalid train config{where}: sft_filter must be a mapping of filter fields, got "
            f"{shown}. It takes: {SFT_FILTER_FIELDS}; e.g. sft_filter: {{min_reward: 0.5}}, or "
            "leave it out to keep solved, unfailed episodes."
        )
    if isinstance(value, dict):
        prefix = "sft_filter."
        _check_names(value, _option_names(SFTFilter, prefix), prefix, where)


def _check_names(data: dict[str, Any], known: list[str], prefix: str, where: str) -> None:
    """An unknown option gets "did you mean" (pydantic would only say extra inputs)."""
    for name in (prefix + key for key in data):
        if name not in known:
            raise ConfigError(
                f"unknown train config option {name!r}{where}.{did_you_mean(name, known)} "
                f"Options are: {', '.join(known)}."
            )


def save_train_config(config: TrainConfig, output_dir: str | Path | None = None) -> Path:
    """Write the resolved config to ``<output_dir>/rk_agent_config.yaml``, secrets redacted,
    and sign it as this user's (`rk_agent.runs.run_trust.sign_config`: its episodes'
    environment is then trusted by ``replay`` and ``rescore``).

    Settings named like credentials and the values of credential environment variables
    (`rk_agent.secrets.secret_values`) are replaced by ``***``.

    Returns:
        The file written.
    """
    import yaml

    folder = Path(output_dir if output_dir is not None else str(config.output_dir))
    folder.mkdir(parents=True, exist_ok=True)
    data = redact(config.model_dump(mode="json"), secret_values())
    path = folder / CONFIG_FILE
    header = f"# rk-agent train {config.kind}, as resolved; rerun with --config {path}\n"
    path.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    sign_config(path)
    return path


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete ``checkpoint-<step>`` folder in ``output_dir``, or ``None``.

    A checkpoint counts once its ``trainer_state.json`` exists (the Trainer writes it last),
    so one cut short by a crash is skipped.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    steps = [
        (int(match.group(1)), child)
        for child in folder.iterdir()
        if (match := _CHECKPOINT.match(child.name)) and (child / "trainer_state.json").is_file()
    ]
    return max(steps)[1] if steps else None


def resume_checkpoint(config: TrainConfig) -> Path | None:
    """The checkpoint to resume from, following ``config.resume``; ``None`` starts afresh.

    Raises:
        ConfigError: ``resume: true`` with no checkpoint in ``output_dir``, or a checkpoint
            path that does not exist.
    """
    resume = config.resume
    if resume is False:
        return None
    if isinstance(resume, str) and resume != "auto":
        path = Path(resume)
        if not path.is_dir():
            raise ConfigError(
                f"resume: checkpoint {resume!r} does not exist; give a checkpoint-<step> "
                "folder, 'auto' (the last one in output_dir, if any) or false "
                "(--resume false)."
            )
        return path
    found = last_checkpoint(str(config.output_dir))
    if found is None and resume is True:
        raise ConfigError(
            f"resume: true but {config.output_dir} has no complete checkpoint-<step> folder; "
            "use resume: auto to start afresh when there is none."
        )
    return found
