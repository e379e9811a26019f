"""A run's record (``run.json``): one model and one writer for rollout and training runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from rk_agent.runs.alarms import Alarm, AlarmKind
from rk_agent.runs.run_record import (
    RUN_RECORD_FILE,
    RunKind,
    RunRecord,
    RunStatus,
    read_run_record,
    write_run_record,
)


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def test_a_record_round_trips_and_a_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    alarm = Alarm(kind=AlarmKind.NAN_REWARD, message="NaN", step=1)
    record = RunRecord.start(RunKind.TRAINING, global_step=0, alarms=[alarm])
    assert (record.pid, record.host) == (os.getpid(), socket.gethostname())
    assert record.status is RunStatus.RUNNING and record.started_at == record.updated_at
    assert write_run_record(tmp_path, record) == tmp_path / RUN_RECORD_FILE
    assert read_run_record(tmp_path) == record
    assert [p.name for p in tmp_path.iterdir()] == [RUN_RECORD_FILE]
    later = record.refreshed(global_step=3)
    assert later.global_step == 3 and later.updated_at >= record.updated_at
    assert later.started_at == record.started_at


def test_each_kind_writes_only_the_fields_it_uses(tmp_path: Path) -> None:
    write_run_record(tmp_path, RunRecord.start(RunKind.ROLLOUT, seed=7))
    written = json.loads((tmp_path / RUN_RECORD_FILE).read_text())
    assert sorted(written) == [
        "host", "kind", "pid", "seed", "started_at", "status", "updated_at",
    ]  # fmt: skip
    assert (written["kind"], written["status"], written["seed"]) == ("rollout", "running", 7)
    write_run_record(tmp_path, RunRecord.start(RunKind.TRAINING, global_step=0))
    written = json.loads((tmp_path / RUN_RECORD_FILE).read_text())
    assert (written["kind"], written["global_step"]) == ("training", 0)
    assert "seed" not in written and "packages" not in written


def test_no_record_or_an_unreadable_one_is_none(tmp_path: Path) -> None:
    assert read_run_record(tmp_path) is None
    (tmp_path / RUN_RECORD_FILE).write_text("{torn")
    assert read_run_record(tmp_path) is None
    no_kind = {"status": "running", "started_at": "2026-01-01T00:00:00Z",
               "updated_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps(no_kind))
    assert read_run_record(tmp_path) is None  # every run.json says which kind of run it is


def test_a_word_that_is_no_status_reads_as_none_and_unknown_keys_are_kept(
    tmp_path: Path,
) -> None:
    edited = {"kind": "training", "status": " Finished ", "started_at": "2026-01-01T00:00:00Z",
              "updated_at": "2026-01-01T00:00:00Z", "note": "mine"}  # fmt: skip
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps(edited))
    record = read_run_record(tmp_path)
    assert record is not None and record.status is RunStatus.FINISHED
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps({**edited, "status": "done by hand"}))
    record = read_run_record(tmp_path)
    assert record is not None and record.status is None
    write_run_record(tmp_path, record.refreshed(global_step=1))
    assert json.loads((tmp_path / RUN_RECORD_FILE).read_text())["note"] == "mine"


def test_the_writer_is_alive_here_gone_or_unknown_elsewhere() -> None:
    record = RunRecord.start(RunKind.TRAINING)
    assert record.writer_alive() is True
    assert record.model_copy(update={"pid": _dead_pid()}).writer_alive() is False
    assert record.model_copy(update={"host": "another-machine"}).writer_alive() is None
    assert record.model_copy(update={"pid": None}).writer_alive() is None
