"""Episode rewards for the dynamic sampling and retirement runs: spread where the tests want it.

A random model's replies differ from sample to sample, so a score read off the reply's text has
spread within a group, and a score that ignores the reply has none. Which tasks get which is
decided by their ground truth, so fresh tasks follow the same rule.
"""

from __future__ import annotations

import zlib
from typing import Any


def _hash(value: Any) -> int:
    return zlib.crc32(str(value).encode())


def _reply(messages: list[Any]) -> str:
    replies = [m.text for m in messages if m.role == "assistant"]
    return replies[-1] if replies else ""


def by_reply(messages: list[Any], **kwargs: Any) -> float:
    """A score in [0, 1) read off the last reply: spread in every group, never a success."""
    return _hash(_reply(messages)) % 1000 / 1000


def on_a_third(messages: list[Any], ground_truth: Any = None, **kwargs: Any) -> float:
    """`by_reply` on the tasks whose ground truth hashes to 0 mod 3; 1.0 (solved) elsewhere."""
    return by_reply(messages) if _hash(ground_truth) % 3 == 0 else 1.0


def constant(**kwargs: Any) -> float:
    """1.0 whatever happens: no group has spread."""
    return 1.0


def solved(ground_truth: Any) -> Any:
    """A reward under which the task with ``ground_truth`` is always solved, the others never."""

    def solved_one(messages: list[Any], ground_truth: Any = None, **kwargs: Any) -> float:
        return 1.0 if ground_truth == answer else by_reply(messages)

    answer = ground_truth
    return solved_one
