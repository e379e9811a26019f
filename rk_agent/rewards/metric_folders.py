"""Reward Kit's metric folders: ``NAME=PATH`` pairs that become one reward.

A metric folder holds a ``main.py`` that defines ``evaluate(messages, **kwargs)`` (decorated with
``@reward_function`` or not), as in Reward Kit's tutorial (``metrics/relevance/main.py``).
Several folders combine into one reward whose score is, unless you choose otherwise, the
**mean of the folders' scores**; its metrics hold each folder's score under the folder's name
and the folder's own metrics namespaced under it (``relevance``, ``relevance.keyword_overlap``).
``rk-agent preview --metrics-folders``, ``rk-agent deploy --metrics-folders`` and
`rk_agent.evaluation` all build the reward here, and a deployed evaluator builds it the same
way from the folders it carries.

Main names: `MetricFolder`, `parse_metric_folders`, `load_metric_folder`,
`metric_folders_reward`, `folder_requirements`, `parse_weights`.

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "short").mkdir()
    >>> _ = (root / "short" / "main.py").write_text(
    ...     "def evaluate(messages, **kwargs):\\n"
    ...     "    return float(len(messages[-1]['content']) < 20)\\n")
    >>> reward = metric_folders_reward([f"short={root / 'short'}"])
    >>> result = reward(messages=[{"role": "user", "content": "Hi?"},
    ...                           {"role": "assistant", "content": "Hello!"}])
    >>> result.score, sorted(result.metrics)
    (1.0, ['short'])
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rk_agent.errors import ConfigError
from rk_agent.rewards.compose import CombineMethod, combine
from rk_agent.rewards.decorator import AnyRewardFn
from rk_agent.rewards.registry import get_reward_function

__all__ = [
    "ENTRY_FILE",
    "ENTRY_FUNCTION",
    "MetricFolder",
    "folder_requirements",
    "load_metric_folder",
    "metric_folders_reward",
    "parse_metric_folders",
    "parse_weights",
]

ENTRY_FILE = "main.py"
"""The file every metric folder holds."""
ENTRY_FUNCTION = "evaluate"
"""The reward that file defines."""

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
_EXAMPLE = '"relevance=./metrics/relevance"'


@dataclass(frozen=True)
class MetricFolder:
    """One metric folder.

    Attributes:
        name: the metric's name: the prefix of its metrics in the combined result.
        path: the folder (relative paths are read from the working directory).
        given: the path as the user wrote it, for messages (default: ``path``).
    """

    name: str
    path: Path
    given: str | None = field(default=None, compare=False)

    @property
    def shown(self) -> str:
        """The folder as the user wrote it."""
        return self.given if self.given is not None else str(self.path)

    @property
    def main(self) -> Path:
        """The folder's ``main.py``."""
        return self.path / ENTRY_FILE

    @property
    def pair(self) -> str:
        """``NAME=PATH``, as it is written on the command line."""
        return f"{self.name}={self.shown}"


def parse_metric_folders(
    folders: Iterable[str | MetricFolder] | Mapping[str, str | Path],
) -> list[MetricFolder]:
    """Read ``NAME=PATH`` pairs (or a ``{name: path}`` mapping) and check each folder.

    Checks, in order, each with a one-line `ConfigError` that says what was expected, what
    came and how to fix it: the pair has ``=`` with a name before it and a path after it; the
    name uses letters, digits, ``_`` and ``-``; no name is given twice; the folder exists and
    is a folder; it holds ``main.py``; ``main.py`` defines ``evaluate``. Nothing is imported.

    Raises:
        ConfigError: no folders, or one of the checks above failed.
    """
    if isinstance(folders, Mapping):
        items: list[MetricFolder] = [MetricFolder(str(k), Path(v)) for k, v in folders.items()]
    elif isinstance(folders, (str, bytes)):
        raise ConfigError(
            f"expected a list of NAME=PATH pairs for metric folders, got the string {folders!r}. "
            f"Wrap it in a list: [{folders!r}]."
        )
    else:
        items = [f if isinstance(f, MetricFolder) else _split(str(f)) for f in folders]
    if not items:
        raise ConfigError(
            f"no metric folders given: expected at least one NAME=PATH pair such as {_EXAMPLE}. "
            "Pass --metrics-folders NAME=PATH (repeat it for more folders)."
        )
    seen: dict[str, MetricFolder] = {}
    for folder in items:
        _check_name(folder)
        if folder.name in seen:
            raise ConfigError(
                f"metric name {folder.name!r} is given twice ({seen[folder.name].pair!r} and "
                f"{folder.pair!r}); expected one folder per name. Give each folder its own name."
            )
        seen[folder.name] = folder
    for folder in items:
        _check_folder(folder)
    return items


def _split(pair: str) -> MetricFolder:
    name, sep, path = pair.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise ConfigError(
            f"expected a metric folder as NAME=PATH (e.g. {_EXAMPLE}), got {pair!r}. Write the "
            "metric's name, '=', then the folder that holds its main.py."
        )
    return MetricFolder(name.strip(), Path(path.strip()).expanduser(), path.strip())


