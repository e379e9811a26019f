"""Tests for `rk_agent.testing.stub_completions`: the stub's vLLM token-id completions endpoint,
over real HTTP on loopback."""

from __future__ import annotations

import doctest
from typing import Any

import httpx
import pytest

from rk_agent.policies.function_policy import tool_call
from rk_agent.testing import stub_completions
from rk_agent.testing.stub_server import Fault, StubServer
from rk_agent.tool_calls import LLAMA3_JSON

PROMPT = [1, 17, 4, 9]


def complete(server: StubServer, prompt: Any = PROMPT, **fields: Any) -> httpx.Response:
    body = {"model": "m", "prompt": prompt, "max_tokens": 64, **fields}
    return httpx.post(server.base_url + "/completions", json=body, timeout=5)


def vllm_fields(**more: Any) -> dict[str, Any]:
    """The token-id fields `VLLMPolicy` (and TRL's VLLMClient) send."""
    return {"logprobs": 0, "return_token_ids": True, "return_tokens_as_token_ids": True, **more}


def test_a_text_reply_becomes_the_tokenizers_ids_ending_in_eos(embedded_tok: Any) -> None:
    with StubServer(["four"], tokenizer=embedded_tok) as server:
        body = complete(server, **vllm_fields()).json()
    expected = [*embedded_tok.encode("four", add_special_tokens=False), embedded_tok.eos_token_id]
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert body["model"] == "m"
    (choice,) = body["choices"]
    assert choice["index"] == 0
    assert choice["text"] == "four"  # decoded without special tokens, as vLLM's default
    assert choice["token_ids"] == expected
    assert choice["prompt_token_ids"] == PROMPT
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] is None
    logprobs = choice["logprobs"]
    assert logprobs["tokens"] == [f"token_id:{i}" for i in expected]
    assert logprobs["token_logprobs"] == [-0.125 * (1 + i % 4) for i in range(len(expected))]
    assert logprobs["top_logprobs"] == [
        {t: v} for t, v in zip(logprobs["tokens"], logprobs["token_logprobs"], strict=True)
    ]
    assert len(logprobs["text_offset"]) == len(expected)
    assert body["usage"] == {
        "prompt_tokens": len(PROMPT),
        "completion_tokens": len(expected),
        "total_tokens": len(PROMPT) + len(expected),
    }


def test_token_ids_and_logprobs_only_when_asked(embedded_tok: Any) -> None:
    with StubServer(["four"], tokenizer=embedded_tok) as server:
        plain = complete(server).json()["choices"][0]
        pieces = complete(server, logprobs=0).json()["choices"][0]
    assert "token_ids" not in plain and "prompt_token_ids" not in plain
    assert plain["logprobs"] is None
    assert pieces["logprobs"]["tokens"] == ["four", "<|im_end|>"]


def test_a_list_of_replies_is_indexed_by_the_earlier_prompts_a_prompt_continues(
    embedded_tok: Any,
) -> None:
    with StubServer(["call", "answer"], tokenizer=embedded_tok) as server:
        first = complete(server, **vllm_fields()).json()["choices"][0]
        again = complete(server, **vllm_fields()).json()["choices"][0]  # another episode
        turn2 = [*PROMPT, *first["token_ids"], 5, 6]
        second = complete(server, turn2, **vllm_fields()).json()["choices"][0]
        third = complete(server, [*turn2, 8], **vllm_fields()).json()["choices"][0]
        other = complete(server, [2, 3], **vllm_fields()).json()["choices"][0]
    assert [c["text"] for c in (first, again, second, third, other)] == [
        "call",
        "call",
        "answer",
        "answer",  # the last reply repeats
        "call",
    ]


def test_tool_calls_are_written_as_tool_call_blocks(embedded_tok: Any) -> None:
    replies: list[Any] = [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]},
        tool_call("lookup", {"name": "France"}),
    ]
    with StubServer(replies, tokenizer=embedded_tok) as server:
        first = complete(server).json()["choices"][0]
        second = complete(server, [*PROMPT, 3]).json()["choices"][0]
    assert first["text"] == (
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>'
    )
    assert second["text"] == (
        '<tool_call>\n{"name": "lookup", "arguments": {"name": "France"}}\n</tool_call>'
    )


