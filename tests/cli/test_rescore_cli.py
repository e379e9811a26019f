"""`rk-agent rescore` and `rk-agent compare` as real subprocesses, on runs of the real engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer
from tests.rollouts.runs import answering, arithmetic_tasks, file_hashes, play_run

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
