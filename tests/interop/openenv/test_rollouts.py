"""``rk-agent rollout --env openenv:ws://...`` as a real subprocess, against OpenEnv's servers.

The model is rk-agent's stub server answering as `guess_and_words_reply` plays; the episodes
are played over real WebSocket sessions, 16 at once, and the OpenEnv server (openenv 0.10.0's
``create_app``, in its own environment) counts the sessions it built and closed: every one is
closed at the end, after a Ctrl-C too, and a server killed mid-run fails the episodes it
leaves (never scores them 0).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rk_agent.testing.stub_server import StubServer
from tests.interop.openenv.servers import (
    counts,
    guess_and_words_reply,
    openenv_server,
    wait_for,
)

ENV = {**os.environ, "COLUMNS": "200", "UV_RUN_RECURSION_DEPTH": "1"}


def rollout(*args: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "rollout", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=_default_sigint, **popen,
    )  # fmt: skip


def _default_sigint() -> None:
    """In the child: Ctrl-C as a terminal delivers it, whatever the test runner left behind."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def lines(run_dir: Path) -> list[dict[str, Any]]:
    file = run_dir / "trajectories.jsonl"
    return [json.loads(x) for x in file.read_text().splitlines()] if file.exists() else []


def guesses(trajectory: dict[str, Any]) -> list[int]:
    return [
        json.loads(call["function"]["arguments"])["n"]
        for turn in trajectory["turns"]
        for call in turn["assistant"].get("tool_calls") or []
    ]


def test_sixteen_sessions_at_once_score_right_without_cross_talk_and_all_close(
    guess_url: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    before = counts(guess_url)
    with StubServer(guess_and_words_reply, latency_s=0.05) as model:
        process = rollout(
            "--env", f"openenv:{guess_url.replace('http', 'ws')}", "--base-url", model.base_url,
            "--model", "stub", "--n", "32", "--concurrency", "16", "--max-turns", "12",
            "--output", str(run_dir),
        )  # fmt: skip
        _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-3000:]
    after = counts(guess_url)
    trajectories = lines(run_dir)
    assert len(trajectories) == 32
    played = {e["seed"]: e for e in after["episodes"]}
    for t in trajectories:
        seed = t["task"]["metadata"]["seed"]
        secret = random.Random(seed).randint(1, 100)
        # The server's session saw exactly this episode's guesses: no session got another's.
        assert played[seed]["actions"] == guesses(t) and guesses(t)[-1] == secret
        assert t.get("failure") is None and t["episode"]["score"] == 1.0 and t["success"]
        offered = {tool["function"]["name"] for tool in t["provenance"]["tools"]}
        assert offered == ({"guess", "parity"} if seed % 2 else {"guess"})
    assert after["built"] - before["built"] == 32
    assert after["closed"] - before["closed"] == 32
    assert after["peak"] >= 12  # (16 at once but for a slow start on a busy machine)


def test_a_text_action_environment_rolls_out(words_url: str, tmp_path: Path) -> None:
    with StubServer(guess_and_words_reply) as model:
        process = rollout(
            "--env", f"openenv:{words_url}", "--base-url", model.base_url, "--model", "stub",
            "--n", "6", "--concurrency", "3", "--max-turns", "8", "--output", str(tmp_path / "r"),
        )  # fmt: skip
        _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-3000:]
    trajectories = lines(tmp_path / "r")
    assert [t["episode"]["score"] for t in trajectories] == [1.0] * 6
    assert all(t["stop_reason"] == "answered" for t in trajectories)


@pytest.mark.slow  # its own OpenEnv server and a Ctrl-C: ~30 s
def test_ctrl_c_closes_every_session(tmp_path: Path) -> None:
    with openenv_server("guess") as (url, _), StubServer(guess_and_words_reply,
                                                         latency_s=0.5) as model:  # fmt: skip
        process = rollout(
            "--env", f"openenv:{url}", "--base-url", model.base_url, "--model", "stub",
            "--n", "64", "--concurrency", "16", "--max-turns", "12",
            "--output", str(tmp_path / "run"),
        )  # fmt: skip
        try:
            assert wait_for(lambda: counts(url)["built"] - counts(url)["closed"] >= 16, 120)
        finally:
            process.send_signal(signal.SIGINT)
            _stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 130, stderr[-3000:]
        assert wait_for(lambda: counts(url)["built"] == counts(url)["closed"], 15), counts(url)
        assert counts(url)["built"] >= 16


@pytest.mark.slow  # its own OpenEnv server, killed: ~30 s
def test_a_server_killed_mid_run_fails_the_episodes_it_leaves(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with openenv_server("guess") as (url, server), StubServer(guess_and_words_reply,
                                                              latency_s=0.1) as model:  # fmt: skip
        process = rollout(
            "--env", f"openenv:{url}", "--base-url", model.base_url, "--model", "stub",
            "--n", "40", "--concurrency", "4", "--max-turns", "12", "--output", str(run_dir),
        )  # fmt: skip
        assert wait_for(lambda: len(lines(run_dir)) >= 4, 120)
        os.killpg(server.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-3000:]
    assert time.monotonic() - killed_at < 120
    trajectories = lines(run_dir)
    assert len(trajectories) == 40
    scored = [t for t in trajectories if t.get("failure") is None]
    failed = [t for t in trajectories if t.get("failure") is not None]
    assert len(scored) >= 4 and all(t["episode"]["score"] == 1.0 for t in scored)
    assert failed, "the episodes after the kill must fail"
    for t in failed:
        assert t["failure"]["kind"] == "tool_server_error", t["failure"]
        assert t["failure"]["message"].startswith("OpenEnv server ws://127.0.0.1:")
        assert t.get("episode") is None and t["stop_reason"] == "error"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episodes"] == 40
