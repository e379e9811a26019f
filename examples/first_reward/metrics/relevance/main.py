"""Relevance metric: how well a response addresses the user's question.

The "first reward function" tutorial: keyword overlap between the question and the response,
plus a bonus when the response answers directly. Try it:

    uv run rk-agent preview --reward examples/first_reward/metrics/relevance/main.py::evaluate \
        --samples examples/first_reward/samples.jsonl
"""

from __future__ import annotations

import re

from rk_agent import EvaluateResult, Message, MetricResult, reward_function

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "ask",
        "asked",
        "asking",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "of",
        "on",
        "or",
        "question",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
DIRECT_OPENERS = ("yes", "no", "the", "it is", "it's", "there are", "there is")


def keywords(text: str) -> set[str]:
    """Lower-cased words of ``text`` that carry meaning (stopwords removed)."""
    return {w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOPWORDS}


@reward_function
def evaluate(
    messages: list[Message], original_messages: list[Message] | None = None, **kwargs: object
) -> EvaluateResult:
    """Score relevance: keyword overlap with the question, plus 0.2 for a direct answer; 0 for
    a reply that only repeats the question's words."""
    if len(messages) < 2 or messages[-1].role != "assistant":
        return EvaluateResult(
            score=0.0, reason="the last message must be the assistant's reply", metrics={}
        )
    question = next((m.text for m in reversed(messages[:-1]) if m.role == "user"), "")
    if not question:
        return EvaluateResult(score=0.0, reason="no user question to compare with", metrics={})
    response = messages[-1].text

    asked = keywords(question)
    answered = keywords(response)
    overlap = len(asked & answered) / len(asked) if asked else 0.0
    direct = response.strip().lower().startswith(DIRECT_OPENERS)
    # A reply made only of the question's own words (an echo, a restatement) answers nothing.
    adds = bool(answered - asked)
    score = min(1.0, overlap + (0.2 if direct else 0.0)) if adds else 0.0
    return EvaluateResult(
        score=score,
        reason=f"{len(asked & answered)}/{len(asked)} question keywords in the response"
        + ("; answers directly" if direct else "")
        + ("" if adds else "; but it adds nothing to the question's own words"),
        metrics={
            "adds_content": MetricResult(
                score=1.0 if adds else 0.0,
                success=adds,
                reason=f"new: {sorted(answered - asked)}" if adds else "only the question's words",
            ),
            "keyword_overlap": MetricResult(
                score=overlap, success=overlap >= 0.5, reason=f"shared: {sorted(asked & answered)}"
            ),
            "direct_answer": MetricResult(
                score=1.0 if direct else 0.0,
                success=direct,
                reason="starts with a direct answer" if direct else "does not answer directly",
            ),
        },
    )
