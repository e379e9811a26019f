"""Fixtures: a fake Fireworks API on loopback and a client pointed at it, in a clean environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rk_agent.fireworks.auth import Credentials
from rk_agent.fireworks.client import FireworksClient
from rk_agent.testing.fake_fireworks import FakeFireworks

SECRET = "fw-SECRET-key-0123456789"
ACCOUNT = "acme"
REWARD_SOURCE = '''"""Rewards for the Fireworks tests."""
from rk_agent import reward_function


@reward_function(requirements=["regex>=2024.1"])
def exact(response: str, ground_truth: str) -> float:
    """1.0 when the answer is exactly the ground truth."""
    return float(response.strip() == str(ground_truth).strip())
'''


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real credentials leak in: a fresh HOME, no FIREWORKS_* variables."""
    for name in (
        "FIREWORKS_API_KEY", "FIREWORKS_ACCOUNT_ID", "FIREWORKS_API_BASE", "FIREWORKS_PROFILE",
        "FIREWORKS_AUTH_FILE", "WANDB_API_KEY",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def fake() -> Iterator[FakeFireworks]:
    with FakeFireworks(api_key=SECRET, account_id=ACCOUNT) as server:
        yield server


@pytest.fixture
def client(fake: FakeFireworks) -> Iterator[FireworksClient]:
    credentials = Credentials(api_key=SECRET, account_id=ACCOUNT, api_base=fake.url)
    with FireworksClient(credentials, backoff_s=0.001, backoff_max_s=0.05) as made:
        yield made


@pytest.fixture
def reward_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_rewards.py"
    path.write_text(REWARD_SOURCE)
    return path
