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


# --- the way back: a deployed reward called by name ------------------------------------------


def test_the_fireworks_hosted_source_loads_only_for_a_reward_called_by_name() -> None:
    from rk_agent.rewards.deploy_targets import get_hosted_source, hosted_source_names

    assert "fireworks" in hosted_source_names()
    code = (
        "import sys\n"
        "from rk_agent import RewardFunction\n"
        "RewardFunction(mode='remote', endpoint='http://127.0.0.1:9/evaluate')\n"
        "assert not [m for m in sys.modules if m.startswith('rk_agent.fireworks')]\n"
        "from rk_agent.rewards.deploy_targets import get_hosted_source\n"
        "source = get_hosted_source('fireworks')\n"
        "print(source.__module__, source.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "rk_agent.fireworks.hosted hosted_reward"
    with pytest.raises(UnknownNameError, match="fireworks"):
        get_hosted_source("fireworx")


def test_a_registered_source_serves_remote_rewards_by_name() -> None:
    from rk_agent import RewardFunction
    from rk_agent.rewards.deploy_targets import register_hosted_source
    from rk_agent.types import EvaluateResult

    asked: list[tuple[str, dict[str, Any]]] = []

    def source(name: str, **options: Any) -> Any:
        asked.append((name, options))
        return lambda call: EvaluateResult(score=float(len(call["messages"])))

    register_hosted_source("fireworks", source, overwrite=True)
    try:
        reward = RewardFunction(name="my-eval", mode="remote", api_key="k", timeout=5.0)
        chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "HI"}]
        assert reward(messages=chat).score == 2.0
    finally:
        register_hosted_source("fireworks", "rk_agent.fireworks.hosted:hosted_reward",
                               overwrite=True)  # fmt: skip
    assert asked == [("my-eval", {"api_key": "k", "timeout": 5.0})]
