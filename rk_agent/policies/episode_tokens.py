"""Token-exact episodes for training: what the model generated, what the environment wrote.

GRPO trains on the very tokens the model sampled. Re-rendering a conversation with the chat
template after every turn can tokenize the model's own reply differently (tool-call JSON is
re-serialized, whitespace is normalized), so the trained sequence would not be the one sampled.
`EpisodeTokens` avoids that: it is a `Policy` for *one* episode that keeps the token sequence
itself, on top of a `TokenPolicy` (the trainer's own model, `HFPolicy`, or a served one,
`VLLMPolicy`). The first turn's prompt is rendered once; every later turn continues that
sequence with the environment's messages, rendered as a template *suffix* (the same way TRL's
own tool loop does it), and generation starts from the tokens so far.

It records, per token of the completion, whether the model wrote it (``env_mask`` 1, trained)
or the environment did (0: tool results, feedback, the template's turn markers), and stops the
episode (`ContextOverflowError`, which the episode loop records as truncated) once the
completion budget (TRL's ``max_completion_length``) is spent: TRL does not truncate for you.

The prompt is rendered once, with the tools of the episode's first turn: an environment whose
tools differ per task is trained as any other, one whose tools change between turns
(``ChatEnv.tool_scope`` ``turn``) cannot be (`check_fixed_tools`).

Main names: `EpisodeTokens`, `SuffixRenderer`, `TokenPolicy`, `check_fixed_tools`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.offered_tools import ToolScope
from rk_agent.errors import ConfigError, ContextOverflowError
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.types import Message

__all__ = ["EpisodeTokens", "SuffixRenderer", "TokenPolicy", "check_fixed_tools"]

_PROBE = "rk-agent-probe-reply"


def check_fixed_tools(env: ChatEnv | type[ChatEnv], name: str) -> None:
    """Raise `ConfigError` when ``env``'s tools change between the turns of an episode: a
    token-exact episode renders its prompt once (see the module docstring).

    Args:
        env: the environment, or its class (whose ``tool_scope`` an instance may change).
        name: how the user named it, for the message.
    """
    if env.tool_scope is ToolScope.TURN:
        raise ConfigError(
            f"environment {name!r} changes its tools between the turns of an episode "
            "(tool_scope 'turn'); rk-agent's GRPO loop trains on one token sequence per "
            "episode, its prompt rendered once with the first turn's tools, so it cannot show "
            "the model the tools a later turn adds. Train on an environment whose tools change "
            "only between tasks (tool_scope 'task')."
        )


class TokenPolicy(Protocol):
    """A model that generates from token ids and renders with its own chat template.

    `HFPolicy` (the trainer's model, in process) and `VLLMPolicy` (a served model) are both
    one; `EpisodeTokens` needs nothing else.
    """

    name: str
    tokenizer: Any
    eos_ids: set[int]

    def render(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        """The conversation as the chat template writes it."""
        ...

    def encode(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> list[int]:
        """The prompt's token ids, generation prompt included."""
        ...

    async def generate_ids(
        self, prompt_ids: list[int], tools: list[dict[str, Any]] | None, sampling: SamplingParams
    ) -> PolicyOutput:
        """The reply to ``prompt_ids``: token ids, log-probabilities, text, finish reason."""
        ...


class SuffixRenderer:
    """Renders the environment's messages as tokens that continue an assistant turn.

    The chat template is applied to a dummy exchange ``[user, assistant]`` with and without the
    environment's messages (and the generation prompt) after it; the difference is what the
    template writes between the assistant's reply and the next reply. When the reply did not
    end with the end-of-turn token (it was cut at its token limit), the turn's closing markers
    are added too, so the sequence stays well-formed.

    Args:
        policy: the `TokenPolicy` whose template and tokenizer are used.
    """

    def __init__(self, policy: TokenPolicy) -> None:
        self.policy = policy
        self._eos_texts = sorted(
            {str(policy.tokenizer.decode([i])) for i in policy.eos_ids}, key=len, reverse=True
        )

    def suffix_ids(
        self,
        environment: list[Message],
        tools: list[dict[str, Any]] | None,
        reply_ids: list[int],
    ) -> list[int]:
        """The tokens between the model's last reply (``reply_ids``) and its next turn.

        Raises:
            ConfigError: the chat template does not render a conversation as a prefix of its
                continuation, so turns cannot be appended token by token.
        """
        exchange = [Message(role="user", content="hi"), Message(role="assistant", content=_PROBE)]
        before = self.policy.render(exchange, tools, add_generation_prompt=False)
        after = self.policy.render(exchange + environment, tools, add_generation_prompt=True)
        if not after.startswith(before) or _PROBE not in before:
            raise ConfigError(
                "the chat template does not keep a conversation's rendering as a prefix when "
                "messages are added, so multi-turn episodes cannot be trained token by token. "
                "Use a prefix-preserving template (e.g. TRL's chat_templates/qwen2_5.jinja)."
            )
        closing = before[before.rindex(_PROBE) + len(_PROBE) :]
        if reply_ids and reply_ids[-1] in self.policy.eos_ids:
            closing = self._after_eos(closing)
        text = closing + after[len(before) :]
        return list(self.policy.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _after_eos(self, closing: str) -> str:
        """The turn's closing text minus the end-of-turn token the model already wrote."""
        for eos in self._eos_texts:
            at = closing.find(eos)
            if eos and at != -1 and not closing[:at].strip():
                return closing[at + len(eos) :]
        return closing


@dataclass
class EpisodeTokens:
    """A `Policy` for one episode that generates token-in/token-out and records the tokens.

    Create one per episode, all sharing one `TokenPolicy` (so concurrent episodes batch
    together) and one `SuffixRenderer`.

    Attributes:
        policy: the shared model (`HFPolicy` or `VLLMPolicy`).
        renderer: the shared suffix renderer.
        budget: most completion tokens (model and environment together).
        prompt_ids: the first turn's prompt (set on the first call).
        completion_ids: everything after the prompt: replies and environment suffixes.
        env_mask: per completion token, 1 when the model wrote it, 0 when the environment did.
        logprobs: per completion token, the sampling log-probability (0.0 for environment tokens).
        model_turns: replies generated.
        budget_hit: whether the budget ended the episode.
    """

    policy: TokenPolicy
    renderer: SuffixRenderer
    budget: int
    prompt_ids: list[int] | None = None
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    model_turns: int = 0
    budget_hit: bool = False
    _seen: int = 0
    _last_reply: list[int] = field(default_factory=list)
    _tools: list[dict[str, Any]] | None = None
    name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.name = self.policy.name

    async def generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> PolicyOutput:
        """The next reply, continuing this episode's tokens (see the module docstring).

        Raises:
            ContextOverflowError: the completion budget is spent.
        """
        if self.prompt_ids is None:
            self.prompt_ids = self.policy.encode(messages, tools)
            self._tools = tools
        else:
            if tools != self._tools:
                raise ConfigError(
                    "the environment changed its tools during an episode; a token-exact "
                    "episode renders its prompt once, with the first turn's tools, so it cannot "
                    "offer tools added later. Train on an environment whose tools change only "
                    "between tasks (ChatEnv.tool_scope 'task')."
                )
            suffix = self.renderer.suffix_ids(messages[self._seen :], tools, self._last_reply)
            if len(self.completion_ids) + len(suffix) >= self.budget:
                raise self._spent()
            self._append(suffix, trained=False)
        room = self.budget - len(self.completion_ids)
        if room <= 0:
            raise self._spent()
        sampling = sampling.model_copy(update={"max_tokens": min(sampling.max_tokens, room)})
        output = await self.policy.generate_ids(
            self.prompt_ids + self.completion_ids, tools, sampling
        )
        reply = output.token_ids or []
        self._append(reply, trained=True, logprobs=output.logprobs)
        self._last_reply = reply
        self._seen = len(messages) + 1  # the environment appends this reply to the conversation
        self.model_turns += 1
        return output

    async def aclose(self) -> None:
        """Nothing to release: the shared policy is closed by its owner."""

    def _spent(self) -> ContextOverflowError:
        self.budget_hit = True
        return ContextOverflowError(
            f"the episode used its {self.budget}-token completion budget "
            "(max_completion_length); raise it to let episodes run longer."
        )

    def _append(
        self, ids: list[int], *, trained: bool, logprobs: list[float] | None = None
    ) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([1 if trained else 0] * len(ids))
        if logprobs is not None and len(logprobs) == len(ids):
            self.logprobs.extend(logprobs)
        else:
            self.logprobs.extend([0.0] * len(ids))
