"""Rewards for environments whose tasks end in a short final answer reached with tools.

Main names:
    answer_match: ``"answer_match"``, 1.0 when the final ``Answer: <value>`` line equals the
        ground truth (numbers within a tolerance; text ignoring case, accents, end punctuation).
    answer_given: ``"answer_given"``, 1.0 when the last reply ends the episode with an
        ``Answer: <value>`` line, right or wrong: a shaping term that makes answering worth more
        than running out of turns.
    tool_efficiency: tool calls needed / made (capped at 1), with call and turn metrics.
    tool_use_reward: per-step shaping, +0.05 for successful tool calls the task needs, -0.1 for
        failed ones.
    extract_final_answer: the final answer of a reply, by the rule `answer_match` uses.

They are plain decorated rewards (``@reward_function``): the ``tools`` environment uses them,
and any environment of yours can name them in its ``default_episode_rewards`` /
``default_step_rewards``. `tool_use_reward` reads ``tool_calls`` (the step's
`ToolCallRecord` list), which `ChatEnv` passes to step rewards.

Example:
    >>> answer_match([{"role": "assistant", "content": "Lookups done.\\nAnswer: Paris"}],
    ...              ground_truth="paris").score
    1.0
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from rk_agent.envs.base import ToolCallRecord
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = [
    "FAILURE_PENALTY",
    "SUCCESS_BONUS",
    "answer_given",
    "answer_match",
    "extract_final_answer",
    "tool_efficiency",
    "tool_use_reward",
]

SUCCESS_BONUS = 0.05
"""Step reward for a step whose tool calls all succeed."""

FAILURE_PENALTY = 0.1
"""Step penalty for a step whose tool calls all fail."""

_ANSWER_LINE = re.compile(r"^[\W_]*(?:final\s+)?answer\s*[:=]\s*(.*?)\s*$", re.I | re.M)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")


def extract_final_answer(text: str) -> tuple[str | None, bool]:
    """The final answer of a reply and whether it was marked: ``("0.81", True)``.

    The last ``Answer: ...`` line wins; a reply that is one short line is its own (unmarked)
    answer; otherwise there is none.
    """
    found = [a.strip(" *_`") for a in _ANSWER_LINE.findall(text)]
    if found and found[-1]:
        return found[-1], True
    stripped = text.strip()
    if stripped and "\n" not in stripped and len(stripped) <= 40:
        return stripped, False
    return None, False


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(text.casefold().strip(" \t.,;:!?\"'`*").split())


def _matches(answer: str, gold: Any, tolerance: float) -> bool:
    if isinstance(gold, (int, float)) and not isinstance(gold, bool):
        number = _NUMBER.search(answer)
        if number is None:
            return False
        value = float(number.group().replace(",", ""))
        return abs(value - gold) <= tolerance + 1e-9 * max(1.0, abs(gold))
    return _normalise(answer) == _normalise(str(gold))


@reward_function(
    name="answer_match",
    description="1.0 when the final 'Answer: ...' equals ground_truth (numbers within tolerance)",
)
def answer_match(
    messages: list[Message],
    ground_truth: Any = None,
    metadata: dict[str, Any] | None = None,
    *,
    tolerance: float | None = None,
    **kwargs: Any,
) -> EvaluateResult:
    """Score 1.0 when the last assistant message's final answer equals ``ground_truth``.

    The answer is the last ``Answer: <value>`` line (or the whole reply when it is one short
    line). A numeric ground truth matches the first number of the answer within ``tolerance``
    (default: ``metadata["tolerance"]``, else 0); text matches ignoring case, accents, extra
    spaces and end punctuation. Metrics: ``answer_found``, ``format`` (the ``Answer:`` line was
    used), ``correct``.

    Example:
        >>> reply = [{"role": "assistant", "content": "Answer: 0.8"}]
        >>> answer_match(reply, ground_truth=0.81, metadata={"tolerance": 0.01}).score
        1.0
        >>> answer_match(reply, ground_truth=0.83, metadata={"tolerance": 0.01}).score
        0.0
    """
    if ground_truth is None:
        return EvaluateResult.invalid("answer_match needs a ground_truth")
    reply = last_reply(messages)
    if reply is None:
        return no_reply("answer_match")
    if tolerance is None:
        tolerance = float((metadata or {}).get("tolerance", 0.0))
    answer, marked = extract_final_answer(reply.text)
    correct = answer is not None and _matches(answer, ground_truth, tolerance)
    if answer is None:
        reason = f"no final answer (expected 'Answer: {ground_truth}')"
    else:
        verdict = "equals" if correct else "differs from"
        reason = f"answer {answer[:60]!r} {verdict} expected {ground_truth!r}"
        if tolerance and isinstance(ground_truth, (int, float)):
            reason += f" (tolerance {tolerance:g})"
    return EvaluateResult(
        score=float(correct),
        reason=reason,
        metrics={
            "answer_found": MetricResult(
                score=float(answer is not None), success=answer is not None
            ),
            "format": MetricResult(score=float(marked), success=marked),
            "correct": MetricResult(score=float(correct), success=correct, reason=reason),
        },
    )


@reward_function(
    name="answer_given",
    description="1.0 when the last reply gives an 'Answer: ...' line, right or wrong",
)
def answer_given(messages: list[Message], **kwargs: Any) -> EvaluateResult:
    """Score 1.0 when the last assistant message has an ``Answer: <value>`` line.

    Right or wrong: weighted low next to `answer_match`, it makes a well-formed final answer
    worth more than no answer at all, so a policy is not paid the same for running out of turns
    as for answering wrongly.

    Example:
        >>> answer_given([{"role": "assistant", "content": "Answer: 12"}]).score
        1.0
        >>> answer_given([{"role": "assistant", "content": "Let me look that up."}]).score
        0.0
    """
    reply = last_reply(messages)
    if reply is None:
        return no_reply("answer_given")
    answer, marked = extract_final_answer(reply.text)
    given = answer is not None and marked
    reason = "an 'Answer:' line was given" if given else "no 'Answer: <value>' line"
    return EvaluateResult(score=float(given), reason=reason)


def _calls_made(messages: list[Message]) -> int:
    """The tool calls the assistant made in ``messages``."""
    return sum(len(m.tool_calls or []) for m in messages if m.role == "assistant")


@reward_function(
    name="tool_efficiency",
    description="minimum tool calls needed / tool calls made (capped at 1), with call metrics",
)
def tool_efficiency(
    messages: list[Message], metadata: dict[str, Any] | None = None, **kwargs: Any
) -> EvaluateResult:
    """How economically the episode used tools: ``min(1, needed / made)``.

    ``needed`` is ``metadata["min_tool_calls"]``; without it the score is invalid (the metrics
    are still there). Metrics: ``tool_calls_made``, ``tool_calls_failed``, ``turns``.
    """
    made = _calls_made(messages)
    failed = sum(1 for m in messages if m.role == "tool" and m.text.startswith("Error"))
    turns = sum(1 for m in messages if m.role == "assistant")
    metrics = {
        "tool_calls_made": MetricResult(score=float(made)),
        "tool_calls_failed": MetricResult(score=float(failed), success=failed == 0),
        "turns": MetricResult(score=float(turns)),
    }
    needed = (metadata or {}).get("min_tool_calls")
    if needed is None:
        return EvaluateResult(
            score=0.0, is_score_valid=False, error="metadata has no min_tool_calls",
            reason="metadata has no min_tool_calls", metrics=metrics,
        )  # fmt: skip
    score = min(1.0, needed / made) if made else float(needed == 0)
    return EvaluateResult(
        score=score, reason=f"{made} tool calls made, {needed} needed", metrics=metrics
    )


@reward_function(
    name="tool_use",
    description="+0.05 for a step whose needed tool calls succeed, -0.1 for one whose calls fail",
)
def tool_use_reward(
    tool_calls: list[ToolCallRecord] | None = None,
    messages: list[Message] | None = None,
    metadata: dict[str, Any] | None = None,
    **kwargs: Any,
) -> EvaluateResult:
    """Per-step shaping for tool use: the mean over the step's calls of +0.05 (success) or -0.1
    (bad arguments, unknown tool, an exception or timeout in the tool). 0 for a step without
    tool calls.

    Only the calls the task needs earn the bonus: when ``metadata["min_tool_calls"]`` is known,
    a successful call beyond that many calls in the episode (``messages``, this step's included)
    earns 0. Without that cap GRPO learnt to farm the bonus: on the learning benchmark a fourth,
    needless lookup instead of an answer paid 0.20, more than a wrong answer after the three
    needed calls (0.15), and within 20 steps the policy stopped answering (held-out success
    0.48 -> 0.00). With it, not answering never pays more than answering. A task without
    ``min_tool_calls`` (a dataset row that does not say) pays no bonus: failed calls still
    cost the penalty.
    """
    if not tool_calls:
        return EvaluateResult(score=0.0, reason="no tool calls in this step")
    failed = [r for r in tool_calls if not r.result.ok]
    ok = len(tool_calls) - len(failed)
    paid = ok
    reason = f"{ok} tool call(s) succeeded, {len(failed)} failed"
    needed = (metadata or {}).get("min_tool_calls")
    if needed is None:  # needed calls cannot be told from needless ones: none is paid
        paid = 0
        if ok:
            reason += "; the task has no min_tool_calls, so no call earns the bonus"
    elif messages is not None:
        before = max(0, _calls_made(messages) - len(tool_calls))
        paid = min(ok, max(0, int(needed) - before))
        if paid < ok:
            reason += f"; {ok - paid} beyond the {needed} the task needs earn nothing"
    score = (SUCCESS_BONUS * paid - FAILURE_PENALTY * len(failed)) / len(tool_calls)
    if failed:
        reason += " (" + ", ".join(str(r.result.error_kind) for r in failed) + ")"
    return EvaluateResult(score=score, reason=reason)
