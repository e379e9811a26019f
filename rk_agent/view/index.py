"""An index of a trajectories file: where each episode's line is, and what the filters ask of it.

A run page must stay fast on a run of 100,000 episodes, so the viewer never holds episodes: it
reads ``trajectories.jsonl`` once, as a stream, and keeps per episode its line's byte offset and
length and the few fields the filters, the histograms and the episode list need in compact
arrays: id, task, sample, training step, success, the episode reward and its components'
scores, the reward the watch reads (the episode reward plus the step rewards), stop reason,
failure kind, turns, whether it was truncated, a hash of its final answer, and the start of the
task's question, casefolded for the text filter. A page of the list reads
its rows' lines back for their questions as written, and an episode page its one line
(`EpisodeIndex.read`). While a pass runs, `EpisodeIndex.progress` says how far it got.

A training run's file holds every step's episodes: an episode's **step** is the optimizer step
its rollouts fed (``metadata.train_step``, the steps done when it was generated, plus one: the
step ``watch.jsonl`` and the alarms name). Its id says that step (``s3-0-1``,
`rk_agent.trainers.episode_names`) and is its **key** (its name in URLs), as elsewhere; in a
file written before ids said their step they repeat from step to step (``0-0`` is the first row
of each), and the key is ``<id>@<step>``. An episode's **group** (its GRPO group) is the
episodes of its task index in a rollout run, of its task in the same step in a training run.

**Reward components** are kept sparse: per component name, the positions of the episodes that
have a valid score for it and those scores (`ComponentScores`), so memory grows with the scores
in the file, not with names times episodes (a column per name as long as the episodes so far
took 348 MB for a 0.41 MB file of 6,000 names). A run keeps at most `COMPONENT_NAMES` names,
the first it meets; the scores of the others are counted (`EpisodeIndex.other_components`,
`EpisodeIndex.other_scores`), not kept.

The file may grow while it is shown (a run still playing): `EpisodeIndex.refresh` indexes the
lines appended since the last look, and starts over when the file shrank (replaced). The rules
for lines are the run reader's (`rk_agent.runs.run_dir`): a last line without its newline
that is not JSON is a torn write, left for later; a repeated episode key in a run directory is
counted once, the first kept. A line that is not an episode is counted in ``unreadable``, not
fatal: a viewer shows what it can.

Main names: `EpisodeIndex`, `EpisodeRow`, `ComponentScores`, `COMPONENT_NAMES`.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rk_agent.runs.trajectory import Trajectory

__all__ = ["COMPONENT_NAMES", "ComponentScores", "EpisodeIndex", "EpisodeRow"]

TEXT_CHARS = 300
"""How much of a task's question is kept for the task-text filter and the episode list."""

COMPONENT_NAMES = 64
"""At most this many reward-component names are kept per run: the first met; the scores of
the others are counted, not kept (module docstring)."""

_NO_VERDICT = -1


@dataclass(frozen=True)
class EpisodeRow:
    """What the episode list shows of one episode (read from the index, not the file).

    Attributes:
        position: the episode's place in the index (file order).
        key: its name in URLs (module docstring).
        id, task_index, sample, task_id: as in the `Trajectory`.
        step: the training step it fed (module docstring), ``None`` outside training runs.
        success: the environment's verdict, ``None`` when there is none.
        reward: the valid episode reward, ``None`` when missing or invalid.
        stop_reason: why it ended; failure_kind: what failed ("" when nothing did).
        turns: assistant turns.
        text: the start of the task's question.
    """

    position: int
    key: str
    id: str
    task_index: int
    sample: int
    task_id: str
    step: int | None
    success: bool | None
    reward: float | None
    stop_reason: str
    failure_kind: str
    turns: int
    text: str


class ComponentScores:
    """One reward component's valid scores, sparse: the positions (in the index) of the episodes
    that have one, in file order, and the scores. While they are consecutive (a component every
    episode has), the positions are a range, not stored: 8 bytes a score, as a dense column.

    Attributes:
        scores: the scores, one per position.
    """

    __slots__ = ("_positions", "_start", "scores")

    def __init__(self) -> None:
        self.scores: array[float] = array("d")
        self._start = 0
        self._positions: array[int] | None = None  # None: range(_start, _start + len(scores))

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def positions(self) -> Sequence[int]:
        """The positions of the episodes the scores belong to, ascending."""
        if self._positions is not None:
            return self._positions
        return range(self._start, self._start + len(self.scores))

    def add(self, position: int, score: float) -> None:
        """Add an episode's score (positions ascending)."""
        if self._positions is None:
            if not self.scores:
                self._start = position
            elif position != self._start + len(self.scores):  # a gap: positions from now on
                self._positions = array("i", self.positions)
        if self._positions is not None:
            self._positions.append(position)
        self.scores.append(score)

    def dense(self, episodes: int) -> Iterator[float]:
        """Every episode's score by position, NaN for those without one (``episodes`` of
        them), computed as it is read."""
        at = 0
        for position, score in zip(self.positions, self.scores, strict=True):
            yield from itertools.repeat(math.nan, position - at)
            yield score
            at = position + 1
        yield from itertools.repeat(math.nan, max(episodes - at, 0))


