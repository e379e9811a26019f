"""Gymnasium spaces for chat: a conversation (observation) and an assistant message (action).

Observations are lists of OpenAI-format message dicts, actions are assistant messages (a dict
or a `Message`). Both spaces can sample, seeded, so Gymnasium's ``check_env`` can drive an env.

Main names: `ConversationSpace`, `MessageSpace`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from rk_agent.types import Message

__all__ = ["ConversationSpace", "MessageSpace"]

_WORDS = ("yes", "no", "42", "7", "answer", "the", "is", "hello", "done", "3.5")


def _is_message(value: Any, roles: tuple[str, ...] | None = None) -> bool:
    try:
        message = Message.coerce(value)
    except ValueError:
        return False
    return roles is None or message.role in roles


class MessageSpace(spaces.Space[Any]):
    """Assistant messages (a `Message` or an OpenAI dict with ``role="assistant"``)."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        """A random short text reply."""
        count = int(self.np_random.integers(1, 6))
        words = self.np_random.choice(_WORDS, size=count)
        return {"role": "assistant", "content": " ".join(str(w) for w in words)}

    def contains(self, x: Any) -> bool:
        return _is_message(x, ("assistant",))

    def __repr__(self) -> str:
        return "MessageSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageSpace)


class ConversationSpace(spaces.Space[list[dict[str, Any]]]):
    """Conversations: lists of OpenAI-format message dicts."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        """A random one-question conversation."""
        words = self.np_random.choice(_WORDS, size=int(self.np_random.integers(1, 6)))
        return [{"role": "user", "content": " ".join(str(w) for w in words)}]

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(m, dict) and _is_message(m) for m in x)

    def __repr__(self) -> str:
        return "ConversationSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConversationSpace)
