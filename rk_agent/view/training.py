"""A training run's steps as the viewer shows them: its record, its watch, and their charts.

A folder ``rk-agent train`` wrote holds the run's record (``run.json``:
`rk_agent.runs.run_record`), its resolved config (``rk_agent_config.yaml``: which kind of
training, the model, the environment or, for SFT, the trajectories it trains on), TRL's
checkpoints (``checkpoint-<step>``, each with ``trainer_state.json``: the logged loss of every
logging step so far), the final model (``final``) and, for GRPO, the watch's file
(``watch.jsonl``: `rk_agent.runs.watch_log`, one line per optimizer step: that step's
`rk_agent.runs.watch.WatchSignals` and the alarms it raised). `TrainingLog` reads them, and
again only when a file changed (a running run rewrites its record and appends to its watch
every step); a watch line that cannot be read is counted, not fatal. `Training.charts` draws
the figures per step (`rk_agent.view.charts`): the loss (from the newest checkpoint), and for
GRPO the reward (mean, and its spread inside groups, what GRPO learns from), the success rate,
the groups with zero reward spread (all fail, all pass), and the completion length; every chart
marks the steps that raised an alarm. An SFT run has no watch and no episodes of its own: its
page is its record, its config, its loss and its checkpoints.

Main names: `TrainingLog`, `Training`, `WatchLine`, `LossPoint`.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from rk_agent.policies.local_model import DEFAULT_MODEL
from rk_agent.runs.alarms import Alarm
from rk_agent.runs.run_record import RUN_RECORD_FILE, RunRecord, read_run_record
from rk_agent.runs.run_trust import TRAINING_CONFIG_FILE
from rk_agent.runs.watch import WatchSignals
from rk_agent.runs.watch_log import WATCH_FILE
from rk_agent.view.charts import LineChart, line_chart

__all__ = ["FINAL_DIR", "LossPoint", "Training", "TrainingLog", "WatchLine"]

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_STATE = "trainer_state.json"
FINAL_DIR = "final"
"""The final model's folder in a training run's (`rk_agent.trainers.run.FINAL_DIR`)."""


class WatchLine(WatchSignals):
    """One line of ``watch.jsonl``: a step's signals and the alarms it raised."""

    step: int
    alarms: list[Alarm] = Field(default_factory=list)


@dataclass(frozen=True)
class LossPoint:
    """One logging step of TRL's log (``trainer_state.json``): its loss, learning rate and
    gradient norm (``None``: not logged)."""

    step: int
    loss: float | None
    learning_rate: float | None = None
    grad_norm: float | None = None


