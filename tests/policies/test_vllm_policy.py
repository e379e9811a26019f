"""Tests for `rk_agent.policies.vllm_policy`, over real HTTP against the loopback stub server,
which speaks vLLM's token-id completions contract (`rk_agent.testing.stub_completions`)."""

from __future__ import annotations

import asyncio
import doctest
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from rk_agent.errors import ConfigError, ContextOverflowError, EndpointError, UnknownNameError
from rk_agent.policies import vllm_policy
from rk_agent.policies.policy import Policy, SamplingParams
from rk_agent.policies.vllm_policy import VLLMPolicy, openai_base_url
from rk_agent.retry import MODEL_ENDPOINT_RETRY
from rk_agent.testing.stub_server import Fault, StubServer
from rk_agent.types import Message

T = TypeVar("T")
PROMPT = [1, 17, 4, 9]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
        },
    },
}
SAMPLING = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=32)


def run(policy: VLLMPolicy, work: Callable[[VLLMPolicy], Awaitable[T]]) -> T:
    """Run ``work(policy)`` in a fresh event loop and close the policy after it."""

    async def main() -> T:
        try:
            return await work(policy)
        finally:
            await policy.aclose()

    return asyncio.run(main())


def generate(policy: VLLMPolicy, prompt: list[int] = PROMPT, tools: Any = None) -> Any:
    return run(policy, lambda p: p.generate_ids(prompt, tools, SAMPLING))


def test_token_ids_go_out_and_come_back_untouched(embedded_tok: Any) -> None:
    with StubServer(["four"], tokenizer=embedded_tok) as server:
        policy = VLLMPolicy(server.url, embedded_tok, extra_body={"top_k": 0, "min_p": 0.1})
        output = generate(policy)
    (request,) = server.completion_requests
    assert request.path == "/v1/completions"
    assert request.body == {
        "model": "stub-model",  # the first model GET /v1/models lists
        "prompt": PROMPT,
        "max_tokens": 32,
        "temperature": 0.7,
        "top_p": 0.9,
        "stop_token_ids": sorted(policy.eos_ids),
        "logprobs": 0,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "top_k": 0,
        "min_p": 0.1,
    }
    choice = request.response["choices"][0]
    assert output.token_ids == choice["token_ids"]
    assert output.token_ids[-1] == embedded_tok.eos_token_id
    assert output.logprobs == choice["logprobs"]["token_logprobs"]
    assert output.prompt_token_ids == PROMPT
    assert output.message == Message(role="assistant", content="four")
    assert output.finish_reason == "stop"
    assert output.usage is not None and output.usage.completion_tokens == len(output.token_ids)
    assert policy.name == "stub-model"


def test_tool_calls_in_the_text_are_parsed(embedded_tok: Any) -> None:
    reply = {"tool_calls": [{"name": "add", "arguments": {"a": 2}}]}
    with StubServer([reply], tokenizer=embedded_tok) as server:
        output = generate(VLLMPolicy(server.url, embedded_tok), tools=[ADD])
    assert output.finish_reason == "tool_calls"
    (call,) = output.message.tool_calls or []
    assert call.function.name == "add" and call.function.parsed_arguments() == {"a": 2}


def test_the_text_protocol_in_another_tool_call_format(embedded_tok: Any) -> None:
    reply = '<|python_tag|>{"name": "add", "parameters": {"a": 2}}'
    messages = [Message(role="user", content="2 + 0?")]
    with StubServer([reply], tokenizer=embedded_tok) as server:
        policy = VLLMPolicy(
            server.url, embedded_tok, tool_format="text", tool_call_format="llama3_json"
        )
        output = run(policy, lambda p: p.generate(messages, [ADD], SAMPLING))
    prompt = embedded_tok.decode(server.completion_requests[0].body["prompt"])
    assert '{"name": "<function-name>", "parameters": {"<argument-name>": <value>}}' in prompt
    assert output.finish_reason == "tool_calls" and output.parse_error is None
    (call,) = output.message.tool_calls or []
    assert call.function.name == "add" and call.function.parsed_arguments() == {"a": 2}


def test_a_reply_cut_at_max_tokens_has_finish_reason_length(embedded_tok: Any) -> None:
    with StubServer(["one two three four five"], tokenizer=embedded_tok) as server:
        policy = VLLMPolicy(server.url, embedded_tok)
        output = run(policy, lambda p: p.generate_ids(PROMPT, None, SAMPLING.model_copy(
            update={"max_tokens": 2})))  # fmt: skip
    assert output.finish_reason == "length" and len(output.token_ids) == 2


def test_generate_renders_the_conversation_with_the_chat_template(embedded_tok: Any) -> None:
    messages = [Message(role="user", content="What is 2 + 2?")]
    with StubServer(["4"], tokenizer=embedded_tok) as server:
        policy = VLLMPolicy(server.url, embedded_tok)
        output = run(policy, lambda p: p.generate(messages, None, SAMPLING))
    sent = server.completion_requests[0].body["prompt"]
    assert sent == policy.encode(messages, None)
    assert embedded_tok.decode(sent).endswith("<|im_start|>assistant\n")
    assert output.message.content == "4"
    assert isinstance(policy, Policy)


def test_concurrent_turns_go_out_in_parallel(embedded_tok: Any) -> None:
    with StubServer(["ok"], tokenizer=embedded_tok, latency_s=0.2) as server:
        policy = VLLMPolicy(server.url, embedded_tok)

        async def eight(p: VLLMPolicy) -> list[Any]:
            return list(
                await asyncio.gather(*(p.generate_ids([i + 1], None, SAMPLING) for i in range(8)))
            )

        outputs = run(policy, eight)
    assert len(outputs) == 8 and server.counts["max_in_flight"] == 8
    assert server.counts["requests"] == 9  # the models listing, then eight completions


