"""What the next start of ``rk-agent train`` says about the last run in its folder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from rk_agent.runs.run_record import (
    RunKind,
    RunRecord,
    RunStatus,
    read_run_record,
    write_run_record,
)
from rk_agent.trainers.previous_run import previous_run_note

GB = 1024**3


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def _record(**changes: object) -> RunRecord:
    when = datetime(2026, 11, 23, 21, 30, tzinfo=UTC)
    base = RunRecord(
        kind=RunKind.TRAINING, status=RunStatus.RUNNING, pid=_dead_pid(),
        host=socket.gethostname(), started_at=when, updated_at=when, global_step=2,
        last_checkpoint="checkpoint-2", rss_bytes=int(15.2 * GB), peak_rss_bytes=int(15.6 * GB),
        machine_memory_bytes=int(23.4 * GB),
    )  # fmt: skip
    return base.model_copy(update=changes)


def test_no_record_an_unreadable_one_or_a_rollout_runs_says_nothing(tmp_path: Path) -> None:
    assert previous_run_note(tmp_path) is None
    (tmp_path / "run.json").write_text("{torn")
    assert previous_run_note(tmp_path) is None
    write_run_record(tmp_path, _record(kind=RunKind.ROLLOUT))
    assert previous_run_note(tmp_path) is None


def test_a_run_killed_near_the_machines_memory_is_called_out_of_memory(tmp_path: Path) -> None:
    write_run_record(tmp_path, _record())
    note = previous_run_note(tmp_path)
    assert note is not None
    assert note.startswith(
        f"the previous run in {tmp_path} (pid {read_run_record(tmp_path).pid}, "  # type: ignore[union-attr]
        "started 2026-11-23 21:30 UTC) stopped at step 2 without finishing and without an "
        "error: its process was killed (the kernel's out-of-memory killer, kill -9, or a lost "
        "machine); its last checkpoint is checkpoint-2. Its resident memory was 15.2 GB when "
        "last recorded (peak 15.6 GB, of 23.4 GB on the machine)."
    )
    assert "the OS most likely killed it for memory" in note
    assert "--gradient_checkpointing" in note


def test_a_killed_run_with_memory_to_spare_is_not_blamed_on_memory(tmp_path: Path) -> None:
    write_run_record(tmp_path, _record(rss_bytes=GB, peak_rss_bytes=2 * GB))
    note = previous_run_note(tmp_path)
    assert note is not None and "was killed" in note
    assert "for memory" not in note


def test_clean_ends_and_live_runs(tmp_path: Path) -> None:
    write_run_record(tmp_path, _record(status=RunStatus.FINISHED))
    assert previous_run_note(tmp_path) is None
    write_run_record(tmp_path, _record(pid=os.getpid()))  # alive: someone is training here
    assert previous_run_note(tmp_path) is None
    write_run_record(tmp_path, _record(status=RunStatus.INTERRUPTED))
    assert previous_run_note(tmp_path) == (
        f"the previous run in {tmp_path} was interrupted (Ctrl-C) at step 2; its last "
        "checkpoint is checkpoint-2."
    )
    write_run_record(tmp_path, _record(status=RunStatus.FAILED, error="ValueError: bad row"))
    assert previous_run_note(tmp_path) == (
        f"the previous run in {tmp_path} failed at step 2: ValueError: bad row; its last "
        "checkpoint is checkpoint-2."
    )
