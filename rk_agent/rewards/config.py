"""Rewards from configuration (YAML or dicts): one schema for every place a reward is configured.

A reward in a config is one of:

```yaml
reward: math                                  # a registered name
reward: my_rewards.py::evaluate               # a file, or package.module:fn
reward: {name: format, kwargs: {tags: [answer]}}        # with bound keyword arguments
reward:                                       # several, combined
  combine:
    answer: math
    brevity: {name: length, kwargs: {target_chars: 400}, weight: 0.1}
  method: weighted_sum                        # or mean, min, product
  gate: {name: format, kwargs: {tags: [answer]}}
  gate_threshold: 1.0
```

Main names: `SingleRewardConfig`, `CombinedRewardConfig`, `build_reward`, `load_reward_config`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rk_agent.config_files import read_yaml_mapping, rebase_paths, validation_problems
from rk_agent.errors import ConfigError, kind_of
from rk_agent.rewards.compose import CombineMethod, combine
from rk_agent.rewards.decorator import AnyRewardFn
from rk_agent.rewards.function import RewardFunction
from rk_agent.rewards.registry import get_reward_function

__all__ = [
    "CombinedRewardConfig",
    "RewardConfig",
    "SingleRewardConfig",
    "build_reward",
    "load_reward_config",
]


class SingleRewardConfig(BaseModel):
    """One reward: a name, ``module:fn`` or ``file.py::fn``, with bound keyword arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="registered name, 'package.module:fn' or 'file.py::fn'")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="passed on every call")
    weight: float = Field(default=1.0, description="weight when combined with others")


class CombinedRewardConfig(BaseModel):
    """Several rewards combined into one (see `rk_agent.combine`)."""

    model_config = ConfigDict(extra="forbid")

    combine: dict[str, str | SingleRewardConfig]
    method: CombineMethod = "weighted_sum"
    gate: str | SingleRewardConfig | None = None
    gate_threshold: float = 1.0
    name: str = "combined"


RewardConfig = str | SingleRewardConfig | CombinedRewardConfig
"""What a config may hold where a reward is expected."""


def build_reward(config: RewardConfig | dict[str, Any]) -> AnyRewardFn:
    """Build a decorated reward from a config value (a string, or a dict / spec model).

    Raises:
        ConfigError: the value fits none of the forms; the message says which forms exist.
        UnknownNameError, RewardLoadError: a named reward cannot be found or loaded.

    Example:
        >>> reward = build_reward({"combine": {"answer": "math", "fmt": {"name": "format",
        ...                        "kwargs": {"tags": ["answer"]}, "weight": 0.5}}})
        >>> reward.reward_spec.name
        'combined'
    """
    spec = _parse(config)
    if isinstance(spec, str):
        return get_reward_function(spec)
    if isinstance(spec, SingleRewardConfig):
        return _single(spec)
    components = {
        key: _single(SingleRewardConfig(name=item) if isinstance(item, str) else item)
        for key, item in spec.combine.items()
    }
    weights = {
        key: 1.0 if isinstance(item, str) else item.weight for key, item in spec.combine.items()
    }
    gate = None
    if spec.gate is not None:
        gate = _single(
            SingleRewardConfig(name=spec.gate) if isinstance(spec.gate, str) else spec.gate
        )
    return combine(
        components,
        weights=weights,
        method=spec.method,
        gate=gate,
        gate_threshold=spec.gate_threshold,
        name=spec.name,
    )


def _single(spec: SingleRewardConfig) -> AnyRewardFn:
    if not spec.kwargs:
        return get_reward_function(spec.name)
    return get_reward_function(RewardFunction(spec.name, **spec.kwargs))


def _parse(config: Any) -> str | SingleRewardConfig | CombinedRewardConfig:
    if isinstance(config, (str, SingleRewardConfig, CombinedRewardConfig)):
        return config
    if not isinstance(config, dict):
        raise ConfigError(_FORMS + f" Got {kind_of(config)}.")
    model: type[SingleRewardConfig | CombinedRewardConfig] = (
        CombinedRewardConfig if "combine" in config else SingleRewardConfig
    )
    try:
        return model.model_validate(config)
    except ValidationError as exc:
        raise ConfigError(
            f"reward config is not valid: {validation_problems(exc)}. {_FORMS}"
        ) from exc


_FORMS = (
    "A reward is a name or path string, {name: ..., kwargs: {...}, weight: ...}, or "
    "{combine: {key: reward, ...}, method: ..., gate: ...}."
)


def load_reward_config(path: str | Path) -> AnyRewardFn:
    """Build the reward under the ``reward:`` key of a YAML file.

    Relative ``file.py::fn`` paths are read from the file's folder (`rebase_paths`).

    Raises:
        ConfigError: the file cannot be read, is not YAML, or has no ``reward:`` key.
    """
    data = rebase_paths(read_yaml_mapping(path), path, specs=("reward",))
    if "reward" not in data:
        raise ConfigError(f"config {path} has no 'reward:' key. {_FORMS}")
    return build_reward(data["reward"])
