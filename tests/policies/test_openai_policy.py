"""Tests for `rk_agent.policies.openai_policy`, over real HTTP against the loopback stub server.

Each test starts a `StubServer` (a background thread on 127.0.0.1, port 0), scripts its replies
and injected faults, drives the policy with ``asyncio.run`` and reads back what the server got.
"""

from __future__ import annotations

import asyncio
import doctest
import email.utils
import logging
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from rk_agent.errors import ConfigError, ContextOverflowError, EndpointError, UnknownNameError
from rk_agent.policies import openai_policy
from rk_agent.policies.openai_policy import OpenAIPolicy, PolicyStats, make_policy
from rk_agent.policies.policy import Policy, PolicyOutput, SamplingParams
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy
from rk_agent.testing.stub_server import Fault, StubServer
from rk_agent.tool_calls import HERMES, LLAMA3_JSON
from rk_agent.types import Message

KEY = "sk-test-0123456789abcdef-SECRET"
FIREWORKS_URL = "https://api.fireworks.ai/inference/v1"
MESSAGES = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="What is 2 + 2?"),
]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
T = TypeVar("T")


def run(policy: OpenAIPolicy, work: Callable[[OpenAIPolicy], Awaitable[T]]) -> T:
    """Run ``work(policy)`` in a fresh event loop and close the policy after it."""

    async def main() -> T:
        try:
            return await work(policy)
        finally:
            await policy.aclose()

    return asyncio.run(main())


def ask(
    policy: OpenAIPolicy,
    tools: list[dict[str, Any]] | None = None,
    sampling: SamplingParams | None = None,
) -> PolicyOutput:
    return run(policy, lambda p: p.generate(MESSAGES, tools, sampling or SamplingParams()))


def policy_for(server: StubServer, **options: Any) -> OpenAIPolicy:
    options.setdefault("backoff_base_s", 0.001)
    return OpenAIPolicy("test-model", base_url=server.base_url, api_key=KEY, **options)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer(["4"]) as running:
        yield running


# ---------------------------------------------------------------------------------------------
# Success


def test_text_reply(server: StubServer) -> None:
    policy = policy_for(server)
    out = ask(policy, sampling=SamplingParams(temperature=0.0, max_tokens=16, stop=["\n"], seed=3))
    assert isinstance(policy, Policy)
    assert out.message == Message(role="assistant", content="4")
    assert out.finish_reason == "stop"
    assert out.usage is not None and (out.usage.prompt_tokens, out.usage.completion_tokens) == (
        8,
        1,
    )
    assert out.latency_s > 0 and out.extra["attempts"] == 1
    assert out.logprobs is None and out.token_ids is None and out.prompt_token_ids is None
    (request,) = server.chat_requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "test-model",
        "messages": [m.to_openai() for m in MESSAGES],
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 16,
        "stop": ["\n"],
        "seed": 3,
    }


def test_tool_calls_are_sent_and_parsed() -> None:
    reply = {"tool_calls": [{"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 2}}]}
    with StubServer([reply]) as server:
        out = ask(policy_for(server), tools=[ADD])
        (request,) = server.chat_requests
    assert request.body["tools"] == [ADD] and request.body["tool_choice"] == "auto"
    assert out.finish_reason == "tool_calls" and out.message.content is None
    (call,) = out.message.tool_calls or []
    assert (call.id, call.function.name) == ("call_1", "add")
    assert call.function.parsed_arguments() == {"a": 2, "b": 2}
    assert out.extra["tool_protocol"] == "native" and out.parse_error is None


def test_reasoning_is_read_but_never_sent_back() -> None:
    with StubServer([{"content": "4", "reasoning_content": "2 and 2 make 4"}]) as server:
        out = ask(policy_for(server))
        history = [*MESSAGES, out.message, Message(role="user", content="And 3 + 3?")]
        policy = policy_for(server)
        run(policy, lambda p: p.generate(history, None, SamplingParams()))
        sent = server.chat_requests[-1].body["messages"][2]
    assert out.message.reasoning_content == "2 and 2 make 4"
    assert sent == {"role": "assistant", "content": "4"}


@pytest.mark.parametrize(
    "message",
    [
        Message(role="system", content="You are terse."),
        Message(role="user", content=[{"type": "text", "text": "hi"}], name="ann"),
        Message(role="assistant", content=None, reasoning_content="think", refusal="no"),
        Message.model_validate(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "add", "arguments": {"a": 1}}},
                    {"id": "c2", "type": "function", "function": {"name": "f"}},
                ],
                "provider_extra": 1,
            }
        ),
        Message(role="assistant", tool_calls=[]),
        Message(role="tool", tool_call_id="c1", name="add", content="3"),
    ],
)
def test_a_message_is_sent_as_its_standard_fields_without_nulls(message: Message) -> None:
    standard = ("role", "content", "name", "tool_calls", "tool_call_id")
    expected = {k: v for k, v in message.to_openai().items() if k in standard}
    sent = openai_policy._wire(message)
    assert sent == expected
    assert list(sent) == list(expected)  # the same JSON, byte for byte


