"""`keep_history`: a GRPO run started again in its folder keeps only the steps it resumes after."""

from __future__ import annotations

import json
from pathlib import Path

from rk_agent.runs.alarms import Alarm, AlarmKind
from rk_agent.runs.run_record import RunKind, RunRecord
from rk_agent.trainers.resumed import checkpoint_step, keep_history, kept_alarms


def _episode(step: int, name: str) -> str:
    return json.dumps({"id": name, "metadata": {"train_step": step}}) + "\n"


def test_the_steps_after_the_checkpoint_are_dropped_with_a_note(tmp_path: Path) -> None:
    lines = [_episode(0, "s1-0-0"), _episode(1, "s2-0-0"), _episode(2, "s3-0-0"),
             _episode(2, "s3-0-1"), "not json, kept\n"]  # fmt: skip
    (tmp_path / "trajectories.jsonl").write_text("".join(lines) + '{"torn')
    (tmp_path / "watch.jsonl").write_text(
        "".join(json.dumps({"step": s}) + "\n" for s in (1, 2, 3))
    )
    kept = keep_history(tmp_path, 2)
    assert (tmp_path / "trajectories.jsonl").read_text() == "".join(lines[:2] + lines[4:])
    assert (tmp_path / "watch.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'
    assert (kept.dropped_episodes, kept.dropped_steps) == (2, [3])
    assert kept.note() == (
        "dropped 2 episode(s) of step 3 from trajectories.jsonl: an earlier run played them but "
        "no checkpoint kept their training, and this run plays them again (from step 3)."
    )


def test_a_run_starting_afresh_keeps_nothing_and_a_clean_folder_is_left_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "trajectories.jsonl").write_text(_episode(0, "s1-0-0") + _episode(1, "s2-0-0"))
    kept = keep_history(tmp_path, 0)
    assert (tmp_path / "trajectories.jsonl").read_text() == ""
    assert kept.note() is not None and kept.note().endswith("(from the start).")
    assert keep_history(tmp_path / "none", 0).note() is None


def test_the_alarms_of_the_steps_kept_are_kept(tmp_path: Path) -> None:
    alarms = [Alarm(kind=AlarmKind.TRUNCATION, step=1, message="step 1: cut"),
              Alarm(kind=AlarmKind.NAN_REWARD, step=3, message="step 3: NaN")]  # fmt: skip
    previous = RunRecord.start(RunKind.TRAINING, alarms=alarms)
    assert kept_alarms(previous, 2) == alarms[:1]
    assert kept_alarms(previous, 3) == alarms and kept_alarms(None, 3) == []


def test_a_checkpoints_step_is_its_trainer_state_s_else_its_name(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    assert checkpoint_step(checkpoint) == 4 and checkpoint_step(None) == 0
    (checkpoint / "trainer_state.json").write_text('{"global_step": 3}')
    assert checkpoint_step(checkpoint) == 3
