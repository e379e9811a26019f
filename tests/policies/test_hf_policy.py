"""HFPolicy: dynamic batching, token ids and logprobs, finish reasons, overflow, shutdown.

Fast tests use a tiny random Llama with the embedded model's real tokenizer (and its
tool-capable chat template); one slow test runs the embedded model itself.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rk_agent.errors import ConfigError, ContextOverflowError, EndpointError  # noqa: E402
from rk_agent.policies.function_policy import tool_call  # noqa: E402
from rk_agent.policies.hf_policy import HFPolicy  # noqa: E402
from rk_agent.policies.policy import Policy, PolicyOutput, SamplingParams  # noqa: E402
from rk_agent.types import Message  # noqa: E402

GREEDY = SamplingParams(temperature=0, max_tokens=6)
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
    },
}


@pytest.fixture(scope="module")
def tokenizer(embedded_tok: Any) -> Any:
    return embedded_tok


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory, tokenizer: Any) -> Path:
    """A 2-layer random Llama (3 M parameters) saved with the embedded model's tokenizer."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.5,  # spread-out logits: no near-ties for greedy decoding
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    folder = tmp_path_factory.mktemp("tiny-llama")
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny(tiny_folder: Path) -> Any:
    """A fresh loaded copy of the tiny model (tests may change its generation config)."""
    return transformers.AutoModelForCausalLM.from_pretrained(tiny_folder).eval()


def _conversation(i: int, words: int = 1) -> list[Message]:
    return [
        Message(role="system", content="You are terse."),
        Message(role="user", content=f"Question {i}: " + "more " * (i * words)),
    ]


async def _many(policy: HFPolicy, n: int, sampling: SamplingParams = GREEDY) -> list[PolicyOutput]:
    return list(
        await asyncio.gather(*(policy.generate(_conversation(i), None, sampling) for i in range(n)))
    )


def _teacher_forced_logprobs(model: Any, prompt: list[int], tokens: list[int], t: float) -> Any:
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits / t, dim=-1).gather(1, torch.tensor(tokens)[:, None])[:, 0]


def test_loads_from_a_folder_and_is_a_policy(tiny_folder: Path) -> None:
    policy = HFPolicy(tiny_folder, max_batch_size=4)
    assert isinstance(policy, Policy)
    assert policy.name == str(tiny_folder)
    assert policy.native_tools  # the embedded tokenizer carries the Qwen2.5 tool template
    assert policy.max_context == 512
    assert policy.eos_ids == {2}
    assert policy.model.dtype == torch.float32


def test_concurrent_requests_are_generated_in_one_batch(tiny: Any, tokenizer: Any) -> None:
    async def run() -> tuple[list[PolicyOutput], HFPolicy]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, max_batch_size=8, max_wait_ms=500)
        outputs = await _many(policy, 8)
        await policy.aclose()
        return outputs, policy

    outputs, policy = asyncio.run(run())
    assert policy.stats.sizes == {8: 1}
    assert (policy.stats.batches, policy.stats.requests) == (1, 8)
    assert policy.stats.generated_tokens == 48 and policy.stats.mean_batch_size == 8.0
    for out in outputs:
        assert out.extra["batch_size"] == 8
        assert out.token_ids is not None and out.logprobs is not None
        assert len(out.token_ids) == len(out.logprobs) == 6  # a random model never says EOS
        assert out.finish_reason == "length"
        assert out.usage is not None and out.usage.completion_tokens == 6
        assert out.prompt_token_ids is not None
        assert out.usage.prompt_tokens == len(out.prompt_token_ids)
        assert out.message.role == "assistant" and out.parse_error is None
        assert out.latency_s > 0
    # The prompts differ in length, so the batch was left-padded: all rows still decode right.
    assert len({len(out.prompt_token_ids or []) for out in outputs}) == 8


def test_max_batch_size_caps_the_batches(tiny: Any, tokenizer: Any) -> None:
    async def run() -> HFPolicy:
        policy = HFPolicy(tiny, tokenizer=tokenizer, max_batch_size=3, max_wait_ms=500)
        await _many(policy, 7, SamplingParams(temperature=0, max_tokens=2))
        await policy.aclose()
        return policy

    assert asyncio.run(run()).stats.sizes == {3: 2, 1: 1}