def test_tool_calls_are_written_in_the_format_asked_for() -> None:
    request = {"prompt": [5, 6]}
    reply = {"text": "Checking.", "tool_calls": [{"name": "lookup", "arguments": {"k": 1}}]}
    body = stub_completions.completions_body(
        request, [reply], model="m", tokenizer=None, tool_call_format=LLAMA3_JSON
    )
    assert body["choices"][0]["text"] == 'Checking.\n{"name": "lookup", "parameters": {"k": 1}}'


def test_max_tokens_cuts_the_reply_with_finish_reason_length(embedded_tok: Any) -> None:
    text = "one two three four five six seven eight nine ten"
    with StubServer([text], tokenizer=embedded_tok) as server:
        cut = complete(server, max_tokens=3, **vllm_fields()).json()["choices"][0]
        default = complete(server, max_tokens=None, **vllm_fields()).json()["choices"][0]
    ids = embedded_tok.encode(text, add_special_tokens=False)
    assert cut["token_ids"] == ids[:3] and cut["finish_reason"] == "length"
    assert cut["text"] == embedded_tok.decode(ids[:3])
    assert len(cut["logprobs"]["token_logprobs"]) == 3
    assert len(default["token_ids"]) == min(16, len(ids) + 1)  # vLLM's default max_tokens


def test_token_id_replies_are_sent_as_given(embedded_tok: Any) -> None:
    reply = {"token_ids": [28120, 665], "logprobs": [-1.5, -0.25], "finish_reason": "length"}
    with StubServer([reply], tokenizer=embedded_tok) as server:
        choice = complete(server, **vllm_fields()).json()["choices"][0]
    assert choice["token_ids"] == [28120, 665]
    assert choice["text"] == embedded_tok.decode([28120, 665])
    assert choice["logprobs"]["token_logprobs"] == [-1.5, -0.25]
    assert choice["finish_reason"] == "length"


def test_without_a_tokenizer_each_word_is_one_stand_in_id() -> None:
    with StubServer(["the answer is 4"]) as server:
        choice = complete(server, "a text prompt", **vllm_fields()).json()["choices"][0]
    assert choice["text"] == "the answer is 4"
    assert len(choice["token_ids"]) == 4 and len(choice["prompt_token_ids"]) == 3


def test_several_prompts_and_n_choices_come_prompt_major(embedded_tok: Any) -> None:
    with StubServer(["x"], tokenizer=embedded_tok) as server:
        body = complete(server, [[1, 2], [3, 4, 5]], n=2, **vllm_fields()).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    assert [c["prompt_token_ids"] for c in body["choices"]] == [
        [1, 2],
        [1, 2],
        [3, 4, 5],
        [3, 4, 5],
    ]
    assert body["usage"]["prompt_tokens"] == 5


def test_requests_are_recorded_with_the_body_answered(embedded_tok: Any) -> None:
    with StubServer(["four"], tokenizer=embedded_tok) as server:
        answered = complete(server, **vllm_fields()).json()
        server.inject(Fault.http(503))
        complete(server, **vllm_fields())
        httpx.post(server.base_url + "/chat/completions", json={"messages": []})
    recorded = server.completion_requests
    assert [r.body["prompt"] for r in recorded] == [PROMPT, PROMPT]
    assert recorded[0].response == answered
    assert recorded[1].response is None  # the fault
    assert len(server.chat_requests) == 1 and server.chat_requests[0].response is not None


def test_faults_apply_to_completions(embedded_tok: Any) -> None:
    with StubServer(["four"], tokenizer=embedded_tok, fail_first_n=1) as server:
        failed = complete(server)
        served = complete(server)
    assert failed.status_code == 500 and served.status_code == 200


@pytest.mark.parametrize(
    "prompt",
    [None, "", [], [1, -2], [[1], []], [1, "a"], [True]],
)
def test_bad_prompts_get_an_openai_style_400(prompt: Any) -> None:
    with StubServer() as server:
        response = complete(server, prompt)
    assert response.status_code == 400
    assert "a JSON object with a `prompt`" in response.json()["error"]["message"]


def test_a_broken_script_is_a_500_that_says_why(embedded_tok: Any) -> None:
    with StubServer([{"token_ids": [1, 2], "logprobs": [-1.0]}], tokenizer=embedded_tok) as s:
        response = complete(s, **vllm_fields())
    assert response.status_code == 500
    assert response.json()["error"]["message"] == (
        "the stub could not build its reply: ConfigError: a scripted reply has 2 tokens but 1 "
        "logprobs; give one per token."
    )


def test_docstring_examples_run() -> None:
    result = doctest.testmod(stub_completions)
    assert result.failed == 0 and result.attempted >= 2
