"""The reply a built-in reward scores (the last assistant message), and the result without one.

A conversation with no assistant message has nothing to score: that is one bad sample, so the
result is invalid (and the other samples go on), with the same message from every built-in.
"""

from __future__ import annotations

from collections.abc import Sequence

from rk_agent.types import EvaluateResult, Message

__all__ = ["last_reply", "no_reply"]


def last_reply(messages: Sequence[Message]) -> Message | None:
    """The last assistant message, or ``None`` when the conversation has none."""
    return next((m for m in reversed(messages) if m.role == "assistant"), None)


def no_reply(name: str) -> EvaluateResult:
    """The invalid result for a conversation with no assistant message."""
    return EvaluateResult.invalid(
        f"reward {name!r} scores the last assistant message, but the conversation has none"
    )
