"""Run directories and trajectory files: one writer, one reader, status, summaries, the lock."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, DataError, RunLockedError
from rk_agent.policies.policy import Usage
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import (
    LOCK_FILE,
    SUMMARY_FILE,
    TRAJECTORIES_FILE,
    RunDir,
    RunStatus,
    append_trajectories,
    read_trajectories,
    trajectory_line,
)
from rk_agent.runs.run_record import RUN_RECORD_FILE, RunKind
from rk_agent.runs.summary import summarize
from rk_agent.runs.trajectory import Failure, ToolCallOutcome, Trajectory, Turn
from rk_agent.types import (
    EvaluateResult,
    FailureKind,
    Message,
    MetricResult,
    StopReason,
)

HINT = "Each line must be one episode as `rk-agent rollout` writes it (a Trajectory)"


def episode(i: int, sample: int = 0, **fields: object) -> Trajectory:
    values: dict[str, object] = {
        "id": f"{i}-{sample}", "task_index": i, "sample": sample, "seed": i, "env": "tools",
        "model": "m", "stop_reason": StopReason.ANSWERED,
        "task": Task(id=f"t{i}", messages=[Message(role="user", content=f"{i}+{i}?")]),
        "turns": [Turn(index=0, assistant=Message(role="assistant", content=str(2 * i)))],
    }  # fmt: skip
    values.update(fields)
    return Trajectory.model_validate(values)


def full_episode() -> Trajectory:
    """Every optional field set, ``None`` where ``None`` is allowed, nulls inside metadata."""
    return episode(
        7,
        seed=None,
        turns=[
            Turn(
                index=0,
                assistant=Message(role="assistant", content=None, tool_calls=[
                    {"id": "c1", "type": "function",
                     "function": {"name": "add", "arguments": '{"a": 1}'}}]),
                environment=[Message(role="tool", content="2", tool_call_id="c1", name="add")],
                tool_calls=[ToolCallOutcome(name="add", ok=True, latency_s=0.5)],
                reward=0.25, metrics={"fmt": MetricResult(score=0.25, reason="ok")},
                parse_error=None, prompt_token_ids=[1, 2], token_ids=[3], logprobs=[-0.5],
                usage=Usage(prompt_tokens=2, completion_tokens=1), finish_reason="tool_calls",
            ),
        ],
        episode=EvaluateResult(score=1.0, reason="right", metrics={}),
        success=True,
        failure=Failure(kind=FailureKind.TIMEOUT, message="slow", where="engine"),
        metadata={"note": None, "nested": {"x": None}, "step": 3},
    )  # fmt: skip


def config() -> RolloutConfig:
    return RolloutConfig(env="tools", n=3, group_size=1)


# ---------------------------------------------------------------------------- one writer


def test_a_trajectory_round_trips_through_its_line(tmp_path: Path) -> None:
    original = full_episode()
    line = trajectory_line(original)
    assert "\n" not in line
    assert '"parse_error"' not in line and '"seed"' not in line  # null fields are left out
    assert '"note":null' in line  # values inside free-form metadata are kept as they are
    file = tmp_path / "t.jsonl"
    append_trajectories(file, [original, episode(1)])
    assert read_trajectories(file) == [original, episode(1)]


def test_the_run_dir_and_the_trainer_log_write_the_same_lines(tmp_path: Path) -> None:
    trajectory = full_episode()
    with RunDir.create(tmp_path / "run", config()) as run:
        run.append(trajectory)
        run.append_dropped(7, "7-0: timeout: slow", [trajectory])
    append_trajectories(tmp_path / "log.jsonl", [trajectory])
    in_run = (tmp_path / "run" / TRAJECTORIES_FILE).read_text()
    assert in_run == (tmp_path / "log.jsonl").read_text() == trajectory_line(trajectory) + "\n"
    dropped = json.loads((tmp_path / "run" / "dropped.jsonl").read_text())
    assert dropped["trajectories"] == [json.loads(trajectory_line(trajectory))]


# ---------------------------------------------------------------------------- one reader


def test_a_torn_last_line_is_skipped_and_cut_off_before_the_next_append(tmp_path: Path) -> None:
    file = tmp_path / "t.jsonl"
    append_trajectories(file, [episode(0), episode(1)])
    torn = trajectory_line(episode(2))[:40]
    with file.open("a") as handle:
        handle.write(torn)  # a crash mid-write
    assert [t.id for t in read_trajectories(file)] == ["0-0", "1-0"]
    append_trajectories(file, [episode(3)])  # e.g. training resumed after a kill
    assert [t.id for t in read_trajectories(file)] == ["0-0", "1-0", "3-0"]
    assert torn not in file.read_text()


def test_a_whole_last_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    file = tmp_path / "t.jsonl"
    file.write_text(trajectory_line(episode(0)) + "\n" + trajectory_line(episode(1)))
    assert [t.id for t in read_trajectories(file)] == ["0-0", "1-0"]
    append_trajectories(file, [episode(2)])
    assert [t.id for t in read_trajectories(file)] == ["0-0", "1-0", "2-0"]
    assert file.read_text().count("\n") == 3


def test_repair_cuts_only_a_torn_line(tmp_path: Path) -> None:
    with RunDir.create(tmp_path / "run", config()) as run:
        run.append(episode(0))
        assert run.repair() == 0
        with (run.path / TRAJECTORIES_FILE).open("a") as handle:
            handle.write('{"id": "1-0", "task_in')
        assert run.repair() == len('{"id": "1-0", "task_in')
        assert [t.id for t in run.read_trajectories()] == ["0-0"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("not json", "invalid JSON (Expecting value at column 1): 'not json'"),
        ("[1, 2]", "expected a JSON object per line, got list"),
        ('{"id": "x"}', "not a trajectory: task_index: Field required;"),
    ],
)
def test_an_invalid_line_names_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    file = tmp_path / "t.jsonl"
    good = trajectory_line(episode(0))
    file.write_text(f"{good}\n\n{bad}\n{good}\n")
    with pytest.raises(DataError, match=re.escape(f"{file}:3: {message}")) as error:
        read_trajectories(file)
    assert (error.value.path, error.value.line) == (str(file), 3)


def test_a_whole_last_line_that_is_not_a_trajectory_is_an_error(tmp_path: Path) -> None:
    file = tmp_path / "t.jsonl"
    file.write_text(trajectory_line(episode(0)) + '\n{"id": "x"}')  # JSON, so not torn
    with pytest.raises(DataError, match=re.escape(f"{file}:2: not a trajectory: ")) as error:
        read_trajectories(file)
    assert HINT in str(error.value)


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    file = tmp_path / "t.jsonl"
    file.write_bytes(trajectory_line(episode(0)).encode() + b"\n\xff\xfe\n")
    with pytest.raises(DataError, match=re.escape(f"{file}:2: not UTF-8 text (invalid start")):
        read_trajectories(file)


def test_a_missing_source_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist: expected a run directory made by"):
        read_trajectories(tmp_path / "nope.jsonl")
    with pytest.raises(ConfigError, match=f"holds no {TRAJECTORIES_FILE}: expected a run"):
        read_trajectories(tmp_path)


def test_an_episode_repeated_in_a_run_counts_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with RunDir.create(tmp_path / "run", config()) as run:
        first, again = episode(0, wall_time_s=1.0), episode(0, wall_time_s=2.0)
        for trajectory in (first, episode(1), again):
            run.append(trajectory)
    with caplog.at_level(logging.WARNING):
        assert run.read_trajectories() == [first, episode(1)]
        assert read_trajectories(tmp_path / "run" / TRAJECTORIES_FILE) == [first, episode(1)]
    assert "1 episode(s) appear more than once" in caplog.text
    assert summarize(run.read_trajectories()).episodes == 2
    # A training log repeats ids from step to step: outside a run directory all are kept.
    log = tmp_path / "log.jsonl"
    append_trajectories(log, [first, again])
    assert read_trajectories(log) == [first, again]


# ---------------------------------------------------------------------------- status


def record(run: RunDir) -> dict[str, object]:
    data: dict[str, object] = json.loads((run.path / RUN_RECORD_FILE).read_text())
    return data


def test_status_goes_from_running_to_failed_with_the_error(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", config())
    assert (record(run)["kind"], record(run)["status"]) == ("rollout", "running")
    assert "error" not in record(run) and record(run)["seed"] == 0
    assert "global_step" not in record(run) and "alarms" not in record(run)  # training's
    run.finish(RunStatus.FAILED, "RuntimeError: boom")
    assert (record(run)["status"], record(run)["error"]) == ("failed", "RuntimeError: boom")
    started = record(run)["started_at"]
    run.close()
    with RunDir.resume(tmp_path / "run") as again:
        again.mark_running()
        assert record(again)["status"] == "running" and "error" not in record(again)
        assert record(again)["started_at"] == started
        again.finish("finished")
    read = RunDir.open(tmp_path / "run").read_record()
    assert read is not None and read.status is RunStatus.FINISHED
    assert read.kind is RunKind.ROLLOUT and read.packages["pydantic"]


def test_a_hand_edited_run_json_still_reads_and_keeps_its_keys(tmp_path: Path) -> None:
    RunDir.create(tmp_path / "run", config()).close()
    edited = {
        "kind": "rollout", "started_at": "2025-01-01T12:00:00Z", "python": "3.11.7",
        "packages": {"rk-agent": "0.1.0"}, "seed": 0, "status": "Done (by hand)",
        "updated_at": "2025-01-01T12:05:00Z", "host_note": "kept",
    }  # fmt: skip
    (tmp_path / "run" / RUN_RECORD_FILE).write_text(json.dumps(edited))
    run = RunDir.open(tmp_path / "run")
    read = run.read_record()
    assert read is not None and read.status is None  # a word that is not a status
    assert read.started_at.year == 2025
    (tmp_path / "run" / RUN_RECORD_FILE).write_text(json.dumps({**edited, "status": "interrupted"}))
    with RunDir.resume(tmp_path / "run") as again:
        again.finish(RunStatus.FINISHED)
    rewritten = record(run)
    assert rewritten["status"] == "finished" and rewritten["host_note"] == "kept"
    assert rewritten["started_at"] == "2025-01-01T12:00:00Z"
    assert rewritten["packages"] == {"rk-agent": "0.1.0"}  # what the run started with


# ---------------------------------------------------------------------------- summaries


def test_the_summary_is_typed_both_ways(tmp_path: Path) -> None:
    summary = summarize([episode(0), episode(1)])
    with RunDir.create(tmp_path / "run", config()) as run:
        assert run.read_summary() is None
        run.write_summary(summary)
        assert run.read_summary() == summary


def test_an_older_summary_without_newer_fields_loads(tmp_path: Path) -> None:
    with RunDir.create(tmp_path / "run", config()) as run:
        data = json.loads(summarize([episode(0)]).model_dump_json())
        del data["reward_errors"]  # added after the first release
        (run.path / SUMMARY_FILE).write_text(json.dumps(data))
        read = run.read_summary()
        assert read is not None and read.episodes == 1 and read.reward_errors == {}
        (run.path / SUMMARY_FILE).write_text('{"episodes": "many"}')
        with pytest.raises(DataError, match=r"summary\.json: not a run summary: episodes: "):
            run.read_summary()


# ---------------------------------------------------------------------------- the lock


def test_only_the_writer_that_holds_the_lock_writes(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", config())
    with pytest.raises(RunLockedError, match="is being written by this process itself"):
        RunDir.resume(tmp_path / "run")
    with pytest.raises(RunLockedError, match="is being written by this process itself"):
        RunDir.create(tmp_path / "run", config())
    reader = RunDir.open(tmp_path / "run")  # readers take no lock
    with pytest.raises(ConfigError, match="is open for reading only"):
        reader.append(episode(0))
    run.close()
    with pytest.raises(ConfigError, match="is open for reading only"):
        run.append(episode(0))
    assert (tmp_path / "run" / LOCK_FILE).read_text() == ""  # released: the record is gone
    with pytest.raises(ConfigError, match=r"already holds a run\. Finish it with `--resume"):
        RunDir.create(tmp_path / "run", config())
    with RunDir.resume(tmp_path / "run") as again:
        again.append(episode(0))
        holder = again.holder()
        assert holder is not None and holder.is_alive()
    assert [t.id for t in read_trajectories(tmp_path / "run")] == ["0-0"]


def test_the_saved_config_names_its_files_wherever_a_resume_runs_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative paths were saved as typed: ``--resume`` from another folder read other files."""
    given = tmp_path / "project"
    (given / "data").mkdir(parents=True)
    (given / "data" / "tasks.jsonl").write_text('{"id": "t0", "messages": []}\n')
    (given / "my_rewards.py").write_text("")
    monkeypatch.chdir(given)
    config = RolloutConfig(
        env="tools", tasks="data/tasks.jsonl", rewards=["my_rewards.py::exact", "math"],
        mcp="missing.json",
    )  # fmt: skip
    with RunDir.create(tmp_path / "run", config):
        pass
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    saved = RunDir.open(tmp_path / "run").config
    assert saved.env.tasks == str(given / "data" / "tasks.jsonl")
    assert saved.env.rewards == [f"{given / 'my_rewards.py'}::exact", "math"]
    assert saved.env.name == "tools"  # a name, not a path
    assert saved.env.mcp == "missing.json"  # no such file where it was given: left as typed


