"""A run's record of itself, ``run.json``: how a rollout or training run stands, or ended.

Every run folder holds one ``run.json`` (`RUN_RECORD_FILE`), a `RunRecord` that says which kind
of run it is (`RunKind`: ``rollout``, from ``rk-agent rollout`` and ``rk-agent rescore``, or
``training``, from ``rk-agent train``), where it stands (`rk_agent.types.RunStatus`), when it
started and was last written, and by which process. A rollout run adds what reproduces it
(seed, Python and package versions); a training run records the same (its first task seed
and TRL's ``seed`` too) and adds how far it got (optimizer step, last checkpoint, resident
memory, the alarms it raised, what dynamic sampling and task retirement did:
`rk_agent.runs.group_sampling.SamplingRecord`). Fields a kind does not use are left out of the
file.

The writer of the run rewrites the record as the run goes (`write_run_record`, atomically:
`rk_agent.atomic_file`), then once more when it ends: ``finished``, ``interrupted`` (Ctrl-C),
``failed`` (with the exception's message in ``error``) or, for training, ``stopped`` by an
alarm. A process the OS kills (``kill -9``, out of memory) cannot write that last word, so its
record still says ``running`` with a process that is gone: `RunRecord.writer_alive` tells, on
the machine that ran it (a rollout run's lock, `rk_agent.runs.run_lock`, tells too).

One reader, `read_run_record`, serves ``rk-agent show``, ``rk-agent view``, ``--resume`` and
``rk-agent train``'s note on a previous run; the record is informational, so a missing or
unreadable one reads as ``None``.

Main names: `RunRecord`, `RunKind`, `RUN_RECORD_FILE`, `read_run_record`, `write_run_record`.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = write_run_record(folder, RunRecord.start(RunKind.TRAINING, global_step=0))
    >>> record = read_run_record(folder)
    >>> record.kind.value, record.status.value, record.writer_alive()
    ('training', 'running', True)
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rk_agent.atomic_file import write_atomic
from rk_agent.runs.alarms import Alarm
from rk_agent.runs.group_sampling import SamplingRecord
from rk_agent.runs.run_lock import process_alive
from rk_agent.types import RunStatus

__all__ = [
    "RUN_RECORD_FILE",
    "RunKind",
    "RunRecord",
    "RunStatus",
    "read_run_record",
    "write_run_record",
]

RUN_RECORD_FILE = "run.json"
"""The record's file name in every run folder."""


class RunKind(str, Enum):
    """Which command made a run, and so which folder layout it has."""

    ROLLOUT = "rollout"
    """``rk-agent rollout`` or ``rk-agent rescore``: a run directory with ``config.yaml``
    (`rk_agent.runs.run_dir`)."""
    TRAINING = "training"
    """``rk-agent train``: an output folder with TRL's checkpoints (`rk_agent.trainers.run`)."""


class RunRecord(BaseModel):
    """What a run last said about itself (``run.json``; module docstring).

    Keys this version does not know are kept when the file is rewritten.

    Attributes:
        kind: rollout or training.
        status: where the run stands; ``None`` when the file holds a word that is not a
            `RunStatus` (a hand-edited file).
        error: the exception that stopped a ``failed`` run.
        started_at: when the run was created (a rollout run keeps it across resumes) or, for
            training, when this process started training (UTC).
        updated_at: when the record was last written (UTC).
        pid: the process that wrote it last.
        host: the machine it ran on (a pid means nothing on another one).
        seed: the run's first task seed (task ``i`` is played with ``seed + i``; a GRPO run's
            training tasks likewise).
        training_seed: a training run's TRL ``seed`` (model initialisation, sampling, data
            order).
        python: the run's Python version.
        packages: the run's versions of the packages that matter for reproducing it.
        global_step: a training run's optimizer steps done, resumed ones included.
        last_checkpoint: a training run's newest checkpoint folder saved, if any.
        rss_bytes: a training run's resident memory at the last write.
        peak_rss_bytes: the training process's peak resident memory so far.
        machine_memory_bytes: the machine's physical memory.
        alarms: the alarms a training run raised (`rk_agent.runs.alarms`), in order (a
            rollout run's are in its summary).
        sampling: a training run's dynamic sampling and task retirement in all (groups drawn,
            kept, dropped, filled, the steps that hit the bound, the tasks retired), when
            either was on.
    """

    model_config = ConfigDict(extra="allow")

    kind: RunKind
    status: RunStatus | None = None
    error: str | None = None
    started_at: datetime
    updated_at: datetime
    pid: int | None = None
    host: str | None = None
    seed: int | None = None
    training_seed: int | None = None
    python: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    global_step: int | None = None
    last_checkpoint: str | None = None
    rss_bytes: int | None = None
    peak_rss_bytes: int | None = None
    machine_memory_bytes: int | None = None
    alarms: list[Alarm] = Field(default_factory=list)
    sampling: SamplingRecord | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _known_status(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return RunStatus(value.strip().lower())
            except ValueError:
                return None
        return value

    @classmethod
    def start(cls, kind: RunKind, **fields: object) -> RunRecord:
        """A ``running`` record of ``kind`` for this process, now, with ``fields`` set."""
        now = datetime.now(UTC)
        values: dict[str, object] = {
            "kind": kind,
            "status": RunStatus.RUNNING,
            "started_at": now,
            "updated_at": now,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            **fields,
        }
        return cls.model_validate(values)

    def refreshed(self, **changes: object) -> RunRecord:
        """A copy with ``changes`` and the time of writing brought up to date."""
        return self.model_copy(update={"updated_at": datetime.now(UTC), **changes})

    def writer_alive(self) -> bool | None:
        """Whether the process that wrote the record still exists (``None``: it ran on another
        machine, or none is recorded)."""
        if self.pid is None or self.host != socket.gethostname():
            return None
        return process_alive(self.pid)


def read_run_record(folder: str | os.PathLike[str]) -> RunRecord | None:
    """The record in ``folder``, or ``None`` when there is none or it cannot be read."""
    try:
        return RunRecord.model_validate_json((Path(folder) / RUN_RECORD_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def write_run_record(folder: str | os.PathLike[str], record: RunRecord) -> Path:
    """Write ``record`` to ``folder``'s ``run.json`` atomically (`rk_agent.atomic_file`);
    fields left at their defaults are left out."""
    text = record.model_dump_json(indent=2, exclude_defaults=True)
    return write_atomic(Path(folder) / RUN_RECORD_FILE, text)
