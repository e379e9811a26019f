"""``rk-agent show`` on a training run's folder: how it stands, its last watched step, its alarms.

A folder ``rk-agent train`` wrote holds ``run.json`` of kind ``training``
(`rk_agent.runs.run_record`) and, for GRPO, ``watch.jsonl`` (`rk_agent.trainers.watch`).
`render_training_run` prints the run's status, step and last checkpoint, the watch's figures
of its last step, what dynamic sampling and task retirement did in all (from the record), and
every alarm it raised (from the record; from ``watch.jsonl`` when the record has none, as for a
killed run).
Everything is printed as plain text.

Main names: `is_training_run`, `render_training_run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rk_agent.cli.console import shown_text
from rk_agent.runs.run_record import RunKind, read_run_record
from rk_agent.runs.watch_log import read_watch

__all__ = ["is_training_run", "render_training_run"]


def is_training_run(path: Path) -> bool:
    """Whether ``path`` is a folder ``rk-agent train`` wrote: its ``run.json`` says so."""
    record = read_run_record(path)
    return record is not None and record.kind is RunKind.TRAINING


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return f"{value:.{digits}f}"


def render_training_run(path: Path, console: Console) -> None:
    """Print the run's status, its last watched step and its alarms (module docstring)."""
    record = read_run_record(path)
    watched = read_watch(path)
    table = Table(title=shown_text(str(path)), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    rows: list[tuple[str, str]] = []
    if record is not None:
        rows.append(("status", record.status.value if record.status else "unknown"))
        rows.append(("step", str(record.global_step or 0)))
        rows.append(("last checkpoint", record.last_checkpoint or "none"))
        if record.error:
            rows.append(("error", record.error))
        sampling = record.sampling
        if sampling is not None and sampling.steps:
            rows.append(("groups played", f"{sampling.drawn} in {sampling.steps} generations: "
                         f"{sampling.kept} kept, {sampling.dropped} dropped, {sampling.filled} "
                         f"filled, {sampling.replaced} replaced"))  # fmt: skip
        if sampling is not None and sampling.retired:
            retired = ", ".join(f"{r.task_id} (step {r.step})" for r in sampling.retired)
            rows.append(("tasks retired", f"{len(sampling.retired)}: {retired}"))
    if watched:
        last = watched[-1]
        fail, passed = (
            _fmt(last.get("zero_spread_all_fail")),
            _fmt(last.get("zero_spread_all_pass")),
        )
        spread = f"{_fmt(last.get('zero_spread'))} (all fail {fail}, all pass {passed})"
        reward = f"mean {_fmt(last.get('reward_mean'))}"
        reward += f"  spread in groups {_fmt(last.get('reward_group_std'))}"
        rows += [
            ("watched steps", f"{len(watched)} (last: step {last.get('step')})"),
            ("zero-spread groups", spread),
            ("reward", reward),
            ("success rate", _fmt(last.get("success_mean"))),
            ("truncated", _fmt(last.get("truncated"))),
            ("NaN rewards", str(last.get("nan_rewards", 0))),
        ]
    for name, value in rows:
        table.add_row(shown_text(name), shown_text(value))
    console.print(table)
    alarms = [a.message for a in record.alarms] if record is not None and record.alarms else []
    if not alarms:
        alarms = [str(a.get("message")) for line in watched for a in line.get("alarms", [])]
    if not watched and not alarms:
        console.print(
            shown_text("This run was not watched (no watch.jsonl: an SFT run, or older).")
        )
        return
    console.print(shown_text(f"Alarms raised: {len(alarms)}" if alarms else "Alarms raised: none"))
    for message in alarms:
        console.print(shown_text(f"- {message}"))
