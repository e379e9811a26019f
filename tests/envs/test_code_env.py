"""The ``code`` environment: failed tests come back as feedback (real sandbox runs; kept few)."""

from __future__ import annotations

from typing import Any

import pytest

from rk_agent.envs import code_env
from rk_agent.envs.code_env import CodeEnv, solve
from rk_agent.errors import ConfigError
from rk_agent.types import EvaluateResult, Message, StopReason
from tests.sandbox.support import needs_bwrap

pytestmark = needs_bwrap

TASK = {
    "id": "add",
    "messages": [{"role": "user", "content": "Write `add(a, b)`."}],
    "ground_truth": [{"fn_name": "add", "args": [1, 2], "expected": 3},
                     {"fn_name": "add", "args": [5, 0], "expected": 5}],
}  # fmt: skip
WRONG = {"role": "assistant", "content": "```python\ndef add(a, b):\n    return a - b\n```"}
RIGHT = {"role": "assistant", "content": "```python\ndef add(a, b):\n    return a + b\n```"}


def test_failures_are_fed_back_until_the_tests_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[EvaluateResult] = []
    real = code_env.code_execution_reward

    def counted(*args: Any, **kwargs: Any) -> EvaluateResult:
        runs.append(real(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(code_env, "code_execution_reward", counted)  # a spy: the sandbox runs
    env = CodeEnv()
    observation, _ = env.reset(options={"task": TASK})
    assert observation[0]["role"] == "system"
    _, reward, terminated, _, _ = env.step(WRONG)
    assert not terminated and reward == 0.0
    feedback = env.state.messages[-1].text
    assert feedback.startswith("Your code did not pass the tests: 1/2 test cases passed; first")
    assert "add(*[1, 2])" in feedback
    _, reward, terminated, _, info = env.step(RIGHT)
    assert terminated and reward == 1.0
    assert info["episode"].metrics["tests.pass_rate"].score == 1.0
    assert len(runs) == 2  # the final reply ran in the sandbox once, not twice


def test_the_example_is_not_a_scored_test_and_feedback_reveals_no_expected_value() -> None:
    env = CodeEnv()
    for seed in range(40):  # generation only: no sandbox run
        task = env.reset(seed=seed)[1]["task"]
        shown = task.messages[-1].text.rsplit("For example, `", 1)[1]
        for test in task.ground_truth:
            call = f"{test['fn_name']}({', '.join(repr(a) for a in test['args'])})`"
            assert not shown.startswith(call), (seed, shown)
    env.reset(seed=0)
    env.step({"role": "assistant", "content": "```python\ndef caesar(text):\n    return text\n```"})
    assert env.state.messages[-1].text == (
        "Your code did not pass the tests: 1/6 test cases passed; first failure: test 0 "
        "(caesar(*['cat cat apple'])): returned 'cat cat apple'.\nFix it and reply with the "
        "complete corrected function in one ```python block."
    )


def test_out_of_turns_is_truncated_with_the_last_pass_rate() -> None:
    env = CodeEnv(max_turns=1)
    env.reset(options={"task": TASK})
    _, reward, terminated, truncated, info = env.step(WRONG)
    assert truncated and not terminated and info["stop_reason"] is StopReason.MAX_TURNS
    assert reward == 0.5 and info["episode"].score == 0.5


def test_no_code_gets_feedback_without_running_anything() -> None:
    env = CodeEnv()
    env.reset(options={"task": TASK})
    env.step({"role": "assistant", "content": "Sure! Here is how you add numbers."})
    assert "no Python code found in the response" in env.state.messages[-1].text


def test_solver_writes_code_that_passes_the_hidden_tests() -> None:
    env = CodeEnv()
    observation, info = env.reset(seed=5)
    reply = solve(Message.coerce_list(observation))
    _, reward, terminated, _, _ = env.step(reply)
    assert terminated and reward == 1.0
    assert len(info["task"].ground_truth) == 6


def _best_known_hack(messages: list[Message], tools: Any) -> str:
    """Every trick at once, for whichever function the task names: forge the result channel,
    hunt the expected values through frames and gc, answer with an always-equal int, exit 0."""
    question = next(m.text for m in messages if m.role == "user")
    name = question.split("`", 2)[1].split("(", 1)[0]
    return (
        "```python\nimport gc, json, os, sys\n"
        "class Eq(int):\n    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n    __hash__ = int.__hash__\n"
        "for i in range(6):\n    try:\n"
        "        os.write(3, (json.dumps([i, 'value', {'opaque': 'x'}]) + '\\n').encode())\n"
        "    except OSError:\n        pass\n"
        f"def {name}(*args):\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'expected' in o and o.get('args') == list(args):\n"
        "            return o['expected']\n"
        "    f = sys._getframe()\n    while f is not None:\n"
        "        if 'expected' in f.f_locals:\n            return f.f_locals['expected']\n"
        "        f = f.f_back\n"
        "    return Eq(0)\n```"
    )


def test_a_policy_that_always_hacks_gets_no_success() -> None:
    import asyncio

    from rk_agent.policies.function_policy import FunctionPolicy
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.runs.config import RolloutConfig

    config = RolloutConfig(env="code", n=6, group_size=1, concurrency=2, seed=0, max_turns=2)
    result = asyncio.run(
        run_rollouts(config, policy=FunctionPolicy(_best_known_hack), make_env=CodeEnv,
                     env_name="code")
    )  # fmt: skip
    trajectories = result.trajectories
    assert len(trajectories) == 6
    assert [t.success for t in trajectories] == [False] * 6
    assert all(t.episode is not None and t.episode.score == 0.0 for t in trajectories)
    assert {t.episode.metrics["tests.sandbox"].reason for t in trajectories if t.episode} == {
        "bwrap"
    }
    # The same hack against the reference solver's tasks: the honest answer still passes.
    env = CodeEnv()
    observation, _ = env.reset(seed=0)
    _, reward, _, _, _ = env.step(solve(Message.coerce_list(observation)))
    assert reward == 1.0


def test_sandbox_mode_is_recorded_and_checked_at_start_up() -> None:
    env = CodeEnv(sandbox="process")
    env.reset(options={"task": TASK})
    _, _, _, _, info = env.step(RIGHT)
    assert info["episode"].metrics["tests.sandbox"].reason == "process"
    with pytest.raises(ConfigError, match="unknown sandbox mode 'docker'"):
        CodeEnv(sandbox="docker")
