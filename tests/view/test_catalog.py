"""Finding runs: rollout, rescored and training runs, bare trajectories files, and refusals."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import Alarm, AlarmKind
from rk_agent.runs.run_record import RunKind, RunRecord, write_run_record
from rk_agent.types import RunStatus
from rk_agent.view.catalog import find_runs


def test_every_kind_of_run_is_found_with_its_line(runs_root: Path, tmp_path: Path) -> None:
    rescored = tmp_path / "deep" / "rescored"
    subprocess.run(
        [sys.executable, "-m", "rk_agent", "rescore", str(runs_root / "solver"), "-r", "length",
         "--kwargs", '{"max_length": 200}', "-o", str(rescored)],
        check=True, capture_output=True,
    )  # fmt: skip
    training = tmp_path / "train"
    training.mkdir()
    shutil.copy(runs_root / "stub" / "trajectories.jsonl", training / "trajectories.jsonl")
    now = datetime.now(UTC)
    alarm = Alarm(kind=AlarmKind.ZERO_SPREAD, message="every group had one reward")
    record = RunRecord(
        kind=RunKind.TRAINING, status=RunStatus.RUNNING, pid=2**22 + 1, host=socket.gethostname(),
        started_at=now, updated_at=now, global_step=3, alarms=[alarm],
    )  # fmt: skip
    write_run_record(training, record)
    bare = tmp_path / "episodes.jsonl"  # a bare file is a run when given, not when found
    shutil.copy(runs_root / "solver" / "trajectories.jsonl", bare)

    catalog = find_runs([runs_root, tmp_path, bare])
    kinds = {key: run.kind for key, run in catalog.runs.items()}
    assert kinds == {
        "solver": "rollout",
        "stub": "rollout",
        "deep~rescored": "rescored",
        "episodes.jsonl": "trajectories",
        "train": "training",
    }
    solver = catalog.runs["solver"].info()
    assert (solver.env, solver.model, solver.episodes) == ("tools", "tools-reference-solver", 8)
    assert (solver.success_rate, solver.status) == (1.0, "finished")
    assert catalog.runs["deep~rescored"].info().episodes == 8
    train = catalog.runs["train"].info()
    assert (train.status, train.alarms, train.success_rate) == ("killed", [alarm], 0.0)
    assert catalog.runs["episodes.jsonl"].info().status is None


def test_a_run_given_twice_gets_two_keys(runs_root: Path) -> None:
    catalog = find_runs([runs_root / "solver", runs_root / "solver"])
    assert list(catalog.runs) == ["solver", "solver-2"]


def test_a_missing_path_or_a_folder_without_runs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'nope'} does not exist")):
        find_runs([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=re.escape(f"no run found in {tmp_path / 'empty'}")):
        find_runs([tmp_path / "empty"])


def test_a_running_rollout_without_a_live_writer_says_killed(
    runs_root: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs_root / "solver", run)
    record = (run / "run.json").read_text().replace('"finished"', '"running"')
    (run / "run.json").write_text(record)
    assert find_runs([run]).runs["run"].info().status == "killed"