@pytest.mark.parametrize(
    "wire",
    [
        {"role": "assistant", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "reasoning": "r",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}},
                {"type": "function", "function": {"name": "add", "arguments": None}},
                {"id": "c3", "function": {"name": "add", "arguments": {"a": 1}}},
                {"id": "c4", "type": "function", "function": "not a mapping"},
            ],
        },
    ],
)
def test_a_reply_reads_as_the_message_the_model_builds(wire: dict[str, Any]) -> None:
    output = openai_policy._output({"choices": [{"message": wire}], "model": "m"})
    calls = [
        {"id": c.get("id") or f"call_{i}", "function": {
            "name": c["function"]["name"], "arguments": c["function"].get("arguments") or "{}"}}
        for i, c in enumerate(wire.get("tool_calls") or []) if isinstance(c["function"], dict)
    ]  # fmt: skip
    expected = Message(
        role="assistant", content=wire.get("content"), tool_calls=calls or None,
        reasoning_content=wire.get("reasoning"),
    )  # fmt: skip
    assert output.message == expected
    assert output.message.model_fields_set == expected.model_fields_set
    assert output.message.model_dump_json() == expected.model_dump_json()


def test_logprobs_and_token_ids_only_when_asked(server: StubServer) -> None:
    out = ask(policy_for(server, logprobs=True, return_token_ids=True))
    request = server.chat_requests[0].body
    assert request["logprobs"] is True and request["return_token_ids"] is True
    assert out.logprobs == [0.0]
    assert out.token_ids is not None and len(out.token_ids) == 1
    assert out.prompt_token_ids is not None and len(out.prompt_token_ids) == 8


def test_extra_body_and_tool_choice_are_sent(server: StubServer) -> None:
    ask(policy_for(server, extra_body={"top_k": 20}, tool_choice="required"), tools=[ADD])
    body = server.chat_requests[0].body
    assert body["top_k"] == 20 and body["tool_choice"] == "required"


# ---------------------------------------------------------------------------------------------
# Retries


def test_429_waits_for_retry_after(server: StubServer) -> None:
    server.inject(Fault.rate_limit(retry_after=0.4))
    policy = policy_for(server)
    out = ask(policy)
    first, second = server.chat_requests
    assert second.received_at - first.received_at >= 0.4
    assert out.message.content == "4" and out.extra["attempts"] == 2
    assert (policy.stats.requests, policy.stats.retries, policy.stats.errors) == (2, 1, 0)


def test_retry_after_ms_is_honoured(server: StubServer) -> None:
    server.inject(Fault.http(503, headers={"retry-after-ms": "300"}))
    ask(policy_for(server))
    first, second = server.chat_requests
    assert second.received_at - first.received_at >= 0.3


def test_retry_after_as_http_date_is_capped_at_backoff_max(server: StubServer) -> None:
    server.inject(Fault.http(503, retry_after=email.utils.formatdate(time.time() + 3600)))
    ask(policy_for(server, backoff_max_s=0.3))  # an hour's wait would time the test out
    first, second = server.chat_requests
    assert second.received_at - first.received_at >= 0.3


