"""Reading YAML configuration files, with errors that name the file and the problem.

Main names: `read_yaml_mapping`, `validation_problems`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rk_agent.errors import ConfigError

__all__ = ["apply_overrides", "read_yaml_mapping", "validation_problems"]


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping at the top of a YAML file (an empty file gives ``{}``).

    Raises:
        ConfigError: the file cannot be read, is not YAML, or is not a mapping.
    """
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {path} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping of options, got {type(data).__name__}.")
    return data


def validation_problems(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field.sub: message; other: message``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
    )


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Set command-line overrides on a config mapping, in place; ``None`` values are skipped.

    Dotted names reach nested options: ``{"sampling.temperature": 0.2}``.

    Example:
        >>> apply_overrides({"sampling": {"top_p": 0.9}}, {"sampling.temperature": 0.2, "n": None})
        {'sampling': {'top_p': 0.9, 'temperature': 0.2}}
    """
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        target = data
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return data
