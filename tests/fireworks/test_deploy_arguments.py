"""`.deploy(name=..., description=..., force=..., providers=...)` as Reward Kit documents it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.loading import load_object
from rk_agent.testing.fake_fireworks import FakeFireworks

from .conftest import ACCOUNT, SECRET

WORD_COUNT = """from rk_agent import reward_function, EvaluateResult


@reward_function
def word_count_reward(messages, original_messages=None, **kwargs):
    words = len(messages[-1]["content"].split())
    return EvaluateResult(score=min(words / 100, 1.0), reason=f"{words} words")
"""
PROVIDERS = [{"providerType": "fireworks", "modelId": "accounts/fireworks/models/llama-v3-8b"}]


@pytest.fixture
def word_count_reward(tmp_path: Path) -> object:
    path = tmp_path / "word_count.py"
    path.write_text(WORD_COUNT)
    return load_object(f"{path}::word_count_reward", kind="reward")


@pytest.fixture
def env(fake: FakeFireworks, monkeypatch: pytest.MonkeyPatch) -> FakeFireworks:
    monkeypatch.setenv("FIREWORKS_API_KEY", SECRET)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", ACCOUNT)
    monkeypatch.setenv("FIREWORKS_API_BASE", fake.url)
    return fake


def test_the_guide_form_returns_the_evaluator_id(
    env: FakeFireworks, word_count_reward: object, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluator_id = word_count_reward.deploy(  # type: ignore[attr-defined]
        name="word-count-evaluator",
        description="Evaluates responses based on word count",
        poll_s=0.01,
    )
    print(f"Deployed with ID: {evaluator_id}")

    assert capsys.readouterr().out == "Deployed with ID: word-count-evaluator\n"
    record = env.evaluators["word-count-evaluator"]
    assert record["description"] == "Evaluates responses based on word count"
    assert record["state"] == "ACTIVE"


def test_force_replaces_and_providers_warns_that_it_changes_nothing(
    env: FakeFireworks, word_count_reward: object, tmp_path: Path
) -> None:
    word_count_reward.deploy(name="word-count", poll_s=0.01)  # type: ignore[attr-defined]
    changed = tmp_path / "word_count.py"
    changed.write_text(WORD_COUNT.replace("/ 100", "/ 50"))
    newer = load_object(f"{changed}::word_count_reward", kind="reward")
    with pytest.warns(
        UserWarning,
        match=re.escape(
            "deploy(providers=...) is ignored (models: accounts/fireworks/models/llama-v3-8b)"
        ),
    ):
        deployment = newer.deploy(  # type: ignore[attr-defined]
            name="word-count", description="d", force=True, providers=PROVIDERS, poll_s=0.01
        )
    assert deployment.action == "replaced"
    sent = [r.json for r in env.requests if r.path.endswith("/evaluatorsV2")]
    assert all("providers" not in str(body) for body in sent)


def test_account_id_and_auth_token_are_the_credentials(
    fake: FakeFireworks, word_count_reward: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREWORKS_API_BASE", fake.url)  # no key or account in the environment
    deployment = word_count_reward.deploy(  # type: ignore[attr-defined]
        name="wc", account_id=ACCOUNT, auth_token=SECRET, poll_s=0.01
    )
    assert deployment.evaluator.name == f"accounts/{ACCOUNT}/evaluators/wc"
    assert str(deployment) == "wc"


def test_bad_providers_and_credentials_twice_are_config_errors(
    client: FireworksClient, word_count_reward: object
) -> None:
    with pytest.raises(ConfigError, match=re.escape("providers must be a list of")):
        word_count_reward.deploy(name="wc", providers="fireworks", client=client)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=re.escape("Pass one or the other.")):
        word_count_reward.deploy(name="wc", account_id=ACCOUNT, client=client)  # type: ignore[attr-defined]
