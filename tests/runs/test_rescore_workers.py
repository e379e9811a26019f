"""`rescore` on worker processes: real runs of the real engine rescored on real forked and
spawned workers, against the same rescore in one process, byte for byte."""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs import get_solver
from rk_agent.errors import ConfigError, DataError, EndpointError, RewardInputError, WorkerError
from rk_agent.runs import rescore_workers
from rk_agent.runs.rescore import RESCORE_FILE, RescoreResult, rescore
from rk_agent.runs.run_dir import read_trajectories
from tests.rollouts.runs import play_run
from tests.runs.test_rescore import REWARDS as RESCORE_REWARDS

# `rescore` in a fresh interpreter: the test process runs the engine's tool threads, and
# workers are forked only from a process without other threads (`can_fork`). It sets the
# module attributes in ``patch`` first, then prints the result, or the error raised, pickled.
FRESH = """
import base64, importlib, json, pickle, sys
options = json.loads(sys.argv[1])
for name, value in options.pop("patch").items():
    module, attr = name.rsplit(".", 1)
    setattr(importlib.import_module(module), attr, value)
from rk_agent.runs.rescore import rescore
try:
    print(rescore(**options).model_dump_json())
except Exception as exc:
    print("raised", base64.b64encode(pickle.dumps(exc)).decode())
"""

REWARDS = '''
import multiprocessing
import os
import signal
import zlib

from rk_agent import EvaluateResult


def in_worker():
    return multiprocessing.parent_process() is not None


def by_length(messages, ground_truth):
    """Raises on a third of the tasks; scores the others by the final reply's length."""
    if zlib.crc32(str(ground_truth).encode()) % 3 == 0:
        raise ValueError(f"no answer like {ground_truth}")
    text = messages[-1].text or ""
    holds = float(str(ground_truth) in text)
    return EvaluateResult(score=len(text) / 100, metrics={"holds": holds})


def per_call(messages, tool_calls):
    return 0.1 * sum(record.result.ok for record in tool_calls) + 0.01


def killer(messages, ground_truth, kill_on=()):
    """Kills the worker process scoring a task whose answer is one of ``kill_on``."""
    if in_worker() and str(ground_truth) in kill_on:
        os.kill(os.getpid(), signal.SIGKILL)
    return 1.0


def always_kills(messages):
    if in_worker():
        os.kill(os.getpid(), signal.SIGKILL)
    return 1.0
'''


