"""Helpers shared by the built-in environments: question templates, stable ids, system prompts.

A `Template` renders a question from named fields and parses a rendered question back into
them, which is how the reference solvers read a task: from its text, as a model would.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from rk_agent.envs.base import EpisodeState
from rk_agent.errors import EnvError
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = [
    "Template",
    "ensure_system_prompt",
    "not_recognised",
    "pick",
    "question_text",
    "stable_id",
    "tool_call_message",
]

T = TypeVar("T")


class Template:
    """A question with ``{named}`` fields, rendered and parsed back.

    Example:
        >>> t = Template("What is {a} plus {b}?")
        >>> t.parse(t.render(a=2, b=3))
        {'a': '2', 'b': '3'}
    """

    def __init__(self, text: str) -> None:
        self.text = text
        pattern, seen = [], set()
        for literal, field, _, _ in string.Formatter().parse(text):
            pattern.append(re.escape(literal))
            if field is None:
                continue
            pattern.append(f"(?P={field})" if field in seen else f"(?P<{field}>.+?)")
            seen.add(field)
        self._regex = re.compile("".join(pattern), re.DOTALL)

    def render(self, **fields: Any) -> str:
        """The question with its fields filled in."""
        return self.text.format(**fields)

    def parse(self, text: str) -> dict[str, str] | None:
        """The fields of a question rendered from this template, or ``None`` if it is not one."""
        match = self._regex.fullmatch(text.strip())
        return match.groupdict() if match else None


def pick(rng: np.random.Generator, options: Sequence[T]) -> T:
    """One item of ``options``, drawn with ``rng`` (keeps its Python type, unlike rng.choice)."""
    return options[int(rng.integers(len(options)))]


def stable_id(prefix: str, *parts: Any) -> str:
    """A short id that depends only on ``parts``: the same task always gets the same id."""
    digest = hashlib.sha1(repr(parts).encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


def ensure_system_prompt(state: EpisodeState, prompt: str) -> None:
    """Put the environment's system prompt first when a task (e.g. from JSONL) has none."""
    if not any(m.role in ("system", "developer") for m in state.messages):
        state.messages.insert(0, Message(role="system", content=prompt))


def not_recognised(env: str, what: str) -> EnvError:
    """What a reference solver raises for a question none of its templates reads (a dataset's
    own task): it is not solved, and says so, rather than answering something wrong."""
    return EnvError(
        f"the {env} environment's reference solver does not recognise this {what}: it solves the "
        f"{what}s the environment generates (it reads them by their templates), not others "
        "such as a dataset's."
    )


def question_text(messages: Sequence[Message]) -> str:
    """The text of the first user message (the task's question)."""
    return next((m.text for m in messages if m.role == "user"), "")


def tool_call_message(name: str, arguments: dict[str, Any], *, call_id: str) -> Message:
    """An assistant message calling one tool (what the reference solvers reply)."""
    call = ToolCall(id=call_id, function=FunctionCall(name=name, arguments=json.dumps(arguments)))
    return Message(role="assistant", content=None, tool_calls=[call])