def test_without_batching_requests_run_one_at_a_time(tiny: Any, tokenizer: Any) -> None:
    async def run() -> HFPolicy:
        policy = HFPolicy(tiny, tokenizer=tokenizer, batching=False)
        await _many(policy, 4, SamplingParams(temperature=0, max_tokens=2))
        await policy.aclose()
        return policy

    assert asyncio.run(run()).stats.sizes == {1: 4}


def test_batched_greedy_equals_one_at_a_time_greedy(tiny: Any, tokenizer: Any) -> None:
    async def run(batching: bool) -> list[PolicyOutput]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, batching=batching, max_wait_ms=500)
        outputs = await _many(policy, 5)
        await policy.aclose()
        return outputs

    batched, alone = asyncio.run(run(True)), asyncio.run(run(False))
    assert [o.token_ids for o in batched] == [o.token_ids for o in alone]
    for b, a in zip(batched, alone, strict=True):
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)
        assert b.message.content == a.message.content


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_logprobs_match_a_teacher_forced_forward_pass(
    tiny: Any, tokenizer: Any, temperature: float
) -> None:
    async def run() -> list[PolicyOutput]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, max_wait_ms=500)
        outputs = await _many(policy, 3, SamplingParams(temperature=temperature, max_tokens=5))
        await policy.aclose()
        return outputs

    for out in asyncio.run(run()):
        assert out.prompt_token_ids and out.token_ids and out.logprobs
        expected = _teacher_forced_logprobs(
            tiny, out.prompt_token_ids, out.token_ids, temperature or 1.0
        )
        assert out.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
        assert all(lp <= 0 for lp in out.logprobs)


def test_requests_with_different_sampling_run_as_separate_batches(
    tiny: Any, tokenizer: Any
) -> None:
    async def run() -> tuple[list[PolicyOutput], HFPolicy]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, max_wait_ms=500)
        params = [SamplingParams(temperature=0, max_tokens=3 + i) for i in range(3)]
        params += [SamplingParams(temperature=0.9, top_p=0.9, max_tokens=2 + i) for i in range(3)]
        outputs = await asyncio.gather(
            *(policy.generate(_conversation(i), None, p) for i, p in enumerate(params))
        )
        await policy.aclose()
        return list(outputs), policy

    outputs, policy = asyncio.run(run())
    assert policy.stats.sizes == {3: 2}
    # Each row stops at its own max_tokens inside a shared batch.
    assert [len(o.token_ids or []) for o in outputs] == [3, 4, 5, 2, 3, 4]
    assert all(o.finish_reason == "length" for o in outputs)


def test_end_of_sequence_gives_finish_reason_stop(tiny: Any, tokenizer: Any) -> None:
    async def run(policy: HFPolicy) -> PolicyOutput:
        out = await policy.generate(_conversation(1), None, GREEDY)
        await policy.aclose()
        return out

    first = asyncio.run(run(HFPolicy(tiny, tokenizer=tokenizer))).token_ids
    assert first
    # Declare the token the model picks first an end-of-sequence token: it must stop there.
    tiny.generation_config.eos_token_id = [2, first[0]]
    out = asyncio.run(run(HFPolicy(tiny, tokenizer=tokenizer)))
    assert out.finish_reason == "stop"
    assert out.token_ids == [first[0]]  # the EOS token is kept in the ids, as trainers expect
    assert out.logprobs is not None and len(out.logprobs) == 1
    assert out.message.content == ""


