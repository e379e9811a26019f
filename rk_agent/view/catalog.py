"""The runs the viewer shows: found under the paths given, each with its one-line summary.

A path given to ``rk-agent view`` is a run (a rollout run's directory, a rescored run's, a
training run's folder, or a bare trajectories JSONL file) or a folder of runs, searched a few
levels down for run folders (hidden folders and checkpoints skipped; a JSONL file is a run
only when given). Each run gets a short key for its URLs
(its path relative to the folder given, ``/`` written ``~``).

A run's line on the runs page (`RunInfo`) comes from what ``rk-agent show`` reads: every run's
``run.json`` (its kind and status: `rk_agent.runs.run_record`), ``summary.json`` for a
rollout run (``rescore.json`` marks a rescored one), ``watch.jsonl`` for a training run (its
alarms: `rk_agent.view.training`), and the run's episode index where there is no summary yet (a
run still playing, a training run, a bare file). A training run without episodes (SFT, which
trains on another run's; GRPO before its first step) takes its environment and model from its
config (`rk_agent.view.training.Training`).

A run's index is built by a thread of its own (`Run.indexed`): the first open of a big run
reads its whole trajectories file (about 20 s at 100,000 episodes), and pages show how far it
got meanwhile instead of waiting. A run's token checker (`rk_agent.runs.token_drift`) is
loaded the first time one of its episodes with token ids is shown.

Main names: `Catalog`, `Run`, `RunInfo`, `find_runs`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import Alarm
from rk_agent.runs.rescore import RESCORE_FILE
from rk_agent.runs.run_dir import CONFIG_FILE, LOCK_FILE, SUMMARY_FILE, TRAJECTORIES_FILE
from rk_agent.runs.run_lock import RunLock
from rk_agent.runs.run_record import RUN_RECORD_FILE, RunKind, RunRecord, read_run_record
from rk_agent.runs.summary import RunSummary
from rk_agent.types import RunStatus
from rk_agent.view.index import EpisodeIndex
from rk_agent.view.training import Training, TrainingLog

if TYPE_CHECKING:
    from rk_agent.runs.token_drift import TokenChecker

__all__ = ["Catalog", "Run", "RunInfo", "find_runs"]

_DEPTH = 4  # folders searched below a folder given
_SKIP = ("checkpoint-", ".", "__")


@dataclass(frozen=True)
class RunInfo:
    """A run's line on the runs page (``None``: not known).

    Attributes:
        kind: ``rollout``, ``rescored``, ``training`` or ``trajectories`` (a bare file).
        status: ``running``, ``finished``, ``interrupted``, ``failed``, ``stopped``, or
            ``killed`` (says running, but no live process writes it).
        alarms: the alarms the run raised.
        error: why the run's records could not be read, if they could not.
        indexing: while the run's index is being built: the share of its file read so far
            (then ``env``, ``model`` and the figures are not known yet).
    """

    env: str
    model: str
    episodes: int
    success_rate: float | None
    reward_mean: float | None
    status: str | None
    alarms: list[Alarm]
    error: str | None = None
    indexing: float | None = None


@dataclass
class Run:
    """One run the viewer found.

    Attributes:
        key: its name in URLs.
        path: the run directory, training folder or trajectories file.
        kind: ``rollout``, ``rescored``, ``training`` or ``trajectories``.
    """

    key: str
    path: Path
    kind: str
    _index: EpisodeIndex | None = field(default=None, repr=False)
    _pass: threading.Thread | None = field(default=None, repr=False)
    _failed: OSError | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _rates: tuple[int, float | None, float | None] = field(default=(-1, None, None), repr=False)
    _log: TrainingLog | None = field(default=None, repr=False)
    _checker: TokenChecker | str | None = field(default=None, repr=False)

    @property
    def trajectories(self) -> Path:
        """The run's trajectories file (it may not exist yet)."""
        return self.path if self.path.is_file() else self.path / TRAJECTORIES_FILE

    def index(self) -> EpisodeIndex:
        """The run's episode index, brought up to date with the file (waiting for it)."""
        while True:
            index = self.indexed(None)
            if index is not None:  # waited for: always, unless another pass just started
                return index

    def indexed(self, wait_s: float | None) -> EpisodeIndex | None:
        """The run's episode index once it is up to date with the file, or ``None`` while a
        pass over the file is still running after ``wait_s`` seconds (``None``: until done;
        ``0``: not at all, and a pass this call started counts as running).

        A pass starts, in a thread of its own, when the file has bytes the index has not read
        and none runs; `progress` says how far it got.

        Raises:
            OSError: the file could not be read.
        """
        with self._lock:
            if self._index is None:
                self._index = EpisodeIndex(self.trajectories, unique=self.kind != "trajectories")
            index = self._index
            started = (self._pass is None or not self._pass.is_alive()) and index.behind()
            if started:
                self._failed = None
                self._pass = threading.Thread(
                    target=self._refresh,
                    args=(index,),
                    name=f"rk-agent view index {self.key}",
                    daemon=True,
                )
                self._pass.start()
            running = self._pass
        if running is not None:
            running.join(wait_s)
            if running.is_alive() or (started and wait_s == 0):
                return None
        if self._failed is not None:
            raise self._failed
        return index

    def _refresh(self, index: EpisodeIndex) -> None:
        try:
            index.refresh()
        except OSError as exc:
            self._failed = exc

    def progress(self) -> float:
        """The share of the trajectories file the index has read (1.0 when up to date)."""
        index = self._index
        if index is None:
            return 0.0
        done, size = index.progress()
        running = self._pass is not None and self._pass.is_alive()
        return done / size if running and size else 1.0

    def training(self) -> Training | None:
        """A training run's record and watch (`rk_agent.view.training`); ``None`` for other
        runs."""
        if self.kind != "training":
            return None
        with self._lock:
            if self._log is None:
                self._log = TrainingLog(self.path)
        return self._log.read()

    def alarms(self) -> list[Alarm]:
        """The alarms the run raised: a rollout run's summary's, a training run's."""
        training = self.training()
        if training is not None:
            return training.alarms
        summary = self.summary()
        return list(summary.alarms) if summary is not None else []

    def token_checker(self) -> TokenChecker | str:
        """The run's token checker, loaded once; or why there is none (a sentence)."""
        with self._lock:
            if self._checker is None:
                from rk_agent.runs.token_drift import TokenChecker

                try:
                    self._checker = TokenChecker(self.path)
                except ConfigError as exc:
                    self._checker = str(exc)
            return self._checker

    def summary(self) -> RunSummary | None:
        """``summary.json`` of a rollout or rescored run (``None``: none, or unreadable)."""
        if self.kind not in ("rollout", "rescored"):
            return None
        try:
            return RunSummary.model_validate_json((self.path / SUMMARY_FILE).read_bytes())
        except (OSError, ValidationError):
            return None

    def info(self, index: EpisodeIndex | None = None, *, indexing: bool = False) -> RunInfo:
        """The run's line on the runs page (module docstring).

        Args:
            index: the run's index (default: brought up to date, waiting for it).
            indexing: the index is being built: its figures are not known yet.
        """
        summary = self.summary()
        alarms = self.alarms()
        status, error = self._status()
        if indexing:
            return RunInfo(
                env="", model="", episodes=0, success_rate=None, reward_mean=None,
                status=status, alarms=alarms, error=error, indexing=self.progress(),
            )  # fmt: skip
        index = index if index is not None else self.index()
        episodes = len(index)
        if summary is not None and summary.episodes == episodes:
            success, reward = summary.success_rate, summary.episode_reward.mean
        else:
            success, reward = self._index_rates(index)
        env, model = index.env, index.model
        training = self.training()
        if training is not None and not episodes:  # SFT, or GRPO before its first episode
            env, model = training.env, training.model
        return RunInfo(
            env=env,
            model=model,
            episodes=episodes,
            success_rate=success,
            reward_mean=reward,
            status=status,
            alarms=alarms,
            error=error,
        )

    def _index_rates(self, index: EpisodeIndex) -> tuple[float | None, float | None]:
        """Success rate and mean reward from the index (kept until it grows)."""
        counted, success, reward = self._rates
        if counted != len(index):
            success, reward = _rates(index)
            self._rates = (len(index), success, reward)
        return success, reward

    def _status(self) -> tuple[str | None, str | None]:
        if self.kind == "trajectories":
            return None, None
        record = read_run_record(self.path)
        if record is None or record.status is None:
            return None, None
        status = record.status.value
        if record.status is RunStatus.RUNNING and self._writer_gone(record):
            status = "killed"
        return status, record.error

    def _writer_gone(self, record: RunRecord) -> bool:
        """Whether the process writing a run that says ``running`` is known to be gone: a
        rollout run's lock holder, or the training process its record names."""
        if self.kind == "training":
            return record.writer_alive() is False
        holder = RunLock.recorded_holder(self.path / LOCK_FILE)
        return holder is None or holder.is_alive() is False


