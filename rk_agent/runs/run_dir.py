"""Run directories and trajectory files: the one module that reads and writes them.

```text
RUN_DIR/
├── config.yaml          the resolved configuration (no API keys)
├── config.yaml.hmac     its signature by this user's key (`rk_agent.runs.run_trust`)
├── run.json             status, start time, seed, package versions (`RunRecord`)
├── provenance.json      what the model saw: model, tools, tool-call format, template, versions
├── run.lock             held by the process writing the run: its pid, host and command
├── trajectories.jsonl   one finished episode per line, appended as each finishes
├── dropped.jsonl        groups dropped by the failure policy, with the reason
├── worker_failures.jsonl  rollout workers lost during the run (``--workers``), if any
└── summary.json         the statistics of the finished episodes (`RunSummary`)
```

**Trajectory files** (a run's ``trajectories.jsonl``, a training run's log of episodes): one
`Trajectory` per line, serialised one way (`trajectory_line`: compact JSON, ``null`` fields left
out) and appended by one writer (`append_trajectories`, or `append_lines` for lines already
serialised): whole lines in one ``write``, flushed,
so a crash leaves every finished episode readable. One reader (`read_trajectories`), used by
``rk-agent show``, ``--resume``, SFT data and RFT datasets alike, with one rule:

- a last line without its newline that is not valid JSON is a torn write (a crash mid-write,
  or a line still being written while a reader looks): it is skipped when reading and cut off
  before the next append;
- every other non-blank line must be a trajectory; one that is not is a `DataError` naming
  ``file:line``, what was expected and how to fix it;
- in a run directory an episode id appears once: a repeated id (two processes writing one run
  at once, before run directories were locked) is counted once, with a warning.

**Status**: ``run.json`` (`rk_agent.runs.run_record`, kind ``rollout``) says
`RunStatus.RUNNING` while a process writes the run, then ``finished``, ``interrupted`` (Ctrl-C)
or ``failed`` (an exception, whose message is kept in ``error``). A process the OS kills
(``kill -9``, out of memory) cannot write its last word: its run still says ``running`` while no
live process holds its lock (`RunDir.holder`).

**Provenance**: ``provenance.json`` (`rk_agent.runs.provenance.RunProvenance`) is written
once, before the first episode (`RunDir.record_provenance`); `RunDir.append` trims each
episode's record to what differs from it, and fills in what only the first answer tells.

**Lock**: a process that writes a run (`RunDir.create`, `RunDir.resume`) holds ``run.lock``
(`rk_agent.runs.run_lock`) until `RunDir.close`; a second writer gets a `RunLockedError`
naming the first. The OS releases the lock when its process dies, so a killed run is resumed
without any clean-up.

Main names: `RunDir`, `RunStatus`, `read_trajectories`, `iter_trajectories` (and its parts, for
readers that split the work: `trajectories_file`, `trajectory_lines`, `parse_trajectory_line`,
`unique_episodes`), `append_trajectories`, `append_lines`, `trajectory_line` (`trajectory_bytes`),
`read_provenance`, and the file names
(`TRAJECTORIES_FILE`, `CONFIG_FILE`, `PROVENANCE_FILE`, `SUMMARY_FILE`, `DROPPED_FILE`,
`WORKER_FAILURES_FILE`, `LOCK_FILE`; ``run.json`` is `RUN_RECORD_FILE`).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import socket
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from rk_agent.atomic_file import write_atomic
from rk_agent.config_files import rebase_paths, validation_problems
from rk_agent.errors import ConfigError, DataError
from rk_agent.jsonl import append_jsonl, end_last_line, is_torn, iter_jsonl, parse_jsonl_line
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.provenance import PROVENANCE_FILE, RunProvenance, package_versions
from rk_agent.runs.run_kind import not_a_run
from rk_agent.runs.run_lock import LockHolder, RunLock
from rk_agent.runs.run_record import (
    RUN_RECORD_FILE,
    RunKind,
    RunRecord,
    read_run_record,
    write_run_record,
)
from rk_agent.runs.run_trust import is_signed, sign_config
from rk_agent.runs.summary import RunSummary
from rk_agent.runs.trajectory import Trajectory
from rk_agent.trusted_json import validate_trusted_json
from rk_agent.types import RunStatus

__all__ = [
    "CONFIG_FILE",
    "DROPPED_FILE",
    "LOCK_FILE",
    "PROVENANCE_FILE",
    "SUMMARY_FILE",
    "TRAJECTORIES_FILE",
    "WORKER_FAILURES_FILE",
    "RunDir",
    "RunStatus",
    "append_lines",
    "append_trajectories",
    "iter_trajectories",
    "parse_trajectory_line",
    "read_provenance",
    "read_trajectories",
    "trajectories_file",
    "trajectory_bytes",
    "trajectory_line",
    "trajectory_lines",
    "unique_episodes",
]

logger = logging.getLogger(__name__)

_Record = TypeVar("_Record", bound=BaseModel)
_Item = TypeVar("_Item")

TRAJECTORIES_FILE = "trajectories.jsonl"
"""One finished episode per line (also the name of a training run's episode log)."""
CONFIG_FILE = "config.yaml"
"""The run's resolved `RolloutConfig`."""
SUMMARY_FILE = "summary.json"
"""The run's `RunSummary`."""
DROPPED_FILE = "dropped.jsonl"
"""Groups dropped by the failure policy."""
WORKER_FAILURES_FILE = "worker_failures.jsonl"
"""Rollout workers lost during the run (`rk_agent.runs.workers.WorkerFailure`, one a line)."""
LOCK_FILE = "run.lock"
"""Held by the process writing the run (`rk_agent.runs.run_lock`)."""

_PACKAGES = ("rk-agent", "openai", "transformers", "torch", "trl", "gymnasium", "pydantic")
_LINE_HINT = (
    "Each line must be one episode as `rk-agent rollout` writes it (a Trajectory); fix or "
    "delete this line."
)


class RunDir:
    """One run's directory.

    `RunDir.create` makes a new run and `RunDir.resume` reopens one to finish it; both hold the
    run's lock until `close` (or a ``with`` block ends, or the process ends). `RunDir.open`
    opens a run for reading only (``rk-agent show``): it takes no lock and cannot write.
    """

    TRAJECTORIES = TRAJECTORIES_FILE
    DROPPED = DROPPED_FILE
    CONFIG = CONFIG_FILE
    RECORD = RUN_RECORD_FILE
    SUMMARY = SUMMARY_FILE
    LOCK = LOCK_FILE
    WORKER_FAILURES = WORKER_FAILURES_FILE
    PROVENANCE = PROVENANCE_FILE

    def __init__(self, path: Path, config: RolloutConfig, lock: RunLock | None = None) -> None:
        self.path = path
        self.config = config
        self.lock = lock
        self.provenance: RunProvenance | None = None
        self.signed = True

    @classmethod
    def create(cls, path: str | Path, config: RolloutConfig, *, signed: bool = True) -> RunDir:
        """Make a new run directory, take its lock, and write its config and record; the
        config is signed unless ``signed`` is false (it holds what a run from elsewhere named).

        Raises:
            RunLockedError: another process is writing a run there.
            ConfigError: the directory already holds a run (use ``--resume`` to finish it).
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        lock = RunLock.acquire(path / LOCK_FILE)
        if (path / TRAJECTORIES_FILE).exists() or (path / CONFIG_FILE).exists():
            lock.release()
            record = read_run_record(path)
            if record is not None and record.status is RunStatus.FINISHED:
                raise ConfigError(
                    f"{path} already holds a finished run (every episode is there); choose "
                    "another --output."
                )
            raise ConfigError(
                f"{path} already holds a run. Finish it with `--resume {path}`, or choose "
                "another --output."
            )
        run = cls(path, config, lock)
        run.signed = signed
        run._write_config()
        run._write_record(RunStatus.RUNNING, error=None, fresh=True)
        (path / TRAJECTORIES_FILE).touch()
        return run

    @classmethod
    def open(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> RunDir:
        """Open an existing run for reading (``rk-agent show``); no lock is taken.

        ``overrides`` change the loaded config (not ``config.yaml``), as flags do
        (`rk_agent.runs.config.load_rollout_config`). Its relative paths are left as
        written (never read from the run's folder), and ``signed`` says whether the config
        verifies (`rk_agent.runs.run_trust.is_signed`).

        Raises:
            ConfigError: there is no run there, or its config is unreadable.
        """
        path = Path(path)
        config_file = path / CONFIG_FILE
        if not config_file.is_file():
            raise ConfigError(not_a_run(path, CONFIG_FILE))
        from rk_agent.runs.config import load_rollout_config

        run = cls(path, load_rollout_config(config_file, overrides, rebase=False))
        run.signed = is_signed(config_file)
        return run

    @classmethod
    def resume(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> RunDir:
        """Open an existing run to finish it: take its lock, then cut off a torn last line.

        `RunLock.previous` (on ``.lock``) names a writer that was killed without releasing.
        ``overrides``: as for `open` (the caller keeps them to where the run plays:
        `rk_agent.runs.config.PLACEMENT_KEYS`).

        Raises:
            ConfigError: there is no run there, or its config is unreadable.
            RunLockedError: another process is writing it.
        """
        run = cls.open(path, overrides)
        run.lock = RunLock.acquire(run.path / LOCK_FILE)
        run.repair()
        return run

    # ------------------------------------------------------------------ writing

    @property
    def writable(self) -> bool:
        """Whether this object holds the run's lock (made by `create` or `resume`, not closed)."""
        return self.lock is not None and self.lock.held

    def append(self, trajectory: Trajectory) -> None:
        """Append one finished episode (a whole line, flushed); its ``provenance`` is kept only
        where it differs from the run's (`record_provenance`)."""
        self._check_writable()
        if self.provenance is not None and trajectory.provenance is not None:
            kept, changed = self.provenance.absorb(trajectory.provenance)
            trajectory = trajectory.model_copy(update={"provenance": kept})
            if changed:
                self._write_atomic(PROVENANCE_FILE, self.provenance.model_dump_json(indent=2))
        append_trajectories(self.path / TRAJECTORIES_FILE, [trajectory])

    def append_dropped(self, task_index: int, reason: str, trajectories: list[Trajectory]) -> None:
        """Log a group dropped by the failure policy."""
        self._check_writable()
        episodes = [json.loads(trajectory_line(t)) for t in trajectories]
        line = json.dumps({"task_index": task_index, "reason": reason, "trajectories": episodes})
        append_jsonl(self.path / DROPPED_FILE, line + "\n")

    def append_worker_failure(self, failure: BaseModel) -> None:
        """Log a lost rollout worker (a `rk_agent.runs.workers.WorkerFailure`)."""
        self._check_writable()
        append_jsonl(self.path / WORKER_FAILURES_FILE, failure.model_dump_json() + "\n")

    def worker_failure_kinds(self) -> list[str]:
        """The kind of each lost rollout worker in ``worker_failures.jsonl``, in order (``[]``
        without the file); a line that cannot be read is skipped (the log is informational)."""
        file = self.path / WORKER_FAILURES_FILE
        if not file.is_file():
            return []
        kinds = []
        for line in iter_jsonl(file):
            kind = (line.value or {}).get("kind")
            if isinstance(kind, str):
                kinds.append(kind)
        return kinds

    def write_summary(self, summary: RunSummary) -> None:
        """Write ``summary.json`` (atomically: a reader never sees half a file)."""
        self._check_writable()
        self._write_atomic(SUMMARY_FILE, summary.model_dump_json(indent=2))

    def record_provenance(
        self, provenance: RunProvenance, *, resumed_with: int | None = None
    ) -> None:
        """Record what the model sees (``provenance.json``); episodes appended from now on are
        trimmed against it.

        A new run (``resumed_with`` ``None``) writes it. A resumed run (``resumed_with``: the
        episodes it holds) checks it against the one recorded and keeps that, noting the
        resume and the package versions that changed; a run made before rk-agent recorded
        provenance gets this one, marked with ``episodes_before``.

        Raises:
            ConfigError: the resumed run would show the model something else than its first
                episodes saw (other tools, another model, other weights or chat template).
        """
        self._check_writable()
        recorded = self.read_provenance() if resumed_with is not None else None
        if recorded is None:
            provenance.episodes_before = resumed_with or 0
        else:
            problems = recorded.resume_problems(provenance)
            if problems:
                raise ConfigError(
                    f"cannot resume {self.path}: the rest of its episodes would see "
                    f"{'; '.join(problems)} (against its {PROVENANCE_FILE}). The episodes of "
                    "one run must all see the same; restore what changed, or play the rest "
                    "as a new run (--output)."
                )
            changed = recorded.note_resume(provenance, resumed_with or 0)
            if changed:
                logger.warning(
                    "%s: resumed with other package versions than it started with: %s",
                    self.path,
                    changed,
                )
            provenance = recorded
        self.provenance = provenance
        self._write_atomic(PROVENANCE_FILE, provenance.model_dump_json(indent=2))

    def mark_running(self) -> None:
        """Record that a process writes the run now (a resumed run), clearing an old error."""
        self._check_writable()
        self._write_record(RunStatus.RUNNING, error=None)

    def finish(self, status: RunStatus | str, error: str | None = None) -> None:
        """Record the run's final status (``finished``, ``interrupted``, ``failed`` with its
        ``error``). The lock is kept until `close`."""
        self._check_writable()
        self._write_record(RunStatus(status), error=error)

    def close(self) -> None:
        """Release the run's lock (safe to call twice; a read-only run has none)."""
        if self.lock is not None:
            self.lock.release()

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def repair(self) -> int:
        """Cut a torn last line off ``trajectories.jsonl``; return the bytes removed."""
        file = self.path / TRAJECTORIES_FILE
        if not file.is_file():
            return 0
        return end_last_line(file)

    def _check_writable(self) -> None:
        if not self.writable:
            raise ConfigError(
                f"{self.path} is open for reading only (RunDir.open, or closed): writing needs "
                "its lock. Open it with RunDir.resume(path) to write to it."
            )

    def _write_atomic(self, name: str, text: str) -> None:
        write_atomic(self.path / name, text)

    def _write_config(self) -> None:
        """Save the config with its relative paths (tasks, MCP servers, ``file.py::name``
        specs of the env and rewards) made absolute from the working directory, where they
        were given: ``--resume`` from another folder reads the same files."""
        import yaml

        data = rebase_paths(
            self.config.model_dump(mode="json"), Path.cwd() / CONFIG_FILE,
            specs=("env", "rewards"), files=("tasks", "mcp"),
        )  # fmt: skip
        self._write_atomic(CONFIG_FILE, yaml.safe_dump(data, sort_keys=False))
        if self.signed:  # this user's key vouches for it (rk_agent.runs.run_trust)
            sign_config(self.path / CONFIG_FILE)

    def _write_record(self, status: RunStatus, error: str | None, fresh: bool = False) -> None:
        record = None if fresh else self.read_record()
        if record is None or record.kind is not RunKind.ROLLOUT:
            record = RunRecord.start(RunKind.ROLLOUT)
        record = record.refreshed(
            status=status,
            error=error,
            pid=os.getpid(),
            host=socket.gethostname(),
            seed=self.config.env.seed,
            python=record.python or platform.python_version(),
            packages=record.packages or package_versions(_PACKAGES),
        )
        write_run_record(self.path, record)

    # ------------------------------------------------------------------ reading

    def read_trajectories(self) -> list[Trajectory]:
        """Every finished trajectory, by `read_trajectories`' rule (``[]`` before the first).

        Raises:
            DataError: a complete line that is not a trajectory (file and line named).
        """
        if not (self.path / TRAJECTORIES_FILE).is_file():
            return []
        return read_trajectories(self.path)

    def read_summary(self) -> RunSummary | None:
        """The saved ``summary.json``, if any (files written before newer fields load too).

        Raises:
            DataError: the file is not a summary.
        """
        fix = f"Delete it: `rk-agent show {self.path}` computes the summary from the trajectories."
        return _read_record(self.path / SUMMARY_FILE, RunSummary, "a run summary", fix)

    def read_record(self) -> RunRecord | None:
        """``run.json`` (`rk_agent.runs.run_record.read_run_record`), or ``None`` when it is
        missing or unreadable (it is informational: resuming and showing a run never depend on
        it)."""
        return read_run_record(self.path)

    def read_provenance(self) -> RunProvenance | None:
        """``provenance.json`` (`read_provenance`)."""
        return read_provenance(self.path)

    def holder(self) -> LockHolder | None:
        """The process recorded in ``run.lock``: the writer now, or one killed while writing
        (check `LockHolder.is_alive`); ``None`` when none is recorded."""
        return RunLock.recorded_holder(self.path / LOCK_FILE)


def read_provenance(folder: str | os.PathLike[str]) -> RunProvenance | None:
    """A run folder's ``provenance.json``, or ``None`` when it has none (a run made before
    rk-agent recorded provenance, a training run, a bare trajectories file's folder).

    Raises:
        DataError: the file is there but is not a run's provenance.
    """
    fix = (
        "It is written by `rk-agent rollout`; restore it, or delete it to treat the run as one "
        "made without it."
    )
    return _read_record(Path(folder) / PROVENANCE_FILE, RunProvenance, "a run's provenance", fix)


def _read_record(file: Path, model: type[_Record], what: str, fix: str) -> _Record | None:
    """A run's JSON record (``None`` when the file is missing).

    Raises:
        DataError: the file is not ``what``; ``fix`` says what to do.
    """
    if not file.is_file():
        return None
    try:
        return model.model_validate_json(file.read_bytes())
    except ValidationError as exc:
        raise DataError(f"not {what}: {validation_problems(exc)}. {fix}", path=str(file)) from exc


# ---------------------------------------------------------------------- trajectory files


def trajectory_line(trajectory: Trajectory) -> str:
    """The one serialisation of a trajectory on disk: compact JSON, ``null`` fields left out,
    no newline."""
    return trajectory_bytes(trajectory).decode()


def trajectory_bytes(trajectory: Trajectory) -> bytes:
    """`trajectory_line` as the bytes written (for writers that batch lines: `append_lines`)."""
    return trajectory.__pydantic_serializer__.to_json(trajectory, exclude_none=True)


def append_trajectories(file: str | os.PathLike[str], trajectories: Iterable[Trajectory]) -> None:
    """Append trajectories to a JSONL file: whole lines in one write, flushed.

    A torn last line left by a crash is cut off first (`read_trajectories`' rule); concurrent
    writers of the file (training processes on several GPUs) take turns.
    """
    append_lines(file, (trajectory_bytes(t) for t in trajectories))


def append_lines(file: str | os.PathLike[str], lines: Iterable[bytes]) -> None:
    """`append_trajectories` for lines `trajectory_bytes` already made (a writer that batches
    lines, not episodes, so that each episode is freed as soon as it is written out)."""
    data = b"".join(line + b"\n" for line in lines)
    if data:
        append_jsonl(file, data)


def read_trajectories(source: str | os.PathLike[str]) -> list[Trajectory]:
    """Every trajectory of a run directory or of a trajectories JSONL file, in file order.

    The rule for a torn last line, for invalid lines and for repeated ids is the module's (see
    its docstring); `iter_trajectories` reads the same lines one at a time.

    Raises:
        ConfigError: the path does not exist, or is a directory without ``trajectories.jsonl``.
        DataError: a line is not UTF-8, not JSON or not a trajectory (``file:line`` named).
    """
    return list(iter_trajectories(source))


def iter_trajectories(source: str | os.PathLike[str]) -> Generator[Trajectory, None, None]:
    """The trajectories of `read_trajectories`, yielded one line at a time (memory stays flat
    on big runs: ``rk-agent rescore`` and ``rk-agent compare`` read this way).

    The file is checked when this is called, before the first trajectory is asked for.

    Raises:
        ConfigError: the path does not exist, or is a directory without ``trajectories.jsonl``.
        DataError: a line is not UTF-8, not JSON or not a trajectory (``file:line`` named),
            raised when that line is reached.
    """
    file = trajectories_file(source)
    return unique_episodes(file, _parsed(file), _trajectory_id)


def trajectories_file(source: str | os.PathLike[str]) -> Path:
    """The trajectories file of a run directory, or the file itself (`iter_trajectories`' check).

    Raises:
        ConfigError: the path does not exist, or is a directory without ``trajectories.jsonl``.
    """
    path = Path(source)
    file = path / TRAJECTORIES_FILE if path.is_dir() else path
    if not file.is_file():
        what = f"holds no {TRAJECTORIES_FILE}" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"{path} {what}: expected a run directory made by `rk-agent rollout`, or a "
            "trajectories JSONL file."
        )
    return file


def trajectory_lines(handle: IO[bytes], number: int = 0) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a trajectories file from ``handle``'s position, with their numbers
    (counted on from ``number``, the lines before it), a torn last line left out (the module's
    rule). A piece of the file read into `io.BytesIO` is read the same way."""
    for index, line in enumerate(handle, start=number + 1):
        if not line.strip():
            continue
        if not line.endswith(b"\n") and is_torn(line):
            break  # the torn last line
        yield index, line


def unique_episodes(
    file: Path, items: Iterable[_Item], id_of: Callable[[_Item], str]
) -> Generator[_Item, None, None]:
    """``items``, read from ``file`` in order, without the repeats of an episode id when ``file``
    is a run directory's (the module's rule: the first is kept, and one warning says how many
    were left out); all of them otherwise."""
    if not (file.parent / CONFIG_FILE).is_file():
        yield from items
        return
    seen: set[str] = set()
    repeated = 0
    for item in items:
        key = id_of(item)
        if key in seen:
            repeated += 1
            continue
        seen.add(key)
        yield item
    if repeated:
        logger.warning(
            "%s: %d episode(s) appear more than once (two processes wrote this run at once, "
            "before rk-agent locked run directories); each is counted once, the first kept.",
            file,
            repeated,
        )


def _parsed(file: Path) -> Iterator[Trajectory]:
    with file.open("rb") as handle:
        for number, line in trajectory_lines(handle):
            yield parse_trajectory_line(file, number, line)


def _trajectory_id(trajectory: Trajectory) -> str:
    return trajectory.id


def parse_trajectory_line(file: Path, number: int, line: bytes) -> Trajectory:
    """Line ``number`` of ``file`` as a `Trajectory` (the reader's validation of one line).

    Raises:
        DataError: the line is not UTF-8, not JSON or not a trajectory (``file:line`` named).
    """
    try:  # the lines rk-agent writes skip the validators that widen what models accept
        return validate_trusted_json(Trajectory, line)
    except ValidationError:
        pass  # the slow path below says what is wrong, in the reader's words
    try:
        parsed = parse_jsonl_line(file, number, line.decode("utf-8"))
        if parsed.error is not None:  # not JSON, or not an object: named with file:line
            raise parsed.error
        return Trajectory.model_validate(parsed.value)
    except (UnicodeDecodeError, ValidationError) as exc:
        problem = (
            f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            if isinstance(exc, UnicodeDecodeError)
            else f"not a trajectory: {validation_problems(exc)}"
        )
        raise DataError(f"{problem}. {_LINE_HINT}", path=str(file), line=number) from exc
