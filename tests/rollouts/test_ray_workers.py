"""Rollouts on Ray workers, with real Ray on this machine.

The API tests share one local Ray (started once for the module, stopped after it); the CLI
tests run ``rk-agent rollout --workers 2`` as subprocesses that start and stop their own Ray,
or join one started with ``ray start --head`` on loopback. Episodes are played against the
scripted policy or the OpenAI-compatible stub server, so every run is deterministic.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray is in the dev group: `uv sync` installs it")

import psutil

from rk_agent.errors import ConfigError, EndpointError
from rk_agent.gc_tuning import YOUNG_THRESHOLD
from rk_agent.policies.function_policy import tool_call
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.rollouts.ray_workers import ray_session, run_rollouts_on_workers
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.workers import RayOptions, WorkerFailureKind
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = [tool_call("calculator", {"expression": "1+1"})] * 2 + ["Answer: 42"]
ENV = {**os.environ, "COLUMNS": "200", "RAY_DISABLE_USAGE_STATS": "1"}
# Whether `ray start` turns token authentication on depends on a token in ~/.ray; a driver that
# joins by address never does (Ray's rule). The test cluster, on this machine only, has none.
CLUSTER_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """One local Ray for the module's API tests (the runs join it and leave it running)."""
    with ray_session(RayOptions(), workers=2) as ray:
        yield ray


def config(**options: Any) -> RolloutConfig:
    defaults: dict[str, Any] = {
        "env": "tools", "n": 12, "group_size": 2, "concurrency": 8, "max_turns": 3,
        "sampling": {"temperature": 0.0, "max_tokens": 64, "seed": 7},
    }  # fmt: skip
    return RolloutConfig(**{**defaults, **options})


def fingerprint(trajectory: Trajectory) -> tuple[Any, ...]:
    """What the run's seeds decide: the task, its seed, and how the episode went."""
    return (
        trajectory.task_index, trajectory.sample, trajectory.seed, trajectory.task.id,
        trajectory.task.ground_truth, trajectory.total_reward, len(trajectory.turns),
    )  # fmt: skip


