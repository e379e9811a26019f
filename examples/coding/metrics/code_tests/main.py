"""The coding metric, as a Reward Kit metric folder: the fraction of test cases the code passes.

It wraps rk-agent's built-in ``code_execution`` reward (the code runs in the sandbox), so the
folder works with ``rk-agent preview --metrics-folders``, ``rk-agent deploy --metrics-folders``
and ``rk_agent.evaluation``.
"""

from __future__ import annotations

from typing import Any

from rk_agent import EvaluateResult, Message, reward_function
from rk_agent.rewards.builtin.code_execution import code_execution_reward


@reward_function
def evaluate(messages: list[Message], ground_truth: Any = None, **kwargs: Any) -> EvaluateResult:
    """Run the code in the last assistant message against the test cases in ground_truth."""
    return code_execution_reward(messages, ground_truth=ground_truth)
