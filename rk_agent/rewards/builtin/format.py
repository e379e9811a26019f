"""The format reward: does the response have the required structure (tags, or a regex)?

Main names:
    format_reward: ``"format"``, checks the last assistant message's text.
    DEFAULT_TAGS: ``("think", "answer")``, the structure checked when nothing else is asked for.

Tags are found with plain substring counts, not a regular expression, so checking is linear in
the length of the text: a megabyte of adversarial ``</think><answer>`` repeats costs
milliseconds, where a ``<think>.*?</think>\\s*<answer>.*?</answer>`` regex backtracks
quadratically.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["DEFAULT_TAGS", "format_reward"]

DEFAULT_TAGS = ("think", "answer")
"""The tags `format_reward` expects when given neither ``pattern`` nor ``tags``."""

_TAG_NAME = re.compile(r"[A-Za-z_][\w.:-]*")


@dataclass(frozen=True)
class _TagCheck:
    """One tag in the text: its span (open to close) when well-formed, else the problem."""

    tag: str
    span: tuple[int, int] | None
    problem: str | None


def _check_tag(text: str, tag: str) -> _TagCheck:
    opening, closing = f"<{tag}>", f"</{tag}>"
    n_open, n_close = text.count(opening), text.count(closing)
    problem = None
    if n_open == 0 and n_close == 0:
        problem = f"{opening} is missing"
    elif n_open != 1:
        problem = f"{opening} appears {n_open} times" if n_open else f"{opening} is missing"
    elif n_close != 1:
        problem = f"{closing} appears {n_close} times" if n_close else f"{opening} is not closed"
    if problem:
        return _TagCheck(tag, None, problem)
    start, end = text.find(opening), text.find(closing)
    if end < start:
        return _TagCheck(tag, None, f"{closing} comes before {opening}")
    if not text[start + len(opening) : end].strip():
        return _TagCheck(tag, None, f"{opening} is empty")
    return _TagCheck(tag, (start, end + len(closing)), None)


def _order_problem(checks: list[_TagCheck]) -> str | None:
    """Why the tags are not one after the other in the given order, or ``None``."""
    spans = [(c.tag, c.span) for c in checks if c.span is not None]
    if len(spans) < len(checks):
        return "not every tag is well-formed"
    for (tag, (start, end)), (next_tag, (next_start, _)) in itertools.pairwise(spans):
        if end > next_start:
            if start > next_start:
                return f"<{next_tag}> comes before <{tag}>"
            return f"<{next_tag}> is inside <{tag}>"
    return None


def _outside_text(text: str, checks: list[_TagCheck]) -> str:
    """The text outside the well-formed tags' spans, whitespace removed at the ends."""
    spans = sorted(c.span for c in checks if c.span is not None)
    pieces, cursor = [], 0
    for start, end in spans:
        if start > cursor:
            pieces.append(text[cursor:start])
        cursor = max(cursor, end)
    pieces.append(text[cursor:])
    return "".join(pieces).strip()


def _check_tags(
    text: str, tags: Sequence[str], partial_credit: bool, allow_outside_text: bool
) -> EvaluateResult:
    checks = [_check_tag(text, tag) for tag in tags]
    metrics = {
        f"{c.tag}_tag": MetricResult(
            score=float(c.problem is None),
            success=c.problem is None,
            reason=c.problem or f"<{c.tag}>...</{c.tag}> appears once, closed, not empty",
        )
        for c in checks
    }
    order = _order_problem(checks)
    metrics["order"] = MetricResult(
        score=float(order is None),
        success=order is None,
        reason=order or "the tags come in order, none inside another",
    )
    if not allow_outside_text:
        outside = _outside_text(text, checks)
        metrics["outside_text"] = MetricResult(
            score=float(not outside),
            success=not outside,
            reason=f"text outside the tags: {outside[:40]!r}" if outside else "none",
        )
    failed = [str(m.reason) for m in metrics.values() if not m.success]
    passed = len(metrics) - len(failed)
    score = passed / len(metrics) if partial_credit else float(not failed)
    tag_list = "".join(f"<{t}>" for t in tags)
    reason = f"{tag_list}: " + ("; ".join(failed) if failed else "well-formed")
    return EvaluateResult(score=score, reason=reason, metrics=metrics)


