"""Every command on environments from elsewhere, typed as a user types them (real
subprocesses): ``reasoning-gym:chain_sum`` (no tools, one turn) and ``bfcl:multi_turn_base``
(its own tools per task, several user turns), each played by its reference solver once per
module (`solver_run`) and that run reused by ``show``, ``view``, ``--resume``, ``--fork``,
``rescore``, ``compare`` and ``train sft``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from rk_agent.mcp import McpServers
from tests.view.conftest import free_port

ENV = {**os.environ, "COLUMNS": "200", "UV_RUN_RECURSION_DEPTH": "1"}
RG, BFCL = "reasoning-gym:chain_sum", "bfcl:multi_turn_base"
# The source's own score of a recorded episode, for `rescore` (it reads the transcript).
TRANSCRIPT_REWARD = {
    RG: "rk_agent.interop.reasoning_gym:score_answer",
    BFCL: "rk_agent.interop.bfcl:checker",
}
FORK_TURN = {RG: 0, BFCL: 2}  # bfcl: from the second user turn, its first two turns replayed
TASKS, GROUP = 3, 2


def rk(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True, cwd=cwd,
        env=env or ENV, timeout=600,
    )  # fmt: skip


def said(text: str) -> str:
    """Output with the console's line wrapping undone."""
    return " ".join(text.split())


def episodes(run: Path) -> list[dict[str, Any]]:
    text = (run / "trajectories.jsonl").read_text()
    return sorted((json.loads(line) for line in text.splitlines()), key=lambda t: t["id"])