class Catalog:
    """The runs found under the paths given, by key."""

    def __init__(self, runs: Iterable[Run]) -> None:
        self.runs: dict[str, Run] = {run.key: run for run in runs}

    def get(self, key: str) -> Run | None:
        """The run with this key, ``None`` when there is none."""
        return self.runs.get(key)


def find_runs(paths: Iterable[str | Path]) -> Catalog:
    """Find every run under ``paths`` (module docstring).

    Raises:
        ConfigError: a path that does not exist, or under which no run was found.
    """
    found: list[Run] = []
    keys: set[str] = set()
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise ConfigError(
                f"{root} does not exist: give a run directory, a folder of runs, or a "
                "trajectories JSONL file."
            )
        runs = list(_walk(root, root, 0))
        if not runs:
            raise ConfigError(
                f"no run found in {root}: expected a folder made by `rk-agent rollout`, "
                f"`rk-agent rescore` or `rk-agent train` ({CONFIG_FILE}, {RUN_RECORD_FILE} or "
                f"{TRAJECTORIES_FILE}), or folders holding such runs."
            )
        for path, kind, name in runs:
            key = name
            suffix = 2
            while key in keys:
                key, suffix = f"{name}-{suffix}", suffix + 1
            keys.add(key)
            found.append(Run(key=key, path=path, kind=kind))
    return Catalog(found)


