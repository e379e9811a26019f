"""A policy that is your function: replies computed in Python from the conversation.

The built-in environments' reference solvers are FunctionPolicies (`rk_agent.check_env` and
``rk-agent rollout --provider solver`` play them); your own solver can be one too. The test
doubles (`rk_agent.testing.ScriptedPolicy`, the stub server) are in `rk_agent.testing`.

Main names:
    FunctionPolicy: replies computed by your function from the conversation.
    Reply: what the function may return (text, a message, a full output, an exception).
    reply_output: a `Reply` as the `PolicyOutput` a policy returns.
    tool_call: an assistant message calling one tool (handy in solvers).

Example:
    >>> import asyncio
    >>> from rk_agent.policies.policy import SamplingParams
    >>> policy = FunctionPolicy(lambda messages, tools: "#### 4")
    >>> out = asyncio.run(policy.generate([], None, SamplingParams()))
    >>> out.message.content
    '#### 4'
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

from rk_agent.policies.policy import PolicyOutput, SamplingParams, Usage
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = ["FunctionPolicy", "Reply", "reply_output", "tool_call"]

Reply = str | Message | dict[str, Any] | PolicyOutput | BaseException
"""A reply: text, a message, a full output, or an exception to raise."""

_ids = itertools.count()


def reply_output(reply: Reply) -> PolicyOutput:
    """``reply`` as a policy's output (an exception is raised); usage counts its words."""
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
        return reply_output(reply)

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
