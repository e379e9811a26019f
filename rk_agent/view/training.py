"""A training run's steps as the viewer shows them: its record, its watch, and their charts.

A folder ``rk-agent train`` wrote holds the run's record (``run.json``:
`rk_agent.runs.run_record`) and, for GRPO, the watch's file (``watch.jsonl``:
`rk_agent.runs.watch_log`, one line per optimizer step: that step's
`rk_agent.runs.watch.WatchSignals` and the alarms it raised). `TrainingLog` reads both, and
again only when a file changed (a running run rewrites its record and appends to its watch
every step); a watch line that cannot be read is counted, not fatal. `Training.charts` draws
the figures per step (`rk_agent.view.charts`): the reward (mean, and its spread inside groups,
what GRPO learns from), the success rate, the groups with zero reward spread (all fail, all
pass), and the completion length; every chart marks the steps that raised an alarm.

Main names: `TrainingLog`, `Training`, `WatchLine`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, ValidationError

from rk_agent.runs.alarms import Alarm
from rk_agent.runs.run_record import RUN_RECORD_FILE, RunRecord, read_run_record
from rk_agent.runs.watch import WatchSignals
from rk_agent.runs.watch_log import WATCH_FILE
from rk_agent.view.charts import LineChart, line_chart

__all__ = ["Training", "TrainingLog", "WatchLine"]


class WatchLine(WatchSignals):
    """One line of ``watch.jsonl``: a step's signals and the alarms it raised."""

    step: int
    alarms: list[Alarm] = Field(default_factory=list)


@dataclass(frozen=True)
class Training:
    """What a training run's folder says about its steps (module docstring).

    Attributes:
        record: the run's record, ``None`` when it has none or it cannot be read.
        lines: the watch's lines, by step.
        unreadable: watch lines that could not be read.
    """

    record: RunRecord | None
    lines: list[WatchLine] = field(default_factory=list)
    unreadable: int = 0

    @property
    def alarms(self) -> list[Alarm]:
        """The alarms the run raised: the record's, else the watch's (a killed run's record
        may miss the last)."""
        if self.record is not None and self.record.alarms:
            return list(self.record.alarms)
        return [alarm for line in self.lines for alarm in line.alarms]

    def rows(self) -> list[tuple[str, str]]:
        """The run's state and how many steps were watched, as text rows (the charts show the
        figures)."""
        rows: list[tuple[str, str]] = []
        if self.record is not None:
            rows += [
                ("status", self.record.status.value if self.record.status else "unknown"),
                ("step", str(self.record.global_step or 0)),
                ("last checkpoint", self.record.last_checkpoint or "none"),
                ("updated", f"{self.record.updated_at:%Y-%m-%d %H:%M:%S} UTC"),
            ]
        if self.lines:
            rows.append(("watched steps", f"{len(self.lines)} (last: step {self.lines[-1].step})"))
        return rows

    def charts(self) -> list[LineChart]:
        """The charts of the watch's figures per step (module docstring)."""
        steps = [line.step for line in self.lines]
        alarms = [(a.step, a.kind.value, a.message) for a in self.alarms if a.step is not None]
        lines = self.lines
        return [
            line_chart(
                "chart-reward",
                "Reward",
                steps,
                {
                    "mean": [x.reward_mean for x in lines],
                    "spread in groups": [x.reward_group_std for x in lines],
                },
                alarms=alarms,
            ),
            line_chart(
                "chart-success",
                "Success rate",
                steps,
                {"success": [x.success_mean for x in lines]},
                alarms=alarms,
                rate=True,
            ),
            line_chart(
                "chart-zero-spread",
                "Groups with zero reward spread",
                steps,
                {
                    "zero spread": [x.zero_spread for x in lines],
                    "all fail": [x.zero_spread_all_fail for x in lines],
                    "all pass": [x.zero_spread_all_pass for x in lines],
                },
                alarms=alarms,
                rate=True,
            ),
            line_chart(
                "chart-length",
                "Completion tokens per episode",
                steps,
                {"tokens": [x.completion_tokens_mean for x in lines]},
                alarms=alarms,
            ),
        ]


class TrainingLog:
    """A training run's record and watch, read again when either file changes.

    Args:
        folder: the run's folder.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: tuple[object, ...] | None = None
        self._read = Training(None)
        self._lock = threading.Lock()

    def read(self) -> Training:
        """The run as its files say now (module docstring)."""
        stamp = (_stamp(self.folder / RUN_RECORD_FILE), _stamp(self.folder / WATCH_FILE))
        with self._lock:
            if stamp != self._seen:
                self._read = _read(self.folder)
                self._seen = stamp
            return self._read


def _stamp(file: Path) -> tuple[int, int] | None:
    try:
        status = file.stat()
    except OSError:
        return None
    return status.st_size, status.st_mtime_ns


def _read(folder: Path) -> Training:
    lines: list[WatchLine] = []
    unreadable = 0
    try:
        with (folder / WATCH_FILE).open("rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    lines.append(WatchLine.model_validate_json(raw))
                except ValidationError:
                    unreadable += 1  # a torn last line among them: read it next time
    except FileNotFoundError:
        pass
    lines.sort(key=lambda line: line.step)
    return Training(read_run_record(folder), lines, unreadable)
