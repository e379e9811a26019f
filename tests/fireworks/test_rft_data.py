"""RFT rows from a run directory, a trajectories file or a tasks file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, DataError, UntrustedRunError
from rk_agent.fireworks.rft_data import rows_from_source, task_row
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.trajectory import Trajectory, Turn
from rk_agent.types import Message, StopReason

EVIL = """\
from pathlib import Path

Path({marker!r}).write_text("imported")

from rk_agent.envs.tools_env import ToolsEnv


class Env(ToolsEnv):
    pass
"""

TOOL_NAMES = ["calculator", "convert_units", "days_between", "add_days", "weekday", "lookup"]


def task(i: int) -> Task:
    return Task(
        id=f"t{i}",
        messages=[Message(role="system", content="Use tools."),
                  Message(role="user", content=f"What is {i} + {i}?")],
        ground_truth=str(2 * i),
        metadata={"kind": "sum"},
    )  # fmt: skip


def make_run(path: Path, tasks: int = 3, group_size: int = 2) -> RunDir:
    run = RunDir.create(path, RolloutConfig(env="tools", n=tasks, group_size=group_size))
    for i in range(tasks):
        for s in range(group_size):
            run.append(Trajectory(
                id=f"{i}-{s}", task_index=i, sample=s, seed=i, task=task(i), env="tools",
                model="m", stop_reason=StopReason.ANSWERED,
                turns=[Turn(index=0, assistant=Message(role="assistant", content="x"))],
            ))  # fmt: skip
    return run


def test_a_run_gives_one_row_per_task_with_the_env_tools(tmp_path: Path) -> None:
    make_run(tmp_path / "run")
    rows = rows_from_source(tmp_path / "run")
    assert (rows.kind, rows.records, rows.env, len(rows.rows)) == ("run", 6, "tools", 3)
    first = rows.rows[0]
    assert first["messages"] == [
        {"role": "system", "content": "Use tools."}, {"role": "user", "content": "What is 0 + 0?"},
    ]  # fmt: skip
    assert first["ground_truth"] == "0" and first["metadata"] == {"kind": "sum"}
    assert [t["function"]["name"] for t in first["tools"]] == TOOL_NAMES
    assert list(first) == ["messages", "ground_truth", "tools", "metadata"]


def test_a_trajectories_file_uses_the_config_next_to_it(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", tasks=2)
    rows = rows_from_source(run.path / "trajectories.jsonl")
    assert (rows.kind, rows.records, len(rows.rows), rows.env) == ("trajectories", 4, 2, "tools")
    copied = tmp_path / "alone.jsonl"
    copied.write_text((run.path / "trajectories.jsonl").read_text())
    assert rows_from_source(copied).env == "tools"  # from the trajectories themselves
    bare = rows_from_source(copied, tools=False)
    assert bare.tools == [] and "tools" not in bare.rows[0]


def test_a_run_from_elsewhere_naming_code_is_built_only_when_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "cache"))
    marker, evil = tmp_path / "IMPORTED", tmp_path / "evil.py"
    evil.write_text(EVIL.format(marker=str(marker)))
    mine = RunDir.create(tmp_path / "mine", RolloutConfig(env=f"{evil}::Env", n=2))
    mine.append(make_run(tmp_path / "tools", tasks=1).read_trajectories()[0])
    mine.close()
    theirs = tmp_path / "theirs"
    shutil.copytree(mine.path, theirs)  # a copy is not the run that was signed
    wants = f"reading its environment's tools would import {evil} (environment {evil}::Env)."
    for source in (theirs, theirs / "trajectories.jsonl"):
        with pytest.raises(UntrustedRunError, match=re.escape(wants)):
            rows_from_source(source)
    assert not marker.exists()
    assert rows_from_source(theirs, env="tools").env == "tools"  # named by the user
    assert rows_from_source(theirs, tools=False).tools == []
    assert not marker.exists()
    trusted = rows_from_source(theirs, trust_run=True)
    assert marker.exists() and [t["function"]["name"] for t in trusted.tools] == TOOL_NAMES
    assert rows_from_source(mine.path).env == f"{evil}::Env"  # this user's own run


def test_a_tasks_file(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    path.write_text(
        json.dumps({"prompt": "2+2?", "ground_truth": "4"}) + "\n"
        + json.dumps({"id": "b", "messages": [{"role": "user", "content": "hi"}],
                      "tools": [tool]}) + "\n"
    )  # fmt: skip
    rows = rows_from_source(path)
    assert rows.rows == [
        {"messages": [{"role": "user", "content": "2+2?"}], "ground_truth": "4"},
        {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]},
    ]
    with_env = rows_from_source(path, env="math")
    assert with_env.env == "math" and with_env.rows[1]["tools"] == [tool]  # its own tools win


def test_answers_are_not_part_of_the_prompt() -> None:
    chat = Task(id="x", messages=[Message(role="user", content="q"),
                                  Message(role="assistant", content="a")])  # fmt: skip
    assert task_row(chat) == {"messages": [{"role": "user", "content": "q"}]}


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("does not exist. Give a run directory")):
        rows_from_source(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty"
    RunDir.create(empty, RolloutConfig(env="tools"))
    with pytest.raises(DataError, match=re.escape("no tasks to train on")):
        rows_from_source(empty)
    broken = tmp_path / "t.jsonl"
    broken.write_text('{"task": {}, "stop_reason": "answered"}\n')
    with pytest.raises(DataError, match=re.escape(f"{broken}:1: not a trajectory")):
        rows_from_source(broken)
    with pytest.raises(ConfigError, match="unknown environment 'nope'"):
        rows_from_source(make_run(tmp_path / "r").path, env="nope")