def written_ids(run_dir: Path) -> Counter[str]:
    """Episode ids as the file holds them, counting repeats (the reader would hide them)."""
    text = (run_dir / "trajectories.jsonl").read_text()
    return Counter(json.loads(line)["id"] for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------------------------------- API


class WarmPolicy(ScriptedPolicy):
    warmed = 0

    async def warm_up(self) -> None:
        self.warmed += 1


def test_a_worker_warms_up_before_its_first_episode() -> None:
    """The worker class itself, in this process: warm_up builds one environment and warms
    the policy; the first episode then plays in that environment."""
    from rk_agent.rollouts.ray_workers import RolloutWorker
    from rk_agent.rollouts.slots import plan_slots

    built: list[Any] = []
    factory = config().env.factory()

    def make_env() -> Any:
        built.append(factory())
        return built[-1]

    policy = WarmPolicy(SCRIPT)
    worker = RolloutWorker(0, config(), policy, make_env, "tools", concurrency=4)
    slot = plan_slots(config(), dataset_size=factory.dataset_size)[0]

    thresholds: list[int] = []

    async def main() -> list[Any]:
        assert await worker.warm_up() == os.getpid()
        assert (len(built), policy.warmed) == (1, 1)
        batches = []
        async for batch in worker.play([slot]):
            thresholds.append(gc.get_threshold()[0])
            batches.append(batch)
        return batches

    saved = gc.get_threshold()
    [[trajectory]] = asyncio.run(main())
    assert trajectory.id == slot.id and trajectory.failure is None
    assert len(built) == 1  # played in the environment built while warming up
    assert thresholds == [YOUNG_THRESHOLD]  # a worker's process is its own: tuned (gc_tuning)
    assert gc.get_threshold() == saved and gc.get_freeze_count() == 0
    factory.close()


def test_the_driver_leaves_its_callers_collector_alone(local_ray: Any) -> None:
    """The driver runs in the caller's process: its collector is the caller's (only an entry
    point, ``rk-agent rollout``, tunes it: `rk_agent.gc_tuning`)."""
    cfg = config(workers=2)
    seen: list[int] = []
    gc.set_threshold(700, 10, 10)
    saved, frozen = gc.get_threshold(), gc.get_freeze_count()
    played = run_rollouts_on_workers(
        cfg, policy=ScriptedPolicy(SCRIPT), make_env=cfg.env.factory(),
        on_episode=lambda _t: seen.append(gc.get_threshold()[0]),
    )  # fmt: skip
    result = asyncio.run(played)
    assert len(result.trajectories) == 24
    assert seen == [saved[0]] * 24
    assert gc.get_threshold() == saved and gc.get_freeze_count() == frozen


def test_one_and_two_workers_play_the_same_tasks_and_seeds_as_one_process(local_ray: Any) -> None:
    cfg = config()

    async def play(workers: int | None) -> dict[str, tuple[Any, ...]]:
        result = await run_rollouts(  # with workers set it hands the run to Ray
            cfg.model_copy(update={"workers": workers}),
            policy=ScriptedPolicy(SCRIPT),
            make_env=cfg.env.factory(),
        )
        return {t.id: fingerprint(t) for t in result.trajectories}

    in_process = asyncio.run(play(None))
    one, two = asyncio.run(play(1)), asyncio.run(play(2))
    assert len(in_process) == 24
    assert one == in_process
    assert two == in_process


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(
    local_ray: Any, tmp_path: Path
) -> None:
    cfg = config(n=80, group_size=1, workers=2)
    seen: list[str] = []
    killed: list[int] = []

    def on_episode(trajectory: Trajectory) -> None:
        seen.append(trajectory.id)
        if len(seen) == 10:  # mid-run: kill one worker the way the OS would
            pid = worker_pids()[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    with RunDir.create(tmp_path / "run", cfg) as run_dir:
        result = asyncio.run(
            run_rollouts_on_workers(
                cfg, policy=ScriptedPolicy(SCRIPT, latency_s=0.05), make_env=cfg.env.factory(),
                run_dir=run_dir, on_episode=on_episode,
            )
        )  # fmt: skip
    assert killed, "no worker process was found to kill"
    ids = written_ids(tmp_path / "run")
    assert ids == Counter({f"{i}-0": 1 for i in range(80)})
    assert sorted(seen) == sorted(ids)
    assert [t.failure for t in result.trajectories if t.failure is not None] == []
    (failure,) = result.worker_failures
    assert failure.kind is WorkerFailureKind.DIED
    assert failure.replayed, "the killed worker had episodes in flight"
    assert set(failure.replayed) <= set(ids)
    logged = (tmp_path / "run" / "worker_failures.jsonl").read_text().splitlines()
    assert [json.loads(line)["replayed"] for line in logged] == [failure.replayed]
    assert RunDir.open(tmp_path / "run").worker_failure_kinds() == ["died"]  # in summary.json


class FailSomeSamples(ScriptedPolicy):
    """The script, except that some samples (by prompt and sampling seed) get a model error."""

    async def generate(self, messages: list[Any], tools: Any, sampling: Any) -> Any:
        task = next(m.content for m in messages if m.role == "user")
        if (zlib.crc32(task.encode()) + (sampling.seed or 0)) % 5 == 0:
            raise EndpointError("the model is down for this sample", retryable=False)
        return await super().generate(messages, tools, sampling)


def test_drop_group_keeps_groups_whole_across_workers(local_ray: Any) -> None:
    cfg = config(n=12, group_size=3, failure_policy={"action": "drop_group"})

    async def play(workers: int | None) -> tuple[list[int], list[str]]:
        run = run_rollouts if workers is None else run_rollouts_on_workers
        result = await run(
            cfg.model_copy(update={"workers": workers}),
            policy=FailSomeSamples(SCRIPT),
            make_env=cfg.env.factory(),
        )
        return sorted(result.dropped_groups), sorted(t.id for t in result.trajectories)

    dropped, kept = asyncio.run(play(2))
    assert (dropped, kept) == asyncio.run(play(None))
    assert 0 < len(dropped) < 12, "the test needs some groups kept and some dropped"
    groups = Counter(int(i.split("-")[0]) for i in kept)
    assert set(groups.values()) == {3}
    assert not set(groups) & set(dropped)


def test_a_policy_that_cannot_be_copied_is_refused_before_any_worker_starts(
    local_ray: Any,
) -> None:
    class Unpicklable(ScriptedPolicy):
        def __reduce__(self) -> Any:
            raise TypeError("cannot pickle this policy")

    cfg = config(workers=2)
    with pytest.raises(ConfigError, match="cannot be sent to the workers"):
        asyncio.run(
            run_rollouts_on_workers(cfg, policy=Unpicklable(SCRIPT), make_env=cfg.env.factory())
        )


def test_a_cluster_too_small_for_the_workers_is_refused(local_ray: Any) -> None:
    cfg = config(workers=2, ray={"resources": {"sandbox": 1}})
    with pytest.raises(ConfigError, match=r"sandbox: 2 x 1 = 2 needed, 0 there"):
        asyncio.run(
            run_rollouts_on_workers(cfg, policy=ScriptedPolicy(SCRIPT), make_env=cfg.env.factory())
        )


def test_a_fork_plays_and_resumes_on_workers(local_ray: Any, tmp_path: Path) -> None:
    from rk_agent.envs.registry import get_solver
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.run_dir import read_trajectories
    from tests.rollouts.runs import play_run

    source = play_run(tmp_path / "source", get_solver("tools"), env="tools", n=2)
    recorded = {t.id: t for t in read_trajectories(source)}["1-0"]
    fork = tmp_path / "fork"
    cfg = RolloutConfig.model_validate(
        {"fork": f"{source}::1-0@2", "group_size": 8, "concurrency": 4, "workers": 2,
         "output": str(fork)}
    )  # fmt: skip
    with prepare_run(cfg, policy=ScriptedPolicy(["Answer: -1"])) as run:
        asyncio.run(run.play())
    assert written_ids(fork) == Counter({f"1-{i}": 1 for i in range(8)})  # one group
    source_turns = [turn.model_copy(update={"copied_from": f"{source}::1-0"})
                    for turn in recorded.turns[:2]]  # fmt: skip
    for t in read_trajectories(fork):
        assert (t.task, t.seed, t.turns[:2]) == (recorded.task, recorded.seed, source_turns)
        assert [turn.assistant.text for turn in t.turns[2:]] == ["Answer: -1"]

    # A driver killed after three episodes: the rest is played on the workers on --resume.
    file = fork / "trajectories.jsonl"
    file.write_text("".join(file.read_text().splitlines(keepends=True)[:3]))
    manifest = fork / "run.json"
    manifest.write_text(manifest.read_text().replace('"finished"', '"interrupted"'))
    with prepare_run(cfg, resume=fork, policy=ScriptedPolicy(["Answer: -1"])) as run:
        assert len(run.done) == 3 and run.config.workers == 2
        asyncio.run(run.play())
    assert written_ids(fork) == Counter({f"1-{i}": 1 for i in range(8)})
    assert all(t.turns[:2] == source_turns for t in read_trajectories(fork))


def worker_pids() -> list[int]:
    """This process's Ray workers that are rollout workers (Ray names them in their title)."""
    out = []
    for process in psutil.Process().children(recursive=True):
        try:
            title = " ".join(process.cmdline())
        except psutil.Error:
            continue
        if "RolloutWorker" in title:
            out.append(process.pid)
    return out


# ---------------------------------------------------------------------------------------- CLI


@pytest.fixture
def stub() -> Iterator[StubServer]:
    replies = call_first_tool_then_answer("Answer: 42", 2)
    with StubServer(replies, latency_s=0.05, record=False) as server:
        yield server


def rollout(
    stub: StubServer, run_dir: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "rk_agent", "rollout", "--env", "tools", "--max-turns", "3",
        "--base-url", stub.base_url, "--model", "stub-model", "--api-key", "unused",
        "--concurrency", "8", "--output", str(run_dir), *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**ENV, **(env or {})},
    )  # fmt: skip


def wait_for_lines(run_dir: Path, count: int, process: subprocess.Popen[str]) -> None:
    """Until the run has written ``count`` episodes (the test's timeout bounds the wait)."""
    file = run_dir / "trajectories.jsonl"
    while not (file.exists() and file.read_bytes().count(b"\n") >= count):
        if process.poll() is not None:
            raise AssertionError(f"the run ended before {count} episodes: {process.stdout}")
        time.sleep(0.2)


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def test_ctrl_c_stops_the_workers_and_keeps_what_finished(stub: StubServer, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = rollout(stub, run_dir, "--n", "300", "--workers", "2")
    wait_for_lines(run_dir, 10, process)
    ray_processes = descendants(process.pid)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    assert "Interrupted" in output
    _, alive = psutil.wait_procs(ray_processes, timeout=60)
    assert alive == [], f"left running after Ctrl-C: {[p.pid for p in alive]}"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    ids = written_ids(run_dir)
    assert 10 <= len(ids) < 300
    assert max(ids.values()) == 1


def test_resume_after_the_driver_is_killed(stub: StubServer, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = rollout(stub, run_dir, "--n", "200", "--workers", "2")
    wait_for_lines(run_dir, 10, process)
    ray_processes = descendants(process.pid)
    process.kill()
    process.communicate(timeout=60)
    psutil.wait_procs(ray_processes, timeout=60)  # Ray's processes die with their driver

    resumed = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rollout", "--resume", str(run_dir)],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "taking over" in resumed.stdout
    assert written_ids(run_dir) == Counter({f"{i}-0": 1 for i in range(200)})
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_joins_a_cluster_started_with_ray_start(stub: StubServer, tmp_path: Path) -> None:
    """The head listens on this machine's address; Ray resolves 127.0.0.1 to it."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths have a length limit
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
            "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
            "--disable-usage-stats", "--temp-dir", temp_dir,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**ENV, **CLUSTER_ENV},
    )  # fmt: skip
    try:
        assert head.stdout is not None
        for line in head.stdout:  # `ray start` says when the head is up
            if "Ray runtime started" in line:
                break
        else:
            raise AssertionError("ray start --head did not start")
        run_dir = tmp_path / "run"
        process = rollout(
            stub,
            run_dir,
            "--n",
            "20",
            "--workers",
            "2",
            "--ray-address",
            f"127.0.0.1:{port}",
            env=CLUSTER_ENV,
        )
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, output
        assert "on 2 Ray workers" in output
        assert written_ids(run_dir) == Counter({f"{i}-0": 1 for i in range(20)})
        assert head.poll() is None, "the driver stopped a cluster it did not start"
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops its processes on exit
        head.communicate(timeout=120)
        shutil.rmtree(temp_dir, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_run_that_starts_its_own_ray_prints_no_token_authentication_warning(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in ENV.items() if k != "RAY_AUTH_MODE"}
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rollout", "--env", "tools", "--provider", "solver",
         "--n", "2", "--workers", "1", "--output", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, env={**env, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"writing to {tmp_path / 'run'}, on 1 Ray worker\n" in out.stdout
    assert "Token authentication" not in out.stdout + out.stderr
    assert (tmp_path / ".ray" / "auth_token").is_file()  # still on: asked for, not defaulted to
