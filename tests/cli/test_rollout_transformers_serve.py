"""Rollouts against a server the project did not write: ``transformers serve`` with the embedded
model, on loopback.

The stub server answers as the project believes an OpenAI-compatible server answers; this one
answers as one really does (offline, its ``GET /v1/models`` answers 500 while its chat
completions work), so a change to the client or to the start-up check cannot pass against the
stub alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rk_agent.policies.openai_policy import OpenAIPolicy
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.types import Message

pytestmark = pytest.mark.slow  # loads the embedded model in a server process: ~30 s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    def __init__(self, base_url: str, model: str) -> None:
        self.base_url = base_url
        self.model = model


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``transformers serve`` on a free loopback port, offline, and the embedded model's path."""
    from rk_agent.policies.local_model import embedded_model_path

    model = str(embedded_model_path(progress=None))
    port = free_port()
    log = tmp_path_factory.mktemp("transformers-serve") / "serve.log"
    command = [str(Path(sys.executable).with_name("transformers")), "serve"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("w") as out:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield Served(f"http://127.0.0.1:{port}/v1", model)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_its_models_route_really_fails_offline(served: Served) -> None:
    # The premise of this module: if this starts passing, the check below is tested by the stub's
    # models_status alone, and the other tests here still run rollouts for real.
    listed = httpx.get(served.base_url + "/models", timeout=60)
    assert listed.status_code >= 400 or listed.json()["object"] == "list"


def test_a_rollout_starts_and_plays_against_it(served: Served, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", "rollout", "--env", "tools",
         "--base-url", served.base_url, "--model", served.model, "--n", "2",
         "--max-turns", "2", "--output", str(run_dir)],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=280,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Summary of" in out.stdout
    text = (run_dir / "trajectories.jsonl").read_text()
    trajectories = [json.loads(line) for line in text.splitlines()]
    assert sorted(t["id"] for t in trajectories) == ["0-0", "1-0"]
    for trajectory in trajectories:
        assert trajectory.get("failure") is None  # written only when something failed
        assert trajectory["episode"]["is_score_valid"]
        replies = [turn["assistant"] for turn in trajectory["turns"]]
        assert replies and all(m.get("content") or m.get("tool_calls") for m in replies)
        assert all(turn["usage"]["completion_tokens"] > 0 for turn in trajectory["turns"])


def test_the_policy_reads_its_replies_and_usage(served: Served) -> None:
    policy = OpenAIPolicy(served.model, base_url=served.base_url)
    messages = [Message(role="user", content="Say hello.")]

    async def ask() -> PolicyOutput:
        try:
            return await policy.generate(messages, None, SamplingParams(max_tokens=4))
        finally:
            await policy.aclose()

    policy.check_endpoint()
    out = asyncio.run(ask())
    assert out.message.role == "assistant" and out.message.content
    assert out.usage is not None and out.usage.completion_tokens == 4
    assert out.finish_reason == "length"
