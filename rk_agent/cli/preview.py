"""``rk-agent preview``: score a JSONL file of samples with a reward, locally."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rk_agent.cli.console import echo, echo_json, shown_text
from rk_agent.cli.folder_options import Combine, MetricsFolders, MoreFolders, Weight
from rk_agent.errors import ConfigError, kind_of
from rk_agent.terminal_text import terminal_text

if TYPE_CHECKING:
    from rich.console import Console

    from rk_agent.rewards.preview import PreviewReport

EXIT_SKIPPED = 1
"""Exit code when some lines could not be scored (the rest were)."""


def preview(
    samples: Annotated[
        Path,
        typer.Option(
            "--samples",
            "-s",
            help='JSONL file, one sample per line: {"messages": [...], "ground_truth": ...}.',
        ),
    ],
    reward: Annotated[
        str | None,
        typer.Option(
            "--reward",
            "-r",
            help="The reward: a registered name (see `rk-agent rewards list`), "
            "'path/to/file.py::fn' or 'package.module:fn'.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="YAML file whose 'reward:' key configures the reward (instead of --reward).",
        ),
    ] = None,
    metrics_folders: MetricsFolders = None,
    combine: Combine = "mean",
    weight: Weight = None,
    max_samples: Annotated[
        int | None,
        typer.Option("--max-samples", help="Score only the first N samples (default: all)."),
    ] = None,
    more_folders: MoreFolders = None,
    kwargs: Annotated[
        str | None,
        typer.Option(
            "--kwargs",
            help="JSON object of extra keyword arguments passed to the reward on every call.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the full report as JSON instead of tables.")
    ] = False,
    sandbox: Annotated[
        str | None,
        typer.Option(
            "--sandbox",
            help="Where rewards that run model code (code_execution) run it: bwrap (isolated, "
            "the default) or process (no isolation; opt-in). See `rk-agent doctor`.",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw the score distribution into this image (e.g. rewards.png): one "
            "histogram per reward component, invalid scores counted apart.",
        ),
    ] = None,
) -> None:
    """Score every sample with the reward and show a table and a summary.

    The reward comes from --reward, --config, or Reward Kit metric folders
    (--metrics-folders "relevance=./metrics/relevance"). Lines that cannot be read are reported
    with their file and line number; the rest are still scored, and the exit code is 1 so
    scripts notice.
    """
    from rk_agent.cli.console import make_console
    from rk_agent.rewards.config import load_reward_config
    from rk_agent.rewards.metric_folders import metric_folders_reward, parse_weights
    from rk_agent.rewards.preview import preview_samples

    if more_folders:
        if not metrics_folders:
            raise ConfigError(
                f"unexpected argument {more_folders[0]!r}: rk-agent preview takes options "
                "(--reward, --config or --metrics-folders, and --samples)."
            )
        # Reward Kit's `--metrics-folders a=./a b=./b`: the later folders come as arguments.
        metrics_folders = [*metrics_folders, *more_folders]
    bound = _parse_kwargs(kwargs)
    if max_samples is not None and max_samples < 1:
        raise ConfigError(f"--max-samples must be at least 1, got {max_samples}.")
    given = [reward is not None, config is not None, bool(metrics_folders)]
    if sum(given) != 1:
        raise ConfigError(
            "give the reward with either --reward NAME|PATH, --config FILE or "
            "--metrics-folders NAME=PATH (exactly one of them)."
        )
    if metrics_folders:
        from rk_agent.cli.fireworks import _combine_method

        spec: Any = metric_folders_reward(
            metrics_folders,
            method=_combine_method(combine),
            weights=parse_weights(weight or ()) or None,
        )
    elif reward is not None:
        from rk_agent.cli.reward_options import check_reward_options

        check_reward_options(reward, {k: v for k, v in bound.items() if k != "sandbox"})
        spec = reward
    else:
        spec = load_reward_config(config)  # type: ignore[arg-type]
    if "sandbox" in bound:
        raise ConfigError("give the sandbox mode with --sandbox, not in --kwargs.")
    if plot is not None:
        from rk_agent.rewards.plots import check_plot_path

        check_plot_path(plot)  # a wrong suffix fails before the samples are scored
    report = preview_samples(spec, samples, sandbox=sandbox, max_samples=max_samples, **bound)
    if as_json:
        echo_json(report.model_dump_json(indent=2))
    else:
        _render(report, make_console())
    if plot is not None and report.rows:
        from rk_agent.rewards.plots import plot_reward_histograms

        title = f"{report.reward} on {Path(report.samples).name}"
        written = plot_reward_histograms([r.result for r in report.rows], plot, title=title)
        echo(f"reward histograms: {written}", err=as_json)
    if report.skipped:
        raise typer.Exit(EXIT_SKIPPED)


def _parse_kwargs(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--kwargs must be a JSON object, got {text!r}: {exc.msg}.") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"--kwargs must be a JSON object, got {kind_of(value)}.")
    return value


def _render(report: PreviewReport, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{report.reward} on {report.samples}")
    table.add_column("line", justify="right")
    table.add_column("score", justify="right")
    table.add_column("reason", overflow="fold")
    table.add_column("metrics", overflow="fold")
    for row in report.rows:
        result = row.result
        score = (
            shown_text(f"{result.score:.3f}")
            if result.is_score_valid
            else shown_text("invalid", "red")
        )
        reason = result.error if result.error else (result.reason or "")
        metrics = ", ".join(f"{k}={m.score:.2f}" for k, m in result.metrics.items())
        table.add_row(str(row.line), score, reason, metrics)
    console.print(table)
    stats = report.stats
    valid = stats.count - stats.invalid
    summary = f"scored {stats.count} samples ({valid} valid, {stats.invalid} invalid)"
    if stats.mean is not None:
        summary += (
            f"; mean {stats.mean:.3f}, std {stats.std:.3f}, min {stats.min:.3f}, "
            f"max {stats.max:.3f}"
        )
    console.print(summary)
    if report.sandbox is not None:
        from rk_agent.rewards.sandbox_choice import describe

        console.print(f"model code ran in {describe(report.sandbox)}")
    if report.metric_means:
        means = ", ".join(f"{k}={v:.3f}" for k, v in report.metric_means.items())
        console.print(f"metric means: {means}")
    for skipped in report.skipped:
        console.print(Text.assemble(("skipped", "yellow"), " ", terminal_text(skipped.error)))
    if report.skipped:
        console.print(shown_text(f"{len(report.skipped)} line(s) skipped", "yellow"))
