"""Reward Kit's ``reward_kit.evaluation`` functions, for code written against its tutorials.

``create_evaluation`` deploys metric folders as a Fireworks evaluator and returns it as a dict;
``preview_evaluation`` scores a JSONL file of samples with metric folders and returns a result
you can print. Both are thin layers over what the CLI runs (`rk-agent deploy --metrics-folders`
and `rk-agent preview --metrics-folders`): `rk_agent.fireworks.evaluators.deploy_metric_folders`
and `rk_agent.rewards.preview.preview_samples` with
`rk_agent.rewards.metric_folders.metric_folders_reward`.

One difference from Reward Kit: ``preview_evaluation`` scores the samples **locally** by
default (Reward Kit sends them to Fireworks' preview API); pass ``on_fireworks=True`` for that.

Main names: `create_evaluation`, `preview_evaluation`, `EvaluationPreview`, `PreviewSample`.

Example:
    >>> from pathlib import Path
    >>> folder = Path("examples/first_reward/metrics/relevance").absolute()
    >>> preview = preview_evaluation(metric_folders=[f"relevance={folder}"],
    ...                              sample_file="examples/first_reward/samples.jsonl")
    >>> preview.total_samples, [round(r.score, 2) for r in preview.results]
    (3, [1.0, 0.67, 0.0])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent.errors import ConfigError

if TYPE_CHECKING:
    from rk_agent.fireworks.client import FireworksClient
    from rk_agent.fireworks.evaluators import Evaluator
    from rk_agent.rewards.compose import CombineMethod
    from rk_agent.rewards.preview import PreviewReport

__all__ = ["EvaluationPreview", "PreviewSample", "create_evaluation", "preview_evaluation"]


def create_evaluation(
    evaluator_id: str,
    metric_folders: Sequence[str] | None = None,
    display_name: str | None = None,
    description: str | None = None,
    force: bool = False,
    *,
    combine: CombineMethod = "mean",
    weights: Mapping[str, float] | None = None,
    requirements: Sequence[str] = (),
    client: FireworksClient | None = None,
    wait: bool = True,
    poll_s: float = 10.0,
    timeout_s: float = 900.0,
    on_update: Callable[[Evaluator], None] | None = None,
) -> dict[str, Any]:
    """Create (or, with ``force``, replace) a Fireworks evaluator made of metric folders.

    Contract only: tested against the project's fake of the documented Fireworks API.

    Args:
        evaluator_id: the evaluator's id (1 to 63 lowercase letters, digits and hyphens).
        metric_folders: ``"NAME=PATH"`` pairs; each folder holds a ``main.py`` defining
            ``evaluate``. The evaluator's score is the mean of the folders' scores unless
            ``combine``/``weights`` say otherwise; its metrics are ``NAME.<metric>``.
        display_name: shown in the console (default: the id).
        description: one line (default: names the folders).
        force: replace an evaluator of this id whose code differs (unchanged code is reused).
        combine: ``"mean"``, ``"weighted_sum"``, ``"min"`` or ``"product"``.
        weights: ``{name: weight}`` for ``mean`` and ``weighted_sum``.
        requirements: pip requirements beyond the folders' own ``requirements.txt``.
        client: the API client (default: one from ``FIREWORKS_API_KEY`` and friends).
        wait: wait until the evaluator is built (``ACTIVE``).
        poll_s: seconds between status checks.
        timeout_s: how long to wait for the build.
        on_update: called with the evaluator at each status check.

    Returns:
        The evaluator as the API returns it (camelCase keys); ``result["name"]`` is the full
        resource name ``accounts/<account>/evaluators/<id>``.

    Raises:
        ConfigError: a folder is not a valid metric folder, the id is not valid, or no API key
            is set.
        FireworksError: the API refused, the evaluator exists with other code and ``force`` is
            off, or the build failed.

    Example:
        ```python
        result = create_evaluation(
            evaluator_id="relevance-evaluator",
            metric_folders=[f"relevance={Path('metrics/relevance').absolute()}"],
            display_name="Response Relevance Evaluator",
            description="Evaluates how well a response addresses the user's query",
            force=True,
        )
        print(result["name"].split("/")[-1])  # relevance-evaluator
        ```
    """
    from rk_agent.fireworks.evaluators import deploy_metric_folders

    deployment = deploy_metric_folders(
        _folders(metric_folders),
        evaluator_id=evaluator_id,
        display_name=display_name,
        description=description,
        force=force,
        method=combine,
        weights=weights,
        requirements=requirements,
        client=client,
        wait=wait,
        poll_s=poll_s,
        timeout_s=timeout_s,
        on_update=on_update,
    )
    return deployment.evaluator.to_api()


@dataclass(frozen=True)
class PreviewSample:
    """One sample's result in an `EvaluationPreview`.

    Attributes:
        index: the sample's position among the scored samples (0-based).
        success: whether the score is valid.
        score: the combined score.
        per_metric_evals: ``{metric: score}``: each folder's score under its name and the
            folders' own metrics as ``NAME.<metric>``.
        reason: why it scored so (or the error, when the score is invalid).
        line: the sample's line in the file (``None`` for a preview on Fireworks).
    """

    index: int
    success: bool
    score: float
    per_metric_evals: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    line: int | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        """Another name for ``per_metric_evals``."""
        return self.per_metric_evals


@dataclass(frozen=True)
class EvaluationPreview:
    """What `preview_evaluation` returns: one result per sample and a printable summary.

    ``print(preview)`` or ``preview.display()`` shows it.

    Attributes:
        results: one `PreviewSample` per sample scored.
        total_samples: how many samples were scored.
        total_runtime_ms: how long scoring took.
        skipped: lines of the file that could not be scored (``file:line: why``).
        where: ``"local"`` or ``"fireworks"``.
        report: the full local report (``None`` for a preview on Fireworks).
    """

    results: list[PreviewSample]
    total_samples: int
    total_runtime_ms: int
    skipped: list[str] = field(default_factory=list)
    where: str = "local"
    report: PreviewReport | None = None

    @property
    def sample_results(self) -> list[PreviewSample]:
        """Another name for ``results``."""
        return self.results

    @property
    def average_score(self) -> float:
        """The mean score of the samples whose score is valid (0.0 when none is)."""
        valid = [r.score for r in self.results if r.success]
        return sum(valid) / len(valid) if valid else 0.0

    def summary(self) -> str:
        """The results as text: totals, then each sample's score and metrics."""
        lines = [
            f"Evaluation preview ({self.where})",
            f"Total samples: {self.total_samples}",
            f"Total runtime: {self.total_runtime_ms} ms",
            f"Average score: {self.average_score:.3f}",
        ]
        for result in self.results:
            where = f" (line {result.line})" if result.line is not None else ""
            status = "" if result.success else " [invalid]"
            lines.append(f"Sample {result.index + 1}{where}: score {result.score:.3f}{status}")
            if result.reason:
                lines.append(f"  reason: {result.reason}")
            for name, value in result.per_metric_evals.items():
                shown = f"{value:.3f}" if isinstance(value, (int, float)) else str(value)
                lines.append(f"  {name}: {shown}")
        lines += [f"Skipped {line}" for line in self.skipped]
        return "\n".join(lines)

    def display(self) -> None:
        """Print `summary` (Reward Kit's ``EvaluatorPreviewResult.display``)."""
        print(self.summary())

    def __str__(self) -> str:
        return self.summary()