@pytest.mark.parametrize(
    "fault",
    [Fault.http(500), Fault.http(502), Fault.http(503), Fault.drop(), Fault.malformed()],
    ids=["500", "502", "503", "drop", "malformed"],
)
def test_retryable_failures_are_retried(server: StubServer, fault: Fault) -> None:
    server.inject(fault, fault)
    policy = policy_for(server)
    out = ask(policy)
    assert out.message.content == "4" and out.extra["attempts"] == 3
    assert policy.stats.retries == 2 and len(server.chat_requests) == 3


def test_timeout_is_retried(server: StubServer) -> None:
    server.inject(Fault.hang(60))
    start = time.perf_counter()
    out = ask(policy_for(server, timeout_s=2))  # the retry's answer has 2 s, even on a busy host
    assert out.message.content == "4" and out.extra["attempts"] == 2
    assert time.perf_counter() - start >= 2
    assert server.counts["in_flight"] == 1  # the hung request still hangs: it was not waited for


@pytest.mark.parametrize(
    ("fault", "status", "message"),
    [
        (Fault.hang(5), None, "did not answer within 0.3s (timeout)"),
        (
            Fault.drop(),
            None,
            "could not reach {url}: ServerDisconnected: the server closed the connection",
        ),
        (Fault.malformed(), 200, "{url} sent a body that is not JSON: JSONDecodeError"),
        (Fault.http(503, "overloaded"), 503, "{url}: HTTP 503: overloaded (gave up after 1"),
    ],
)
def test_retryable_errors_carry_status_and_retryable(
    server: StubServer, fault: Fault, status: int | None, message: str
) -> None:
    server.inject(fault)
    # Only the hang waits for the timeout; the others get one long enough for a busy host.
    timeout_s = 0.3 if "within" in message else 60
    policy = policy_for(server, timeout_s=timeout_s, max_retries=0)
    with pytest.raises(EndpointError, match=re.escape(message.format(url=server.base_url))) as info:
        ask(policy)
    assert info.value.status == status and info.value.retryable is True
    assert info.value.url == server.base_url and isinstance(info.value.__cause__, Exception)
    assert policy.stats.errors == 1


def test_gives_up_after_max_retries_with_the_servers_message() -> None:
    fault = Fault.http(503, "the model is overloaded, try later")
    with StubServer(fail_first_n=10, fault=fault) as server:
        policy = policy_for(server, max_retries=2)
        expected = (
            f"{server.base_url}: HTTP 503: the model is overloaded, try later "
            "(gave up after 3 attempts)"
        )
        with pytest.raises(EndpointError, match=re.escape(expected)) as info:
            ask(policy)
        assert len(server.chat_requests) == 3
    assert (info.value.status, info.value.retryable) == (503, True)
    assert (policy.stats.requests, policy.stats.retries, policy.stats.errors) == (3, 2, 1)


def test_the_backoff_arguments_make_the_retry_policy(server: StubServer) -> None:
    policy = policy_for(server, max_retries=2, backoff_base_s=0.1, backoff_max_s=0.25)
    assert policy.retry == MODEL_ENDPOINT_RETRY.replace(max_retries=2, base_s=0.1, max_s=0.25)
    assert policy.retry.jitter == "full" and policy.retry.retries_status(409)


def test_waits_follow_the_retry_policy() -> None:
    waits: list[float] = []
    retry = RetryPolicy(max_retries=3, base_s=0.1, max_s=0.25, jitter="none", sleep=waits.append)
    with StubServer(fail_first_n=3, fault=Fault.http(503)) as server:
        out = ask(OpenAIPolicy("stub", base_url=server.base_url, retry=retry))
    assert waits == [0.1, 0.2, 0.25] and out.extra["attempts"] == 4


