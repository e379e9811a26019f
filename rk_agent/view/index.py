"""An index of a trajectories file: where each episode's line is, and what the filters ask of it.

A run page must stay fast on a run of 100,000 episodes, so the viewer never holds episodes: it
reads ``trajectories.jsonl`` once, as a stream, and keeps per episode its line's byte offset and
length and the few fields the filters and the episode list need (id, task, sample, success,
episode reward, stop reason, failure kind, turns, the start of the task's question, casefolded
for the text filter) in compact arrays. A page of the list reads its rows' lines back for
their questions as written, and an episode page its one line (`EpisodeIndex.read`).

The file may grow while it is shown (a run still playing): `EpisodeIndex.refresh` indexes the
lines appended since the last look, and starts over when the file shrank (replaced). The rules
for lines are the run reader's (`rk_agent.rollouts.run_dir`): a last line without its newline
that is not JSON is a torn write, left for later; a repeated episode id in a run directory is
counted once, the first kept. A line that is not an episode is counted in ``unreadable``, not
fatal: a viewer shows what it can.

Main names: `EpisodeIndex`, `EpisodeRow`.
"""

from __future__ import annotations

import json
import math
import os
import threading
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rk_agent.rollouts.trajectory import Trajectory

__all__ = ["EpisodeIndex", "EpisodeRow"]

TEXT_CHARS = 300
"""How much of a task's question is kept for the task-text filter and the episode list."""

_NO_VERDICT = -1


@dataclass(frozen=True)
class EpisodeRow:
    """What the episode list shows of one episode (read from the index, not the file).

    Attributes:
        position: the episode's place in the index (file order).
        id, task_index, sample, task_id: as in the `Trajectory`.
        success: the environment's verdict, ``None`` when there is none.
        reward: the valid episode reward, ``None`` when missing or invalid.
        stop_reason: why it ended; failure_kind: what failed ("" when nothing did).
        turns: assistant turns.
        text: the start of the task's question.
    """

    position: int
    id: str
    task_index: int
    sample: int
    task_id: str
    success: bool | None
    reward: float | None
    stop_reason: str
    failure_kind: str
    turns: int
    text: str


class _Fields(BaseModel):
    """Read from a line: only the fields named become Python objects (not the turns')."""

    model_config = ConfigDict(extra="ignore")


class _Message(_Fields):
    role: str = ""
    content: Any = None


class _Task(_Fields):
    id: str = ""
    messages: list[_Message] = []


class _Score(_Fields):
    score: float | None = None
    is_score_valid: bool = True


class _Failure(_Fields):
    kind: str = ""


class _Head(_Fields):
    """The fields of a trajectory line the index keeps (a `Trajectory` is about 3x slower to
    read, and holds what the index does not need)."""

    id: str
    task_index: int = -1
    sample: int = 0
    task: _Task = _Task()
    env: str = ""
    model: str = ""
    turns: list[_Fields] = []
    episode: _Score | None = None
    success: bool | None = None
    stop_reason: str = ""
    failure: _Failure | None = None


class _Vocabulary:
    """A few distinct words (stop reasons, failure kinds) stored as small numbers."""

    def __init__(self) -> None:
        self.words: list[str] = [""]
        self._codes: dict[str, int] = {"": 0}

    def code(self, word: str) -> int:
        found = self._codes.get(word)
        if found is None:
            found = self._codes[word] = len(self.words)
            self.words.append(word)
        return found