def test_stop_strings_cut_the_text_and_the_tokens(tiny: Any, tokenizer: Any) -> None:
    async def run(sampling: SamplingParams) -> PolicyOutput:
        policy = HFPolicy(tiny, tokenizer=tokenizer)
        out = await policy.generate(_conversation(2), None, sampling)
        await policy.aclose()
        return out

    full = asyncio.run(run(SamplingParams(temperature=0, max_tokens=12)))
    text = full.message.text
    stop = next(text[i : i + 2] for i in range(3, len(text)) if text[i : i + 2].strip())
    cut = asyncio.run(run(SamplingParams(temperature=0, max_tokens=12, stop=[stop, "\x00never"])))
    assert cut.finish_reason == "stop"
    assert cut.message.content == text[: text.find(stop)]
    assert cut.token_ids and full.token_ids
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)]
    assert len(cut.token_ids) < len(full.token_ids)
    assert stop in tokenizer.decode(cut.token_ids)  # the last token completes the stop string
    assert stop not in tokenizer.decode(cut.token_ids[:-1])
    assert cut.logprobs is not None and len(cut.logprobs) == len(cut.token_ids)


def test_seeded_sampling_is_reproducible_one_at_a_time(tiny: Any, tokenizer: Any) -> None:
    async def run(seed: int) -> list[int] | None:
        policy = HFPolicy(tiny, tokenizer=tokenizer, batching=False)
        out = await policy.generate(
            _conversation(1), None, SamplingParams(temperature=1.0, max_tokens=8, seed=seed)
        )
        await policy.aclose()
        return out.token_ids

    assert asyncio.run(run(123)) == asyncio.run(run(123))
    assert asyncio.run(run(123)) != asyncio.run(run(124))


def test_a_prompt_longer_than_the_context_is_a_context_overflow(tiny: Any, tokenizer: Any) -> None:
    policy = HFPolicy(tiny, tokenizer=tokenizer, name="tiny")
    long = [Message(role="user", content="word " * 600)]
    n = len(policy.encode(long, None))
    message = (
        f"the prompt has {n} tokens but tiny takes at most 512; shorten the conversation "
        "(fewer turns, shorter tool results) or use a model with a longer context."
    )
    with pytest.raises(ContextOverflowError, match=re.escape(message)) as info:
        asyncio.run(policy.generate(long, None, GREEDY))
    assert info.value.retryable is False
    policy.close()


def test_the_reply_is_cut_at_the_end_of_the_context(tiny: Any, tokenizer: Any) -> None:
    async def run() -> tuple[PolicyOutput, int]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, max_context=100)
        conversation = _conversation(1)
        room = 100 - len(policy.encode(conversation, None))
        out = await policy.generate(conversation, None, SamplingParams(temperature=0))
        await policy.aclose()
        return out, room

    out, room = asyncio.run(run())
    assert 0 < room < 100
    assert len(out.token_ids or []) == room and out.finish_reason == "length"


def test_aclose_finishes_queued_requests_then_refuses_new_ones(tiny: Any, tokenizer: Any) -> None:
    async def run() -> tuple[list[PolicyOutput], HFPolicy]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, batching=False, name="tiny")
        tasks = [
            asyncio.create_task(policy.generate(_conversation(i), None, GREEDY)) for i in range(3)
        ]
        await asyncio.sleep(0.05)  # let them queue
        await policy.aclose()
        outputs = [await task for task in tasks]
        with pytest.raises(EndpointError, match=re.escape("the HFPolicy 'tiny' is closed")):
            await policy.generate(_conversation(0), None, GREEDY)
        await policy.aclose()  # closing twice is fine
        return outputs, policy

    outputs, policy = asyncio.run(run())
    assert all(len(o.token_ids or []) == 6 for o in outputs)
    assert policy._worker is not None and not policy._worker.is_alive()


def test_a_cancelled_request_does_not_stop_the_worker(tiny: Any, tokenizer: Any) -> None:
    async def run() -> PolicyOutput:
        policy = HFPolicy(tiny, tokenizer=tokenizer, batching=False)
        slow = asyncio.create_task(
            policy.generate(_conversation(1), None, SamplingParams(temperature=0, max_tokens=30))
        )
        doomed = asyncio.create_task(policy.generate(_conversation(2), None, GREEDY))
        await asyncio.sleep(0.01)
        doomed.cancel()
        out = await policy.generate(_conversation(3), None, GREEDY)
        await slow
        with pytest.raises(asyncio.CancelledError):
            await doomed
        await policy.aclose()
        return out

    assert len(asyncio.run(run()).token_ids or []) == 6


