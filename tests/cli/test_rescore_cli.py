"""`rk-agent rescore` and `rk-agent compare` as real subprocesses, on runs of the real engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rk_agent.envs import get_solver
from rk_agent.runs.rescore import PARALLEL_BYTES, rescore
from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer
from tests.rollouts.runs import answering, arithmetic_tasks, file_hashes, play_run, repeated_run

ENV = {**os.environ, "COLUMNS": "200", "UV_RUN_RECURSION_DEPTH": "1"}
NO_RUN = (
    "expected a run directory made by `rk-agent rollout`, a training run's folder or a "
    "trajectories JSONL file."
)


def rk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True, env=ENV,
        timeout=300,
    )  # fmt: skip


def test_rescore_a_stub_server_run_then_show_and_compare_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with StubServer(call_first_tool_then_answer("Answer: 42")) as stub:
        played = rk(
            "rollout", "--env", "tools", "--base-url", stub.base_url, "--model", "m",
            "--api-key", "k", "--n", "3", "--output", str(run),
        )  # fmt: skip
    assert played.returncode == 0, played.stderr
    before = file_hashes(run)
    out = rk("rescore", str(run), "--reward", "length", "--kwargs", '{"max_length": 400}')
    assert out.returncode == 0, out.stderr
    new = tmp_path / "run-rescored-length"
    assert f"Summary of {new}" in out.stdout
    assert "Change against the source" in out.stdout
    assert "│ success rate" in out.stdout and "  length " in out.stdout
    assert f"Rescored 3 of 3 episodes of {run} with length (sha256 " in out.stdout
    assert file_hashes(run) == before
    assert json.loads((new / "rescore.json").read_text())["kwargs"] == {"max_length": 400}
    shown = rk("show", str(new), "--limit", "1")
    assert shown.returncode == 0, shown.stderr
    compared = rk("compare", str(run), str(new), "--json")
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["scope"] == "compared on 3 shared tasks"


def test_rescore_bad_inputs_are_one_line_with_exit_2(tmp_path: Path) -> None:
    tasks = arithmetic_tasks(tmp_path / "tasks.jsonl", range(2))
    run = play_run(tmp_path / "run", answering({0}), env="math", tasks=str(tasks), n=2)
    cases = {
        ("rescore", str(tmp_path / "nope"), "--reward", "format"): (
            f"error: no run at {tmp_path / 'nope'}: {NO_RUN}"
        ),
        ("rescore", str(run), "--reward", "format", "--kwargs", "[1]"): (
            "error: --kwargs must be a JSON object, got list."
        ),
        ("rescore", str(run), "--reward", "format", "-o", str(run)): (
            f"error: {run} already exists; rescore writes a new run and never overwrites one. "
            "Choose another -o/--output, or delete it first."
        ),
    }
    for args, message in cases.items():
        out = rk(*args)
        assert (out.returncode, out.stderr, out.stdout) == (2, message + "\n", ""), args
    unknown = rk("rescore", str(run), "--reward", "fromat")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: unknown reward 'fromat'. Did you mean 'format'?")
    assert unknown.stderr.count("\n") == 1


WORKER_REWARDS = """
import multiprocessing
import time
from pathlib import Path


def marked(messages, ground_truth, marker, pause=0.0):
    \"\"\"Holds the ground truth; touches ``marker`` when called in a worker process.\"\"\"
    if multiprocessing.parent_process() is not None:
        Path(marker).touch()
    time.sleep(pause)
    return float(str(ground_truth) in (messages[-1].text or ""))
"""


def _big_run(tmp_path: Path) -> Path:
    """A run of the ``tools`` solver's episodes over the size rescore hands to workers."""
    played = play_run(tmp_path / "played", get_solver("tools"), env="tools", n=8)
    line = (played / "trajectories.jsonl").stat().st_size / 8
    return repeated_run(played, tmp_path / "big", int(PARALLEL_BYTES / line) + 50)