class _Fields(BaseModel):
    """Read from a line: only the fields named become Python objects (not the turns')."""

    model_config = ConfigDict(extra="ignore")


class _Message(_Fields):
    role: str = ""
    content: Any = None


class _Task(_Fields):
    id: str = ""
    messages: list[_Message] = []


class _Metric(_Fields):
    score: float | None = None
    is_score_valid: bool = True


class _Score(_Metric):
    metrics: dict[str, _Metric] = {}


class _Assistant(_Message):
    tool_calls: list[_Fields] | None = None


class _Turn(_Fields):
    assistant: _Assistant = _Assistant()
    finish_reason: str | None = None
    reward: float = 0.0
    reward_valid: bool = True


class _Metadata(_Fields):
    train_step: Any = None
    budget_hit: Any = False


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
    turns: list[_Turn] = []
    episode: _Score | None = None
    success: bool | None = None
    stop_reason: str = ""
    failure: _Failure | None = None
    metadata: _Metadata = _Metadata()


class _TaskHead(_Fields):
    """A line's task alone: what a page of the list reads back for its questions."""

    task: _Task = _Task()


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
        unique: drop repeated episode keys (a run directory's rule).

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
        self.reading = 0  # bytes read so far by the pass under way
        self.size = 0  # the file's size when the pass began
        self.unreadable = 0
        self.env = ""
        self.model = ""
        self._offsets = array("q")
        self._lengths = array("l")
        self._task_index = array("l")
        self._sample = array("l")
        self._step = array("l")
        self._group = array("l")
        self._success = array("b")
        self._reward = array("d")
        self._return = array("d")
        self._stop = array("B")
        self._failure = array("B")
        self._turns = array("l")
        self._truncated = array("b")
        self._answer = array("q")
        self._components: dict[str, ComponentScores] = {}
        self._other_names: set[int] = set()  # hashes of the names past COMPONENT_NAMES
        self.other_scores = 0
        self._ids: list[str] = []
        self._keys: list[str] = []
        self._task_ids: list[str] = []
        self._text: list[str] = []
        self._positions: dict[str, int] = {}
        self._groups: dict[tuple[int, object], int] = {}
        self.stops = _Vocabulary()
        self.failures = _Vocabulary()

    def __len__(self) -> int:
        return len(self._ids)

    # ------------------------------------------------------------------ building

    def behind(self) -> bool:
        """Whether the file has bytes the index has not read (a pass would change it)."""
        try:
            return self.file.stat().st_size != self.end
        except FileNotFoundError:
            return self.end != 0

    def progress(self) -> tuple[int, int]:
        """How far the pass under way got: bytes read, and the file's size when it began."""
        return self.reading, max(self.size, self.reading)

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
            self.size, self.reading = size, self.end
            with self.file.open("rb") as handle:
                handle.seek(self.end)
                offset = self.end
                for line in handle:
                    if not line.endswith(b"\n") and _is_torn(line):
                        break  # a torn (or half-written) last line: read it next time
                    self._add(offset, line)
                    offset += len(line)
                    self.reading = offset
                self.end = offset

    def _add(self, offset: int, line: bytes) -> None:
        if not line.strip():
            return
        try:
            head = _Head.model_validate_json(line)
        except ValidationError:
            self.unreadable += 1
            return
        step = _step(head.metadata.train_step)
        key = head.id if step is None or head.id.startswith(f"s{step}-") else f"{head.id}@{step}"
        if self.unique and key in self._positions:
            return
        if not self._ids:
            self.env, self.model = head.env, head.model
        position = len(self._ids)
        self._positions.setdefault(key, position)  # the first of repeated keys
        self._ids.append(head.id)
        self._keys.append(key)
        self._offsets.append(offset)
        self._lengths.append(len(line))
        self._task_index.append(head.task_index)
        self._sample.append(head.sample)
        self._step.append(-1 if step is None else step)
        group = (-1, head.task_index) if step is None else (step, head.task.id)
        self._group.append(self._groups.setdefault(group, len(self._groups)))
        self._task_ids.append(head.task.id)
        self._text.append(_question(head.task.messages)[:TEXT_CHARS].casefold())
        self._success.append(_NO_VERDICT if head.success is None else int(head.success))
        reward, episode = math.nan, head.episode
        if episode is not None and episode.is_score_valid and episode.score is not None:
            reward = episode.score
        self._reward.append(reward)
        self._return.append(_return(reward, head.turns))
        self._add_components(position, episode)
        self._stop.append(self.stops.code(head.stop_reason))
        kind = head.failure.kind if head.failure is not None else ""
        self._failure.append(self.failures.code("env_error" if kind == "tool_error" else kind))
        self._turns.append(len(head.turns))
        self._truncated.append(_truncated(head))
        answer = _final_answer(head.turns)
        self._answer.append(0 if answer is None else hash(answer) or 1)

    def _add_components(self, position: int, episode: _Score | None) -> None:
        if episode is None or not episode.is_score_valid:
            return
        for name, metric in episode.metrics.items():
            if not metric.is_score_valid or metric.score is None:
                continue
            column = self._components.get(name)
            if column is None:
                if len(self._components) >= COMPONENT_NAMES:
                    self._other_names.add(hash(name))
                    self.other_scores += 1
                    continue
                column = self._components[name] = ComponentScores()
            column.add(position, metric.score)

    # ------------------------------------------------------------------ reading

    def position(self, key: str) -> int | None:
        """The index position of an episode key, ``None`` when the run has no such episode."""
        return self._positions.get(key)

    def row(self, position: int) -> EpisodeRow:
        """What the index knows of the episode at ``position`` (its question read back)."""
        return self.rows([position])[0]

    def rows(self, positions: Iterable[int]) -> list[EpisodeRow]:
        """`row` of each position; the file is opened once, and only their lines are read."""
        found: list[EpisodeRow] = []
        positions = list(positions)
        if not positions:  # nothing to read: the file may not exist (an SFT run writes none)
            return found
        with self.file.open("rb") as handle:
            for position in positions:
                line = os.pread(handle.fileno(), self._lengths[position], self._offsets[position])
                success = self._success[position]
                reward = self._reward[position]
                step = self._step[position]
                found.append(
                    EpisodeRow(
                        position=position,
                        key=self._keys[position],
                        id=self._ids[position],
                        task_index=self._task_index[position],
                        sample=self._sample[position],
                        task_id=self._task_ids[position],
                        step=None if step < 0 else step,
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

    def group_of(self, position: int) -> list[int]:
        """The positions of the episode's group (module docstring), by sample number."""
        code = self._group[position]
        found = [p for p, g in enumerate(self._group) if g == code]
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
    def returns(self) -> array[float]:
        """Per episode: the reward the watch reads (the episode reward plus the step rewards,
        weights 1), NaN when it has none."""
        return self._return

    @property
    def components(self) -> dict[str, ComponentScores]:
        """Per reward component kept (at most `COMPONENT_NAMES`, the first met): the valid
        scores and the episodes they belong to (`ComponentScores.dense`: one per episode)."""
        return self._components

    @property
    def other_components(self) -> int:
        """How many component names past `COMPONENT_NAMES` the run holds (scores not kept)."""
        return len(self._other_names)

    @property
    def steps(self) -> array[int]:
        """Per episode: its training step, -1 outside training runs."""
        return self._step

    @property
    def groups(self) -> array[int]:
        """Per episode: its group's code (equal codes: the same group)."""
        return self._group

    @property
    def truncations(self) -> array[int]:
        """Per episode: 1 when it was cut by a token limit (as the watch counts it), else 0."""
        return self._truncated

    @property
    def answers(self) -> array[int]:
        """Per episode: a hash of its final answer (as the watch reads it), 0 when none."""
        return self._answer

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


def _step(train_step: Any) -> int | None:
    if isinstance(train_step, bool) or not isinstance(train_step, int):
        return None
    return train_step + 1


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _question(messages: list[_Message]) -> str:
    """The task's first user message as text (its first message when none is the user's)."""
    chosen = next((m for m in messages if m.role == "user"), messages[0] if messages else None)
    return "" if chosen is None else _text(chosen.content)


def _final_answer(turns: list[_Turn]) -> str | None:
    """The watch's final answer (`rk_agent.runs.watch.final_answer`) from the line."""
    if not turns or turns[-1].assistant.tool_calls:
        return None
    return " ".join(_text(turns[-1].assistant.content).split()).lower() or None


def _return(reward: float, turns: list[_Turn]) -> float:
    """`rk_agent.runs.watch.outcome_of`'s reward, weights 1 (NaN: none)."""
    if math.isnan(reward) or not all(turn.reward_valid for turn in turns):
        return math.nan
    return reward + math.fsum(turn.reward for turn in turns)


def _truncated(head: _Head) -> int:
    """The watch's rule (`rk_agent.runs.watch`): stopped as truncated, out of its token
    budget, or a reply cut by a token limit."""
    cut = head.stop_reason == "truncated" or head.metadata.budget_hit is True
    return int(cut or any(turn.finish_reason == "length" for turn in head.turns))


def _line_question(line: bytes) -> str:
    try:
        return _question(_TaskHead.model_validate_json(line).task.messages)
    except ValidationError:
        return ""  # the file changed under the index: the row still shows what it knows


def _is_torn(tail: bytes) -> bool:
    try:
        json.loads(tail)
    except ValueError:
        return True
    return False
