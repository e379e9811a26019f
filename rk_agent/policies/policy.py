"""The `Policy` protocol: what the rollout engine asks a model for, and what it gets back.

A policy turns a conversation (plus tool schemas and sampling parameters) into the next
assistant `Message`, with token ids, log-probabilities and usage when the backend gives them.
Every backend (OpenAI-compatible servers, a local Hugging Face model, your own function, the
test doubles of `rk_agent.testing`) implements it; the engine knows nothing else about models.

Main names: `Policy`, `SamplingParams`, `PolicyOutput`, `Usage`.

Optional: ``async def warm_up(self)``, to pay what a policy pays once per process (imports,
opening its HTTP client) before the first episode; the engine and rollout workers await it
before their first episode, with ``connections=`` the number of episodes they play at once
when it takes that argument (a served policy opens that many connections then).

Errors: a policy raises `EndpointError` (``retryable`` set as it applies) once its own retries
are spent, and `ContextOverflowError` when the conversation no longer fits. It never returns a
fake message for a failure.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.types import Message

if TYPE_CHECKING:
    from rk_agent.tool_calls import ToolCallFormat

__all__ = ["Policy", "PolicyOutput", "SamplingParams", "Usage", "warm_up_policy"]


class SamplingParams(BaseModel):
    """Sampling parameters for one generation (OpenAI names).

    Attributes:
        temperature: sampling temperature; 0 means greedy.
        top_p: nucleus sampling.
        max_tokens: most new tokens per turn.
        stop: stop strings.
        seed: per-request seed, where the backend supports it.
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=512, ge=1)
    stop: list[str] | None = None
    seed: int | None = None


class Usage(BaseModel):
    """Token counts of one generation."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


@dataclass
class PolicyOutput:
    """What a policy returns for one turn.

    Attributes:
        message: the assistant message (text and/or tool calls).
        prompt_token_ids: the tokens the model saw, when known.
        token_ids: the generated tokens, when known.
        logprobs: one log-probability per generated token, when known.
        usage: token counts, when known.
        finish_reason: ``"stop"``, ``"length"``, ``"tool_calls"``, ... as the backend says.
        latency_s: wall time of the call, retries included.
        parse_error: set when the model tried to call a tool but the call could not be parsed
            (text tool-call protocols); the message then carries the raw text.
        parse_format: the text tool-call format the reply was read with (the policy's
            ``tool_call_format``), ``None`` when it was not read as text (no tools offered, or
            native tool calls). After a ``parse_error`` the environment shows the model this
            format's note (``ChatEnv.reject_turn``): the policy owns the format.
        extra: backend-specific details worth keeping (e.g. retries made).
    """

    message: Message
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    parse_error: str | None = None
    parse_format: ToolCallFormat | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    """Anything that can play the assistant: ``await policy.generate(messages, tools, sampling)``.

    Example:
        >>> from rk_agent.policies.function_policy import FunctionPolicy
        >>> isinstance(FunctionPolicy(lambda messages, tools: "hi"), Policy)
        True
    """

    name: str
    """A short, human-readable name (model id), recorded with every trajectory."""

    async def generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> PolicyOutput:
        """The next assistant message for ``messages``, offered ``tools`` (OpenAI schemas)."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads or models held by the policy."""
        ...


async def warm_up_policy(policy: Any, connections: int) -> None:
    """Await ``policy.warm_up()`` when it has one (the module docstring), with
    ``connections=`` when it takes that argument."""
    warm_up = getattr(policy, "warm_up", None)
    if warm_up is None:
        return
    try:
        takes = "connections" in inspect.signature(warm_up).parameters
    except (TypeError, ValueError):  # no signature to read: call it as the protocol says
        takes = False
    await (warm_up(connections=connections) if takes else warm_up())
