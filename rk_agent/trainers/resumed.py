"""What a GRPO run started in a folder keeps of the runs before it there.

A run that resumes from ``checkpoint-K`` trains steps ``K + 1, ...`` again from that
checkpoint, and one that starts afresh (no checkpoint yet, or ``resume: false``) trains every
step again. What an earlier process in the folder wrote about those steps is then about steps
that were never kept: the episodes of a step Ctrl-C stopped after its rollouts, before its
checkpoint. `keep_history` makes the folder say what the checkpoint holds, before training
starts:

- ``trajectories.jsonl`` keeps the episodes of steps ``1 .. K`` (``metadata["train_step"]``
  below ``K``); those of later steps are dropped, since they are played again (and named again,
  `rk_agent.trainers.episode_names`), so no step's episodes are written twice and no id
  repeats;
- ``watch.jsonl`` (`rk_agent.runs.watch_log`) keeps its lines of steps ``1 .. K``;
- the alarms the earlier runs raised at steps ``1 .. K`` (their ``run.json``,
  `rk_agent.runs.run_record`: `kept_alarms`) are handed to the new run, which keeps them in
  its own record from its start and does not raise them again (`rk_agent.trainers.watch`).

A line whose step cannot be read (not JSON, or written by something else) is kept as it is.

Main names: `keep_history` (`KeptHistory`), `kept_alarms`, `checkpoint_step`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rk_agent.runs.alarms import Alarm
from rk_agent.runs.run_dir import TRAJECTORIES_FILE
from rk_agent.runs.run_record import RunRecord
from rk_agent.runs.watch_log import WATCH_FILE

__all__ = ["KeptHistory", "checkpoint_step", "keep_history", "kept_alarms"]


@dataclass
class KeptHistory:
    """What `keep_history` dropped.

    Attributes:
        step: the optimizer steps the checkpoint holds (``0``: none, the run starts afresh).
        dropped_episodes: episodes dropped from ``trajectories.jsonl``.
        dropped_steps: the steps (1-based) they fed.
    """

    step: int
    dropped_episodes: int = 0
    dropped_steps: list[int] = field(default_factory=list)

    def note(self) -> str | None:
        """One line saying what was dropped, or ``None`` when nothing was."""
        if not self.dropped_episodes:
            return None
        steps = ", ".join(str(s) for s in self.dropped_steps)
        plural = "s" if len(self.dropped_steps) > 1 else ""
        again = f"from step {self.step + 1}" if self.step else "from the start"
        return (
            f"dropped {self.dropped_episodes} episode(s) of step{plural} {steps} from "
            f"{TRAJECTORIES_FILE}: an earlier run played them but no checkpoint kept their "
            f"training, and this run plays them again ({again})."
        )


def checkpoint_step(checkpoint: Path | None) -> int:
    """The optimizer steps a checkpoint holds (its ``trainer_state.json``, else its name);
    ``0`` for none."""
    if checkpoint is None:
        return 0
    try:
        state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
        return int(state["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        digits = checkpoint.name.rpartition("-")[2]
        return int(digits) if digits.isdigit() else 0


def kept_alarms(previous: RunRecord | None, step: int) -> list[Alarm]:
    """The alarms an earlier run in the folder raised at steps ``1 .. step`` (``previous``:
    its ``run.json``, read before the new run writes its own)."""
    if previous is None:
        return []
    return [a for a in previous.alarms if a.step is None or a.step <= step]


def keep_history(output_dir: str | os.PathLike[str], step: int) -> KeptHistory:
    """Drop what ``output_dir``'s files say of steps after ``step`` (module docstring)."""
    folder = Path(output_dir)
    dropped = _keep_lines(folder / TRAJECTORIES_FILE, lambda line: _train_step(line) + 1, step)
    _keep_lines(folder / WATCH_FILE, _watch_step, step)
    return KeptHistory(step, len(dropped), sorted(set(dropped)))


def _keep_lines(file: Path, step_of: Callable[[Any], int], last: int) -> list[int]:
    """Rewrite ``file`` without its lines of steps after ``last`` (a torn last line goes too);
    return the steps of the lines dropped."""
    if not file.is_file():
        return []
    data = file.read_bytes()
    keep: list[bytes] = []
    dropped: list[int] = []
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            try:
                json.loads(line)
            except ValueError:
                continue  # a torn last line
            line += b"\n"
        try:
            step = int(step_of(json.loads(line)))
        except (ValueError, TypeError, KeyError, AttributeError):
            keep.append(line)
            continue
        if step > last:
            dropped.append(step)
        else:
            keep.append(line)
    if dropped:
        temporary = file.with_name(f".{file.name}.kept")
        temporary.write_bytes(b"".join(keep))
        temporary.replace(file)
    return dropped


def _train_step(line: Any) -> int:
    step = line["metadata"]["train_step"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError("not a step")
    return step


def _watch_step(line: Any) -> int:
    step = line["step"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError("not a step")
    return step
