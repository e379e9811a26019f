"""What needs no Ray: the worker options, and the message when Ray is not installed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from rk_agent.errors import ConfigError
from rk_agent.runs.config import load_rollout_config
from rk_agent.runs.workers import RAY_INSTALL_HINT, WorkerFailure, WorkerFailureKind

# Runs the CLI with `import ray` failing, as it does where the extra is not installed.
WITHOUT_RAY = """
import runpy, sys

class NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoRay())
sys.argv = ["rk-agent", *sys.argv[1:]]
runpy.run_module("rk_agent", run_name="__main__")
"""


def test_workers_without_ray_say_how_to_install_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable, "-c", WITHOUT_RAY, "rollout", "--env", "guess", "--provider",
            "solver", "--n", "2", "--workers", "2", "--output", str(run_dir),
        ],
        capture_output=True, text=True, timeout=300, env={"COLUMNS": "400", "PATH": ""},
    )  # fmt: skip
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, output
    assert "--workers plays episodes on Ray actors, but Ray cannot be imported" in output
    assert " ".join(RAY_INSTALL_HINT.split()) in output
    assert not run_dir.exists(), "nothing is made before the check"


def test_worker_options_come_from_files_and_flags(tmp_path: Path) -> None:
    file = tmp_path / "run.yaml"
    file.write_text("env: guess\nworkers: 4\nray:\n  num_cpus: 0.5\n  resources: {sandbox: 1}\n")
    config = load_rollout_config(file, {"ray.address": "auto", "workers": 2})
    assert config.workers == 2
    assert (config.ray.address, config.ray.num_cpus, config.ray.resources) == (
        "auto",
        0.5,
        {"sandbox": 1.0},
    )
    assert load_rollout_config().workers is None


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [({"workers": -1}, "workers"), ({"ray.num_cpus": -1}, "ray.num_cpus")],
)
def test_bad_worker_options_are_named(overrides: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_rollout_config(None, overrides)


def test_zero_workers_is_this_process() -> None:
    assert load_rollout_config(None, {"workers": 0}).workers is None
    assert load_rollout_config(None, {"workers": 2}).workers == 2


def test_a_resumed_run_may_change_only_where_it_plays(tmp_path: Path) -> None:
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.run_dir import RunDir

    config = load_rollout_config(None, {"env": "tools", "n": 2, "provider": "solver"})
    RunDir.create(tmp_path / "run", config).close()
    with pytest.raises(ConfigError, match=r"only where and how many at once can change .*not n\."):
        prepare_run(config, resume=tmp_path / "run", placement={"n": 3, "workers": 0})
    with prepare_run(config, resume=tmp_path / "run", placement={"concurrency": 5}) as run:
        assert run.config.concurrency == 5 and run.config.n == 2


def test_a_worker_failure_round_trips_as_json() -> None:
    failure = WorkerFailure(worker=1, kind=WorkerFailureKind.DIED, message="x", replayed=["3-0"])
    again = WorkerFailure.model_validate_json(failure.model_dump_json())
    assert again.model_dump_json() == failure.model_dump_json()
    assert again.kind is WorkerFailureKind.DIED and again.replayed == ["3-0"]


def test_lost_workers_are_counted_in_the_summary(tmp_path: Path) -> None:
    from rk_agent.cli.render import render_summary
    from rk_agent.runs.config import RolloutConfig
    from rk_agent.runs.run_dir import RunDir
    from rk_agent.runs.summary import summarize

    with RunDir.create(tmp_path / "run", RolloutConfig(env="tools", n=2)) as run:
        assert run.worker_failure_kinds() == [] and summarize([]).worker_failures == {}
        for kind in (WorkerFailureKind.DIED, WorkerFailureKind.OUT_OF_MEMORY):
            run.append_worker_failure(WorkerFailure(worker=0, kind=kind, message="lost"))
        run.append_worker_failure(WorkerFailure(worker=1, kind=WorkerFailureKind.DIED, message="x"))
        with (run.path / "worker_failures.jsonl").open("a") as log:
            log.write('{"worker": 2, "kind": "di')  # torn by a crash: skipped
        kinds = run.worker_failure_kinds()
    assert kinds == ["died", "out_of_memory", "died"]
    summary = summarize([], 1, kinds)
    assert summary.worker_failures == {"died": 2, "out_of_memory": 1}
    console = Console(width=200, record=True)
    render_summary(summary, console)
    text = console.export_text()
    assert "workers lost" in text and "died=2, out_of_memory=1" in text


def test_a_model_loaded_in_this_process_is_refused_before_it_loads(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the check comes after Ray's")
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.config import RolloutConfig
    from rk_agent.runs.workers import LOCAL_MODEL_REFUSED

    config = RolloutConfig(env="guess", n=2, workers=2, output=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=re.escape(LOCAL_MODEL_REFUSED)):
        prepare_run(config)
    assert not (tmp_path / "run").exists()