def _check_name(folder: MetricFolder) -> None:
    if not _NAME.match(folder.name):
        suggestion = re.sub(r"[^A-Za-z0-9_-]+", "_", folder.name).strip("_-") or "metric"
        raise ConfigError(
            f"expected a metric name of letters, digits, '_' and '-', got {folder.name!r} (in "
            f"{folder.pair!r}). Rename it, e.g. {suggestion!r}."
        )


def _check_folder(folder: MetricFolder) -> None:
    path, shown = folder.path, folder.shown
    main_shown = f"{shown.rstrip('/')}/{ENTRY_FILE}"  # as typed: "./x" stays "./x"
    if not path.exists():
        raise ConfigError(
            f"metric folder {folder.name!r}: expected a folder at {shown!r}, but it does not "
            f"exist (relative paths start from {Path.cwd()}). Fix the path after "
            f"'{folder.name}='."
        )
    if not path.is_dir():
        parent = shown.rsplit("/", 1)[0] if "/" in shown.strip("/") else "."
        raise ConfigError(
            f"metric folder {folder.name!r}: expected a folder, got the file {shown!r}. Give "
            f"the folder that holds {ENTRY_FILE}, e.g. '{folder.name}={parent}'."
        )
    main = folder.main
    if not main.is_file():
        found = sorted(p.name for p in path.glob("*.py"))
        listing = f" (it holds {', '.join(found)})" if found else " (it holds no .py file)"
        raise ConfigError(
            f"metric folder {folder.name!r}: expected {ENTRY_FILE} in {shown!r}, found none"
            f"{listing}. Put the metric's {ENTRY_FUNCTION}() in {main_shown!r}."
        )
    try:
        tree = ast.parse(main.read_text(encoding="utf-8"), filename=str(main))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"metric folder {folder.name!r}: cannot read {main_shown!r}: {exc}."
        ) from exc
    except SyntaxError as exc:
        raise ConfigError(
            f"metric folder {folder.name!r}: {main_shown!r} is not valid Python: {exc.msg} (line "
            f"{exc.lineno}). Fix the file."
        ) from exc
    if ENTRY_FUNCTION not in _bound_names(tree):
        functions = [n.name for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]  # fmt: skip
        defines = f"it defines {', '.join(functions)}" if functions else "it defines no function"
        raise ConfigError(
            f"metric folder {folder.name!r}: expected {main_shown!r} to define "
            f"{ENTRY_FUNCTION}(messages, **kwargs), but {defines}. Name the metric's reward "
            f"function {ENTRY_FUNCTION}."
        )


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def load_metric_folder(folder: MetricFolder | str) -> AnyRewardFn:
    """Import a metric folder's ``main.py`` and return its ``evaluate`` as a reward.

    Raises:
        ConfigError: the folder fails a check of `parse_metric_folders`.
        RewardLoadError: ``main.py`` raised while it was imported.
    """
    (checked,) = parse_metric_folders([folder])
    return get_reward_function(f"{checked.main}::{ENTRY_FUNCTION}")


def metric_folders_reward(
    folders: Iterable[str | MetricFolder] | Mapping[str, str | Path],
    *,
    method: CombineMethod = "mean",
    weights: Mapping[str, float] | None = None,
) -> AnyRewardFn:
    """One reward from metric folders: each folder's ``evaluate``, combined.

    Args:
        folders: ``NAME=PATH`` pairs, `MetricFolder` objects, or ``{name: path}``.
        method: how the folders' scores become one: ``"mean"`` (the default; weighted when
            ``weights`` are given), ``"weighted_sum"``, ``"min"`` or ``"product"`` (see
            `rk_agent.rewards.compose.combine`).
        weights: ``{name: weight}``; a folder left out weighs 1.0.

    Returns:
        A decorated reward named after the folders (``relevance``, ``relevance+accuracy``);
        its metrics hold ``<name>`` (the folder's score) and ``<name>.<metric>`` for each
        metric the folder reports.

    Raises:
        ConfigError: a folder fails a check of `parse_metric_folders`, or ``method`` or
            ``weights`` are not valid.
        RewardLoadError: a folder's ``main.py`` raised while it was imported.
    """
    parsed = parse_metric_folders(folders)
    components = {f.name: get_reward_function(f"{f.main}::{ENTRY_FUNCTION}") for f in parsed}
    return combine(components, weights=weights, method=method, name="+".join(components))


def folder_requirements(folder: MetricFolder) -> list[str]:
    """The pip requirements in the folder's ``requirements.txt`` (none when it has none)."""
    path = folder.path / "requirements.txt"
    if not path.is_file():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    return [line for line in lines if line]


def parse_weights(pairs: Sequence[str]) -> dict[str, float]:
    """Read ``NAME=WEIGHT`` pairs (the CLI's ``--weight``).

    Raises:
        ConfigError: a pair is not ``NAME=NUMBER``.
    """
    weights: dict[str, float] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = math.nan
        if not name.strip() or not math.isfinite(weight):
            raise ConfigError(
                f"expected a weight as NAME=NUMBER (e.g. relevance=2), got {pair!r}. Write the "
                "metric folder's name, '=', then a number."
            )
        weights[name.strip()] = weight
    return weights