def test_a_named_model_must_be_served(embedded_tok: Any) -> None:
    with StubServer(tokenizer=embedded_tok) as server:
        named = VLLMPolicy(server.url, embedded_tok, model="stub-model", name="policy-a")
        assert run(named, lambda p: p.connect()) == "stub-model"
        assert named.name == "policy-a"
        wrong = VLLMPolicy(server.url, embedded_tok, model="stub-modle")
        with pytest.raises(UnknownNameError, match=re.escape(
            "unknown served model 'stub-modle'. Did you mean 'stub-model'? Known served "
            "models: stub-model. (from "
        )):  # fmt: skip
            run(wrong, lambda p: p.connect())


def test_a_server_that_is_down_is_an_error_naming_its_url(embedded_tok: Any) -> None:
    server = StubServer().start()
    url = server.url
    server.stop()
    policy = VLLMPolicy(url, embedded_tok)
    with pytest.raises(EndpointError, match=re.escape(f"no model server answers at {url}/v1")):
        generate(policy)


def test_retryable_failures_are_retried(embedded_tok: Any) -> None:
    with StubServer(["ok"], tokenizer=embedded_tok) as server:
        server.inject(Fault.http(503, retry_after=0.01))
        policy = VLLMPolicy(server.url, embedded_tok)
        output = run(policy, lambda p: p.connect())  # the models listing is not retried
        output = generate(policy)
    assert output.message.content == "ok" and len(server.completion_requests) == 2


def test_retries_wait_under_the_shared_retry_policy(embedded_tok: Any) -> None:
    """The waits are `rk_agent.retry`'s (Retry-After honoured), not the openai SDK's."""
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    policy_retry = MODEL_ENDPOINT_RETRY.replace(max_retries=3, sleep=record)
    with StubServer(["ok"], tokenizer=embedded_tok) as server:
        policy = VLLMPolicy(server.url, embedded_tok, retry=policy_retry)
        run(policy, lambda p: p.connect())
        server.inject(Fault.http(503, retry_after=2.0), Fault.http(429, retry_after=1.0))
        output = generate(policy)
    assert output.message.content == "ok" and len(server.completion_requests) == 3
    assert waits == [2.0, 1.0]


def test_failures_become_endpoint_errors_with_the_servers_message(embedded_tok: Any) -> None:
    key = "sk-vllm-0123456789-SECRET"
    with StubServer(["ok"], tokenizer=embedded_tok, api_key=key) as server:
        policy = VLLMPolicy(server.url, embedded_tok, api_key=key, max_retries=0)
        run(policy, lambda p: p.connect())
        server.inject(Fault.http(500, f"boom with {key}"))
        with pytest.raises(EndpointError) as caught:
            generate(policy)
    assert caught.value.status == 500 and caught.value.retryable
    assert "boom with ***" in str(caught.value) and key not in str(caught.value)
    assert key not in repr(policy)


def test_a_prompt_too_long_is_a_context_overflow(embedded_tok: Any) -> None:
    with StubServer(["ok"], tokenizer=embedded_tok) as server:
        policy = VLLMPolicy(server.url, embedded_tok)
        run(policy, lambda p: p.connect())
        server.inject(Fault.context_overflow(4096))
        with pytest.raises(ContextOverflowError, match="maximum context length is 4096"):
            generate(policy)


def test_a_server_without_token_ids_breaks_the_contract(embedded_tok: Any) -> None:
    body = {"choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}]}
    with (
        StubServer([body], tokenizer=embedded_tok) as server,
        pytest.raises(ConfigError, match=re.escape("answered without `token_ids`")),
    ):
        generate(VLLMPolicy(server.url, embedded_tok))


def test_a_server_that_changed_the_prompt_breaks_the_contract(embedded_tok: Any) -> None:
    choice = {"index": 0, "text": "ok", "token_ids": [5, 2], "prompt_token_ids": [0, *PROMPT]}
    with (
        StubServer([{"choices": [choice]}], tokenizer=embedded_tok) as server,
        pytest.raises(ConfigError, match=re.escape("(5 tokens back for 4 sent)")),
    ):
        generate(VLLMPolicy(server.url, embedded_tok))


def test_missing_logprobs_are_none(embedded_tok: Any) -> None:
    choice = {"index": 0, "text": "ok", "token_ids": [5, 2], "logprobs": None}
    with StubServer([{"choices": [choice]}], tokenizer=embedded_tok) as server:
        output = generate(VLLMPolicy(server.url, embedded_tok))
    assert output.token_ids == [5, 2] and output.logprobs is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "localhost:8000"}, "a server URL starts with http:// or https://"),
        ({"timeout_s": 0}, "VLLMPolicy: timeout_s must be > 0 seconds, got 0"),
        ({"max_retries": -1}, "VLLMPolicy: max_retries must be >= 0, got -1"),
        ({"tool_format": "xml"}, "tool_format must be 'auto', 'native' or 'text', got 'xml'"),
    ],
)
def test_bad_settings_fail_at_once(embedded_tok: Any, kwargs: dict[str, Any], message: str) -> None:
    arguments = {"base_url": "http://127.0.0.1:1", **kwargs}
    with pytest.raises(ConfigError, match=re.escape(message)):
        VLLMPolicy(tokenizer=embedded_tok, **arguments)


def test_openai_base_url_accepts_trls_form_and_the_v1_form() -> None:
    assert openai_base_url("http://0.0.0.0:8000") == "http://0.0.0.0:8000/v1"
    assert openai_base_url(" http://gpu:8000/v1/ ") == "http://gpu:8000/v1"


def test_docstring_examples_run() -> None:
    result = doctest.testmod(vllm_policy)
    assert result.failed == 0 and result.attempted >= 1