@pytest.mark.parametrize(
    ("fault", "status"), [(Fault.http(400, "bad field 'foo'"), 400), (Fault.http(404), 404)]
)
def test_client_errors_are_not_retried(server: StubServer, fault: Fault, status: int) -> None:
    server.inject(fault)
    policy = policy_for(server, max_retries=3)
    with pytest.raises(EndpointError, match=re.escape(f"HTTP {status}: {fault.message}")) as info:
        ask(policy)
    assert (info.value.status, info.value.retryable) == (status, False)
    assert "gave up" not in str(info.value)
    assert len(server.chat_requests) == 1 and policy.stats.retries == 0


def test_401_is_not_retried_and_says_where_the_key_came_from() -> None:
    with StubServer(api_key="sk-the-right-key") as server:
        policy = policy_for(server, max_retries=3)
        expected = (
            f"{server.base_url}: HTTP 401: Invalid API key provided. "
            "(check the API key; it came from: argument)"
        )
        with pytest.raises(EndpointError, match=re.escape(expected)) as info:
            ask(policy)
        assert len(server.chat_requests) == 1
    assert (info.value.status, info.value.retryable) == (401, False)


def test_context_overflow(server: StubServer) -> None:
    server.inject(Fault.context_overflow(limit=1024))
    policy = policy_for(server, max_retries=3)
    expected = (
        f"{server.base_url}: HTTP 400: the conversation does not fit the context window of "
        "'test-model': This model's maximum context length is 1024 tokens."
    )
    with pytest.raises(ContextOverflowError, match=re.escape(expected)) as info:
        ask(policy)
    assert (info.value.status, info.value.retryable) == (400, False)
    assert len(server.chat_requests) == 1 and policy.stats.errors == 1


@pytest.mark.parametrize(
    "message",
    [
        "The prompt is too long: 5000, model maximum context length: 4096",
        "The input (5000 tokens) is longer than the model's context length (4096 tokens).",
        "the request exceeds the available context size, try increasing it",
        "Requested too many tokens for this model",
    ],
)
def test_context_overflow_wordings_of_other_servers(server: StubServer, message: str) -> None:
    server.inject(Fault.http(400, message))
    with pytest.raises(ContextOverflowError):
        ask(policy_for(server))


# ---------------------------------------------------------------------------------------------
# Secrets


def test_the_api_key_never_appears_in_errors_or_repr() -> None:
    echo = Fault.http(400, f"request with key {KEY} rejected")
    with StubServer(lambda request: echo) as server:
        policy = policy_for(server)
        with pytest.raises(EndpointError) as info:
            ask(policy)
    assert "request with key *** rejected" in str(info.value)
    for text in (str(info.value), repr(info.value), repr(policy), str(policy)):
        assert KEY not in text


def test_missing_key_error_never_shows_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        make_policy(provider="openai", model="gpt-4o-mini")
    assert KEY not in str(info.value)


# ---------------------------------------------------------------------------------------------
# Concurrency, usage, tools fall-back, closing


def test_concurrency_limit_is_respected() -> None:
    with StubServer(["4"], latency_s=0.15) as server:
        policy = policy_for(server, max_concurrency=3)

        async def many(p: OpenAIPolicy) -> list[PolicyOutput]:
            return await asyncio.gather(
                *(p.generate(MESSAGES, None, SamplingParams()) for _ in range(10))
            )

        outputs = run(policy, many)
        counts = server.counts
    assert len(outputs) == 10
    assert counts["max_in_flight"] == 3 and counts["connections"] <= 3
    assert max(out.extra["queued_s"] for out in outputs) >= 0.3


