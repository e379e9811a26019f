"""Deploy targets: `.deploy(target=...)` finds its target by name; the reward API imports none."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from rk_agent import reward_function
from rk_agent.errors import ConfigError, UnknownNameError
from rk_agent.rewards.deploy_targets import (
    deploy_target_names,
    get_deploy_target,
    register_deploy_target,
)


@reward_function
def shout(response: str) -> float:
    return 1.0 if response.isupper() else 0.0


def test_deploy_calls_the_named_target_with_the_documented_arguments() -> None:
    calls: list[dict[str, Any]] = []

    def record(reward: Any, **kwargs: Any) -> str:
        calls.append({"reward": reward, **kwargs})
        return "deployed"

    register_deploy_target("record-test", record, overwrite=True)
    result = shout.deploy(
        name="shout-eval", description="all caps", force=True, target="record-test", wait=False
    )
    assert result == "deployed"
    assert calls == [
        {
            "reward": shout,
            "evaluator_id": "shout-eval",
            "description": "all caps",
            "force": True,
            "wait": False,
        }
    ]


def test_fireworks_is_the_built_in_target_loaded_only_when_asked_for() -> None:
    assert "fireworks" in deploy_target_names()
    code = (
        "import sys\n"
        "from rk_agent import reward_function\n"
        "assert 'rk_agent.fireworks.evaluators' not in sys.modules\n"
        "from rk_agent.rewards.deploy_targets import get_deploy_target\n"
        "target = get_deploy_target('fireworks')\n"
        "print(target.__module__, target.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "rk_agent.fireworks.evaluators deploy_reward"


def test_an_unknown_target_suggests_the_closest_name() -> None:
    with pytest.raises(UnknownNameError, match="fireworks"):
        shout.deploy(target="firework")


def test_a_target_that_is_not_callable_is_refused() -> None:
    register_deploy_target("not-callable-test", "os:sep", overwrite=True)
    with pytest.raises(ConfigError, match=r"deploy target 'not-callable-test' is a str"):
        get_deploy_target("not-callable-test")


def test_a_taken_name_needs_overwrite() -> None:
    with pytest.raises(ConfigError, match="a deploy target named 'fireworks' is already"):
        register_deploy_target("fireworks", lambda reward, **kw: None)
