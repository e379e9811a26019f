"""Score a JSONL file of samples with a reward, locally: what ``rk-agent preview`` runs.

Each line is a sample: ``{"messages": [...], "ground_truth": ..., <other fields>}``; every field
besides ``messages`` is passed to the reward as a keyword argument. A line that cannot be read
is reported with its file and line number and the rest are still scored.

Main names: `preview_samples`, `PreviewReport`, `PreviewRow`, `SkippedLine`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.jsonl import iter_jsonl
from rk_agent.rewards.decorator import check_options
from rk_agent.rewards.function import RewardFunction
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.rewards.stats import RewardStats, reward_stats
from rk_agent.sandbox import SandboxMode, sandbox_mode
from rk_agent.types import EvaluateResult, Message

__all__ = ["PreviewReport", "PreviewRow", "SkippedLine", "preview_samples"]


class PreviewRow(BaseModel):
    """One scored sample: its line number in the file and the reward's result."""

    line: int
    result: EvaluateResult


class SkippedLine(BaseModel):
    """A line that could not be scored, and why."""

    line: int
    error: str


class PreviewReport(BaseModel):
    """Everything ``rk-agent preview`` shows: per-sample results, skipped lines, statistics.

    ``sandbox`` is the mode model code ran in (``None``: the reward runs no code).
    """

    reward: str
    samples: str
    sandbox: SandboxMode | None = None
    rows: list[PreviewRow]
    skipped: list[SkippedLine]
    stats: RewardStats
    metric_means: dict[str, float]


def preview_samples(
    reward: RewardLike | RewardFunction,
    samples: str | Path,
    *,
    sandbox: SandboxMode | str | None = None,
    max_samples: int | None = None,
    **bound_kwargs: Any,
) -> PreviewReport:
    """Score every sample in a JSONL file (or its first ``max_samples``).

    Args:
        reward: the reward (name, ``module:fn``, ``file.py::fn``, callable or `RewardFunction`).
        samples: the JSONL file.
        sandbox: for a reward that runs model code: ``"bwrap"`` (isolated, the default) or
            ``"process"`` (no isolation, opt-in); fixed for every sample and checked before
            the first (see `rk_agent.rewards.sandbox_choice`).
        max_samples: read no more than this many samples (non-blank lines); ``None``: all.
        **bound_kwargs: passed to the reward on every call (sample fields take precedence).

    Raises:
        DataError: the file cannot be opened.
        ConfigError: the reward cannot be found or loaded, or ``sandbox`` does not apply.
        SandboxError: the sandbox cannot run code here (the cause and the fix).
    """
    from rk_agent.rewards.sandbox_choice import fix_sandbox, takes_sandbox

    mode: SandboxMode | None = None
    if isinstance(reward, RewardFunction):
        if sandbox is not None:
            raise ConfigError(
                "give the sandbox mode to the RewardFunction, not to preview_samples."
            )
        rf = reward
    else:
        func = get_reward_function(reward)
        check_options(func, bound_kwargs)
        fixed = fix_sandbox(func, sandbox)
        if takes_sandbox(func):
            mode = SandboxMode.BWRAP if sandbox is None else sandbox_mode(sandbox)
        rf = RewardFunction(fixed, **bound_kwargs)
    if max_samples is not None and max_samples < 1:
        raise ConfigError(f"max_samples must be at least 1, got {max_samples}.")
    rows: list[PreviewRow] = []
    skipped: list[SkippedLine] = []
    for line in iter_jsonl(samples):
        if max_samples is not None and len(rows) + len(skipped) >= max_samples:
            break
        if line.error is not None or line.value is None:
            skipped.append(SkippedLine(line=line.number, error=str(line.error)))
            continue
        fields = dict(line.value)
        messages = fields.pop("messages", None)
        problem = messages_problem(messages)
        if problem:
            skipped.append(
                SkippedLine(line=line.number, error=f"{samples}:{line.number}: {problem}")
            )
            continue
        try:
            result = rf(messages=messages, **fields)
        except RewardInputError as exc:
            skipped.append(SkippedLine(line=line.number, error=f"{samples}:{line.number}: {exc}"))
            continue
        rows.append(PreviewRow(line=line.number, result=result))
    results = [row.result for row in rows]
    return PreviewReport(
        reward=rf.name,
        samples=str(samples),
        sandbox=mode,
        rows=rows,
        skipped=skipped,
        stats=reward_stats(results),
        metric_means=_metric_means(results),
    )


def messages_problem(messages: Any) -> str | None:
    """What is wrong with a sample's ``messages`` field, or ``None`` when it is a valid chat."""
    if not isinstance(messages, list) or not messages:
        return (
            "expected a non-empty 'messages' list (OpenAI chat format), got "
            f"{type(messages).__name__ if messages is not None else 'no messages field'}"
        )
    try:
        Message.coerce_list(messages)
    except ValueError as exc:
        first = str(exc).splitlines()
        return f"'messages' is not in the OpenAI chat format: {' '.join(first[:3])}"
    return None


def _metric_means(results: list[EvaluateResult]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for result in results:
        for name, metric in result.metrics.items():
            if metric.is_score_valid:
                values.setdefault(name, []).append(metric.score)
    return {name: sum(v) / len(v) for name, v in sorted(values.items())}
