"""RFT with a self-hosted reward endpoint: a thin evaluator forwards each sample to the server.

The forwarding code runs for real: the fake API previews it in a subprocess, and it POSTs to a
real reward server on loopback (`rk_agent.server.serving`).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rk_agent import RewardFunction
from rk_agent.errors import ConfigError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.evaluators import deploy_package, preview_evaluator
from rk_agent.fireworks.forwarding import check_endpoint, forwarder_id, package_forwarder
from rk_agent.fireworks.launch import launch_rft
from rk_agent.fireworks.rft import RFTJobConfig, TrainingConfig
from rk_agent.server import serving
from rk_agent.testing.fake_fireworks import FakeFireworks

from .conftest import ACCOUNT, SECRET

SERVER_KEY = "srv-KEY-0123456789"
SAMPLES = [
    {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
     "ground_truth": "4"},
    {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "5"}],
     "ground_truth": "4"},
]  # fmt: skip
LOCAL = re.escape("is a local address: the evaluator runs on Fireworks and cannot reach it")


@pytest.fixture
def endpoint(reward_file: Path) -> Iterator[str]:
    with serving(f"{reward_file}::exact", api_key=SERVER_KEY) as url:
        yield f"{url}/evaluate"


def test_the_forwarder_scores_through_the_server(
    client: FireworksClient, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_AGENT_SERVER_API_KEY", SERVER_KEY)  # the secret where it runs
    result = preview_evaluator(package_forwarder(endpoint), SAMPLES, client=client)
    assert [(r.success, r.score) for r in result.results] == [(True, 1.0), (True, 0.0)]


def test_without_the_key_the_score_is_invalid_with_the_reason(
    client: FireworksClient, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RK_AGENT_SERVER_API_KEY", raising=False)
    result = preview_evaluator(package_forwarder(endpoint), SAMPLES[:1], client=client)
    (only,) = result.results
    assert not only.success and only.reason and f"HTTP 401 from {endpoint}" in only.reason


def test_the_package_holds_the_url_but_never_the_key() -> None:
    package = package_forwarder("https://rewards.example.com/evaluate", directory="fwd")
    with tarfile.open(fileobj=io.BytesIO(package.archive), mode="r:gz") as tar:
        text = b"".join(
            (tar.extractfile(m) or io.BytesIO()).read() for m in tar.getmembers() if m.isfile()
        )
    assert b"'https://rewards.example.com/evaluate'" in text
    assert SERVER_KEY.encode() not in text and b"'RK_AGENT_SERVER_API_KEY'" in text
    again = package_forwarder("https://rewards.example.com/evaluate", directory="fwd")
    assert again.digest == package.digest  # same URL, same code: a relaunch reuses it


def test_launch_with_an_endpoint_deploys_the_forwarder_and_creates_the_job(
    fake: FakeFireworks, client: FireworksClient, endpoint: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "2+2?", "ground_truth": "4"}) + "\n")
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    with pytest.warns(UserWarning, match=LOCAL):
        launch = launch_rft(tasks, reward_endpoint=endpoint, config=config, client=client,
                            job_id="job-1", poll_s=0.01)  # fmt: skip
    evaluator_id = forwarder_id(endpoint)
    assert evaluator_id.startswith("endpoint-127-0-0-1-")
    assert launch.deployment.evaluator.state == "ACTIVE"
    assert launch.job.evaluator == f"accounts/{ACCOUNT}/evaluators/{evaluator_id}"
    assert fake.evaluators[evaluator_id]["description"] == (
        f"rk-agent: forwards each sample to {endpoint}"
    )
    # The deployed forwarder, called by name, reaches the server too.
    monkeypatch.setenv("RK_AGENT_SERVER_API_KEY", SERVER_KEY)
    monkeypatch.setenv("FIREWORKS_API_KEY", SECRET)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", ACCOUNT)
    monkeypatch.setenv("FIREWORKS_API_BASE", fake.url)
    hosted = RewardFunction(name=evaluator_id, mode="remote")
    assert hosted(messages=SAMPLES[0]["messages"], ground_truth="4").score == 1.0


def test_reward_and_endpoint_together_or_neither(client: FireworksClient, tmp_path: Path) -> None:
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    with pytest.raises(ConfigError, match="exactly one; got both"):
        launch_rft(tmp_path, "format", reward_endpoint="https://x.example/evaluate",
                   config=config, client=client)  # fmt: skip
    with pytest.raises(ConfigError, match="exactly one; got neither"):
        launch_rft(tmp_path, config=config, client=client)


def test_endpoint_checks() -> None:
    with pytest.raises(ConfigError, match=re.escape("is not an http(s) URL")):
        check_endpoint("rewards.example.com/evaluate")
    with pytest.warns(UserWarning, match="is plain http"):
        check_endpoint("http://rewards.example.com/evaluate")
    with pytest.warns(UserWarning, match=LOCAL):
        check_endpoint("http://localhost:8000/evaluate")
    assert check_endpoint("https://rewards.example.com/evaluate").startswith("https://")


def test_an_unchanged_forwarder_is_reused(client: FireworksClient) -> None:
    package = package_forwarder("https://rewards.example.com/evaluate", directory="fwd")
    first = deploy_package(package, "fwd", client=client, poll_s=0.01)
    second = deploy_package(package, "fwd", client=client, poll_s=0.01)
    assert (first.action, second.action) == ("created", "unchanged")