def test_a_generation_failure_answers_every_caller_of_the_batch(tiny: Any, tokenizer: Any) -> None:
    async def run() -> list[BaseException | PolicyOutput]:
        # An invalid generation setting fails inside the worker, for the whole batch.
        policy = HFPolicy(
            tiny, tokenizer=tokenizer, max_wait_ms=500, generate_kwargs={"num_beams": 0}
        )
        results = await asyncio.gather(
            *(policy.generate(_conversation(i), None, GREEDY) for i in range(2)),
            return_exceptions=True,
        )
        await policy.aclose()
        return list(results)

    for result in asyncio.run(run()):
        assert isinstance(result, EndpointError)
        assert str(result).startswith("local generation failed: ")
        assert isinstance(result.__cause__, Exception)
        assert result.retryable is False


def test_native_tool_rendering_uses_the_chat_template(tiny: Any, tokenizer: Any) -> None:
    policy = HFPolicy(tiny, tokenizer=tokenizer)
    history = [
        Message(role="system", content="Use tools."),
        Message(role="user", content="1+1?"),
        tool_call("add", {"a": 1}, call_id="call_1"),
        Message(role="tool", content="2", tool_call_id="call_1"),
    ]
    text = policy.render(history, [ADD])
    assert text.startswith("<|im_start|>system\nUse tools.\n\n# Tools\n")
    assert '"name": "add"' in text and "<tools>" in text
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    policy.close()


def test_a_template_without_tools_falls_back_on_the_text_protocol(
    tiny: Any, tokenizer: Any, tiny_folder: Path
) -> None:
    plain = transformers.AutoTokenizer.from_pretrained(tiny_folder)
    plain.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    policy = HFPolicy(tiny, tokenizer=plain)
    assert policy.native_tools is False
    history = [Message(role="user", content="1+1?"), tool_call("add", {"a": 1}, call_id="c")]
    history.append(Message(role="tool", content="2", tool_call_id="c"))
    text = policy.render(history, [ADD])
    assert text.startswith("<|im_start|>system\n# Tools\n\nYou can call the tools below")
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}' in text
    assert "<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>" in text
    forced = HFPolicy(tiny, tokenizer=tokenizer, tool_format="text")
    assert forced.native_tools is False
    assert "You can call the tools below" in forced.render(history, [ADD])
    policy.close()
    forced.close()


