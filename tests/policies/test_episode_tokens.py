"""Token-exact episodes: the env mask, asserted token by token on a known episode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.registry import get_solver, make_env
from rk_agent.policies.episode_tokens import EpisodeTokens, SuffixRenderer
from rk_agent.policies.hf_policy import HFPolicy
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.tool_calls import HERMES
from rk_agent.types import Message, StopReason

SEED = 3


class ScriptedTokens(HFPolicy):
    """A real HFPolicy (template, tokenizer) whose replies are scripted text, not sampled.

    Only the model's choice of tokens is scripted; rendering, the episode loop, the environment
    and the masks are the real ones.
    """

    def __init__(self, replies: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.replies = list(replies)
        self.prompts: list[list[int]] = []

    async def generate_ids(
        self,
        prompt_ids: list[int],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
        started: float | None = None,
    ) -> PolicyOutput:
        self.prompts.append(list(prompt_ids))
        text = self.replies.pop(0)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        ids = [*ids[: sampling.max_tokens - 1], self.im_end]
        reply = HERMES.parse(self.tokenizer.decode(ids[:-1]), tools)
        return PolicyOutput(
            message=reply.message,
            prompt_token_ids=list(prompt_ids),
            token_ids=ids,
            logprobs=[-0.5] * len(ids),
            parse_error=reply.parse_error,
        )

    @property
    def im_end(self) -> int:
        return int(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))


def _solver_replies() -> list[str]:
    """What the tools env's reference solver says on task SEED, as text the model would write."""
    env = make_env("tools")
    observation, info = env.reset(seed=SEED)
    solve = get_solver("tools")
    replies = []
    while True:
        message = solve([Message.coerce(m) for m in observation], info["tools"])
        calls = "\n".join(HERMES.render_call(c) for c in message.tool_calls or [])
        replies.append(calls or message.text)
        observation, _, terminated, truncated, _ = env.step(message)
        if terminated or truncated:
            return replies


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each run of equal values."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((mask[start], start, i))
            start = i
    return runs


def _play(model_dir: Path, replies: list[str], budget: int) -> tuple[Any, EpisodeTokens, Any]:
    policy = ScriptedTokens(replies, model=str(model_dir), device="cpu")
    tokens = EpisodeTokens(policy, SuffixRenderer(policy), budget=budget)
    env = make_env("tools")
    trajectory = asyncio.run(
        play_episode(
            env,
            tokens,
            EpisodeSlot(0, 0, SEED),
            sampling=SamplingParams(temperature=1.0, max_tokens=64),
            env_name="tools",
        )
    )
    return trajectory, tokens, policy


def test_env_mask_is_one_exactly_on_the_model_tokens(tiny_model_dir: Path) -> None:
    replies = _solver_replies()
    assert len(replies) == 3  # two tool calls, then the answer
    trajectory, tokens, policy = _play(tiny_model_dir, replies, budget=1024)
    assert trajectory.stop_reason is StopReason.ANSWERED and trajectory.success
    tok = policy.tokenizer
    assert len(tokens.completion_ids) == len(tokens.env_mask) == len(tokens.logprobs)

    runs = _runs(tokens.env_mask)
    assert [value for value, _, _ in runs] == [1, 0, 1, 0, 1]
    model_texts = [tok.decode(tokens.completion_ids[a:b]) for v, a, b in runs if v == 1]
    assert model_texts == [reply + "<|im_end|>" for reply in replies]
    tool_results = [m.text for turn in trajectory.turns for m in turn.environment]
    env_texts = [tok.decode(tokens.completion_ids[a:b]) for v, a, b in runs if v == 0]
    assert env_texts == [
        f"\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
        for result in tool_results[:2]
    ]
    # Model tokens carry the sampling log-probs; environment tokens are not the model's.
    assert all(
        lp == (-0.5 if m else 0.0) for lp, m in zip(tokens.logprobs, tokens.env_mask, strict=True)
    )
    # The model saw, at every turn, exactly the tokens it is trained on.
    prompt = tokens.prompt_ids or []
    for turn_prompt, (_, start, _) in zip(policy.prompts, runs[::2], strict=True):
        assert turn_prompt == prompt + tokens.completion_ids[:start]
    # ...and they are the chat template's own rendering of the whole conversation.
    rendered = policy.render(
        trajectory.conversation, trajectory_tools(), add_generation_prompt=False
    )
    assert tok.decode(prompt + tokens.completion_ids) + "\n" == rendered


def trajectory_tools() -> list[dict[str, Any]]:
    return make_env("tools").tool_schemas


