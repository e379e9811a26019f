"""A policy that replies from a script: the test double for a model, with no model at all.

Use it to test your environments and rewards, or to drive the engine in benchmarks. (An
OpenAI-compatible stub *server*, for testing over real HTTP, is `rk_agent.testing.StubServer`;
a policy computed by your own function is `rk_agent.FunctionPolicy`.)

Main names: `ScriptedPolicy`.

Example:
    >>> import asyncio
    >>> from rk_agent.policies.policy import SamplingParams
    >>> policy = ScriptedPolicy(["first", "second"], per_episode=False)
    >>> [asyncio.run(policy.generate([], None, SamplingParams())).message.content for _ in "ab"]
    ['first', 'second']
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.policies.function_policy import Reply, reply_output
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.types import Message

__all__ = ["ScriptedPolicy"]


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
        return reply_output(self.replies[min(index, len(self.replies) - 1)])

    async def aclose(self) -> None:
        """Nothing to release."""