def _walk(path: Path, root: Path, depth: int) -> Iterable[tuple[Path, str, str]]:
    kind = _kind(path)
    if kind is not None:
        relative = path.relative_to(root) if path != root else Path(path.name)
        name = "~".join(relative.parts) if relative.parts else path.name
        yield path, kind, name or "run"
        return
    if not path.is_dir() or depth >= _DEPTH:
        return
    try:
        children = sorted(path.iterdir())
    except OSError:
        return
    for child in children:
        if child.is_dir() and not child.name.startswith(_SKIP):
            yield from _walk(child, root, depth + 1)


def _kind(path: Path) -> str | None:
    if path.is_file():
        return "trajectories" if path.suffix == ".jsonl" else None
    if (path / CONFIG_FILE).is_file():
        return "rescored" if (path / RESCORE_FILE).is_file() else "rollout"
    record = read_run_record(path)
    if record is not None and record.kind is RunKind.TRAINING:
        return "training"
    if (path / TRAJECTORIES_FILE).is_file():
        return "trajectories"
    return None


def _rates(index: EpisodeIndex) -> tuple[float | None, float | None]:
    judged = [s for s in index.successes if s >= 0]
    rewards = [r for r in index.rewards if r == r]  # NaN: no valid reward
    success = sum(judged) / len(judged) if judged else None
    return success, (sum(rewards) / len(rewards) if rewards else None)
