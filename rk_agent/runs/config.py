"""The rollout configuration: every option of ``rk-agent rollout``, from YAML and flags.

A YAML file gives any option; command-line flags override it; the resolved configuration is
saved with the run (``config.yaml``), API keys excluded. The environment options (``env``,
``env_kwargs``, ``tasks``, ``rewards``, ``max_turns``, ``seed``) are flat keys in files and
flags and one `rk_agent.envs.env_setup.EnvSetup` in the config (``config.env``), shared with
training.

Main names: `RolloutConfig`, `FailurePolicy`, `load_rollout_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from rk_agent.config_files import (
    apply_overrides,
    flag_problems,
    read_yaml_mapping,
    rebase_paths,
    validation_problems,
)
from rk_agent.envs.env_setup import (
    EnvConfig,
    EnvSetup,
    env_override_key,
    flat_location,
    nest_env_keys,
)
from rk_agent.errors import ConfigError
from rk_agent.policies.policy import SamplingParams
from rk_agent.runs.workers import RayOptions
from rk_agent.tool_calls.registry import DEFAULT_TOOL_CALL_FORMAT

__all__ = ["FailurePolicy", "RolloutConfig", "load_rollout_config"]

Provider = Literal["fireworks", "openai", "local", "solver"]


class FailurePolicy(BaseModel):
    """What to do with an episode that failed (model error, timeout, crashed environment).

    Attributes:
        action: ``"record"`` keeps the failed trajectory and goes on; ``"retry"`` plays the
            episode again (up to ``max_attempts``) when the failure may pass, then records it;
            ``"drop_group"`` drops every sample of that task (a GRPO group with a missing
            sample is biased), logging it to ``dropped.jsonl``.
        max_attempts: tries per episode with ``"retry"``.
    """

    model_config = ConfigDict(extra="forbid")

    action: Literal["record", "retry", "drop_group"] = "record"
    max_attempts: int = Field(default=3, ge=1)


_SAMPLING: dict[str, Any] = {"temperature": 0.7, "max_tokens": 256}
"""A run's sampling defaults (`SamplingParams`' own are the OpenAI API's: temperature 1.0)."""


class RolloutConfig(EnvConfig):
    """Everything a rollout run needs. Saved as the run's ``config.yaml``.

    The environment options are given flat, as in a config file (``RolloutConfig(env="math",
    env_kwargs={"retries": 2}, seed=3)``), or as one `EnvSetup` (``env=EnvSetup(...)``); a flat
    key wins over the same field of a setup given too. Saved, they are flat again. Read them
    from ``config.env`` (``config.env.seed``).

    Attributes:
        env: the environment (`EnvSetup`): ``env`` (short name, Gymnasium id,
            ``file.py::Class`` or ``module:Class``), ``env_kwargs`` (keyword arguments for its
            constructor), ``tasks`` (a JSONL dataset of tasks instead of the environment's
            generator), ``tasks_columns`` (the task field each of its columns holds),
            ``rewards`` (episode rewards replacing the environment's: names or
            paths), ``max_turns`` (assistant turns per episode; ``None``: the environment's
            default) and ``seed`` (task ``i`` is played with seed ``seed + i``).
        model: model name, hub id or local folder; ``None`` is the embedded default model.
        provider: ``fireworks``, ``openai`` or ``local``; ``solver`` plays the environment's
            reference solver (no model: solved episodes for an SFT warm start, or to check an
            environment); ``None`` picks from the other options.
        base_url: an OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, ...).
        api_key_env: the environment variable holding the API key (the key is never saved).
        n: number of tasks.
        group_size: samples per task (GRPO groups, pass@k).
        concurrency: episodes played at once.
        tool_call_format: how the model writes tool calls as text where tools are not passed
            natively (a server that refuses ``tools``, a local model without a tool template):
            ``hermes`` (default) or another registered format (`rk_agent.tool_calls`); the
            policy parses with it, as GRPO's ``tool_call_format`` does in training.
        episode_timeout_s: wall-time limit per episode.
        sampling: sampling parameters.
        failure_policy: what to do with failed episodes.
        output: the run directory (default: ``runs/<env>-<timestamp>``).
        workers: play the episodes on this many Ray actors (`rk_agent.rollouts.ray_workers`;
            needs ``rk-agent[ray]``), ``concurrency`` shared among them; ``None`` (or 0) plays
            them in this process.
        ray: where the workers run and what each reserves (`RayOptions`).
        fork: ``RUN::ID@K``: play ``group_size`` continuations of episode ``ID`` of run ``RUN``
            from its turn ``K``, the environment's state restored by replaying the first ``K``
            recorded turns (`rk_agent.rollouts.fork`); the environment is the source run's and
            ``n`` is 1 (one group).
    """

    model_config = ConfigDict(extra="forbid")

    env: EnvSetup = Field(default_factory=EnvSetup)
    model: str | None = None
    provider: Provider | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    n: int = Field(default=16, ge=1)
    group_size: int = Field(default=1, ge=1)
    concurrency: int = Field(default=8, ge=1)
    tool_call_format: str = DEFAULT_TOOL_CALL_FORMAT
    episode_timeout_s: float = Field(default=600.0, gt=0)
    sampling: SamplingParams = Field(default_factory=lambda: SamplingParams(**_SAMPLING))
    failure_policy: FailurePolicy = Field(default_factory=FailurePolicy)
    output: str | None = None
    workers: int | None = Field(default=None, ge=0)
    ray: RayOptions = Field(default_factory=RayOptions)
    fork: str | None = None

    @field_validator("sampling", mode="before")
    @classmethod
    def _sampling_defaults(cls, value: Any) -> Any:
        """A partial ``sampling`` (``--max-tokens`` alone) keeps the run's other defaults."""
        return {**_SAMPLING, **value} if isinstance(value, Mapping) else value

    @field_validator("workers")
    @classmethod
    def _no_workers(cls, workers: int | None) -> int | None:
        """0 workers is this process (``--workers 0``: what ``--resume`` uses to leave Ray)."""
        return workers or None


