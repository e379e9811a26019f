"""The watch's file in a GRPO run's folder: ``watch.jsonl``, one line of signals per step.

Each line is ``{"step": N, ...}`` with every `rk_agent.runs.watch.WatchSignals` figure and
``"alarms"``: the alarms that step raised (`rk_agent.runs.alarms.Alarm`, as JSON), and the
step's token drift when it was measured (``"tokens/drift_episodes"``, ``"tokens/drift_turns"``,
`rk_agent.trainers.drift_rate`), and ``"sampling"``: what dynamic sampling and task retirement
did in the step (`rk_agent.runs.group_sampling.StepSampling`), when either is on. It is light to
read (no torch, no TRL), for ``rk-agent show``.

Main names: `WATCH_FILE`, `append_watch_line`, `read_watch`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rk_agent.runs.alarms import Alarm
from rk_agent.runs.group_sampling import StepSampling
from rk_agent.runs.watch import WatchSignals

__all__ = ["WATCH_FILE", "append_watch_line", "read_watch"]

WATCH_FILE = "watch.jsonl"
"""The watch's file in a run's output directory."""


def append_watch_line(
    output_dir: str | Path,
    step: int,
    signals: WatchSignals,
    alarms: Sequence[Alarm],
    extra: Mapping[str, float] | None = None,
    sampling: StepSampling | None = None,
) -> Path:
    """Append one step's line to ``<output_dir>/watch.jsonl`` and return the file; ``extra``
    figures (the token drift) and ``sampling`` go in the line too."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    line = {
        "step": step,
        **signals.model_dump(mode="json"),
        "alarms": [alarm.model_dump(mode="json") for alarm in alarms],
        **(extra or {}),
    }
    if sampling is not None:
        line["sampling"] = sampling.model_dump(mode="json")
    path = folder / WATCH_FILE
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return path


def read_watch(output_dir: str | Path) -> list[dict[str, Any]]:
    """The lines of a run's ``watch.jsonl`` (none when it has none); unreadable lines skipped."""
    path = Path(output_dir) / WATCH_FILE
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    return lines