@pytest.fixture(scope="module", params=[RG, BFCL])
def solver_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``rk-agent rollout --policy solver`` of the source, 3 tasks x 2: the run, its output."""
    name = request.param
    cwd = tmp_path_factory.mktemp("runs")
    run = cwd / "solver"
    out = rk("rollout", "--env", name, "--policy", "solver", "-n", str(TASKS),
             "--group-size", str(GROUP), "--output", str(run), cwd=cwd)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return name, run, out.stdout


def test_rollout_plays_groups_and_reports_pass_at_k(solver_run: Any) -> None:
    name, run, stdout = solver_run
    assert f"{TASKS * GROUP} ({TASKS} tasks x {GROUP})" in stdout
    assert "pass@1=1.000, pass@2=1.000" in stdout
    played = episodes(run)
    assert [t["id"] for t in played] == [f"{i}-{s}" for i in range(TASKS) for s in range(GROUP)]
    assert {t["env"] for t in played} == {name} and all(t["success"] for t in played)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["pass_at_k"] == {"pass@1": 1.0, "pass@2": 1.0}


def test_resume_finishes_a_partial_run_on_the_same_tasks(solver_run: Any, tmp_path: Path) -> None:
    _, run, _ = solver_run
    partial = tmp_path / "partial"
    shutil.copytree(run, partial)
    kept = (partial / "trajectories.jsonl").read_text().splitlines()[:2]
    (partial / "trajectories.jsonl").write_text("\n".join(kept) + "\n")
    resumed = rk("rollout", "--resume", str(partial), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "(resuming: 2 done)" in resumed.stdout
    whole = [(t["id"], t["task"]["id"], t["total_reward"]) for t in episodes(run)]
    assert [(t["id"], t["task"]["id"], t["total_reward"]) for t in episodes(partial)] == whole


def test_fork_continues_an_episode_from_a_recorded_turn(solver_run: Any, tmp_path: Path) -> None:
    name, run, _ = solver_run
    turn = FORK_TURN[name]
    forked = rk("rollout", "--fork", f"{run}::0-0@{turn}", "--policy", "solver", "--n", "2",
                "--output", str(tmp_path / "fork"), cwd=tmp_path)  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    source = episodes(run)[0]
    played = episodes(tmp_path / "fork")
    assert len(played) == 2 and all(t["success"] for t in played)
    assert {t["task"]["id"] for t in played} == {source["task"]["id"]}
    recorded = [turn["assistant"] for turn in source["turns"]]
    assert all([t["assistant"] for t in p["turns"]] == recorded for p in played)


def test_show_renders_the_run_and_its_episodes(solver_run: Any, tmp_path: Path) -> None:
    name, run, _ = solver_run
    shown = rk("show", str(run), "--limit", "1", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = said(shown.stdout)
    assert f"env {name} (rk_agent.interop." in text
    assert re.search(r"episode \d-\d task \S+ seed \d", text)  # the first in the file
    assert f"Showed 1 of {TASKS * GROUP} episodes" in text


def test_view_serves_the_runs_page(solver_run: Any, tmp_path: Path) -> None:
    _, run, _ = solver_run
    port = free_port()
    command = [sys.executable, "-m", "rk_agent", "view", str(run), "--port", str(port)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=tmp_path) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().startswith(f"rk-agent view: http://127.0.0.1:{port}/")
            page = httpx.get(f"http://127.0.0.1:{port}/run/solver", timeout=60)
            episode = httpx.get(f"http://127.0.0.1:{port}/run/solver/episode/0-0", timeout=60)
        finally:
            process.terminate()
            process.wait(timeout=60)
    assert page.status_code == 200, page.text
    assert f"{TASKS * GROUP} of {TASKS * GROUP} episodes" in page.text
    assert episode.status_code == 200, episode.text


def test_rescore_with_the_sources_reward_then_compare(solver_run: Any, tmp_path: Path) -> None:
    name, run, _ = solver_run
    again = tmp_path / "again"
    rescored = rk("rescore", str(run), "--reward", TRANSCRIPT_REWARD[name],
                  "--output", str(again), cwd=tmp_path)  # fmt: skip
    assert rescored.returncode == 0, rescored.stderr
    assert [t["episode"]["score"] for t in episodes(again)] == [1.0] * (TASKS * GROUP)
    compared = rk("compare", str(run), str(again), cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert (
        f"paired samples: {TASKS * GROUP} (both succeeded {TASKS * GROUP}, both failed 0"
        in said(compared.stdout)
    )


@pytest.mark.parametrize("name", [RG, BFCL])
def test_check_env_probes_it_against_the_sources_oracle(name: str, tmp_path: Path) -> None:
    out = rk("check", "env", name, "--episodes", "2", "--json", cwd=tmp_path)
    report = json.loads(out.stdout)
    rows = {row["name"]: row for row in report["rows"]}
    assert report["target"] == name and rows["reference"]["mean"] == 1.0
    assert rows["empty"]["mean"] == 0.0  # the do-nothing policy
    if name == BFCL:
        assert out.returncode == 0, out.stderr
        # The checker scores calls, not the final text: the honest wrong answer (the
        # reference's calls, another task's last reply) passes; the tool probes do not.
        assert rows["wrong"]["mean"] == 1.0
        assert rows["call_every_tool"]["mean"] == rows["answer_at_once"]["mean"] == 0.0
    else:
        assert rows["wrong"]["mean"] == 0.0
        # reasoning-gym's default scorer gives partial credit to an answer holding the right
        # one among others: flagged (exit 1), as the docs say.
        assert out.returncode == 1 and [f["probe"] for f in report["flags"]] == ["two_answers"]


def test_mcp_serve_serves_one_and_refuses_per_task_tools_in_one_line(tmp_path: Path) -> None:
    serve = [sys.executable, "-m", "rk_agent", "mcp", "serve", "--env", RG]
    with McpServers({"rk": {"command": serve[0], "args": serve[1:]}}) as servers:
        tools = {t.name: t for t in servers.open_toolset().tools()}
        assert sorted(tools) == ["start_task", "submit_answer"]
        started = tools["start_task"].run({"seed": 3})
        assert started.ok and "<answer>" in started.content, started.content
        submitted = json.loads(tools["submit_answer"].run({"answer": "<answer>x</answer>"}).content)
        assert (submitted["done"], submitted["score"]) == (True, 0.0)
    refused = rk("mcp", "serve", "--env", BFCL, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "error: bfcl:multi_turn_base cannot be served over MCP: its tools differ per task"
    )
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", [RG, BFCL])
def test_openenv_serve_serves_it_to_an_openenv_client(name: str, tmp_path: Path) -> None:
    from rk_agent import make_env
    from rk_agent.policies.function_policy import tool_call

    port = free_port()
    command = [sys.executable, "-u", "-m", "rk_agent", "openenv", "serve", "--env", name,
               "--port", str(port)]  # fmt: skip
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=tmp_path) as process:
        try:
            assert process.stderr is not None  # it says where it serves on stderr
            line = process.stderr.readline()
            assert line.startswith(f"serving {name} over OpenEnv at ws://"), line
            env = make_env(f"openenv:ws://127.0.0.1:{port}")
            try:
                observation, info = env.reset(seed=3)
                if name == RG:
                    assert "<answer>" in observation[0]["content"] and info["tools"] == []
                    turn = env.play_turn({"role": "assistant", "content": "<answer>x</answer>"})
                    assert turn.episode is not None and turn.episode.is_score_valid
                else:  # the entry's own tools, run in the server's episode
                    assert len(info["tools"]) >= 18  # BFCL's tool sets hold 18 to 39
                    call = info["tools"][0]["function"]["name"]
                    turn = env.play_turn(tool_call(call, {}))
                    assert turn.tool_calls[0].result.content  # run there: a result or an error
            finally:
                env.close()
        finally:
            process.terminate()
            process.wait(timeout=60)


@pytest.mark.slow  # starts Ray and two worker processes that import the source: tens of seconds
@pytest.mark.parametrize("name", [RG, BFCL])
def test_workers_play_it_on_ray_actors(name: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = rk("rollout", "--env", name, "--policy", "solver", "-n", "4", "--workers", "2",
             "--output", str(run), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "2 Ray workers" in said(out.stdout)
    played = episodes(run)
    assert len(played) == 4 and all(t["success"] for t in played)


# ---------------------------------------------------------------------------- training


def _train_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in ENV.items() if not k.startswith("WANDB_")}
    return {**env, "HOME": str(tmp_path / "home")}


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
def test_train_sft_on_the_solver_run(solver_run: Any, tmp_path: Path, tiny_model_dir: Path) -> None:
    _, run, _ = solver_run
    out = tmp_path / "sft"
    trained = rk("train", "sft", "--trajectories", str(run), "--model", str(tiny_model_dir),
                 "--output-dir", str(out), "--no-wandb", "--max_steps", "1",
                 "--per_device_train_batch_size", "1", "--max_length", "8192",
                 cwd=tmp_path, env=_train_env(tmp_path))  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    kept = TASKS * GROUP
    assert f"SFT data: kept {kept} of {kept} trajectories" in said(trained.stdout)
    assert (out / "final" / "config.json").is_file()


GRPO = (
    "--num_generations", "2", "--per_device_train_batch_size", "2",
    "--max_completion_length", "12", "--save_steps", "1", "--no-wandb", "--max_steps", "1",
    "--n-tasks", "2", "--max-turns", "2",
)  # fmt: skip


@pytest.mark.slow  # trains a tiny model in a subprocess: tens of seconds
@pytest.mark.parametrize("name", [RG, BFCL])
def test_train_grpo_with_rk_agents_loop(name: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "run"
    trained = rk("train", "grpo", "--env", name, "--loop", "rk", "--model", str(tiny_model_dir),
                 "--output-dir", str(out), *GRPO, cwd=tmp_path,
                 env=_train_env(tmp_path))  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    played = episodes(out)
    assert len(played) == 2 and {t["env"] for t in played} == {name}
    assert all(t["episode"]["is_score_valid"] for t in played), played
    assert (out / "final" / "config.json").is_file()


TRL_REFUSAL = {
    RG: "it offers no tools. TRL only answers tool calls and ends an episode at the first "
    "reply without one.",
    BFCL: "its tools differ per task (tool_scope 'task'), and TRL 1.16's environment_factory "
    "offers every rollout the same tools, the methods of one class read once when the trainer "
    "starts.",
}


@pytest.mark.parametrize("name", [RG, BFCL])
def test_train_grpo_with_trls_loop_refuses_it_in_one_line(name: str, tmp_path: Path) -> None:
    refused = rk("train", "grpo", "--env", name, "--loop", "trl", "--model", "no-such-model",
                 "--output-dir", str(tmp_path / "run"), "--max_steps", "1", "--no-wandb",
                 cwd=tmp_path, env=_train_env(tmp_path))  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: environment '{name}' cannot train with TRL's tool loop (--loop trl): "
        f"{TRL_REFUSAL[name]} Train it with rk-agent's episode loop instead: --loop rk "
        "(rk_agent.grpo_trainer in a script)."
    ]
    assert not (tmp_path / "run").exists()
