"""`rk-agent rollout` and `rk-agent show`, run as real subprocesses against the stub server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rk_agent.testing.stub_replies import call_first_tool_then_answer
from rk_agent.testing.stub_server import Fault, StubServer

SECRET = "sk-rollout-SECRET-0123456789abcdef"
# Started as `uv run` starts it: hints then say `uv run rk-agent` (tests/cli/test_invocation.py).
ENV = {**os.environ, "COLUMNS": "200", "UV_RUN_RECURSION_DEPTH": "1"}


def rk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True,
        env=env or ENV, timeout=300,
    )  # fmt: skip


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(call_first_tool_then_answer("Answer: 42"), api_key=SECRET) as server:
        yield server


def lines(run_dir: Path) -> list[dict]:
    text = (run_dir / "trajectories.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("env_name", ["tools", "math", "code", "guess"])
def test_every_builtin_env_against_the_stub(
    stub: StubServer, tmp_path: Path, env_name: str
) -> None:
    out = rk(
        "rollout", "--env", env_name, "--base-url", stub.base_url, "--model", "stub-model",
        "--api-key", SECRET, "--n", "3", "--group-size", "2", "--max-turns", "3",
        "--output", str(tmp_path / "run"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Summary of" in out.stdout and "6 (3 tasks x 2)" in out.stdout
    run_dir = tmp_path / "run"
    trajectories = lines(run_dir)
    assert sorted(t["id"] for t in trajectories) == sorted(
        f"{i}-{s}" for i in range(3) for s in range(2)
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episodes"] == 6
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    # The key was used (the stub demands it) and is written nowhere.
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in stub.chat_requests)
    for file in run_dir.iterdir():
        assert SECRET not in file.read_text(), file.name


def test_tools_episodes_record_tool_calls(stub: StubServer, tmp_path: Path) -> None:
    out = rk(
        "rollout", "--env", "tools", "--base-url", stub.base_url, "--model", "m",
        "--api-key", SECRET, "--n", "2", "--output", str(tmp_path / "run"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    [first, *_] = lines(tmp_path / "run")
    assert first["turns"][0]["tool_calls"][0]["name"] == "calculator"
    assert first["turns"][0]["environment"][0]["role"] == "tool"
    assert first["stop_reason"] == "answered"
    shown = rk("show", str(tmp_path / "run"), "--limit", "1")
    assert shown.returncode == 0, shown.stderr
    assert "turn 0" in shown.stdout and "-> calculator(" in shown.stdout


def test_own_tools_tasks_without_min_tool_calls_score_the_answer(tmp_path: Path) -> None:
    """A row with only a prompt and a ground truth: a right answer earns 1.0, valid; the
    zero-weight efficiency metric says what it lacks, and no call earns the step bonus
    (issue 40 item 3)."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "What is 47 + 12?", "ground_truth": 59}) + "\n")

    def reply(request: dict[str, Any]) -> Any:
        if any(m["role"] == "tool" for m in request["messages"]):
            return "Answer: 59"
        return {"tool_calls": [{"name": "calculator", "arguments": {"expression": "47 + 12"}}]}

    with StubServer(reply) as server:
        out = rk(
            "rollout", "--env", "tools", "--tasks", str(tasks), "--base-url", server.base_url,
            "--model", "m", "--n", "1", "--group-size", "2", "--output", str(tmp_path / "run"),
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "episode reward                 │ mean 1.000  std 0.000  (invalid 0)" in out.stdout
    for trajectory in lines(tmp_path / "run"):
        episode = trajectory["episode"]
        assert (episode["score"], episode["is_score_valid"], trajectory["success"]) == (
            1.0, True, True,
        )  # fmt: skip
        assert episode["metrics"]["efficiency"]["reason"] == "metadata has no min_tool_calls"
        assert episode["metrics"]["efficiency"]["is_score_valid"] is False
        called = episode["step_outputs"][0]
        assert trajectory["turns"][0]["environment"][0]["content"] == "59"
        assert called["reward"] == 0.0, "no call earns the bonus without min_tool_calls"


def test_tasks_from_elsewhere_columns_mapped_fewer_rows_than_n_and_the_solver(
    tmp_path: Path,
) -> None:
    """A Hugging Face dataset's `question`/`answer` columns: refused naming them and
    --tasks-columns, read with it; fewer rows than --n plays each once, saying so; the
    reference solver refuses tasks it does not recognise before the run (issue 40 item 11)."""
    generated = rk("rollout", "--env", "math", "--policy", "solver", "-n", "2",
                   "--output", str(tmp_path / "generated"))  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    rows = [{"question": t["task"]["messages"][-1]["content"], "answer": t["task"]["ground_truth"]}
            for t in lines(tmp_path / "generated")]  # fmt: skip
    (tmp_path / "gsm.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    gsm = str(tmp_path / "gsm.jsonl")
    play = ("rollout", "--env", "math", "--policy", "solver", "--tasks", gsm)

    refused = rk(*play, "--output", str(tmp_path / "refused"))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"error: {tmp_path / 'gsm.jsonl'}:1: not a valid task: expected a 'messages' list or a "
        "'prompt' (string or message list); the row's columns are 'question', 'answer': map "
        "them with --tasks-columns prompt=question,ground_truth=answer (columns= in load_tasks)\n"
    )
    assert not (tmp_path / "refused").exists()

    mapped = ("--tasks-columns", "prompt=question,ground_truth=answer")
    out = rk(*play, *mapped, "-n", "5", "--output", str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr
    assert f"{tmp_path / 'gsm.jsonl'} holds 2 tasks, fewer than --n 5: playing each once." in (
        out.stdout
    )
    assert "2 (2 tasks x 1)" in out.stdout
    played = lines(tmp_path / "run")
    assert len(played) == 2 and all(t["success"] for t in played)

    (tmp_path / "other.jsonl").write_text('{"question": "Who wrote Hamlet?", "answer": "S"}\n')
    other = str(tmp_path / "other.jsonl")
    unknown = rk("rollout", "--env", "math", "--policy", "solver", "--tasks", other, *mapped,
                 "--output", str(tmp_path / "solver"))  # fmt: skip
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == (
        "error: --policy solver: the math environment's reference solver does not recognise 1 "
        f"of the 1 tasks of {tmp_path / 'other.jsonl'} (the first: 'other-1'); it solves the "
        "tasks the environment generates, read by their templates. Play a model on them "
        "(--model, --base-url), or leave out --tasks to play the environment's own tasks.\n"
    )
    assert not (tmp_path / "solver").exists()


@pytest.mark.parametrize("env_name", ["tools", "math", "guess"])
def test_the_reference_solver_plays_without_a_model(tmp_path: Path, env_name: str) -> None:
    out = rk("rollout", "--env", env_name, "--provider", "solver", "--n", "4",
             "--output", str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    trajectories = lines(tmp_path / "run")
    assert len(trajectories) == 4 and all(t["success"] for t in trajectories)
    assert {t["model"] for t in trajectories} == {f"{env_name}-reference-solver"}
    # Every summary carries the watch: one episode per task is a group with no spread (the
    # table says so rather than print a share that means nothing).
    watch = json.loads((tmp_path / "run" / "summary.json").read_text())["watch"]
    assert (watch["zero_spread"], watch["zero_spread_all_pass"]) == (1.0, 1.0)
    assert "one episode per task; --group-size 2 or more shows the spread" in out.stdout
    assert "warning:" not in out.stdout  # nor does it raise the zero-spread alarm
    refused = rk("rollout", "--env", env_name, "--provider", "solver", "--model", "m",
                 "--output", str(tmp_path / "other"))  # fmt: skip
    assert refused.returncode == 2
    assert "--provider solver plays the environment's reference solver; leave out --model" in (
        refused.stderr
    )


def test_a_rollout_raises_the_alarms_of_its_groups_and_show_lists_them(tmp_path: Path) -> None:
    # The solver answers every sample of a task alike and right: as GRPO groups, nothing to
    # learn from, which the summary says as the training watch would.
    run = tmp_path / "run"
    out = rk("rollout", "--env", "tools", "--provider", "solver", "--n", "3", "--group-size",
             "2", "--output", str(run))  # fmt: skip
    assert out.returncode == 0, out.stderr
    zero_spread = (
        "100% of groups had zero reward spread (0% all fail, 100% all pass): those groups "
        "teach nothing. Try: easier tasks, more generations (--group-size) or partial credit "
        "when they all fail; harder tasks when they all pass."
    )
    collapse = (
        "in 100% of groups every episode gave the same final answer: the samples no longer "
        "explore. Try: a higher temperature (--temperature), more generations (--group-size)."
    )
    alarms = json.loads((run / "summary.json").read_text())["alarms"]
    assert alarms == [
        {"kind": "zero_spread", "step": None, "message": zero_spread},
        {"kind": "answer_collapse", "step": None, "message": collapse},
    ]
    for shown in (out.stdout, rk("show", str(run), "--limit", "0").stdout):
        flat = " ".join(shown.split())
        assert f"warning: {zero_spread}" in flat and f"warning: {collapse}" in flat


def test_the_truncation_alarm_of_a_rollout_names_the_rollouts_flags(tmp_path: Path) -> None:
    """Not a training flag (--max_completion_length): rollout's own (issue 40 item 10)."""
    cut = {"role": "assistant", "content": "Let me think about", "finish_reason": "length"}
    with StubServer([cut] * 4) as server:
        out = rk("rollout", "--env", "math", "--base-url", server.base_url, "--model", "m",
                 "--n", "2", "--max-turns", "1", "--output", str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert " ".join(out.stdout.split()).endswith(
        "warning: 100% of completions were cut by a token limit: the reward scores unfinished "
        "work. Try: a larger --max-tokens, or fewer turns (--max-turns)."
    )


def test_show_limits_all_and_a_run_without_failures(tmp_path: Path) -> None:
    run = str(tmp_path / "run")
    assert rk("rollout", "--env", "math", "--provider", "solver", "--n", "5",
              "--output", run).returncode == 0  # fmt: skip
    every = rk("show", run, "--limit", "-1")
    some = rk("show", run, "--limit", "2")
    failed = rk("show", run, "--failed")
    bad = rk("show", run, "--limit", "-2")
    assert every.returncode == 0 and every.stdout.count("turn 0") == 5
    assert "Showed" not in every.stdout
    assert some.stdout.count("turn 0") == 2
    assert "Showed 2 of 5 episodes; --limit -1 shows all." in some.stdout
    assert "No failed episodes in" in failed.stdout and "(5 episodes)" in failed.stdout
    assert bad.returncode == 2 and "--limit must be -1 (all), 0 or more, got -2." in bad.stderr


@pytest.mark.slow  # loads the embedded model
def test_a_run_of_the_embedded_model_ends_with_the_next_steps(tmp_path: Path) -> None:
    run = tmp_path / "first"
    out = rk("rollout", "--env", "tools", "--n", "1", "--max-turns", "1", "--max-tokens", "4",
             "--output", str(run), env={**ENV, "COLUMNS": "80"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    # Each command whole on its line, also at 80 columns: pasted back as is (issue 40 item 15).
    steps = out.stdout.split("Next steps:\n", 1)[1].splitlines()
    assert steps == [
        "  # what the model did, turn by turn",
        f"  uv run rk-agent show {run} --limit 2",
        "  # solved episodes without a model, then a warm start from them",
        "  uv run rk-agent rollout --env tools --policy solver --n 64 --output runs/demos",
        "  uv run rk-agent train sft --trajectories runs/demos",
        "  # a real model: vLLM, SGLang, Ollama (or --provider fireworks|openai)",
        "  uv run rk-agent rollout --env tools --base-url http://localhost:8000/v1 --model NAME",
    ]
    demos = tmp_path / "demos"
    suggested = rk("rollout", "--env", "tools", "--policy", "solver", "--n", "2",
                   "--output", str(demos))  # fmt: skip
    assert suggested.returncode == 0, suggested.stderr
    assert all(t["success"] for t in lines(demos))
    assert "Next steps:" not in suggested.stdout  # only after the embedded model


@pytest.mark.slow  # waits out real retries: ~12 s
def test_endpoint_failures_are_recorded_with_their_kind(tmp_path: Path) -> None:
    with StubServer(["Answer: 1"], failure_rate=1.0) as server:
        out = rk(
            "rollout", "--env", "math", "--base-url", server.base_url, "--model", "m",
            "--n", "2", "--output", str(tmp_path / "run"),
        )  # fmt: skip
    assert out.returncode == 1, out.stderr  # every episode failed: not a success
    trajectories = lines(tmp_path / "run")
    assert {t["failure"]["kind"] for t in trajectories} == {"model_error"}
    assert {t["stop_reason"] for t in trajectories} == {"error"}
    assert "model_error=2" in out.stdout
    assert (
        "Every episode failed (model_error x2): see why with "
        f"`uv run rk-agent show {tmp_path / 'run'} --failed`." in " ".join(out.stdout.split())
    )


def test_an_unreachable_base_url_is_one_line_before_any_episode(tmp_path: Path) -> None:
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    out = rk("rollout", "--base-url", url, "--model", "m", "--output", str(tmp_path / "run"))
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: cannot reach the model server: GET {url}/models failed")
    assert "is --base-url right? OpenAI-compatible servers serve under /v1" in out.stderr
    assert not (tmp_path / "run").exists()


def test_a_base_url_without_the_api_and_a_refused_key_are_named(tmp_path: Path) -> None:
    with StubServer(["Answer: 1"], api_key=SECRET) as server:
        root = server.base_url.removesuffix("/v1")
        wrong_path = rk("rollout", "--base-url", root + "/api", "--model", "m",
                        "--api-key", SECRET, "--output", str(tmp_path / "a"))  # fmt: skip
        wrong_key = rk("rollout", "--base-url", server.base_url, "--model", "m",
                       "--api-key", "not-the-key", "--output", str(tmp_path / "b"))  # fmt: skip
        requests = [r.path for r in server.chat_requests]
    assert wrong_path.returncode == 2
    assert wrong_path.stderr.startswith(
        f"error: the model server answered 404 to GET {root}/api/models and 404 to a one-token "
        f"POST {root}/api/chat/completions (model 'm'): there is no OpenAI-compatible API at "
        "this URL; base URLs usually end in /v1"
    )
    assert wrong_key.returncode == 2
    assert wrong_key.stderr.startswith(
        f"error: the model server answered 401 to GET {server.base_url}/models: the API key "
        "(from argument) was refused"
    )
    assert "not-the-key" not in wrong_key.stderr
    assert requests == ["/api/chat/completions"]  # the check's probe; no episode was played
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_bad_input_fails_before_any_work(tmp_path: Path) -> None:
    out = rk("rollout", "--env", "tols", "--output", str(tmp_path / "a"))
    assert out.returncode == 2
    assert "unknown environment 'tols'. Did you mean 'tools'?" in out.stderr
    env = {k: v for k, v in ENV.items() if k != "FIREWORKS_API_KEY"}
    out = rk(
        "rollout", "--provider", "fireworks", "--model", "accounts/fireworks/models/x",
        "--output", str(tmp_path / "b"), env=env,
    )  # fmt: skip
    assert out.returncode == 2
    assert "FIREWORKS_API_KEY" in out.stderr
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"prompt": "2+2?", "ground_truth": "4"}\n{broken\n')
    out = rk("rollout", "--env", "math", "--tasks", str(bad), "--output", str(tmp_path / "c"))
    assert out.returncode == 2
    assert f"{bad}:2: invalid JSON" in out.stderr
    out = rk("rollout", "--reward", "mth", "--output", str(tmp_path / "d"))
    assert out.returncode == 2 and "Did you mean 'math'?" in out.stderr
    assert not any((tmp_path / name).exists() for name in "abcd")


def test_the_tool_call_format_is_the_runs_where_the_server_takes_no_tools(
    tmp_path: Path,
) -> None:
    call = '<|python_tag|>{"name": "calculator", "parameters": {"expression": "6*7"}}'

    def reply(request: dict[str, Any]) -> Any:
        if "tools" in request:  # as vLLM without --enable-auto-tool-choice
            return Fault.http(400, '"auto" tool choice requires --enable-auto-tool-choice')
        said = [m for m in request["messages"] if m["role"] == "assistant"]
        return "Answer: 42" if said else call

    with StubServer(reply) as server:
        out = rk("rollout", "--env", "tools", "--base-url", server.base_url, "--model", "m",
                 "--tool-call-format", "llama3_json", "--n", "1",
                 "-o", str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    (episode,) = lines(tmp_path / "run")
    first = episode["turns"][0]
    assert first.get("parse_error") is None  # left out when there is none
    assert [c["function"]["name"] for c in first["assistant"]["tool_calls"]] == ["calculator"]
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert provenance["tool_call_format"] == "llama3_json"
    refused = rk("rollout", "--env", "tools", "--provider", "solver", "--tool-call-format",
                 "lama3", "-o", str(tmp_path / "no"))  # fmt: skip
    assert refused.returncode == 2 and "Did you mean 'llama3_json'?" in refused.stderr
    assert not (tmp_path / "no").exists()


def test_a_key_written_into_an_inline_mcp_config_is_refused_before_any_work(
    tmp_path: Path,
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "env: tools\nmcp:\n  search:\n    url: http://127.0.0.1:9/mcp\n"
        f"    headers: {{Authorization: Bearer {SECRET}}}\n"
    )
    out = rk("rollout", "-c", str(config), "--provider", "solver", "-o", str(tmp_path / "run"))
    assert out.returncode == 2, out.stdout
    assert "mcp.search.headers.Authorization" in out.stderr and "${NAME}" in out.stderr
    assert SECRET not in out.stderr + out.stdout
    assert not (tmp_path / "run").exists()


def _default_sigint() -> None:
    """In the child: Ctrl-C as a terminal delivers it, whatever the test runner left behind (an
    ignored SIGINT is inherited across exec, and Python keeps it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.slow  # two subprocess runs and a Ctrl-C: ~8 s
def test_ctrl_c_keeps_finished_episodes_and_resume_finishes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with StubServer(call_first_tool_then_answer("Answer: 42"), latency_s=0.15) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "rk_agent", "rollout", "--env", "tools", "--base-url",
             server.base_url, "--model", "m", "--n", "30", "--concurrency", "2",
             "--output", str(run_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
            preexec_fn=_default_sigint,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            file = run_dir / "trajectories.jsonl"
            if file.exists() and len(file.read_text().splitlines()) >= 3:
                break
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 130, (stdout[-2000:], stderr)
        assert "Resume with `uv run rk-agent rollout --resume" in stdout
        finished = lines(run_dir)
        assert 3 <= len(finished) < 30
        assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"

        resumed = rk("rollout", "--resume", str(run_dir))
        assert resumed.returncode == 0, resumed.stderr
        assert f"resuming: {len(finished)} done" in resumed.stdout
    ids = [t["id"] for t in lines(run_dir)]
    assert sorted(ids) == sorted(f"{i}-0" for i in range(30))
    assert json.loads((run_dir / "summary.json").read_text())["episodes"] == 30


def test_resume_of_what_is_not_a_run_says_what_it_is(tmp_path: Path) -> None:
    """A missing folder, a training run, a file: each named as what it is (issue 40 item 14)."""
    missing = rk("rollout", "--resume", str(tmp_path / "nope"))
    assert (missing.returncode, missing.stderr) == (2, (
        f"error: {tmp_path / 'nope'} does not exist: expected a directory made by "
        "`rk-agent rollout`. Check the path.\n"
    ))  # fmt: skip
    trained = tmp_path / "train-grpo"
    trained.mkdir()
    (trained / "rk_agent_config.yaml").write_text("# rk-agent train grpo\nkind: grpo\n")
    training = rk("rollout", "--resume", str(trained))
    assert (training.returncode, training.stderr) == (2, (
        f"error: {trained} is a training run (`rk-agent train grpo`), not a rollout. To go on "
        f"training it, `rk-agent train grpo --config {trained}/rk_agent_config.yaml` resumes "
        f"from its last checkpoint; `rk-agent show {trained}` shows it.\n"
    ))  # fmt: skip
    a_file = rk("rollout", "--resume", str(trained / "rk_agent_config.yaml"))
    assert a_file.stderr.startswith(f"error: {trained}/rk_agent_config.yaml is a file, not a run")


def test_a_misspelt_policy_gets_did_you_mean(tmp_path: Path) -> None:
    out = rk("rollout", "--env", "tools", "--policy", "slover", "-o", str(tmp_path / "run"))
    assert (out.returncode, out.stderr) == (2, (
        "error: --provider slover: Input should be 'fireworks', 'openai', 'local' or "
        "'solver'. Did you mean 'solver'?\n"
    ))  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_resume_refuses_new_flags(tmp_path: Path) -> None:
    out = rk("rollout", "--resume", str(tmp_path), "--n", "3", "--concurrency", "2")
    assert out.returncode == 2
    assert "--resume finishes a run with its saved config; drop --n. Only where" in out.stderr
    assert "--concurrency, --workers (0: in this process)" in out.stderr


def test_resume_may_change_where_the_rest_is_played(tmp_path: Path) -> None:
    """The saved config says 2 Ray workers; the rest is played here, 3 at a time."""
    run_dir = tmp_path / "run"
    first = rk("rollout", "--env", "tools", "--provider", "solver", "--n", "6",
               "--output", str(run_dir))  # fmt: skip
    assert first.returncode == 0, first.stderr
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("workers: null", "workers: 2"))
    played = (run_dir / "trajectories.jsonl").read_text().splitlines()
    (run_dir / "trajectories.jsonl").write_text("\n".join(played[:2]) + "\n")

    resumed = rk("rollout", "--resume", str(run_dir), "--workers", "0", "--concurrency", "3")
    assert resumed.returncode == 0, resumed.stderr
    assert "concurrency 3, writing to" in resumed.stdout and "Ray workers" not in resumed.stdout
    assert "(resuming: 2 done)" in resumed.stdout
    assert sorted(t["id"] for t in lines(run_dir)) == [f"{i}-0" for i in range(6)]
    assert "workers: 2" in config.read_text()  # the run's own config is left as it was


def test_envs_list() -> None:
    out = rk("envs", "list")
    assert out.returncode == 0
    for name in ("tools", "math", "code", "guess"):
        assert name in out.stdout
    assert "Environments from elsewhere (--env SCHEME:REST)" in out.stdout
    assert "│ reasoning-gym:NAME[,NAME...] │ yes       │ reasoning-gym's procedural" in out.stdout
    assert "│ verifiers:MODULE             │ yes       │ verifiers v1 tasksets" in out.stdout


def test_a_reasoning_gym_env_is_played_by_its_solver(tmp_path: Path) -> None:
    out = rk("rollout", "--env", "reasoning-gym:chain_sum", "--policy", "solver", "-n", "8",
             "--output", str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    episodes = lines(tmp_path / "run")
    assert len(episodes) == 8 and all(t["success"] for t in episodes)
    assert {t["env"] for t in episodes} == {"reasoning-gym:chain_sum"}
    assert all(t["episode"]["metrics"]["reasoning_gym"]["score"] == 1.0 for t in episodes)
    assert {t["task"]["metadata"]["generator"] for t in episodes} == {"chain_sum"}
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "env: reasoning-gym:chain_sum" in config


@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_the_code_env_records_its_sandbox_mode(tmp_path: Path, mode: str) -> None:
    from tests.sandbox.support import BWRAP_PROBLEM

    if BWRAP_PROBLEM is not None and mode == "bwrap":
        pytest.skip(f"bubblewrap cannot isolate here: {BWRAP_PROBLEM}")
    args = ["--sandbox", mode] if mode == "process" else []
    out = rk("rollout", "--env", "code", "--provider", "solver", "--n", "2", *args,
             "--output", str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    trajectories = lines(tmp_path / "run")
    assert all(t["success"] for t in trajectories)
    assert {t["episode"]["metrics"]["tests.sandbox"]["reason"] for t in trajectories} == {mode}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "tests.sandbox" in json.dumps(summary)
    bad = rk("rollout", "--env", "code", "--provider", "solver", "--sandbox", "docker",
             "--output", str(tmp_path / "bad"))  # fmt: skip
    assert bad.returncode == 2
    assert "unknown sandbox mode 'docker'" in bad.stderr


def said(text: str) -> str:
    """Output with the console's line wrapping undone."""
    return " ".join(text.split())


def popen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rk_agent", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip


class Gate:
    """A model that answers ``Answer: 42`` to ``allowed`` chat requests; later ones wait."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.arrived = 0
        self.served = 0
        self._lock = threading.Lock()

    async def __call__(self, request: dict[str, Any]) -> str:
        with self._lock:
            self.arrived += 1
        while True:
            with self._lock:
                if self.served < self.allowed:
                    self.served += 1
                    return "Answer: 42"
            await asyncio.sleep(0.01)

    def wait_for(self, arrived: int, process: subprocess.Popen[str]) -> None:
        """Return once ``arrived`` requests have come (the last one waits in the gate)."""
        deadline = time.monotonic() + 240  # a guard against a hang, not a timing check
        while self.arrived < arrived:
            if process.poll() is not None:
                raise AssertionError(f"it exited first: {process.communicate()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.arrived} of {arrived} requests came")
            time.sleep(0.02)


@pytest.mark.slow  # three subprocess runs and a SIGKILL: ~5 s
def test_one_writer_per_run_and_a_killed_one_is_taken_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    gate = Gate(allowed=2)
    with StubServer(gate) as server:
        args = ["rollout", "--env", "math", "--base-url", server.base_url, "--model", "m",
                "--n", "6", "--concurrency", "1"]  # fmt: skip
        first = popen(*args, "--output", str(run_dir))
        gate.wait_for(3, first)  # two episodes written, the third waits for its reply
        assert len(lines(run_dir)) == 2
        # A second run with the same --output, and a --resume of the run, are refused.
        same_output = rk(*args, "--output", str(run_dir))
        for second in (same_output, rk("rollout", "--resume", str(run_dir))):
            assert second.returncode == 2, second.stderr
            assert f"{run_dir} is being written by pid {first.pid} on " in said(second.stderr)
            assert f"(`rk-agent rollout --env math --base-url {server.base_url}" in said(
                second.stderr
            )
            assert f"or stop it (`kill {first.pid}`) and then finish the run with" in said(
                second.stderr
            )
        first.send_signal(signal.SIGKILL)  # no last word: run.json keeps saying running
        first.communicate()
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
        shown = rk("show", str(run_dir), "--limit", "0")
        assert f"its process (pid {first.pid} on" in said(shown.stdout)
        assert f"was killed; finish it with `uv run rk-agent rollout --resume {run_dir}`" in said(
            shown.stdout
        )

        resumed = popen("rollout", "--resume", str(run_dir))
        gate.wait_for(4, resumed)  # it took over the lock and waits for its first reply
        again = rk("rollout", "--resume", str(run_dir))
        assert again.returncode == 2
        assert f"is being written by pid {resumed.pid} on" in said(again.stderr)
        gate.allowed = 10**6
        stdout, stderr = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, stderr
        assert f"The last writer of this run, pid {first.pid} on" in said(stdout)
        assert "resuming: 2 done" in stdout
    ids = [t["id"] for t in lines(run_dir)]
    assert sorted(ids) == [f"{i}-0" for i in range(6)]  # exactly N episodes, none twice
    assert json.loads((run_dir / "summary.json").read_text())["episodes"] == 6
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    assert (run_dir / "run.lock").read_text() == ""


CRASHING_ENV = """
import os

from rk_agent.envs.math_env import MathEnv


class CrashingMathEnv(MathEnv):
    calls = 0

    def is_success(self, episode):
        type(self).calls += 1
        if type(self).calls > int(os.environ.get("CRASH_AFTER", "1000000")):
            raise RuntimeError("simulated crash outside any episode")
        return super().is_success(episode)
"""


@pytest.mark.slow  # two subprocess runs: ~4 s
def test_a_crash_records_failed_with_the_error_and_the_run_resumes(tmp_path: Path) -> None:
    env_file = tmp_path / "crashing_env.py"
    env_file.write_text(CRASHING_ENV)
    run_dir = tmp_path / "run"
    with StubServer(["Answer: 42"]) as server:
        crashed = rk(
            "rollout", "--env", f"{env_file}::CrashingMathEnv", "--base-url", server.base_url,
            "--model", "m", "--n", "5", "--concurrency", "1", "--output", str(run_dir),
            env={**ENV, "CRASH_AFTER": "2"},
        )  # fmt: skip
        assert crashed.returncode == 1
        assert "RuntimeError: simulated crash outside any episode" in crashed.stderr
        record = json.loads((run_dir / "run.json").read_text())
        assert record["status"] == "failed"
        assert record["error"] == "RuntimeError: simulated crash outside any episode"
        assert len(lines(run_dir)) == 2
        assert json.loads((run_dir / "summary.json").read_text())["episodes"] == 2
        shown = rk("show", str(run_dir), "--limit", "0")
        assert (
            "The run failed: RuntimeError: simulated crash outside any episode; finish it with "
            f"`uv run rk-agent rollout --resume {run_dir}`." in said(shown.stdout)
        )
        resumed = rk("rollout", "--resume", str(run_dir))
        assert resumed.returncode == 0, resumed.stderr
    assert sorted(t["id"] for t in lines(run_dir)) == [f"{i}-0" for i in range(5)]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "finished" and "error" not in record


def test_show_reads_a_bare_trajectories_file_and_names_missing_episodes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    played = rk("rollout", "--env", "tools", "--provider", "solver", "--n", "3",
                "--output", str(run_dir))  # fmt: skip
    assert played.returncode == 0, played.stderr
    bare = rk("show", str(run_dir / "trajectories.jsonl"), "--episode", "1-0")
    assert bare.returncode == 0, bare.stderr
    assert "3 (3 tasks x 1)" in bare.stdout and "episode 1-0" in bare.stdout
    missing = rk("show", str(run_dir), "--episode", "99-0")
    assert missing.returncode == 2
    assert missing.stdout == ""  # the error comes before anything is printed
    assert missing.stderr.startswith(f"error: no episode 99-0 in {run_dir}; it holds ")
    assert "['" not in missing.stderr  # no Python list


def test_show_refuses_a_folder_that_holds_no_run(tmp_path: Path) -> None:
    give = (
        "Give a run's folder (made by `rk-agent rollout`, `rk-agent rescore` or `rk-agent "
        "train`) or a trajectories JSONL file."
    )
    folder = tmp_path / "episodes"  # episodes, but neither a rollout's config nor a record
    folder.mkdir()
    (folder / "trajectories.jsonl").write_text("")
    (folder / "rk_agent_run.json").write_text('{"status": "finished"}')  # not a name we read
    shown = rk("show", str(folder))
    assert (shown.returncode, shown.stdout) == (2, "")
    assert " ".join(shown.stderr.split()) == (
        f"error: {folder} holds no run: neither the config.yaml of a rollout run nor the "
        f"run.json of a training run. {give}"
    )
    (folder / "run.json").write_text('{"status": "finished"}')  # no kind: not a record
    shown = rk("show", str(folder))
    assert shown.returncode == 2
    assert " ".join(shown.stderr.split()) == (
        f"error: {folder} holds no run: no config.yaml (a rollout run's), and its run.json is "
        f"not a training run's record (unreadable). {give}"
    )
    shown = rk("show", str(tmp_path / "nope"))
    assert shown.returncode == 2
    assert " ".join(shown.stderr.split()) == f"error: {tmp_path / 'nope'} does not exist. {give}"


def test_a_finished_run_says_so_on_resume_and_on_a_new_rollout(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ("rollout", "--env", "tools", "--provider", "solver", "--n", "2")
    assert rk(*args, "--output", str(run_dir)).returncode == 0
    before = (run_dir / "trajectories.jsonl").read_text()
    resumed = rk("rollout", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert " ".join(resumed.stdout.split()) == (
        f"{run_dir} is finished already: every episode of its config is there, nothing is "
        f"left to play. See it with `uv run rk-agent show {run_dir}`."
    )
    again = rk(*args, "--output", str(run_dir))
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"error: {run_dir} already holds a finished run (every episode is there); choose "
        "another --output."
    )
    assert (run_dir / "trajectories.jsonl").read_text() == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "-5"], "error: --timeout -5.0: Input should be greater than 0."),
        (["--temperature", "-1"],
         "error: --temperature -1.0: Input should be greater than or equal to 0."),
        (["--failure-policy", "nope"],
         "error: --failure-policy nope: Input should be 'record', 'retry' or 'drop_group'."),
        (["--n", "0"], "error: --n 0: Input should be greater than or equal to 1."),
    ],
)  # fmt: skip
def test_a_bad_flag_is_named_as_typed(tmp_path: Path, flags: list[str], message: str) -> None:
    out = rk("rollout", "--env", "tools", *flags, "--output", str(tmp_path / "run"))
    assert out.returncode == 2
    assert out.stderr.strip() == message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model", "./no/such/dir"],
         "error: model './no/such/dir' looks like a local folder but does not exist; give a model "
         "folder (--model runs/<run>/final) or a Hugging Face hub id (org/name)."),
        (["--provider", "local", "--model", "./no/such/dir"],
         "error: model './no/such/dir' looks like a local folder but does not exist; give a model "
         "folder (--model runs/<run>/final) or a Hugging Face hub id (org/name)."),
        (["--env", "math", "--provider", "solver", "--sandbox", "process"],
         "error: environment 'math' runs no code the model writes, so it has no sandbox to "
         "choose: --sandbox (sandbox in env_kwargs) is for environments that run it "
         "(registered: code). Leave --sandbox out for 'math'."),
        (["--provider", "solver", "--reward", "my_rewards.py::nope"],
         "error: cannot load reward 'my_rewards.py::nope': 'my_rewards.py' has no 'nope'. It "
         "defines these functions: exact, helper."),
    ],
)  # fmt: skip
def test_a_mistake_is_named_in_the_user_s_terms(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    (tmp_path / "my_rewards.py").write_text(
        "from rk_agent import reward_function\n\n"
        "@reward_function\ndef exact(messages, ground_truth=None, **kwargs):\n    return 1.0\n\n"
        "def helper(text):\n    return text\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rollout", "--n", "1", *flags, "--output", "run"],
        capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert (out.returncode, out.stderr.strip()) == (2, message)
    assert not (tmp_path / "run").exists()


# verifiers v1 tasksets of tests/interop/verifiers_tasksets, imported by module name.
VF_ENV = {
    **ENV,
    "PYTHONPATH": os.pathsep.join(
        p for p in [str(Path(__file__).parents[1] / "interop" / "verifiers_tasksets"),
                    ENV.get("PYTHONPATH")] if p
    ),
}  # fmt: skip


@pytest.mark.slow  # rk-agent processes that import verifiers (7.5 s each, idle)
def test_a_verifiers_taskset_with_tools_is_played_against_the_stub(tmp_path: Path) -> None:
    with StubServer(call_first_tool_then_answer("red"), api_key=SECRET) as stub:
        out = rk(
            "rollout", "--env", "verifiers:vf_toolbox", "--base-url", stub.base_url,
            "--model", "m", "--api-key", SECRET, "-n", "2", "--output", str(tmp_path / "run"),
            env=VF_ENV,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    first, second = sorted(lines(tmp_path / "run"), key=lambda t: t["task_index"])
    # The stub calls the first tool offered, the taskset's shared shouter, then answers "red".
    for trajectory in (first, second):
        assert trajectory["turns"][0]["tool_calls"][0]["name"] == "shout"
        assert trajectory["turns"][0]["environment"][0]["content"] == "X!"
        assert trajectory["episode"]["metrics"]["verifiers.tool_results"]["score"] == 1.0
    assert [first["episode"]["score"], second["episode"]["score"]] == [1.0, 0.0]  # red, green
    offered = [sorted(t["function"]["name"] for t in second["provenance"]["tools"])]
    assert offered == [["calc_add", "notebook_lookup", "shout"]]
    assert "env: verifiers:vf_toolbox" in (tmp_path / "run" / "config.yaml").read_text()


@pytest.mark.slow  # rk-agent processes that import verifiers (7.5 s each, idle)
def test_a_verifiers_taskset_is_played_by_its_solver_and_a_loop_owner_refused(
    tmp_path: Path,
) -> None:
    out = rk("rollout", "--env", "verifiers:vf_scored", "--policy", "solver", "-n", "6",
             "--output", str(tmp_path / "run"), env=VF_ENV)  # fmt: skip
    assert out.returncode == 0, out.stderr
    episodes = lines(tmp_path / "run")
    assert len(episodes) == 6 and all(t["episode"]["score"] == 1.0 for t in episodes)
    refused = rk("rollout", "--env", "verifiers:vf_owns_loop", "--policy", "solver",
                 "--output", str(tmp_path / "loop"), env=VF_ENV)  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: verifiers:vf_owns_loop exports an Env (LoopEnv), which owns the episode's loop: "
        "rk-agent plays tasksets scored from the transcript, not Envs, harnesses, runtimes or "
        "multi-agent episodes."
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--env", "math", "--seed", "3"),
         "error: --fork plays the source episode's environment, task and seed; drop --env, "
         "--seed (--reward scores the continuations with other rewards, --n or --group-size "
         "sets how many).\n"),
        (("--n", "4", "--group-size", "2"),
         "error: --fork plays one group: --n 4 and --group-size 2 both say how many "
         "continuations; give one of them.\n"),
    ],
)  # fmt: skip
def test_fork_refuses_the_options_it_cannot_honour_in_one_line(
    flags: tuple[str, ...], message: str
) -> None:
    out = rk("rollout", "--fork", "runs/none::0-0@1", *flags, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 2
    assert out.stderr == message