def test_the_budget_ends_the_episode_as_truncated_and_still_scores_it(
    tiny_model_dir: Path,
) -> None:
    replies = _solver_replies()
    trajectory, tokens, _ = _play(tiny_model_dir, replies, budget=60)
    assert len(tokens.completion_ids) <= 60
    assert tokens.budget_hit
    assert trajectory.stop_reason is StopReason.TRUNCATED
    assert trajectory.episode is not None and trajectory.episode.score == 0.0
    assert (
        trajectory.failure is not None
        and "60-token completion budget" in trajectory.failure.message
    )


def test_a_reply_cut_at_its_token_limit_gets_the_turn_closed_as_environment_tokens(
    tiny_model_dir: Path, embedded_tok: Any
) -> None:
    policy = HFPolicy(str(tiny_model_dir), device="cpu")
    renderer = SuffixRenderer(policy)
    feedback = [Message(role="user", content="Try again.")]
    closed = renderer.suffix_ids(feedback, None, reply_ids=[28, 29])
    ended = renderer.suffix_ids(feedback, None, reply_ids=[28, min(policy.eos_ids)])
    assert (
        embedded_tok.decode(ended)
        == "\n<|im_start|>user\nTry again.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert embedded_tok.decode(closed) == "<|im_end|>" + embedded_tok.decode(ended)
    policy.close()


def test_a_template_that_rewrites_history_is_refused(tiny_model_dir: Path) -> None:
    from rk_agent.errors import ConfigError

    policy = HFPolicy(str(tiny_model_dir), device="cpu")
    # A template that drops earlier assistant turns (as reasoning templates do) is not prefix-safe.
    policy.tokenizer.chat_template = (
        "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}"
        "<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    renderer = SuffixRenderer(policy)
    with pytest.raises(ConfigError, match="does not keep a conversation's rendering as a prefix"):
        renderer.suffix_ids([Message(role="user", content="more")], None, reply_ids=[1])
    policy.close()


def test_each_episode_renders_its_own_tools_and_a_change_mid_episode_is_refused(
    tiny_model_dir: Path,
) -> None:
    import json
    import re

    from rk_agent.errors import ConfigError
    from tests.envs.varying_tools import ShopEnv

    env = ShopEnv()
    _, info = env.reset(seed=SEED)
    own, item = info["task"].metadata["kind"], info["task"].metadata["item"]
    call = f"<tool_call>\n{json.dumps({'name': own, 'arguments': {'item': item}})}\n</tool_call>"
    policy = ScriptedTokens([call, call, "unused"], model=str(tiny_model_dir), device="cpu")
    tokens = EpisodeTokens(policy, SuffixRenderer(policy), budget=512)
    message = "the environment changed its tools during an episode; a token-exact episode"
    with pytest.raises(ConfigError, match=re.escape(message)):
        asyncio.run(
            play_episode(ShopEnv(), tokens, EpisodeSlot(0, 0, SEED),
                         sampling=SamplingParams(max_tokens=64), env_name="shop")
        )  # fmt: skip
    assert len(policy.prompts) == 2  # turns 0 and 1; turn 2 offered `order` as well
    prompt = policy.tokenizer.decode(policy.prompts[0])
    assert f'"name": "{own}"' in prompt and '"name": "order"' not in prompt


def test_turns_a_fork_copied_are_prompt_never_trained(tiny_model_dir: Path) -> None:
    """GRPO's rk loop trains only the tokens `EpisodeTokens` sampled: an episode that starts
    with copied turns (a fork's, `Turn.copied_from`) has them in its prompt, with env_mask 0
    nowhere on them (issue 40 item 8)."""
    from rk_agent.policies.function_policy import FunctionPolicy

    solver = FunctionPolicy(get_solver("tools"))
    source = asyncio.run(
        play_episode(make_env("tools"), solver, EpisodeSlot(0, 0, SEED),
                     sampling=SamplingParams(), env_name="tools")
    )  # fmt: skip
    copied = source.turns[0].model_copy(update={"copied_from": "source::0-0"})
    replies = _solver_replies()[1:]  # the model goes on from turn 1
    policy = ScriptedTokens(replies, model=str(tiny_model_dir), device="cpu")
    tokens = EpisodeTokens(policy, SuffixRenderer(policy), budget=1024)
    trajectory = asyncio.run(
        play_episode(make_env("tools"), tokens, EpisodeSlot(0, 0, SEED, None, (copied,)),
                     sampling=SamplingParams(temperature=1.0, max_tokens=64), env_name="tools")
    )  # fmt: skip
    assert trajectory.success and [t.copied_from for t in trajectory.turns] == [
        "source::0-0", None, None,
    ]  # fmt: skip
    tok = policy.tokenizer
    copied_call = HERMES.render_call(copied.assistant.tool_calls[0])
    assert copied_call in tok.decode(tokens.prompt_ids or [])  # context: the prompt
    trained = [tok.decode(tokens.completion_ids[a:b]) for v, a, b in _runs(tokens.env_mask) if v]
    assert trained == [reply + "<|im_end|>" for reply in replies]  # only what was sampled
