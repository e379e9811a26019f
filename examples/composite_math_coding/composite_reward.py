"""A composite reward for a dataset that mixes math and coding problems.

Each problem says what it is in a ``kind`` column (``"math"`` or ``"code"``). Two components
wrap rk-agent's built-in rewards:

- ``math``: the built-in ``math`` reward (the final answer equals ``ground_truth``) on math
  problems, 0.0 on the others;
- ``code``: the built-in ``code_execution`` reward (the fraction of the tests in
  ``ground_truth`` the code passes, run in the sandbox) on coding problems, 0.0 on the others.

`composite` combines them with ``combine(..., method="weighted_sum")``: each problem is scored
by the one component that applies, and the result keeps both components' metrics
(``math.correct``, ``code.pass_rate``, ...). A ``kind`` that is neither makes the score invalid
rather than a silent 0.
"""

from __future__ import annotations

from typing import Any

from rk_agent import EvaluateResult, Message, combine, reward_function
from rk_agent.rewards.builtin.code_execution import code_execution_reward
from rk_agent.rewards.builtin.math import math_reward

KINDS = ("math", "code")


def _other_kind(kind: object, wanted: str) -> EvaluateResult | None:
    """``None`` when the problem is of the ``wanted`` kind, else this component's result."""
    if kind == wanted:
        return None
    if kind not in KINDS:
        return EvaluateResult(
            score=0.0, is_score_valid=False,
            error=f"expected kind 'math' or 'code', got {kind!r}; fix the dataset's kind column",
        )  # fmt: skip
    return EvaluateResult(score=0.0, reason=f"a {kind} problem: scored by the {kind} component")


@reward_function
def math_part(
    messages: list[Message], ground_truth: Any = None, kind: str = "", **kwargs: Any
) -> EvaluateResult:
    """The built-in math reward, on math problems."""
    other = _other_kind(kind, "math")
    return other if other is not None else math_reward(messages, ground_truth=ground_truth)


@reward_function
def code_part(
    messages: list[Message], ground_truth: Any = None, kind: str = "", **kwargs: Any
) -> EvaluateResult:
    """The built-in code-execution reward, on coding problems."""
    other = _other_kind(kind, "code")
    if other is not None:
        return other
    return code_execution_reward(messages, ground_truth=ground_truth)


composite = combine({"math": math_part, "code": code_part}, method="weighted_sum",
                    name="math_and_code")  # fmt: skip