@dataclass(frozen=True)
class Training:
    """What a training run's folder says about its steps (module docstring).

    Attributes:
        record: the run's record, ``None`` when it has none or it cannot be read.
        lines: the watch's lines, by step.
        unreadable: watch lines that could not be read.
        config: the run's resolved config (``rk_agent_config.yaml``), ``{}`` when unreadable.
        losses: TRL's logged steps, from the newest checkpoint.
        checkpoints: the complete checkpoints' folder names, oldest first.
        final: whether the final model was saved (``final``).
        source_env: for SFT, the environment the trajectories it trains on were played in (their
            first episode's), when they can be read.
    """

    record: RunRecord | None
    lines: list[WatchLine] = field(default_factory=list)
    unreadable: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    losses: list[LossPoint] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    final: bool = False
    source_env: str | None = None

    @property
    def kind(self) -> str | None:
        """``grpo`` or ``sft`` (the config's), ``None`` when not known."""
        kind = self.config.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def env(self) -> str:
        """The environment it trains on: GRPO's, or the one SFT's trajectories were played in;
        ``""`` when not known."""
        if self.kind == "sft":
            return self.source_env or ""
        env = self.config.get("env")
        return env if isinstance(env, str) else ""

    @property
    def model(self) -> str:
        """The model it trains (the embedded one when the config names none)."""
        if not self.config:
            return ""
        model = self.config.get("model")
        return model if isinstance(model, str) and model else DEFAULT_MODEL

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
        if self.kind is not None:
            rows.append(("training", self.kind.upper()))
        trajectories = self.config.get("trajectories")
        if self.kind == "sft" and isinstance(trajectories, str):
            rows.append(("trained on", trajectories))
        losses = [p for p in self.losses if p.loss is not None]
        if losses:
            last = losses[-1]
            rows.append(("loss", f"{losses[0].loss:.4f} at step {losses[0].step}, "
                         f"{last.loss:.4f} at step {last.step}"))  # fmt: skip
        if self.checkpoints:
            rows.append(("checkpoints", ", ".join(self.checkpoints)))
        if self.final:
            rows.append(("final model", FINAL_DIR))
        if self.lines:
            rows.append(("watched steps", f"{len(self.lines)} (last: step {self.lines[-1].step})"))
        return rows

    def charts(self) -> list[LineChart]:
        """The charts of the loss and the watch's figures per step (module docstring)."""
        alarms = [(a.step, a.kind.value, a.message) for a in self.alarms if a.step is not None]
        drawn = []
        if any(p.loss is not None for p in self.losses):
            drawn.append(
                line_chart(
                    "chart-loss",
                    "Loss",
                    [p.step for p in self.losses],
                    {"loss": [p.loss for p in self.losses]},
                    alarms=alarms,
                )
            )
        if self.lines:
            drawn += self._watch_charts(alarms)
        return drawn

    def _watch_charts(self, alarms: list[tuple[int, str, str]]) -> list[LineChart]:
        steps = [line.step for line in self.lines]
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
        stamp = (
            _stamp(self.folder / RUN_RECORD_FILE),
            _stamp(self.folder / WATCH_FILE),
            _stamp(self.folder / TRAINING_CONFIG_FILE),
            tuple(_checkpoints(self.folder)),
            (self.folder / FINAL_DIR).is_dir(),
        )
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
    config = _config(folder)
    checkpoints = _checkpoints(folder)
    trajectories = config.get("trajectories")
    sft = config.get("kind") == "sft" and isinstance(trajectories, str)
    source = _source_env(Path(str(trajectories))) if sft else None
    return Training(
        read_run_record(folder), lines, unreadable, config=config,
        losses=_losses(folder / checkpoints[-1] / _STATE) if checkpoints else [],
        checkpoints=checkpoints, final=(folder / FINAL_DIR).is_dir(),
        source_env=source,
    )  # fmt: skip


def _config(folder: Path) -> dict[str, Any]:
    """The run's resolved config, ``{}`` when it has none or it cannot be read."""
    import yaml

    try:
        data = yaml.safe_load((folder / TRAINING_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _checkpoints(folder: Path) -> list[str]:
    """The complete checkpoints (their ``trainer_state.json`` written: the Trainer writes it
    last), oldest first."""
    try:
        children = list(folder.iterdir())
    except OSError:
        return []
    found = [
        (int(match.group(1)), child.name)
        for child in children
        if (match := _CHECKPOINT.match(child.name)) and (child / _STATE).is_file()
    ]
    return [name for _, name in sorted(found)]


def _losses(state: Path) -> list[LossPoint]:
    """The training steps TRL logged (``log_history``), the summary entry at the end left out."""
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history", [])
    except (OSError, ValueError, AttributeError):
        return []
    points = []
    for entry in history if isinstance(history, list) else []:
        if not isinstance(entry, dict) or "train_runtime" in entry:
            continue
        step = entry.get("step")
        if isinstance(step, int) and "loss" in entry:
            loss, rate = _float(entry.get("loss")), _float(entry.get("learning_rate"))
            points.append(LossPoint(step, loss, rate, _float(entry.get("grad_norm"))))
    return points


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _source_env(source: Path) -> str | None:
    """The environment of the first episode of an SFT run's trajectories (a run folder or a
    JSONL file), ``None`` when it cannot be read."""
    file = source / "trajectories.jsonl" if source.is_dir() else source
    try:
        with file.open("rb") as handle:
            first = handle.readline()
        env = json.loads(first).get("env")
    except (OSError, ValueError, AttributeError):
        return None
    return env if isinstance(env, str) else None