def test_usage_totals_add_up() -> None:
    partial_usage = {"prompt_tokens": 100}  # servers omit fields; a missing count is 0
    replies = ["four", "the answer is four", {"content": "x", "usage": partial_usage}]
    with StubServer(replies, fail_first_n=1, fault=Fault.http(500)) as server:
        policy = policy_for(server)

        async def conversation(p: OpenAIPolicy) -> list[PolicyOutput]:
            history, outputs = list(MESSAGES), []
            for _ in range(3):
                out = await p.generate(history, None, SamplingParams())
                outputs.append(out)
                history += [out.message, Message(role="user", content="again")]
            return outputs

        outputs = run(policy, conversation)
    stats = policy.stats
    assert stats.calls == 3 and stats.requests == 4 and stats.retries == 1 and stats.errors == 0
    assert stats.prompt_tokens == sum(o.usage.prompt_tokens for o in outputs if o.usage)
    assert stats.completion_tokens == 1 + 4 + 0
    assert stats.as_dict() == {
        "calls": 3,
        "requests": 4,
        "retries": 1,
        "errors": 0,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": 5,
        "tool_fallbacks": 0,
        "total_tokens": stats.prompt_tokens + 5,
    }
    assert PolicyStats().total_tokens == 0


VLLM_NO_TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'


TEXT_CALL = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 2}}</tool_call>'


def _no_tool_server(text: str = TEXT_CALL) -> StubServer:
    """A server that rejects `tools` as vLLM does without --enable-auto-tool-choice."""
    return StubServer(lambda r: Fault.http(400, VLLM_NO_TOOLS) if "tools" in r else text)


def test_native_tools_fall_back_when_the_server_rejects_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _no_tool_server() as server:
        policy = policy_for(server)

        async def twice(p: OpenAIPolicy) -> list[PolicyOutput]:
            return [await p.generate(MESSAGES, [ADD], SamplingParams()) for _ in range(2)]

        with caplog.at_level(logging.WARNING, logger="rk_agent.policies.openai_policy"):
            first, _ = run(policy, twice)
        sent_tools = ["tools" in r.body for r in server.chat_requests]
    assert sent_tools == [True, False, False]
    assert first.extra["tool_protocol"] == "text" and first.parse_error is None
    (call,) = first.message.tool_calls or []
    assert call.function.name == "add" and call.function.parsed_arguments() == {"a": 2, "b": 2}
    assert policy.native_tools is False and policy.stats.tool_fallbacks == 1
    assert policy.stats.requests == 3 and policy.stats.retries == 0
    assert "using the text tool-call protocol from now on" in caplog.text


def test_native_tools_true_never_falls_back() -> None:
    with _no_tool_server() as server:
        with pytest.raises(EndpointError, match=re.escape(VLLM_NO_TOOLS)) as info:
            ask(policy_for(server, native_tools=True), tools=[ADD])
        assert len(server.chat_requests) == 1
    assert info.value.status == 400


def test_native_tools_false_uses_the_text_protocol() -> None:
    history = [
        *MESSAGES,
        Message.model_validate(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}
                ],
            }
        ),
        Message(role="tool", content="4", tool_call_id="c1"),
    ]
    with StubServer(['<tool_call>{"name": "add", "arguments": [1]}</tool_call>']) as server:
        policy = policy_for(server, native_tools=False)
        out = run(policy, lambda p: p.generate(history, [ADD], SamplingParams()))
        body = server.chat_requests[0].body
    assert "tools" not in body and "tool_choice" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert '"name": "add"' in body["messages"][0]["content"]
    assert "<tool_call>" in body["messages"][2]["content"]
    assert "<tool_response>" in body["messages"][3]["content"]
    assert out.message.tool_calls is None and out.parse_error is not None
    assert out.parse_error.startswith("tool call 1:") and out.parse_format is HERMES
    assert out.extra["tool_protocol"] == "text"


def test_the_text_protocol_in_another_tool_call_format() -> None:
    history = [
        *MESSAGES,
        Message.model_validate(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}
                ],
            }
        ),
        Message(role="tool", content="4", tool_call_id="c1"),
    ]
    reply = '<|python_tag|>{"name": "add", "parameters": {"a": 4, "b": 1}}<|eom_id|>'
    with StubServer([reply]) as server:
        policy = policy_for(server, native_tools=False, tool_call_format="llama3_json")
        out = run(policy, lambda p: p.generate(history, [ADD], SamplingParams()))
        body = server.chat_requests[0].body
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert (
        '"parameters": dictionary of argument name and its value}' in body["messages"][0]["content"]
    )
    assert body["messages"][2]["content"] == '{"name": "add", "parameters": {"a": 2, "b": 2}}'
    assert body["messages"][3]["content"] == "Tool result:\n4"
    assert out.parse_error is None and out.extra["tool_protocol"] == "text"
    assert out.parse_format is LLAMA3_JSON  # the environment's feedback would be its note
    (call,) = out.message.tool_calls or []
    assert call.function.name == "add" and call.function.parsed_arguments() == {"a": 4, "b": 1}


