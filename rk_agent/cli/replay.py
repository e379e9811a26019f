"""``rk-agent replay``: play a recorded episode's actions into a fresh environment and check
that it answers as recorded (`rk_agent.runs.replay.replay_episode`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rk_agent.cli.console import echo, echo_json
from rk_agent.cli.trust_option import TrustRun

if TYPE_CHECKING:
    from rk_agent.runs.replay import ReplayReport

EXIT_MISMATCH = 1


def replay(
    run: Annotated[Path, typer.Argument(help="A run directory (or a trajectories JSONL file).")],
    episode: Annotated[
        str,
        typer.Option("--episode", help="The episode's id, <task index>-<sample> (e.g. 0-0)."),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON instead of lines.")
    ] = False,
    trust_run: TrustRun = False,
) -> None:
    """Replay a recorded episode into a fresh environment: reset it with the recorded seed and
    task, play the recorded assistant messages turn by turn, and check that every observation,
    step reward, the episode's result and its stop reason match the record. Exit 0 when all
    match, 1 on a mismatch, 2 on bad input (or a run from elsewhere whose environment names
    files, commands or URLs: give --trust-run if you trust it)."""
    from rk_agent.runs.replay import replay_episode

    report = replay_episode(run, episode, trust_run=trust_run)
    if as_json:
        echo_json(report.model_dump_json(indent=2))
    else:
        echo("\n".join(describe(report)))
    if not report.matched:
        raise typer.Exit(EXIT_MISMATCH)


def describe(report: ReplayReport) -> list[str]:
    """The report as lines: the episode, each turn, the end, and a verdict."""
    lines = [
        f"Replaying episode {report.episode} of {report.run} ({report.env}, seed {report.seed}, "
        f"{report.recorded_turns} turn{'s' if report.recorded_turns != 1 else ''}) in a fresh "
        "environment",
        f"task: {'differs: ' + report.task.describe() if report.task else 'match'}",
    ]
    for turn in report.turns:
        lines.append(
            f"turn {turn.index}: "
            + (f"differs: {turn.difference.describe()}" if turn.difference else "match")
        )
    if report.end_checked:
        lines.append(f"end: {'differs: ' + report.end.describe() if report.end else 'match'}")
    if report.note:
        lines.append(f"note: {report.note}")
    first = report.first_difference
    if first is None:
        lines.append(
            (
                f"All {len(report.turns)} turns match"
                if len(report.turns) != 1
                else "The turn matches"
            )
            + ": observations, step rewards"
            + (", the episode's result and the stop reason." if report.end_checked else ".")
        )
    else:
        where = (
            f"turn {first.turn}"
            if first.turn is not None
            else ("the task" if first is report.task else "the end")
        )
        lines.append(f"Mismatch: first at {where}, {first.field}.")
    return lines