def test_offered_tools_reach_the_prompt_and_text_replies_stay_text(
    tiny: Any, tokenizer: Any
) -> None:
    async def run(tools: list[dict[str, Any]] | None) -> PolicyOutput:
        policy = HFPolicy(tiny, tokenizer=tokenizer, name="tiny")
        out = await policy.generate(_conversation(1), tools, GREEDY)
        await policy.aclose()
        return out

    plain = asyncio.run(run(None))
    assert plain.parse_error is None and plain.message.tool_calls is None
    with_tools = asyncio.run(run([ADD]))
    assert with_tools.parse_error is None  # random text has no <tool_call> block
    assert with_tools.prompt_token_ids and plain.prompt_token_ids
    assert len(with_tools.prompt_token_ids) > len(plain.prompt_token_ids)  # tools in the prompt


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_batch_size": 0}, "max_batch_size must be at least 1, got 0."),
        ({"max_wait_ms": -1}, "max_wait_ms must be >= 0, got -1."),
        ({"tool_format": "xml"}, "tool_format must be 'auto', 'native' or 'text', got 'xml'."),
    ],
)
def test_bad_settings_are_config_errors(tiny: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        HFPolicy(tiny, **kwargs)


def test_a_loaded_model_needs_its_tokenizer(tiny: Any) -> None:
    message = "HFPolicy(model=<a loaded model>) also needs tokenizer=..."
    with pytest.raises(ConfigError, match=re.escape(message)):
        HFPolicy(tiny)


def test_a_missing_model_folder_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    message = (
        f"model {str(missing)!r} looks like a local folder but does not exist; give a model "
        "folder (--model runs/<run>/final) or a Hugging Face hub id (org/name)."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        HFPolicy(missing)


def test_a_folder_that_holds_no_model_is_one_sentence_per_stop(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        HFPolicy(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"could not load the model {str(tmp_path)!r}: ")
    assert ".." not in message and "?." not in message, message


@pytest.mark.slow
def test_the_embedded_model_answers_and_batches() -> None:
    async def run() -> tuple[list[PolicyOutput], HFPolicy]:
        policy = HFPolicy(max_wait_ms=500)
        question = [
            Message(role="system", content="You are a helpful assistant."),
            Message(role="user", content="What is the capital of France?"),
        ]
        outputs = await asyncio.gather(
            *(
                policy.generate(question, None, SamplingParams(temperature=0, max_tokens=20))
                for _ in range(3)
            )
        )
        await policy.aclose()
        return list(outputs), policy

    outputs, policy = asyncio.run(run())
    assert policy.name == "smollm2-135m"
    assert policy.stats.sizes == {3: 1}
    for out in outputs:
        assert "Paris" in out.message.text
        assert out.finish_reason == "stop"
        assert out.token_ids and out.token_ids[-1] == 2  # <|im_end|>
    assert outputs[0].token_ids == outputs[1].token_ids == outputs[2].token_ids


# -- reusing the KV cache across turns -----------------------------------------------------------


def _play_turns(
    policy: HFPolicy, tokenizer: Any, episodes: int, turns: int, late: int | None = None
) -> list[list[PolicyOutput]]:
    """Concurrent token-in/token-out episodes: each turn appends the reply and a feedback
    message of a different length per episode; episode ``late`` joins one turn late."""

    async def episode(i: int) -> list[PolicyOutput]:
        if i == late:
            await asyncio.sleep(0.3)
        ids = list(policy.encode(_conversation(i, words=2), None))
        outputs = []
        for turn in range(turns):
            sampling = SamplingParams(temperature=0, max_tokens=4 + i)
            out = await policy.generate_ids(ids, None, sampling)
            outputs.append(out)
            feedback = f"<|im_end|>\n<|im_start|>user\nturn {turn}" + " again" * (i + turn)
            ids = ids + (out.token_ids or []) + tokenizer(feedback)["input_ids"]
        return outputs

    async def run() -> list[list[PolicyOutput]]:
        try:
            return list(await asyncio.gather(*(episode(i) for i in range(episodes))))
        finally:
            await policy.aclose()

    return asyncio.run(run())


def test_reusing_the_kv_cache_gives_the_same_turns(tiny: Any, tokenizer: Any) -> None:
    def play(reuse: bool) -> tuple[list[list[PolicyOutput]], HFPolicy]:
        policy = HFPolicy(tiny, tokenizer=tokenizer, max_wait_ms=200, reuse_kv=reuse)
        return _play_turns(policy, tokenizer, episodes=4, turns=3, late=3), policy

    (fresh, off), (reused, on) = play(False), play(True)
    assert off.stats.reused_tokens == 0
    # Turns 2 and 3 of every episode started from the cache: most of each prompt was not
    # prefilled again (each reply's last token and the feedback are new).
    first_turns = sum(len(e[0].prompt_token_ids or []) for e in reused)
    all_prompts = sum(len(o.prompt_token_ids or []) for e in reused for o in e)
    assert 0.6 * (all_prompts - first_turns) < on.stats.reused_tokens < all_prompts - first_turns
    # The late episode made batches with cached and uncached rows side by side.
    assert max(on.stats.sizes) > 1 and on.stats.batches > 3
    for a, b in zip(fresh, reused, strict=True):
        assert [o.token_ids for o in a] == [o.token_ids for o in b]
        for x, y in zip(a, b, strict=True):
            assert y.logprobs == pytest.approx(x.logprobs, abs=1e-4)


def test_logprobs_from_a_cached_prefix_match_a_teacher_forced_pass(
    tiny: Any, tokenizer: Any
) -> None:
    policy = HFPolicy(tiny, tokenizer=tokenizer, max_wait_ms=200, reuse_kv=True)
    episodes = _play_turns(policy, tokenizer, episodes=2, turns=2)
    assert policy.stats.reused_tokens > 0
    for outputs in episodes:
        last = outputs[-1]
        expected = _teacher_forced_logprobs(tiny, last.prompt_token_ids, last.token_ids, 1.0)
        assert last.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


def test_a_re_rendered_conversation_reuses_its_shared_prefix(tiny: Any, tokenizer: Any) -> None:
    policy = HFPolicy(tiny, tokenizer=tokenizer, reuse_kv=True)

    async def run() -> tuple[PolicyOutput, PolicyOutput]:
        try:
            conversation = _conversation(1)
            first = await policy.generate(conversation, None, GREEDY)
            # The chat path renders the reply as text again: its tokens may differ from the
            # generated ones, but the system and user turns are shared.
            conversation += [first.message, Message(role="user", content="And then?")]
            second = await policy.generate(conversation, None, GREEDY)
            return first, second
        finally:
            await policy.aclose()

    first, second = asyncio.run(run())
    assert first.prompt_token_ids and first.token_ids and second.prompt_token_ids
    # The cache holds the prompt and every reply token but the last (never fed back in).
    cached = first.prompt_token_ids + first.token_ids[:-1]
    pairs = zip(cached, second.prompt_token_ids[: len(cached)], strict=True)
    shared = next((i for i, (x, y) in enumerate(pairs) if x != y), len(cached))
    assert shared >= len(first.prompt_token_ids)
    assert policy.stats.reused_tokens == shared


def test_kv_reuse_is_on_for_a_loaded_folder_and_off_for_a_model_object(
    tiny_folder: Path, tiny: Any, tokenizer: Any
) -> None:
    assert HFPolicy(tiny_folder)._kv_cache is not None
    assert HFPolicy(tiny, tokenizer=tokenizer)._kv_cache is None  # its weights may be training
    assert HFPolicy(tiny, tokenizer=tokenizer, reuse_kv=True)._kv_cache is not None


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 30 generate calls of the embedded model: minutes when loaded
def test_the_embedded_model_is_the_same_greedy_with_or_without_the_kv_cache() -> None:
    """Greedy replies of the embedded model do not depend on KV reuse, token for token: five
    tool conversations, re-rendered each turn as the engine sends them, in batches of up to
    four where rows join late and leave early, a tool result appended after every reply."""
    from rk_agent.envs.registry import make_env

    env = make_env("tools", tool_names=["lookup", "calculator"])  # a shorter system prompt
    tools = env.tool_schemas
    openings = []
    for seed in range(5):
        env.reset(seed=seed)
        openings.append(list(env.conversation))

    def play(reuse: bool) -> tuple[list[list[list[int]]], HFPolicy]:
        policy = HFPolicy(max_batch_size=4, max_wait_ms=100, reuse_kv=reuse)

        async def episode(i: int) -> list[list[int]]:
            await asyncio.sleep(0.4 * (i % 3))  # rows join batches already under way
            conversation = list(openings[i])
            replies = []
            for turn in range(2 + i % 2):  # and leave them after 2 or 3 turns
                sampling = SamplingParams(temperature=0, max_tokens=8 + 4 * (i % 2))
                out = await policy.generate(conversation, tools, sampling)
                replies.append(list(out.token_ids or []))
                conversation.append(Message(role="assistant", content=out.message.text))
                result = f"{1000 * (i + 1) + 37 * turn}" + " units" * (i % 4)
                conversation.append(Message(role="tool", content=result, tool_call_id=f"c{turn}"))
            return replies

        async def run() -> list[list[list[int]]]:
            try:
                return list(await asyncio.gather(*(episode(i) for i in range(5))))
            finally:
                await policy.aclose()

        return asyncio.run(run()), policy

    (plain, off), (cached, on) = play(False), play(True)
    assert off.stats.reused_tokens == 0 and on.stats.reused_tokens > 0
    assert max(on.stats.sizes) > 1
    assert cached == plain


# -- the KV cache's byte budget -------------------------------------------------------------------


def test_the_kv_cache_stays_within_its_byte_budget_over_many_batches(
    tiny: Any, tokenizer: Any
) -> None:
    # The tiny model's KV is 512 bytes a token (2 layers, 2 KV heads of 16, keys and values,
    # float32); one conversation of its 512-token context is 262,144 bytes.
    budget = 300_000
    policy = HFPolicy(
        tiny, tokenizer=tokenizer, max_batch_size=8, max_wait_ms=200, reuse_kv=True,
        kv_cache_bytes=budget,
    )  # fmt: skip
    assert policy.kv_bytes_per_token == 512

    async def episode(i: int) -> None:
        conversation = [Message(role="user", content=" ".join(["word"] * (60 + 10 * i)))]
        for turn in range(4):
            out = await policy.generate(
                conversation, None, SamplingParams(temperature=0, max_tokens=6)
            )
            conversation += [out.message, Message(role="user", content=f"turn {turn} more")]

    async def run() -> None:
        try:
            await asyncio.gather(*(episode(i) for i in range(8)))
        finally:
            await policy.aclose()

    asyncio.run(run())
    # Eight conversations of 70 to 150 tokens (36 to 77 kB each) do not fit together: each
    # batch was generated in parts, and what was kept for reuse made room for them.
    assert 0 < policy.stats.kv_bytes_peak <= budget
    assert max(policy.stats.sizes) < 8 and policy.stats.requests == 32
    assert policy.stats.reused_tokens > 0


def test_a_budget_that_cannot_hold_one_conversation_is_refused_at_once(
    tiny: Any, tokenizer: Any
) -> None:
    message = (
        re.escape("kv_cache_bytes=100,000 cannot hold one conversation of ")
        + ".+"
        + (
            re.escape(
                "'s 512-token context (262,144 bytes at 512 bytes a token); give kv_cache_bytes of "
                "at least 262,144, or a smaller max_context."
            )
        )
    )
    with pytest.raises(ConfigError, match=message):
        HFPolicy(tiny, tokenizer=tokenizer, kv_cache_bytes=100_000)
    assert HFPolicy(tiny, tokenizer=tokenizer, kv_cache_bytes=100_000, max_context=128)


def test_the_default_budget_is_a_gib_or_one_whole_conversation_within_a_quarter_of_memory(
    tiny: Any, tokenizer: Any
) -> None:
    from rk_agent.policies.hf_policy import default_kv_cache_bytes

    quarter = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    assert default_kv_cache_bytes("cpu") == min(1024**3, quarter)
    assert default_kv_cache_bytes("cpu", 3 * 1024**3) == min(3 * 1024**3, quarter)
    assert default_kv_cache_bytes("cpu", 10 * quarter) == quarter
    # The tiny model's 512-token context is far under a GiB: the policy takes the GiB.
    assert HFPolicy(tiny, tokenizer=tokenizer).kv_cache_bytes == min(1024**3, quarter)


def test_abort_ends_the_generation_at_its_next_token_and_close_returns(
    tiny: Any, tokenizer: Any
) -> None:
    """What a trainer does on Ctrl-C (issue 40 item 7): the batch being generated stops, its
    callers get an `EndpointError`, and `close` returns with the worker thread ended."""
    policy = HFPolicy(tiny, tokenizer=tokenizer, max_context=100_000)
    long = SamplingParams(temperature=1.0, max_tokens=100_000)  # far more than it will make

    async def generate() -> None:
        await policy.generate([Message(role="user", content="hi")], None, long)

    async def run() -> None:
        task = asyncio.create_task(generate())
        while policy.stats.batches == 0 and not policy._abort.is_set():
            await asyncio.sleep(0.05)  # the worker is generating
            if policy._worker is not None:
                policy.abort()
        with pytest.raises(EndpointError, match=re.escape("local generation was stopped")):
            await task

    asyncio.run(run())
    policy.close()
    assert policy._finished.is_set() and policy._worker is not None
    policy._worker.join(timeout=30)
    assert not policy._worker.is_alive()
    assert policy.stats.batches == 0  # the cut-short batch answered no one
