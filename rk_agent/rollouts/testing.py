"""Test doubles shipped with the library: policies that need no model.

Use them to test your environments and rewards without a model, or to drive the engine in
benchmarks. (An OpenAI-compatible stub *server*, for testing over real HTTP, is in
`rk_agent.rollouts.stub_server`.)

Main names:
    ScriptedPolicy: replies from a list, in order (per episode or globally).
    FunctionPolicy: replies computed by your function from the conversation.

Example:
    >>> import asyncio
    >>> from rk_agent.rollouts.policy import SamplingParams
    >>> policy = FunctionPolicy(lambda messages, tools: "#### 4")
    >>> out = asyncio.run(policy.generate([], None, SamplingParams()))
    >>> out.message.content
    '#### 4'
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.rollouts.policy import PolicyOutput, SamplingParams, Usage
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = ["FunctionPolicy", "Reply", "ScriptedPolicy", "tool_call"]

Reply = str | Message | dict[str, Any] | PolicyOutput | BaseException
"""A scripted reply: text, a message, a full output, or an exception to raise."""

_ids = itertools.count()


def _to_output(reply: Reply) -> PolicyOutput:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, PolicyOutput):
        return reply
    if isinstance(reply, str):
        message = Message(role="assistant", content=reply)
    else:
        message = Message.coerce(reply)
    text = message.text
    return PolicyOutput(
        message=message,
        usage=Usage(prompt_tokens=0, completion_tokens=len(text.split())),
        finish_reason="tool_calls" if message.tool_calls else "stop",
    )


class ScriptedPolicy:
    """Replies from a script, in order. Each reply may be an exception to raise.

    Args:
        replies: the replies. With ``per_episode=True`` the script restarts for every
            conversation whose first message is new (by the number of assistant turns so far),
            so every episode gets ``replies[turn]``.
        per_episode: pick the reply by the episode's turn instead of a global counter.
        latency_s: simulated latency per call.
        name: recorded as the model name.
    """

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        per_episode: bool = True,
        latency_s: float = 0.0,
        name: str = "scripted",
    ) -> None:
        if not replies:
            raise ConfigError("ScriptedPolicy needs at least one reply.")
        self.replies = list(replies)
        self.per_episode = per_episode
        self.latency_s = latency_s
        self.name = name
        self.calls = 0

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, sampling: SamplingParams
    ) -> PolicyOutput:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.per_episode:
            index = sum(1 for m in messages if m.role == "assistant")
        else:
            index = self.calls
        self.calls += 1
        return _to_output(self.replies[min(index, len(self.replies) - 1)])

    async def aclose(self) -> None:
        """Nothing to release."""


class FunctionPolicy:
    """Replies computed by ``fn(messages, tools)`` (sync or async); it returns a `Reply`.

    Reference solvers of the built-in environments are FunctionPolicies.
    """

    def __init__(
        self,
        fn: Callable[[list[Message], list[dict[str, Any]] | None], Any],
        *,
        name: str = "function",
    ) -> None:
        self.fn = fn
        self.name = name

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, sampling: SamplingParams
    ) -> PolicyOutput:
        reply = self.fn(messages, tools)
        if inspect.isawaitable(reply):
            reply = await reply
        return _to_output(reply)

    async def aclose(self) -> None:
        """Nothing to release."""


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> Message:
    """An assistant message calling one tool (handy in scripts and solvers).

    Example:
        >>> tool_call("add", {"a": 1, "b": 2}).tool_calls[0].function.arguments
        '{"a": 1, "b": 2}'
    """
    return Message(
        role="assistant",
        content=None,
        tool_calls=[
            ToolCall(
                id=call_id or f"call_{next(_ids)}",
                function=FunctionCall(name=name, arguments=arguments),  # type: ignore[arg-type]
            )
        ],
    )