def test_an_unknown_tool_call_format_is_refused_at_once() -> None:
    message = "unknown tool-call format 'qwen'. Known tool-call formats: hermes, llama3_json."
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", tool_call_format="qwen")


def test_without_tools_the_tool_protocol_is_none(server: StubServer) -> None:
    out = ask(policy_for(server, native_tools=False))
    assert out.extra["tool_protocol"] is None and out.message.content == "4"


def test_aclose_closes_connections_and_the_policy_can_be_used_again(server: StubServer) -> None:
    policy = policy_for(server)

    async def work(p: OpenAIPolicy) -> tuple[int, int]:
        await p.generate(MESSAGES, None, SamplingParams())
        open_before = server.counts["open_connections"]
        await p.aclose()
        for _ in range(100):
            if server.counts["open_connections"] == 0:
                break
            await asyncio.sleep(0.01)
        open_after = server.counts["open_connections"]
        await p.generate(MESSAGES, None, SamplingParams())
        return open_before, open_after

    assert run(policy, work) == (1, 0)
    assert server.counts["connections"] == 2


# ---------------------------------------------------------------------------------------------
# Providers and settings


def test_fireworks_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    policy = make_policy(provider="fireworks", model="accounts/fireworks/models/qwen3-8b")
    assert policy.base_url == FIREWORKS_URL
    assert policy.key_source == "FIREWORKS_API_KEY"
    assert policy.name == "accounts/fireworks/models/qwen3-8b"
    assert repr(policy) == (
        "OpenAIPolicy(model='accounts/fireworks/models/qwen3-8b', "
        f"base_url='{FIREWORKS_URL}', provider='fireworks')"
    )


def test_fireworks_without_a_key_fails_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIREWORKS_API_KEY", raising=False)
    expected = (
        "provider 'fireworks' needs an API key: set FIREWORKS_API_KEY or pass --api-key "
        "(api_key=...)"
    )
    with pytest.raises(ConfigError, match=re.escape(expected)):
        make_policy(provider="fireworks", model=None)