PLACEMENT_KEYS = ("concurrency", "workers", "ray.address", "ray.num_cpus", "ray.resources")
"""The options a resumed run may change: where its episodes are played and how many at once,
never which episodes or how (`rk_agent.rollouts.slots.plan_slots` gives the same episodes and
seeds whatever they are)."""


def load_rollout_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
    *,
    rebase: bool = True,
) -> RolloutConfig:
    """Read a YAML config (optional) and apply overrides (flags that were given).

    Nested keys can be overridden with dotted names (``{"sampling.temperature": 0.2}``); the
    environment's are flat, as in a file (``{"env": "math", "env_kwargs.retries": 2}``).

    Args:
        path: the YAML file, if any.
        overrides: option -> value, from the command line (``None`` values are not given).
        flags: option -> the flag it was typed as, where the two differ
            (``{"episode_timeout_s": "--timeout"}``; others are ``--name-with-dashes``); with
            it, a bad value given on the command line is named by its flag and value.
        rebase: read the file's relative paths from its folder when they are there
            (`rk_agent.config_files.rebase_paths`). Off for a run's own ``config.yaml``
            (`rk_agent.runs.run_dir.RunDir.open`): a file shipped inside a run folder is
            never picked up; rk-agent writes a run's paths absolute.

    Raises:
        ConfigError: the file cannot be read or parsed, or an option is unknown or invalid
            (the message names the option, or the flag it was typed as).
    """
    data = {}
    if path is not None and not rebase:
        data = read_yaml_mapping(path)
    elif path is not None:  # its relative paths are read from its folder
        data = rebase_paths(
            read_yaml_mapping(path), path, specs=("env", "rewards", "env.rewards"),
            files=("tasks", "env.tasks"),
        )  # fmt: skip
    data = nest_env_keys(data)  # then a flag reaches into an `env:` mapping the file gave
    apply_overrides(data, {env_override_key(k): v for k, v in (overrides or {}).items()})
    try:
        return RolloutConfig.model_validate(data)
    except ValidationError as exc:
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        if flags is not None:
            typed = flag_problems(exc, given, flags, flat_location)
            if typed is not None:
                raise ConfigError(typed) from exc
        where = f" in {path}" if path else ""
        problems = validation_problems(exc, flat_location)
        raise ConfigError(f"invalid rollout config{where}: {problems}.") from exc
