"""``rk-agent compare``: two runs side by side on the tasks they share.

The figures are `rk_agent.runs.compare.compare_runs`'s (its docstring defines each); this
prints them as plain-text tables, or as JSON with ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rk_agent.cli.console import echo_json, shown_text

if TYPE_CHECKING:
    from rich.console import Console

    from rk_agent.runs.compare import Change, RunComparison

_LISTED = 5  # task ids printed per list; --json has them all


def compare(
    run_a: Annotated[
        Path,
        typer.Argument(
            help="The baseline run (A): a run directory, a training run's folder or a "
            "trajectories JSONL file."
        ),
    ],
    run_b: Annotated[Path, typer.Argument(help="The run compared with it (B).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every figure as JSON instead of tables.")
    ] = False,
) -> None:
    """Compare run B against run A on the tasks both hold: success and reward of each, tasks
    gained and lost, McNemar's paired z and the two-proportion z, and the change of each reward
    component and task kind. Episodes are matched by task id and sample; a positive z or
    change means B did better."""
    from rk_agent.runs.compare import compare_runs

    report = compare_runs(run_a, run_b)
    if as_json:
        echo_json(report.model_dump_json(indent=2))
        return
    from rk_agent.cli.console import make_console

    _render(report, make_console())


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _z(value: float | None, why: str) -> str:
    return f"{value:+.2f}" if value is not None else f"undefined ({why})"


def _render(report: RunComparison, console: Console) -> None:
    from rich.table import Table

    console.print(shown_text(f"A: {report.a.path}\nB: {report.b.path}\n{report.scope}"))
    if report.prompts_differ:
        console.print(
            shown_text(
                f"{report.prompts_differ} shared task id(s) open with different messages in "
                "the two runs (compared anyway).",
                style="yellow",
            )
        )
    table = Table(title=shown_text("Runs"))
    for name in ("figure", "A", "B", "change"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    a, b = report.a, report.b
    rows: list[tuple[str, str, str, str]] = [
        ("episodes (shared tasks)", str(a.shared_episodes), str(b.shared_episodes), ""),
        ("with a verdict", str(a.judged), str(b.judged), ""),
        _change_row("success rate", report.success),
        _change_row("mean episode reward", report.reward),
    ]
    rows.extend(_change_row(f"  {name}", change) for name, change in report.components.items())
    for kind, row in report.kinds.items():
        rows.append(_change_row(f"kind {kind} ({row.tasks}): success", row.success))
        rows.append(_change_row(f"kind {kind} ({row.tasks}): reward", row.reward))
    for row_cells in rows:
        table.add_row(*(shown_text(cell) for cell in row_cells))
    console.print(table)
    console.print(shown_text("\n".join(_tests(report))))
    for label, ids in (("gained", report.gained), ("lost", report.lost)):
        shown = ", ".join(ids[:_LISTED]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")
        console.print(shown_text(f"tasks {label} ({len(ids)}): {shown or 'none'}"))
    for label, count, ids in (
        ("only in A", report.only_a, report.only_a_examples),
        ("only in B", report.only_b, report.only_b_examples),
    ):
        if count:
            console.print(shown_text(f"{label} ({count}): {', '.join(ids[:_LISTED])}"))


def _change_row(name: str, change: Change) -> tuple[str, str, str, str]:
    return (name, _fmt(change.a), _fmt(change.b), _fmt(change.delta, signed=True))


def _tests(report: RunComparison) -> list[str]:
    b, c = report.a_failed_b_succeeded, report.a_succeeded_b_failed
    return [
        f"paired samples: {report.pairs} (both succeeded {report.both_succeeded}, both failed "
        f"{report.both_failed}, A failed and B succeeded {b}, A succeeded and B failed {c})",
        f"McNemar z: {_z(report.mcnemar_z, 'no pair differs: b + c = 0')}",
        "two-proportion z: "
        + _z(report.two_proportion_z, "a side has no verdict, or every episode agrees"),
    ]