def test_openai_preset_uses_its_key_and_max_completion_tokens(
    server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert make_policy(provider="openai", model="gpt-4o-mini").base_url == (
        "https://api.openai.com/v1"
    )
    policy = make_policy(provider="openai", model="gpt-4o-mini", base_url=server.base_url)
    ask(policy, sampling=SamplingParams(max_tokens=7))
    (request,) = server.chat_requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["max_completion_tokens"] == 7 and "max_tokens" not in request.body
    assert "openai-organization" not in request.headers


def test_openai_organization_and_project_go_to_openai_only(
    server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-456")
    ask(make_policy(provider="openai", model="gpt-4o-mini", base_url=server.base_url))
    ask(make_policy(model="m", base_url=server.base_url))
    to_openai, to_other = server.chat_requests
    assert to_openai.headers["openai-organization"] == "org-123"
    assert to_openai.headers["openai-project"] == "proj-456"
    assert "openai-organization" not in to_other.headers


def test_a_bare_base_url_sends_a_placeholder_key(
    server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # never sent to an arbitrary server
    policy = make_policy(base_url=server.base_url, model="local")
    ask(policy)
    assert server.chat_requests[0].headers["authorization"] == "Bearer EMPTY"
    assert policy.key_source == "none"


def test_fireworks_model_names_get_a_hint(
    server: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    hint = (
        "Fireworks model names look like 'accounts/fireworks/models/<name>'; "
        "did you mean 'accounts/fireworks/models/qwen3-8b'?"
    )
    with caplog.at_level(logging.WARNING, logger="rk_agent.policies.openai_policy"):
        policy = make_policy(
            provider="fireworks", model="qwen3-8b", base_url=server.base_url, api_key=KEY
        )
    assert hint in caplog.text
    server.inject(Fault.http(404, "Model not found"))
    with pytest.raises(EndpointError, match=re.escape(f"HTTP 404: Model not found ({hint})")):
        ask(policy)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"provider": "fireworkz", "model": "m"},
            UnknownNameError,
            "unknown provider 'fireworkz'. Did you mean 'fireworks'? Known providers: "
            "fireworks, openai. Or pass --base-url.",
        ),
        (
            {"model": "m"},
            ConfigError,
            "no model endpoint: pass --provider fireworks|openai, or --base-url URL",
        ),
        (
            {"base_url": "http://127.0.0.1:1/v1", "model": None},
            ConfigError,
            "no model: pass --model (e.g. --model MODEL)",
        ),
        (
            {"base_url": "http://127.0.0.1:1/v1", "model": "m", "max_retries": -1},
            ConfigError,
            "OpenAIPolicy: max_retries must be an int >= 0, got -1",
        ),
        (
            {"base_url": "http://127.0.0.1:1/v1", "model": "m", "max_concurrency": 0},
            ConfigError,
            "OpenAIPolicy: max_concurrency must be >= 1, got 0",
        ),
        (
            {"base_url": "http://127.0.0.1:1/v1", "model": "m", "timeout_s": 0},
            ConfigError,
            "OpenAIPolicy: timeout_s must be > 0 seconds, got 0",
        ),
    ],
)
def test_bad_settings_fail_at_once(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        make_policy(**kwargs)


# ---------------------------------------------------------------------------------------------
# check_endpoint: one check before a run


def test_check_endpoint_asks_for_the_models_and_nothing_more(server: StubServer) -> None:
    policy_for(server).check_endpoint()
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/v1/models")]


@pytest.mark.parametrize("status", [404, 500, 503])
def test_a_server_whose_models_route_fails_is_checked_with_a_real_completion(
    status: int,
) -> None:
    # transformers serve offline answers 500 to GET /v1/models; its completions work.
    with StubServer(["OK"], models_status=status) as server:
        policy_for(server).check_endpoint()
        probe = server.chat_requests
    assert len(probe) == 1
    assert probe[0].body is not None
    assert probe[0].body["model"] == "test-model" and probe[0].body["max_tokens"] == 1


def test_when_the_completion_fails_too_both_answers_are_named() -> None:
    with StubServer(["OK"], models_status=500, fail_first_n=1, fault=Fault.http(400)) as server:
        with pytest.raises(EndpointError) as caught:
            policy_for(server).check_endpoint()
        url = server.base_url
    assert str(caught.value) == (
        f"the model server answered 500 to GET {url}/models and 400 to a one-token POST "
        f"{url}/chat/completions (model 'test-model'): the server said: injected 400 Bad Request."
    )
    assert caught.value.status == 400 and not caught.value.retryable


def test_a_refused_key_is_fatal_without_a_completion() -> None:
    with StubServer(["OK"], api_key=KEY) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key="sk-wrong-key-0000")
        with pytest.raises(EndpointError, match=re.escape("answered 401 to GET")) as caught:
            policy.check_endpoint()
        assert server.chat_requests == []
    assert "sk-wrong-key-0000" not in str(caught.value)


def test_an_unreachable_server_is_fatal() -> None:
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    policy = OpenAIPolicy("m", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EndpointError, match=r"^cannot reach the model server: GET "):
        policy.check_endpoint()


def test_importing_the_module_stays_light() -> None:
    code = (
        "import sys, rk_agent.policies.openai_policy, rk_agent.testing.stub_server\n"
        "print(','.join(m for m in ('openai', 'httpx', 'httpx2', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_docstring_examples_run() -> None:
    result = doctest.testmod(openai_policy)
    assert result.failed == 0 and result.attempted >= 4
