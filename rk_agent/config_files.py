"""Reading YAML configuration files, with errors that name the file and the problem.

Main names: `read_yaml_mapping`, `rebase_paths`, `validation_problems`, `flag_problems`,
`apply_overrides`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rk_agent.errors import ConfigError, did_you_mean, kind_of, sentence

__all__ = [
    "apply_overrides",
    "flag_problems",
    "problem_message",
    "read_yaml_mapping",
    "rebase_paths",
    "validation_problems",
]

Locate = Callable[[tuple[int | str, ...]], tuple[int | str, ...]]


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
        raise ConfigError(f"config {path} must be a mapping of options, got {kind_of(data)}.")
    return data


def validation_problems(exc: ValidationError, locate: Locate | None = None) -> str:
    """A pydantic error as one line: ``field.sub: message; other: message``.

    A problem of the whole config (a check across fields) is its message alone.

    Args:
        exc: the error.
        locate: rewrites each error's location first (to name a field as the file spells it,
            e.g. `rk_agent.envs.env_setup.flat_location`).
    """
    problems = []
    for error in exc.errors():
        name = _name(error["loc"], locate)
        problems.append(f"{name}: {problem_message(error)}" if name else problem_message(error))
    return "; ".join(problems)


def flag_problems(
    exc: ValidationError,
    given: Mapping[str, Any],
    flags: Mapping[str, str],
    locate: Locate | None = None,
) -> str | None:
    """The problems as ``--flag VALUE: message``, when every one is about an option typed as a
    flag; ``None`` when one is not (then name the options with `validation_problems`).

    Args:
        exc: the error.
        given: option -> value, for the options given as flags (dotted names for nested
            ones, as `apply_overrides` takes them).
        flags: option -> the flag it was typed as, where the two differ
            (``{"episode_timeout_s": "--timeout"}``); any other option ``name_x`` is
            ``--name-x``.
        locate: as for `validation_problems`.

    Example:
        >>> from pydantic import BaseModel, Field
        >>> class Run(BaseModel):
        ...     episode_timeout_s: float = Field(gt=0)
        >>> try:
        ...     Run(episode_timeout_s=-5)
        ... except ValidationError as exc:
        ...     flag_problems(exc, {"episode_timeout_s": -5}, {"episode_timeout_s": "--timeout"})
        '--timeout -5: Input should be greater than 0.'
    """
    problems = []
    for error in exc.errors():
        name = _name(error["loc"], locate)
        if name not in given:
            return None
        flag = flags.get(name, "--" + name.replace("_", "-"))
        problems.append(f"{flag} {given[name]}: {problem_message(error)}")
    return sentence("; ".join(problems)) if problems else None


def problem_message(error: Any) -> str:
    """One pydantic error's message, with "Did you mean ...?" when a name is not one of the
    choices (a ``Literal`` or an enum).

    Example:
        >>> from typing import Literal
        >>> from pydantic import BaseModel, ValidationError
        >>> class Run(BaseModel):
        ...     provider: Literal["openai", "solver"]
        >>> try:
        ...     Run(provider="slover")
        ... except ValidationError as exc:
        ...     problem_message(exc.errors()[0])
        "Input should be 'openai' or 'solver'. Did you mean 'solver'?"
    """
    message = str(error["msg"])
    expected = (error.get("ctx") or {}).get("expected")
    if error["type"] in ("literal_error", "enum") and isinstance(error.get("input"), str):
        hint = did_you_mean(error["input"], re.findall(r"'([^']*)'", str(expected or "")))
        if hint:
            return f"{message}.{hint}"
    return message


def _name(location: tuple[int | str, ...], locate: Locate | None) -> str:
    """An error's location as the option's dotted name (``""`` for the whole config)."""
    return ".".join(str(p) for p in (locate(location) if locate is not None else location))


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


def rebase_paths(
    data: dict[str, Any],
    config_path: str | Path,
    *,
    specs: tuple[str, ...] = (),
    files: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Read the relative paths a config file names from the file's own folder, in place.

    A path in a config means the same thing wherever the command runs from: a relative path
    is taken from the config's folder when it exists there, and otherwise left as written (from
    the working directory, as before). Flags given on the command line are not touched (apply
    them afterwards): they are relative to where the user typed them.

    Args:
        data: the config mapping.
        config_path: the YAML file it came from.
        specs: keys holding ``file.py::name`` specs (rewards, envs): a string, a list of them,
            or reward mappings (``{name: ..., kwargs: ...}``, ``{combine: {...}, gate: ...}``).
        files: keys holding plain file or folder paths (``tasks``, ``trajectories``).

        A dotted key reaches into a nested mapping (``env.tasks``).

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "my_rewards.py").write_text("")
        >>> data = rebase_paths({"rewards": ["my_rewards.py::exact", "math"]},
        ...                     folder / "run.yaml", specs=("rewards",))
        >>> data["rewards"][0] == f"{folder / 'my_rewards.py'}::exact", data["rewards"][1]
        (True, 'math')
    """
    base = Path(config_path).parent
    for key in specs:
        target, leaf = _parent(data, key)
        if target is not None and leaf in target:
            target[leaf] = _rebase_spec(target[leaf], base)
    for key in files:
        target, leaf = _parent(data, key)
        if target is not None and isinstance(target.get(leaf), str):
            target[leaf] = _rebase_file(target[leaf], base)
    return data


def _parent(data: dict[str, Any], key: str) -> tuple[dict[str, Any] | None, str]:
    """The mapping holding a dotted key's last part (``None`` when a level is missing)."""
    *parents, leaf = key.split(".")
    target: Any = data
    for parent in parents:
        target = target.get(parent) if isinstance(target, dict) else None
    return (target if isinstance(target, dict) else None), leaf


def _rebase_spec(value: Any, base: Path) -> Any:
    if isinstance(value, str):
        path, sep, name = value.partition("::")
        return f"{_rebase_file(path, base)}{sep}{name}" if sep else value
    if isinstance(value, list):
        return [_rebase_spec(item, base) for item in value]
    if isinstance(value, dict):
        out = dict(value)
        for key in ("name", "gate"):
            if key in out:
                out[key] = _rebase_spec(out[key], base)
        if isinstance(out.get("combine"), dict):
            out["combine"] = {k: _rebase_spec(v, base) for k, v in out["combine"].items()}
        return out
    return value


def _rebase_file(text: str, base: Path) -> str:
    path = Path(text).expanduser()
    if path.is_absolute() or not (base / path).exists():
        return text
    return str(base / path)