def _compile(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern, re.DOTALL)
    except (re.error, TypeError) as exc:
        raise ConfigError(
            f"format reward: pattern {pattern!r} is not a valid regular expression: {exc}"
        ) from exc


def _check_pattern(text: str, compiled: re.Pattern[str]) -> EvaluateResult:
    ok = compiled.fullmatch(text) is not None
    reason = (
        f"the response {'matches' if ok else 'does not match'} the pattern {compiled.pattern!r}"
    )
    metric = MetricResult(score=float(ok), success=ok, reason=reason)
    return EvaluateResult(score=float(ok), reason=reason, metrics={"pattern": metric})


def _valid_tags(tags: Any) -> tuple[str, ...]:
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise ConfigError(
            f"format reward: tags must be a list of tag names such as ['think', 'answer'], got "
            f"{tags!r}"
        )
    if not tags:
        raise ConfigError("format reward: tags is empty; give at least one tag name")
    for tag in tags:
        if not isinstance(tag, str) or not _TAG_NAME.fullmatch(tag):
            raise ConfigError(
                f"format reward: {tag!r} is not a tag name; give names without angle brackets, "
                "e.g. 'answer' for <answer>...</answer>"
            )
    if len(set(tags)) != len(tags):
        raise ConfigError(f"format reward: tags has duplicates: {list(tags)}")
    return tuple(tags)


@reward_function(
    name="format",
    description="Whether the response has the expected structure (tags in order, or a regex).",
)
def format_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    pattern: str | re.Pattern[str] | None = None,
    tags: Sequence[str] | None = None,
    partial_credit: bool = False,
    allow_outside_text: bool = False,
    **kwargs: Any,
) -> EvaluateResult:
    """Check that the last assistant message has the required structure.

    **Tags** (the default, with `DEFAULT_TAGS` ``think`` then ``answer``): each tag must appear
    exactly once as ``<tag>`` and once as ``</tag>``, closed after it is opened, with non-blank
    content; the tags must come in the given order, none inside another; and unless
    ``allow_outside_text``, nothing but whitespace may sit outside them (so text after
    ``</answer>`` fails). Tags are matched case-sensitively and without attributes. A tag name
    mentioned inside another tag (``<think>I'll use <answer> tags</think>``) counts as a second
    occurrence, which is what defeats the duplicated-``<answer>`` hack.

    **Pattern**: ``pattern`` is a regular expression the *whole* text must match
    (``re.fullmatch`` with ``re.DOTALL``, so ``.`` crosses newlines); write ``.*`` at the ends to
    allow text around it. Its cost is the regex's own: avoid nested quantifiers.

    Args:
        messages: the conversation; the last assistant message's text is checked.
        ground_truth: not used.
        pattern: a regular expression for the whole text (instead of tags); a compiled
            pattern is used with its own flags.
        tags: tag names without angle brackets, in the required order.
        partial_credit: score the fraction of checks passed (one per tag, the order, and the
            outside-text check) instead of 1 or 0. Ignored with ``pattern``.
        allow_outside_text: allow text before, between and after the tags.
        **kwargs: ignored.

    Returns:
        The score with metrics ``<tag>_tag`` per tag, ``order`` and ``outside_text`` (tags), or
        ``pattern``.

    Raises:
        ConfigError: both ``pattern`` and ``tags``, an invalid regular expression, or bad tag
            names.

    Example:
        >>> msgs = [{"role": "user", "content": "2+2?"},
        ...         {"role": "assistant", "content": "<think>2+2=4</think>\\n<answer>4</answer>"}]
        >>> format_reward(msgs).score
        1.0
        >>> format_reward(msgs, tags=["answer"], allow_outside_text=True).score
        1.0
    """
    if pattern is not None and tags is not None:
        raise ConfigError("format reward: give pattern or tags, not both")
    compiled = _compile(pattern) if pattern is not None else None
    chosen = _valid_tags(tags) if tags is not None else DEFAULT_TAGS
    reply = last_reply(messages)
    if reply is None:
        return no_reply("format")
    text = reply.text
    if compiled is not None:
        return _check_pattern(text, compiled)
    return _check_tags(text, chosen, partial_credit, allow_outside_text)
