"""A training run's record on disk: how it stands or ended (killed too), and its memory.

``rk-agent train`` writes ``<output_dir>/rk_agent_run.json`` (`RunRecord`) when it starts and
rewrites it after every optimizer step (the step, the checkpoint last saved, the resident memory
now and at its peak), then once more when it ends: ``finished``, ``interrupted`` (Ctrl-C) or
``failed`` (an exception, with its message). A process the OS kills (the kernel's out-of-memory
killer, ``kill -9``, a lost machine) cannot write that last word, so its record still says
``running`` with a process that no longer exists. The next start in the same folder reads it
(`previous_run_note`) and says what happened, with the memory last seen, before it resumes from
the last complete checkpoint, which a killed run leaves intact (the Trainer writes a checkpoint's
``trainer_state.json`` last, and an incomplete one is skipped).

Each write goes to a temporary file first and is renamed over the record, so a kill mid-write
leaves the previous record whole.

Main names: `RunRecord`, `RunStatus`, `RUN_RECORD_FILE`, `read_run_record`, `write_run_record`,
`previous_run_note`, `resident_bytes`, `peak_resident_bytes`, `machine_memory_bytes`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rk_agent.rollouts.alarms import Alarm
from rk_agent.rollouts.run_lock import process_alive
from rk_agent.types import RunStatus

__all__ = [
    "RUN_RECORD_FILE",
    "RunRecord",
    "RunStatus",
    "machine_memory_bytes",
    "peak_resident_bytes",
    "previous_run_note",
    "read_run_record",
    "resident_bytes",
    "write_run_record",
]

RUN_RECORD_FILE = "rk_agent_run.json"
"""The record's file name in a run's output directory."""

_GB = 1024**3


class RunRecord(BaseModel):
    """What a run last said about itself (``<output_dir>/rk_agent_run.json``).

    Attributes:
        status: where the run stands: ``finished`` once the final model is saved,
            ``interrupted`` (Ctrl-C) with the checkpoints written so far kept, ``failed`` with
            ``error`` set, or ``running`` (training, or killed: then its process is gone).
        pid: the training process.
        host: the machine it ran on (a pid means nothing on another one).
        started_at: when the process started training (UTC).
        updated_at: when the record was last written (UTC).
        global_step: optimizer steps done, resumed ones included.
        last_checkpoint: the newest checkpoint folder saved, if any.
        rss_bytes: resident memory at the last write.
        peak_rss_bytes: the process's peak resident memory so far.
        machine_memory_bytes: the machine's physical memory.
        error: the exception that stopped a ``failed`` run.
        alarms: the alarms the run raised (`rk_agent.rollouts.alarms`), in order.
    """

    model_config = ConfigDict(extra="ignore")

    status: RunStatus
    pid: int
    host: str
    started_at: datetime
    updated_at: datetime
    global_step: int = 0
    last_checkpoint: str | None = None
    rss_bytes: int | None = None
    peak_rss_bytes: int | None = None
    machine_memory_bytes: int | None = None
    error: str | None = None
    alarms: list[Alarm] = Field(default_factory=list)

    @classmethod
    def start(cls) -> RunRecord:
        """A ``running`` record for this process, now."""
        now = datetime.now(UTC)
        return cls(
            status=RunStatus.RUNNING,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=now,
            updated_at=now,
            rss_bytes=resident_bytes(),
            peak_rss_bytes=peak_resident_bytes(),
            machine_memory_bytes=machine_memory_bytes(),
        )

    def refreshed(self, **changes: object) -> RunRecord:
        """A copy with ``changes``, the memory figures and the time brought up to date."""
        update = {
            "updated_at": datetime.now(UTC),
            "rss_bytes": resident_bytes(),
            "peak_rss_bytes": peak_resident_bytes(),
            **changes,
        }
        return self.model_copy(update=update)


def read_run_record(output_dir: str | Path) -> RunRecord | None:
    """The record in ``output_dir``, or ``None`` when there is none or it cannot be read."""
    path = Path(output_dir) / RUN_RECORD_FILE
    try:
        return RunRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def write_run_record(output_dir: str | Path, record: RunRecord) -> Path:
    """Write ``record`` atomically (a temporary file renamed over the old record)."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RUN_RECORD_FILE
    temporary = path.with_name(f".{RUN_RECORD_FILE}.{os.getpid()}.tmp")
    temporary.write_text(record.model_dump_json(indent=2), encoding="utf-8")
    temporary.replace(path)
    return path


def previous_run_note(output_dir: str | Path) -> str | None:
    """What to tell the user about the last run in ``output_dir``, if it did not end cleanly.

    Returns:
        ``None`` when there is no record, or the last run finished or is still running (its
        process is alive); otherwise one paragraph: how it ended, at which step, the memory
        last seen and, for a run killed without a word, the likely cause and what to change.
    """
    record = read_run_record(output_dir)
    if record is None or record.status is RunStatus.FINISHED:
        return None
    step = f"at step {record.global_step}"
    saved = f"; its last checkpoint is {record.last_checkpoint}" if record.last_checkpoint else ""
    if record.status is RunStatus.INTERRUPTED:
        return f"the previous run in {output_dir} was interrupted (Ctrl-C) {step}{saved}."
    if record.status is RunStatus.FAILED:
        return f"the previous run in {output_dir} failed {step}: {record.error}{saved}."
    if record.status is RunStatus.STOPPED:
        return f"the previous run in {output_dir} was stopped by an alarm {step}{saved}."
    if record.host == socket.gethostname() and process_alive(record.pid):
        return None  # another process is training in this folder right now; not ours to judge
    return (
        f"the previous run in {output_dir} (pid {record.pid}, started "
        f"{record.started_at:%Y-%m-%d %H:%M} UTC) stopped {step} without finishing and without "
        f"an error: its process was killed (the kernel's out-of-memory killer, kill -9, or a "
        f"lost machine){saved}. {_memory_words(record)}"
    )


def _memory_words(record: RunRecord) -> str:
    used, total = record.rss_bytes, record.machine_memory_bytes
    peak = record.peak_rss_bytes
    if used is None or peak is None:
        return "Its memory use was not recorded."
    words = (
        f"Its resident memory was {used / _GB:.1f} GB when last recorded (peak {peak / _GB:.1f} GB"
    )
    words += f", of {total / _GB:.1f} GB on the machine)." if total else ")."
    if total and peak > 0.6 * total:
        words += (
            " That is close to all of the machine's memory: the OS most likely killed it for "
            "memory. Lower per_device_train_batch_size (raise gradient_accumulation_steps to "
            "keep the batch), max_completion_length or num_generations, or turn on "
            "--gradient_checkpointing."
        )
    return words


def resident_bytes() -> int | None:
    """This process's resident memory now, in bytes (``None`` where it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path("/proc/self/statm").read_text().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    return None


def peak_resident_bytes() -> int:
    """This process's peak resident memory so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = int(peak) if sys.platform == "darwin" else int(peak) * 1024  # Linux: KiB
    return max(peak, resident_bytes() or 0)  # the kernel updates its figure lazily


def machine_memory_bytes() -> int | None:
    """The machine's physical memory in bytes (``None`` where it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return None