@pytest.fixture
def rewards(tmp_path: Path) -> Path:
    """A file of these rewards after `test_rescore`'s (``needs_reference`` is one of those)."""
    (tmp_path / "worker_rewards.py").write_text(RESCORE_REWARDS + REWARDS)
    return tmp_path / "worker_rewards.py"


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of the ``tools`` env in groups of 2, some episodes failed before they were scored,
    with a repeated line, a blank line and a torn last line; chunks of one or two lines."""
    solver = get_solver("tools")

    def flaky(messages: list[Any], tools: Any) -> Any:
        if len(messages) <= 2 and zlib.crc32(messages[-1].text.encode()) % 4 == 0:
            raise EndpointError("the model is down")
        return solver(messages, tools)

    run = play_run(tmp_path / "source", flaky, env="tools", n=8, group_size=2)
    file = run / "trajectories.jsonl"
    lines = file.read_bytes().splitlines(keepends=True)
    file.write_bytes(b"".join([*lines[:5], lines[2], b"\n", *lines[5:], lines[0][:60]]))
    monkeypatch.setattr(rescore_workers, "CHUNK_BYTES", 8192)
    return run


def _in_fresh_process(
    source: Path, reward: str, patch: dict[str, Any] | None = None, **options: Any
) -> RescoreResult:
    """`rescore` in a new interpreter, which forks its workers; its chunks are this one's, and
    ``patch`` sets module attributes there (``"module.attr": value``); its error is raised."""
    chunks = {"rk_agent.runs.rescore_workers.CHUNK_BYTES": rescore_workers.CHUNK_BYTES}
    options = {
        "source": str(source), "reward": reward, **options, "output": str(options["output"]),
        "patch": {**chunks, **(patch or {})},
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", FRESH, json.dumps(options)], capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    if last.startswith("raised "):
        raise pickle.loads(base64.b64decode(last.split()[1]))
    return RescoreResult.model_validate_json(last)


def _same_runs(a: RescoreResult, b: RescoreResult) -> None:
    """Two rescores of one source wrote the same run (their folders and times apart)."""
    for name in ("trajectories.jsonl", "summary.json", "provenance.json"):
        assert (Path(a.output) / name).read_bytes() == (Path(b.output) / name).read_bytes()
    times = {"created_at"}
    records = [json.loads((Path(r.output) / RESCORE_FILE).read_text()) for r in (a, b)]
    assert [{k: v for k, v in r.items() if k not in times} for r in records] == 2 * [
        {k: v for k, v in records[0].items() if k not in times}
    ]
    fields: Any = {"output": True, "workers": True, "record": times}
    assert a.model_dump(exclude=fields) == b.model_dump(exclude=fields)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_write_what_one_process_writes_byte_for_byte(
    tmp_path: Path, source: Path, rewards: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    options: dict[str, Any] = {"step_reward": f"{rewards}::per_call", "workers": 2}
    serial = rescore(source, f"{rewards}::by_length", output=tmp_path / "serial", workers=0,
                     step_reward=options["step_reward"])  # fmt: skip
    if method == "fork":  # in a fresh process, which has no other threads: forked
        workers = _in_fresh_process(
            source, f"{rewards}::by_length", output=tmp_path / "w", **options
        )
    else:  # in this one, told it cannot fork: spawned
        monkeypatch.setattr(rescore_workers, "can_fork", lambda: False)
        workers = rescore(source, f"{rewards}::by_length", output=tmp_path / "w", **options)

    assert (serial.workers, workers.workers) == (0, 2)
    _same_runs(serial, workers)
    record = workers.record
    assert record.unscored > 0 and record.invalid > 0  # both kinds travelled between processes
    assert record.episodes == serial.summary.episodes == 16  # the repeat left out, the torn line
    lines = (tmp_path / "w" / "trajectories.jsonl").read_text().splitlines()
    raised = [json.loads(line)["episode"] for line in lines if "no answer like" in line]
    assert len(raised) == record.invalid  # a reward raising in a worker is an invalid score
    assert all(
        not e["is_score_valid"] and "ValueError: no answer like" in e["error"] for e in raised
    )


def test_an_episode_whose_reward_kills_its_worker_is_the_only_one_lost(
    tmp_path: Path, source: Path, rewards: Path
) -> None:
    scored = [t for t in read_trajectories(source) if t.episode is not None]
    kill_on = sorted({str(scored[i].task.ground_truth) for i in (1, len(scored) - 2)})
    options: dict[str, Any] = {"kwargs": {"kill_on": kill_on}}
    serial = rescore(source, f"{rewards}::killer", output=tmp_path / "serial", workers=0, **options)
    workers = _in_fresh_process(
        source, f"{rewards}::killer", output=tmp_path / "workers", workers=2, **options
    )

    def lines(result: RescoreResult) -> list[dict[str, Any]]:
        text = (Path(result.output) / "trajectories.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]

    killed = 0
    for one, many in zip(lines(serial), lines(workers), strict=True):
        if "episode" not in one or str(one["task"]["ground_truth"]) not in kill_on:
            assert many == one
            continue
        killed += 1
        assert many["episode"]["is_score_valid"] is False
        assert many["episode"]["error"] == "the worker process scoring it died (killed by SIGKILL)"
        assert many["turns"] == one["turns"]  # the steps as recorded
        assert many["episode"]["step_outputs"] == one["episode"]["step_outputs"]
    assert killed >= 2 and workers.record.invalid == killed and workers.workers == 2


def test_a_reward_that_kills_every_worker_leaves_every_episode_invalid(
    tmp_path: Path, source: Path, rewards: Path
) -> None:
    # Workers die idle too (the next chunk's send fails), both at once: all are replaced.
    limit = {"rk_agent.runs.rescore_workers.MAX_DEATHS": 1000}
    result = _in_fresh_process(
        source, f"{rewards}::always_kills", limit, output=tmp_path / "out", workers=2
    )
    assert result.record.invalid == result.record.rescored > 0
    died = "the worker process scoring it died (killed by SIGKILL)"
    assert result.summary.reward_errors == {died: result.record.rescored}


IDLE_DEATHS = """
import sys
from pathlib import Path
from rk_agent.runs.rescore_workers import RescoreWorkers
from rk_agent.runs.rescorer import Rescorer, RescoreSpec
rescorer = Rescorer(RescoreSpec("format", {}))
rescorer.choose_success_rule("tools")
workers = RescoreWorkers(rescorer, Path(sys.argv[1]), 2)
for worker in workers._workers:  # both die before they are sent anything
    worker.process.kill()
    worker.process.join()
