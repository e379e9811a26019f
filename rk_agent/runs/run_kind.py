"""What a folder that is not a rollout run is, for the commands that need one.

`not_a_run` says why a path is not a run directory (missing, a file, a training run, or a
folder without ``config.yaml``) and what to give instead; `training_kind` tells a training run's
folder (``grpo`` or ``sft``) by the config `rk-agent train` saves there.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TRAINING_CONFIG_FILE", "not_a_run", "training_kind"]

TRAINING_CONFIG_FILE = "rk_agent_config.yaml"
"""The config `rk-agent train` saves in its run folder (`rk_agent.trainers.config`)."""


def training_kind(path: Path) -> str | None:
    """``grpo`` or ``sft`` when ``path`` is a training run's folder, else ``None``."""
    import yaml

    try:
        data = yaml.safe_load((path / TRAINING_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return str(kind) if kind in ("grpo", "sft") else "grpo"


def not_a_run(path: Path, config_file: str) -> str:
    """Why ``path`` is not a run directory (it has no ``config_file``), and what to give.

    Example:
        >>> not_a_run(Path("/no/such/run"), "config.yaml").split(":")[0]
        '/no/such/run does not exist'
    """
    made = "a directory made by `rk-agent rollout`"
    if not path.exists():
        return f"{path} does not exist: expected {made}. Check the path."
    if path.is_file():
        return f"{path} is a file, not a run directory: give {made} ({path.parent}, if it is one)."
    kind = training_kind(path)
    if kind is not None:
        return (
            f"{path} is a training run (`rk-agent train {kind}`), not a rollout. To go on training "
            f"it, `rk-agent train {kind} --config {path / TRAINING_CONFIG_FILE}` resumes from its "
            f"last checkpoint; `rk-agent show {path}` shows it."
        )
    return f"{path} is not a run directory: {config_file} is missing. Point at {made}."
