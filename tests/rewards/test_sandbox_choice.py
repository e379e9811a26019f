"""fix_sandbox: a host's choice of sandbox mode holds for every sample of a code reward."""

from __future__ import annotations

import asyncio
import re
import sys
from typing import Any

import pytest

from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.rewards.decorator import reward_function
from rk_agent.rewards.registry import get_reward_function
from rk_agent.rewards.sandbox_choice import fix_sandbox, takes_sandbox
from rk_agent.sandbox import SandboxMode, run_python_async
from tests.sandbox.support import needs_bwrap

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux")

CODE = [{"role": "user", "content": "Print 2."},
        {"role": "assistant", "content": "```python\nprint(2)\n```"}]  # fmt: skip
TESTS = [{"input": "", "expected_output": "2"}]


@reward_function
async def async_runner(response: str, sandbox: str = "bwrap") -> float:
    """Runs the reply's code, async; 1.0 when it printed 2."""
    code = response.split("```python\n")[1].split("```")[0]
    return float((await run_python_async(code, sandbox=sandbox)).stdout == "2\n")


@reward_function
def takes_anything(messages: list[Any], **kwargs: Any) -> float:
    """Takes any option, runs no code."""
    return 1.0


def test_takes_sandbox() -> None:
    assert takes_sandbox(get_reward_function("code_execution"))
    assert takes_sandbox(async_runner)
    assert not takes_sandbox(get_reward_function("math"))
    assert not takes_sandbox(takes_anything)  # **kwargs alone does not run code


def test_rewards_that_run_no_code() -> None:
    math = get_reward_function("math")
    assert fix_sandbox(math, None) is math
    with pytest.raises(ConfigError, match=re.escape("reward 'math' takes none. Drop --sandbox.")):
        fix_sandbox(math, "process")
    with pytest.raises(ConfigError, match="takes none"):
        fix_sandbox(takes_anything, SandboxMode.PROCESS)


def test_the_mode_holds_for_every_sample() -> None:
    reward = fix_sandbox(get_reward_function("code_execution"), "process")
    assert reward.reward_spec.name == "code_execution"
    result = reward(messages=CODE, ground_truth=TESTS)
    assert result.score == 1.0 and result.metrics["sandbox"].reason == "process"
    same = reward(messages=CODE, ground_truth=TESTS, sandbox="process")
    assert same.metrics["sandbox"].reason == "process"
    with pytest.raises(RewardInputError, match=r"asks for sandbox 'bwrap'.*mode 'process' here"):
        reward(messages=CODE, ground_truth=TESTS, sandbox="bwrap")
    with pytest.raises(ConfigError, match="unknown sandbox mode 'docker'"):
        fix_sandbox(get_reward_function("code_execution"), "docker")


@needs_bwrap
def test_the_default_is_bwrap_and_async_rewards_stay_async() -> None:
    reward = fix_sandbox(get_reward_function("code_execution"), None)
    assert reward(messages=CODE, ground_truth=TESTS).metrics["sandbox"].reason == "bwrap"
    fixed = fix_sandbox(async_runner, "process")
    assert fixed.reward_spec.is_async
    assert asyncio.run(fixed(messages=CODE)).score == 1.0  # type: ignore[arg-type]
    with pytest.raises(RewardInputError, match="asks for sandbox 'bwrap'"):
        asyncio.run(fixed(messages=CODE, sandbox="bwrap"))  # type: ignore[arg-type]
