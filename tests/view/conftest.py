"""Runs made by the real engine, training runs by the trainer's writers (`tests.view.training`),
and the viewer serving them on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rk_agent.runs.run_dir import read_trajectories
from rk_agent.runs.trajectory import Trajectory
from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer
from rk_agent.types import MetricResult
from tests.view.training import TrainingRun

MARKUP = (
    '<img src=x onerror="window.__rk_xss = 1"> <script>window.__rk_xss = 2</script> '
    "<b>bold?</b>\nAnswer: 7"
)
"""What the stub model answers: markup and script that must show as text and never run."""


def _rollout(output: Path, *flags: str) -> None:
    command = [sys.executable, "-m", "rk_agent", "rollout", "--env", "tools", "--n", "4"]
    subprocess.run([*command, *flags, "--output", str(output)], check=True, capture_output=True)


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two runs of the ``tools`` env on the same 4 tasks: ``solver`` (the reference
    solver, groups of 2: every episode solved) and ``stub`` (a stub model that calls a tool
    with placeholder arguments, then answers with markup: every episode failed)."""
    root = tmp_path_factory.mktemp("runs")
    _rollout(root / "solver", "--provider", "solver", "--group-size", "2")
    with StubServer(call_first_tool_then_answer(MARKUP)) as server:
        _rollout(root / "stub", "--base-url", server.base_url, "--model", "stub-model")
    return root


MARKED = '<img src=x onerror="window.__rk_xss = 3">'
"""A reward component's and a task's name that must show as text, in charts and alarms too."""


def by_task(run: Path) -> dict[str, list[Trajectory]]:
    """A run's episodes by task id, in the order of its tasks."""
    found: dict[str, list[Trajectory]] = {}
    for episode in sorted(read_trajectories(run), key=lambda t: (t.task_index, t.sample)):
        found.setdefault(episode.task.id, []).append(episode)
    return found


def mixed_steps(runs_root: Path) -> list[list[list[Trajectory]]]:
    """Four steps of groups of two on the 4 tasks: a solved and a failed episode each in step 1,
    in two groups of step 2; two solved in the others and in step 3; two failed in step 4. From
    step 2 on half the groups have zero spread or more, and one answer: both alarms in step 4."""
    solved, failed = by_task(runs_root / "solver"), by_task(runs_root / "stub")
    tasks = list(solved)

    def group(task: str, kind: str) -> list[Trajectory]:
        one, other = solved[task][0], failed[task][0]
        return {"mixed": [one, other], "solved": solved[task][:2], "failed": [other, other]}[kind]

    plans = [
        ["mixed"] * 4,
        ["solved", "solved", "mixed", "mixed"],
        ["solved"] * 4,
        ["failed"] * 4,
    ]
    return [[group(task, kind) for task, kind in zip(tasks, plan, strict=True)] for plan in plans]


def marked(episode: Trajectory) -> Trajectory:
    """The episode with a task id and a dominant reward component named with markup."""
    assert episode.episode is not None
    result = episode.episode.model_copy(
        update={
            "weights": {"answer": 1.0, MARKED: 0.5},
            "metrics": {**episode.episode.metrics, MARKED: MetricResult(score=10.0)},
        }
    )
    task = episode.task.model_copy(update={"id": MARKED})
    return episode.model_copy(update={"episode": result, "task": task})


@pytest.fixture(scope="session")
def training_root(runs_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two finished training runs: ``train`` (`mixed_steps`: the zero-spread and
    answer-collapse alarms at step 4) and ``marked`` (one step whose episodes' reward has a
    component named with markup that makes up most of it: the dominant-component alarm)."""
    root = tmp_path_factory.mktemp("training")
    run = TrainingRun(root / "train")
    for groups in mixed_steps(runs_root):
        run.step(groups)
    run.finish()
    markup = TrainingRun(root / "marked")
    markup.step([[marked(e) for e in group] for group in mixed_steps(runs_root)[0]])
    markup.finish()
    return root


@pytest.fixture(scope="session")
def drift_root(tmp_path_factory: pytest.TempPathFactory, embedded_tok: Any) -> Path:
    """A folder with ``drift``: 3 episodes of the tools env whose token ids the embedded
    tokenizer recorded as `HFPolicy` does, its tool calls written as compact JSON, which the
    chat template re-renders with spaces: turns 0 and 1 (the calls) drift, the answers do not
    (`tests.runs.test_token_drift`)."""
    from tests.runs.test_token_drift import COMPACT, play

    folder = tmp_path_factory.mktemp("embedded-tokenizer")
    embedded_tok.save_pretrained(folder)
    root = tmp_path_factory.mktemp("drift")
    # In a thread of its own: the browser tests' Playwright holds this thread's event loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(play, root / "drift", embedded_tok, folder, COMPACT).result()
    return root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(paths: list[Path], index_wait_s: float = 1.0) -> Iterator[str]:
    """The viewer over ``paths``, served by uvicorn on loopback in a thread: its base URL."""
    import uvicorn

    from rk_agent.view.app import make_app
    from rk_agent.view.catalog import find_runs

    port = free_port()
    config = uvicorn.Config(
        make_app(find_runs(paths), index_wait_s=index_wait_s),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def viewer(runs_root: Path) -> Iterator[str]:
    """The viewer over ``runs_root``: its base URL."""
    with serving([runs_root]) as url:
        yield url
