"""The ``code`` environment: failed tests come back as feedback (real sandbox runs; kept few)."""

from __future__ import annotations

from typing import Any

import pytest

from rk_agent.envs import code_env
from rk_agent.envs.code_env import CodeEnv, solve
from rk_agent.types import EvaluateResult, Message, StopReason

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