print(sum(len(chunk) for chunk in workers.results()), workers.deaths)
workers.close()
"""


def test_workers_found_dead_before_a_chunk_is_sent_are_replaced(source: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", IDLE_DEATHS, str(source / "trajectories.jsonl")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["17", "2"]  # every line (the repeat too), two replacements


ORPHANED = """
import os, signal, sys
from pathlib import Path
from rk_agent.runs.rescore_workers import RescoreWorkers
from rk_agent.runs.rescorer import Rescorer, RescoreSpec
rescorer = Rescorer(RescoreSpec("format", {}))
rescorer.choose_success_rule("tools")
workers = RescoreWorkers(rescorer, Path(sys.argv[1]), 2)
print(*(worker.process.pid for worker in workers._workers), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # killed outright: no clean-up runs
"""


def test_workers_exit_when_the_process_that_started_them_is_killed(source: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ORPHANED, str(source / "trajectories.jsonl")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # until each has read the end of its pipe
    assert not any(_alive(pid) for pid in pids), "a worker outlived the rescore"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def test_workers_dying_past_the_limit_stop_the_rescore_and_nothing_is_written(
    tmp_path: Path, source: Path, rewards: Path
) -> None:
    limit = {"rk_agent.runs.rescore_workers.MAX_DEATHS": 2}
    with pytest.raises(WorkerError, match=re.escape(
        "3 rescore worker processes died (the last killed by SIGKILL); the reward may crash the "
        "interpreter or exhaust memory on these episodes. Rescore with workers=0 to see the "
        "crash in this process."
    )):  # fmt: skip
        _in_fresh_process(
            source, f"{rewards}::always_kills", limit, output=tmp_path / "out", workers=2
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source", "worker_rewards.py"]


def test_an_error_in_a_worker_is_the_error_one_process_raises(
    tmp_path: Path, source: Path, rewards: Path
) -> None:
    file = source / "trajectories.jsonl"
    lines = file.read_bytes().splitlines(keepends=True)
    file.write_bytes(b"".join([*lines[:9], b'{"id": "bad"}\n', *lines[9:]]))
    with pytest.raises(DataError) as serial:
        rescore(source, "format", output=tmp_path / "out", workers=0)
    with pytest.raises(DataError) as workers:
        _in_fresh_process(source, "format", output=tmp_path / "out", workers=2)
    assert str(workers.value) == str(serial.value)
    assert (workers.value.path, workers.value.line) == (str(file), 10)
    with pytest.raises(RewardInputError, match=re.escape(
        "reward 'needs_reference' cannot be called with these arguments"
    )):  # fmt: skip
        _in_fresh_process(source, f"{rewards}::needs_reference", output=tmp_path / "out", workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source", "worker_rewards.py"]


def test_workers_start_for_big_runs_only_and_never_with_on_episode(
    tmp_path: Path, source: Path
) -> None:
    size = (source / "trajectories.jsonl").stat().st_size
    threshold = {"rk_agent.runs.rescore.PARALLEL_BYTES": size}
    small = _in_fresh_process(source, "format", output=tmp_path / "small")
    assert small.workers == 0  # under PARALLEL_BYTES: forking would cost more than it saves
    big = _in_fresh_process(source, "format", threshold, output=tmp_path / "big")
    cores = len(os.sched_getaffinity(0))
    assert big.workers == (min(cores, 8) if cores >= 2 else 0)
    _same_runs(small, big)
    seen: list[object] = []
    watched = rescore(source, "format", output=tmp_path / "watched", on_episode=seen.append)
    assert watched.workers == 0 and len(seen) == watched.record.episodes
    with pytest.raises(ConfigError, match=re.escape(
        "on_episode is called with each episode in this process, so it needs workers=0 (or "
        "unset), got workers=2; use on_progress to follow worker processes."
    )):  # fmt: skip
        rescore(source, "format", output=tmp_path / "no", workers=2, on_episode=seen.append)
    with pytest.raises(ConfigError, match=re.escape("workers must be 0 or more, got -1.")):
        rescore(source, "format", output=tmp_path / "no", workers=-1)