class EpisodeIndex:
    """The index of one trajectories file (module docstring).

    Args:
        file: the trajectories JSONL file.
        unique: drop repeated episode ids (a run directory's rule).

    Example:
        >>> index = EpisodeIndex(Path("runs/demo/trajectories.jsonl"))  # doctest: +SKIP
        >>> index.refresh(); [row.id for row in index.rows(range(2))]  # doctest: +SKIP
        ['0-0', '1-0']
    """

    def __init__(self, file: Path, *, unique: bool = True) -> None:
        self.file = file
        self.unique = unique
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.end = 0  # bytes indexed so far
        self.unreadable = 0
        self.env = ""
        self.model = ""
        self._offsets = array("q")
        self._lengths = array("l")
        self._task_index = array("l")
        self._sample = array("l")
        self._success = array("b")
        self._reward = array("d")
        self._stop = array("B")
        self._failure = array("B")
        self._turns = array("l")
        self._ids: list[str] = []
        self._task_ids: list[str] = []
        self._text: list[str] = []
        self._positions: dict[str, int] = {}
        self.stops = _Vocabulary()
        self.failures = _Vocabulary()

    def __len__(self) -> int:
        return len(self._ids)

    # ------------------------------------------------------------------ building

    def refresh(self) -> None:
        """Index the lines appended since the last call (all of them the first time)."""
        with self._lock:
            try:
                size = self.file.stat().st_size
            except FileNotFoundError:
                size = 0
            if size < self.end:
                self._reset()  # the file was replaced: start over
            if size == self.end:
                return
            with self.file.open("rb") as handle:
                handle.seek(self.end)
                offset = self.end
                for line in handle:
                    if not line.endswith(b"\n") and _is_torn(line):
                        break  # a torn (or half-written) last line: read it next time
                    self._add(offset, line)
                    offset += len(line)
                self.end = offset

    def _add(self, offset: int, line: bytes) -> None:
        if not line.strip():
            return
        try:
            head = _Head.model_validate_json(line)
        except ValidationError:
            self.unreadable += 1
            return
        if self.unique and head.id in self._positions:
            return
        if not self._ids:
            self.env, self.model = head.env, head.model
        self._positions.setdefault(head.id, len(self._ids))  # the first of repeated ids
        self._ids.append(head.id)
        self._offsets.append(offset)
        self._lengths.append(len(line))
        self._task_index.append(head.task_index)
        self._sample.append(head.sample)
        self._task_ids.append(head.task.id)
        self._text.append(_question(head.task.messages)[:TEXT_CHARS].casefold())
        self._success.append(_NO_VERDICT if head.success is None else int(head.success))
        reward, episode = math.nan, head.episode
        if episode is not None and episode.is_score_valid and episode.score is not None:
            reward = episode.score
        self._reward.append(reward)
        self._stop.append(self.stops.code(head.stop_reason))
        kind = head.failure.kind if head.failure is not None else ""
        self._failure.append(self.failures.code("env_error" if kind == "tool_error" else kind))
        self._turns.append(len(head.turns))

    # ------------------------------------------------------------------ reading

    def position(self, episode_id: str) -> int | None:
        """The index position of an episode id, ``None`` when the run has no such episode."""
        return self._positions.get(episode_id)

    def row(self, position: int) -> EpisodeRow:
        """What the index knows of the episode at ``position`` (its question read back)."""
        return self.rows([position])[0]

    def rows(self, positions: Iterable[int]) -> list[EpisodeRow]:
        """`row` of each position; the file is opened once, and only their lines are read."""
        found = []
        with self.file.open("rb") as handle:
            for position in positions:
                line = os.pread(handle.fileno(), self._lengths[position], self._offsets[position])
                success = self._success[position]
                reward = self._reward[position]
                found.append(
                    EpisodeRow(
                        position=position,
                        id=self._ids[position],
                        task_index=self._task_index[position],
                        sample=self._sample[position],
                        task_id=self._task_ids[position],
                        success=None if success == _NO_VERDICT else bool(success),
                        reward=None if math.isnan(reward) else reward,
                        stop_reason=self.stops.words[self._stop[position]],
                        failure_kind=self.failures.words[self._failure[position]],
                        turns=self._turns[position],
                        text=_line_question(line)[:TEXT_CHARS],
                    )
                )
        return found

    def read(self, position: int) -> Trajectory:
        """Read the episode at ``position`` back from the file (its line only).

        Raises:
            pydantic.ValidationError: the line is JSON but not a trajectory.
        """
        with self.file.open("rb") as handle:
            line = os.pread(handle.fileno(), self._lengths[position], self._offsets[position])
        return Trajectory.model_validate_json(line)

    def group(self, task_index: int) -> list[int]:
        """The positions of a task's samples (its GRPO group), by sample number."""
        found = [p for p, t in enumerate(self._task_index) if t == task_index]
        return sorted(found, key=lambda p: self._sample[p])

    def of_task(self, task_id: str) -> list[int]:
        """The positions of the episodes of a task id, by task index and sample."""
        found = [p for p, t in enumerate(self._task_ids) if t == task_id]
        return sorted(found, key=lambda p: (self._task_index[p], self._sample[p]))

    # ------------------------------------------------------------------ columns for filters

    @property
    def successes(self) -> array[int]:
        """Per episode: 1 succeeded, 0 did not, -1 no verdict."""
        return self._success

    @property
    def rewards(self) -> array[float]:
        """Per episode: the valid episode reward, NaN when there is none."""
        return self._reward

    @property
    def stop_codes(self) -> array[int]:
        """Per episode: its stop reason's code in `stops`."""
        return self._stop

    @property
    def failure_codes(self) -> array[int]:
        """Per episode: its failure kind's code in `failures` (0: none)."""
        return self._failure

    @property
    def folded_texts(self) -> list[str]:
        """Per episode: the start of the task's question, casefolded (`str.casefold`)."""
        return self._text


def _question(messages: list[_Message]) -> str:
    """The task's first user message as text (its first message when none is the user's)."""
    chosen = next((m for m in messages if m.role == "user"), messages[0] if messages else None)
    content = None if chosen is None else chosen.content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _line_question(line: bytes) -> str:
    try:
        return _question(_Head.model_validate_json(line).task.messages)
    except ValidationError:
        return ""  # the file changed under the index: the row still shows what it knows


def _is_torn(tail: bytes) -> bool:
    try:
        json.loads(tail)
    except ValueError:
        return True
    return False