def test_a_runs_relative_paths_are_never_read_from_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file shipped inside a run folder is never picked up: its paths stay as written."""
    run = tmp_path / "downloaded"
    run.mkdir()
    for name in ("evil.py", "tasks.jsonl", "servers.json"):
        (run / name).write_text("")
    (run / "config.yaml").write_text(
        "env: evil.py::Env\nrewards: [evil.py::r]\ntasks: tasks.jsonl\nmcp: servers.json\n"
    )
    monkeypatch.chdir(tmp_path)
    opened = RunDir.open(run)
    assert opened.config.env.name == "evil.py::Env"
    assert opened.config.env.rewards == ["evil.py::r"]
    assert (opened.config.env.tasks, opened.config.env.mcp) == ("tasks.jsonl", "servers.json")
    assert not opened.signed


def test_a_run_rk_agent_writes_is_signed_until_its_config_is_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "cache"))
    with RunDir.create(tmp_path / "run", config()) as run:
        assert run.signed
    assert (tmp_path / "run" / "config.yaml.hmac").is_file()
    assert RunDir.open(tmp_path / "run").signed
    saved = tmp_path / "run" / "config.yaml"
    saved.write_text(saved.read_text().replace("n: 3", "n: 4"))
    assert not RunDir.open(tmp_path / "run").signed
    with RunDir.create(tmp_path / "unsigned", config(), signed=False):
        pass
    assert not (tmp_path / "unsigned" / "config.yaml.hmac").exists()
    assert not RunDir.open(tmp_path / "unsigned").signed