def preview_evaluation(
    metric_folders: Sequence[str] | None = None,
    sample_file: str | Path | None = None,
    max_samples: int = 5,
    *,
    combine: CombineMethod = "mean",
    weights: Mapping[str, float] | None = None,
    on_fireworks: bool = False,
    client: FireworksClient | None = None,
) -> EvaluationPreview:
    """Score the first ``max_samples`` samples of a JSONL file with metric folders.

    Locally by default, exactly as ``rk-agent preview --metrics-folders ... --max-samples N``;
    with ``on_fireworks=True`` the folders' code and the samples go to Fireworks' preview API
    (``:previewEvaluator``, as ``rk-agent fireworks preview`` sends them; contract only: tested
    against the project's fake of the documented API).

    Args:
        metric_folders: ``"NAME=PATH"`` pairs; the score is the mean of the folders' scores
            unless ``combine``/``weights`` say otherwise.
        sample_file: the JSONL file, one ``{"messages": [...], ...}`` per line.
        max_samples: how many samples to score (Reward Kit's default, 5).
        combine: ``"mean"``, ``"weighted_sum"``, ``"min"`` or ``"product"``.
        weights: ``{name: weight}`` for ``mean`` and ``weighted_sum``.
        on_fireworks: score on Fireworks instead of here.
        client: for ``on_fireworks``: the API client (default: one from the environment).

    Raises:
        ConfigError: no sample file, or a folder is not a valid metric folder.
        DataError: the sample file cannot be read.
        FireworksError: for ``on_fireworks``, the API refused the preview.
    """
    if sample_file is None:
        raise ConfigError(
            "preview_evaluation needs sample_file=, the JSONL file of samples to score "
            '(one {"messages": [...]} per line); got none.'
        )
    folders = _folders(metric_folders)
    started = time.monotonic()
    if on_fireworks:
        return _on_fireworks(folders, sample_file, max_samples, combine, weights, client)
    from rk_agent.rewards.metric_folders import metric_folders_reward
    from rk_agent.rewards.preview import preview_samples

    reward = metric_folders_reward(folders, method=combine, weights=weights)
    report = preview_samples(reward, sample_file, max_samples=max_samples)
    results = [
        PreviewSample(
            index=i,
            success=row.result.is_score_valid,
            score=row.result.score,
            per_metric_evals={k: m.score for k, m in row.result.metrics.items()},
            reason=row.result.error or row.result.reason,
            line=row.line,
        )
        for i, row in enumerate(report.rows)
    ]
    return EvaluationPreview(
        results=results,
        total_samples=len(results),
        total_runtime_ms=int((time.monotonic() - started) * 1000),
        skipped=[s.error for s in report.skipped],
        report=report,
    )


