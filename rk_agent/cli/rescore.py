"""``rk-agent rescore``: score a run's stored episodes again with another reward, into a new run.

The work is `rk_agent.runs.rescore.rescore`; this prints its progress, the new run's summary
and how the figures moved against the source (plain text: reward names and errors come from
users).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rk_agent.cli.console import shown_text
from rk_agent.cli.invocation import command
from rk_agent.cli.trust_option import TrustRun

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from rk_agent.runs.rescore import RescoreResult

EXIT_INTERRUPTED = 130


def rescore(
    run: Annotated[
        Path,
        typer.Argument(
            help="The run to rescore: a run directory made by `rk-agent rollout`, a training "
            "run's folder or a trajectories JSONL file. It is only read."
        ),
    ],
    reward: Annotated[
        str,
        typer.Option(
            "--reward",
            "-r",
            help="The new episode reward: a registered name (see `rk-agent rewards list`), "
            "'path/to/file.py::fn' or 'package.module:fn'.",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="The new run directory (default: RUN-rescored-<reward> beside RUN). It must "
            "not exist.",
        ),
    ] = None,
    kwargs: Annotated[
        str | None,
        typer.Option(
            "--kwargs",
            help="JSON object of options passed to the reward on every call, e.g. "
            "'{\"max_length\": 200}'.",
        ),
    ] = None,
    step_reward: Annotated[
        str | None,
        typer.Option(
            "--step-reward",
            help="Also score every turn again with this reward (default: the recorded step "
            "rewards are kept).",
        ),
    ] = None,
    trust_run: TrustRun = False,
) -> None:
    """Score every stored episode of a run again with another reward, without calling the model
    or any tool, and write the result as a new run beside it (the source is never changed).

    The new run names its source and the reward (with a SHA-256 of the reward's code) in
    rescore.json; `rk-agent show`, `rk-agent compare` and the trainers read it like any run.
    An episode the reward fails on is kept with an invalid score and its error. Success is
    decided by the run's environment, or by the default rule (a valid score of at least 1.0)
    for a run from elsewhere whose environment is a file or module (--trust-run: its own).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rk_agent.cli.console import make_console
    from rk_agent.cli.preview import _parse_kwargs  # one reading of --kwargs for every command
    from rk_agent.cli.render import render_summary
    from rk_agent.cli.reward_options import check_reward_options
    from rk_agent.runs.rescore import rescore as rescore_run

    bound = _parse_kwargs(kwargs)
    check_reward_options(reward, bound)
    console = make_console()
    progress = Progress(
        TextColumn("rescoring", style="bold"), BarColumn(),
        TextColumn("{task.completed} episodes", markup=False), TimeElapsedColumn(),
        console=console, transient=True,
    )  # fmt: skip
    bar = progress.add_task("rescoring", total=None)

    def advance(done: int) -> None:
        if not progress.live.is_started:  # shown once episodes flow: bad input prints nothing
            progress.start()
        progress.update(bar, completed=done)

    try:
        result = rescore_run(
            run, reward, output=output, kwargs=bound, step_reward=step_reward,
            on_progress=advance, trust_run=trust_run,
        )  # fmt: skip
    except KeyboardInterrupt:
        _stop(progress)
        console.print(
            "Interrupted: nothing was written (the partial output was removed); run the same "
            "command again to rescore.",
            style="yellow",
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        _stop(progress)
    render_summary(result.summary, console, title=f"Summary of {result.output}")
    _render_change(result, console)
    console.print(_closing(result, run))


def _stop(progress: Progress) -> None:
    if progress.live.is_started:
        progress.stop()


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _render_change(result: RescoreResult, console: Console) -> None:
    from rich.table import Table

    table = Table(title=shown_text("Change against the source"))
    for name in ("figure", "source", "rescored", "change"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    rows = [("mean episode reward", result.reward_mean), ("success rate", result.success_rate)]
    rows.extend((f"  {name}", change) for name, change in result.components.items())
    for name, change in rows:
        table.add_row(
            shown_text(name),
            shown_text(_fmt(change.before)),
            shown_text(_fmt(change.after)),
            shown_text(_fmt(change.delta, signed=True)),
        )
    console.print(table)


def _closing(result: RescoreResult, source: Path) -> str:
    """What was done, with the source as the user named it (``rescore.json`` keeps it whole)."""
    record = result.record
    lines = [
        f"Rescored {record.rescored} of {record.episodes} episodes of {source} with "
        f"{record.reward} (sha256 {(record.reward_sha256 or 'unavailable')[:12]}); wrote "
        f"{result.output}."
    ]
    if record.unscored:
        lines.append(
            f"{record.unscored} episode(s) failed before they were scored and are copied as "
            "they were."
        )
    if record.invalid:
        lines.append(
            f"The reward could not score {record.invalid} episode(s): their scores are invalid, "
            f"with the error (see `{command()} show {result.output} --limit 0`)."
        )
    lines.append(f"Success: {record.success_rule}.")
    return "\n".join(lines)