def test_a_big_run_is_rescored_on_workers_into_the_run_one_process_writes(tmp_path: Path) -> None:
    source, rewards, marker = _big_run(tmp_path), tmp_path / "marked.py", tmp_path / "marker"
    rewards.write_text(WORKER_REWARDS)
    options = json.dumps({"marker": str(marker)})
    out = rk("rescore", str(source), "--reward", f"{rewards}::marked", "--kwargs", options,
             "-o", str(tmp_path / "workers"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert marker.exists()  # scored on worker processes
    episodes = len((source / "trajectories.jsonl").read_text().splitlines())
    assert f"Rescored {episodes} of {episodes} episodes of {source} with " in out.stdout
    one = rescore(source, f"{rewards}::marked", output=tmp_path / "one", workers=0,
                  kwargs={"marker": str(marker)})  # fmt: skip
    for name in ("trajectories.jsonl", "summary.json"):
        assert (tmp_path / "workers" / name).read_bytes() == (Path(one.output) / name).read_bytes()


def test_ctrl_c_stops_the_workers_and_writes_nothing(tmp_path: Path) -> None:
    source, rewards, marker = _big_run(tmp_path), tmp_path / "marked.py", tmp_path / "marker"
    rewards.write_text(WORKER_REWARDS)
    options = json.dumps({"marker": str(marker), "pause": 0.05})
    before = file_hashes(source)
    command = [sys.executable, "-m", "rk_agent", "rescore", str(source), "--reward",
               f"{rewards}::marked", "--kwargs", options, "-o", str(tmp_path / "out")]  # fmt: skip
    rescoring = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists() and rescoring.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # until a worker scores its first episode
    assert marker.exists(), rescoring.communicate()
    os.killpg(rescoring.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole group
    stdout, stderr = rescoring.communicate(timeout=120)
    assert rescoring.returncode == 130, stderr
    assert stdout.startswith("Interrupted: nothing was written (the partial output was removed)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big", "marked.py", "marker", "played"]
    assert file_hashes(source) == before
    try:
        os.killpg(rescoring.pid, 0)
    except ProcessLookupError:
        pass  # no worker outlived the command
    else:
        raise AssertionError("a process of the rescore's group is still running")


def test_compare_prints_a_plain_table_and_its_z_scores(tmp_path: Path) -> None:
    tasks = str(arithmetic_tasks(tmp_path / "tasks.jsonl", range(12)))
    a = play_run(tmp_path / "a", answering({0, 1, 2, 3, 4, 5}), env="math", tasks=tasks, n=12)
    b = play_run(
        tmp_path / "[b]", answering({0, 1, 2, 3, *range(6, 12)}), env="math", tasks=tasks, n=12
    )
    out = rk("compare", str(a), str(b))
    assert out.returncode == 0, out.stderr
    assert f"B: {b}\ncompared on 12 shared tasks\n" in out.stdout  # brackets are not markup
    assert "│ success rate            │ 0.500 │ 0.833 │ +0.333 │" in out.stdout
    assert "McNemar z: +1.41\ntwo-proportion z: +1.73\n" in out.stdout
    assert "tasks gained (6): t6, t7, t8, t9, t10, ... (6 in all)" in out.stdout
    assert "tasks lost (2): t4, t5" in out.stdout
    same = rk("compare", str(a), str(a))
    assert "McNemar z: undefined (no pair differs: b + c = 0)" in same.stdout
    bad = rk("compare", str(a), str(tmp_path / "nope"))
    assert (bad.returncode, bad.stderr) == (2, f"error: no run at {tmp_path / 'nope'}: {NO_RUN}\n")


def test_rescore_of_an_empty_file_fails_and_writes_nothing(tmp_path: Path) -> None:
    """Not an empty run that exits 0 (issue 40 item 13)."""
    empty = tmp_path / "episodes.jsonl"
    empty.write_text("")
    out = rk("rescore", str(empty), "--reward", "math")
    assert (out.returncode, out.stderr) == (2, (
        f"error: {empty} has no episodes: nothing to rescore, and nothing was written. Expected "
        "finished episodes, one trajectory a line, as `rk-agent rollout` writes them.\n"
    ))  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.jsonl"]


def test_rescore_names_the_runs_as_the_user_typed_them(tmp_path: Path) -> None:
    """Relative paths stay relative in what it prints (issue 40 item 15)."""
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rollout", "--env", "math", "--provider", "solver",
         "--n", "2", "--output", "solver"], cwd=tmp_path, capture_output=True, env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rescore", "solver", "--reward", "math"],
        cwd=tmp_path, capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    assert "Rescored 2 of 2 episodes of solver with math (sha256 " in flat
    assert "wrote solver-rescored-math." in flat


def test_a_typo_in_the_rewards_kwargs_is_one_line_before_any_work(tmp_path: Path) -> None:
    run = tmp_path / "solver"
    assert rk("rollout", "--env", "math", "--provider", "solver", "--n", "2",
              "--output", str(run)).returncode == 0  # fmt: skip
    out = rk("rescore", str(run), "--reward", "length", "--kwargs", '{"max_lenght": 100}')
    assert (out.returncode, out.stderr) == (2, (
        "error: --kwargs names 'max_lenght', which the reward 'length' does not take. Did you "
        "mean 'max_length'? It takes: falloff, ground_truth, max_length, target_chars, "
        "target_tokens, unit.\n"
    ))  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["solver"]
