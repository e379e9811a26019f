"""A reward deployed to Fireworks, called by name as the launch post writes it (the fake API)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from rk_agent import RewardFunction
from rk_agent.errors import ConfigError, FireworksError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.evaluators import deploy_reward
from rk_agent.fireworks.hosted import HostedReward, sample_for_preview
from rk_agent.testing.fake_fireworks import FakeFireworks

from .conftest import ACCOUNT, SECRET

NAME = "combined-reward-prod"
RIGHT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
WRONG = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "5"}]


@pytest.fixture
def account(fake: FakeFireworks, monkeypatch: pytest.MonkeyPatch) -> FakeFireworks:
    """Credentials in the environment, as a user of the launch post has them."""
    monkeypatch.setenv("FIREWORKS_API_KEY", SECRET)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", ACCOUNT)
    monkeypatch.setenv("FIREWORKS_API_BASE", fake.url)
    return fake


def _deploy(client: FireworksClient, reward_file: Path, **options: object) -> None:
    deploy_reward(f"{reward_file}::exact", evaluator_id=NAME, client=client, poll_s=0.01,
                  **options)  # type: ignore[arg-type]  # fmt: skip


def test_called_by_name_runs_the_deployed_code(
    account: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    _deploy(client, reward_file)

    reward = RewardFunction(name="combined-reward-prod", mode="remote")

    assert reward(messages=RIGHT, ground_truth="4").score == 1.0
    wrong = reward(messages=WRONG, ground_truth="4")
    assert wrong.score == 0.0 and wrong.is_score_valid
    assert asyncio.run(reward.acall(messages=RIGHT, ground_truth="4")).score == 1.0
    assert reward.name == NAME and repr(reward) == f"RewardFunction({NAME!r}, mode='remote')"
    calls = account.calls()
    path = f"/v1/accounts/{ACCOUNT}/evaluators"
    assert f"GET {path}/{NAME}" in calls
    assert calls[-3:] == [f"POST {path}:previewEvaluator"] * 3
    sent = account.requests[-1].json["evaluator"]
    assert sent["name"] == f"accounts/{ACCOUNT}/evaluators/{NAME}"
    assert sent["entryPoint"] == "main.py::evaluate" and "state" not in sent
    assert "criteria" not in sent  # the code is the deployed one, not sent again


def test_a_failing_sample_is_an_invalid_score(
    account: FakeFireworks, client: FireworksClient, tmp_path: Path
) -> None:
    path = tmp_path / "fragile.py"
    path.write_text(
        "from rk_agent import reward_function\n\n@reward_function\n"
        "def fragile(messages, **kwargs):\n    raise ValueError('cannot score this')\n"
    )
    deploy_reward(f"{path}::fragile", evaluator_id=NAME, client=client, poll_s=0.01)
    result = RewardFunction(name=NAME, mode="remote")(messages=RIGHT)
    assert not result.is_score_valid and result.score == 0.0
    assert result.error and "ValueError: cannot score this" in result.error


def test_unknown_name_says_how_to_deploy_and_suggests_the_closest(
    account: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    _deploy(client, reward_file)
    with pytest.raises(FireworksError) as caught:
        RewardFunction(name="combined-reward-prd", mode="remote")
    message = str(caught.value)
    assert caught.value.status == 404
    assert f"no evaluator 'combined-reward-prd' in Fireworks account {ACCOUNT!r}." in message
    assert f"Did you mean {NAME!r}?" in message
    assert "rk-agent deploy my_rewards.py::my_reward --id combined-reward-prd" in message
    assert f"GET /v1/accounts/{ACCOUNT}/evaluators" in account.calls()


def test_an_evaluator_still_building_is_refused(
    account: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    account.build_polls = 100
    _deploy(client, reward_file, wait=False)
    with pytest.raises(
        FireworksError, match=re.escape(f"evaluator {NAME!r} is BUILDING, not ACTIVE")
    ):
        RewardFunction(name=NAME, mode="remote")


def test_a_failed_build_is_refused(
    account: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    account.fail_build("Collecting regex\nERROR: no matching distribution for regex")
    with pytest.raises(FireworksError, match="failed to build"):
        _deploy(client, reward_file)
    with pytest.raises(
        FireworksError, match=re.escape(f"evaluator {NAME!r} failed to build: ")
    ) as caught:
        RewardFunction(name=NAME, mode="remote")
    assert "--force" in str(caught.value)


def test_no_credentials_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=re.escape("no Fireworks API key: set FIREWORKS_API_KEY")):
        RewardFunction(name=NAME, mode="remote")


def test_neither_endpoint_nor_name() -> None:
    with pytest.raises(ConfigError, match=re.escape("or name='my-evaluator'")):
        RewardFunction(mode="remote")


def test_the_hosted_reward_is_a_plain_scorer(
    account: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    from rk_agent.fireworks.hosted import hosted_reward

    _deploy(client, reward_file)
    scorer = hosted_reward(f"accounts/{ACCOUNT}/evaluators/{NAME}")
    assert isinstance(scorer, HostedReward)
    assert scorer({"messages": RIGHT, "ground_truth": "4"}).score == 1.0


def test_sample_for_preview_keeps_extra_arguments_at_the_top() -> None:
    sample = sample_for_preview({"messages": RIGHT, "ground_truth": "4", "threshold": 2})
    assert sample == {"messages": RIGHT, "ground_truth": "4", "threshold": 2}