def _on_fireworks(
    folders: list[str],
    sample_file: str | Path,
    max_samples: int,
    combine: CombineMethod,
    weights: Mapping[str, float] | None,
    client: FireworksClient | None,
) -> EvaluationPreview:
    from rk_agent.fireworks.evaluators import preview_evaluator
    from rk_agent.fireworks.packaging import package_metric_folders
    from rk_agent.jsonl import iter_jsonl

    package = package_metric_folders(folders, method=combine, weights=weights)
    samples: list[dict[str, Any]] = []
    skipped: list[str] = []
    for line in iter_jsonl(sample_file):
        if len(samples) >= max_samples:
            break
        if line.error is not None or line.value is None:
            skipped.append(str(line.error))
        else:
            samples.append(dict(line.value))
    if not samples:
        raise ConfigError(f"{sample_file} has no samples to preview; expected JSONL objects.")
    answer = preview_evaluator(package, samples, max_samples=max_samples, client=client)
    results = [
        PreviewSample(
            index=i,
            success=r.success,
            score=r.score or 0.0,
            per_metric_evals={k: _metric_score(v) for k, v in r.per_metric_evals.items()},
            reason=r.reason,
        )
        for i, r in enumerate(answer.results)
    ]
    return EvaluationPreview(
        results=results,
        total_samples=answer.total_samples or len(results),
        total_runtime_ms=answer.total_runtime_ms or 0,
        skipped=skipped,
        where="fireworks",
    )


def _metric_score(value: Any) -> Any:
    """A metric as the service sends it: a number, or ``{"score": ..., ...}``."""
    if isinstance(value, dict) and "score" in value:
        return value["score"]
    return value


def _folders(metric_folders: Sequence[str] | None) -> list[str]:
    if metric_folders is None or isinstance(metric_folders, (str, bytes)):
        got = "none" if metric_folders is None else f"the string {metric_folders!r}"
        raise ConfigError(
            f'expected metric_folders=["NAME=PATH", ...] (e.g. '
            f'["relevance=/abs/path/metrics/relevance"]), got {got}. Pass a list of pairs.'
        )
    return [str(f) for f in metric_folders]
