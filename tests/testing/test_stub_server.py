"""Tests for `rk_agent.testing.stub_server`: real HTTP on loopback, from httpx and raw sockets.

Throughput (the slow test at the end) is measured with ``_load``, a raw asyncio HTTP/1.1 client
with one keep-alive connection per concurrent client, against the server in its own process
(``python -m rk_agent.testing.stub_server --port 0 --latency L``). To print the figures::

    uv run pytest tests/testing/test_stub_server.py -m slow -s
"""

from __future__ import annotations

import asyncio
import contextlib
import doctest
import email.utils
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rk_agent.errors import ConfigError
from rk_agent.policies.function_policy import tool_call
from rk_agent.testing import stub_replies, stub_server
from rk_agent.testing.stub_server import Fault, StubServer, call_first_tool_then_answer

USER = [{"role": "user", "content": "What is two plus two?"}]


def chat(
    server: StubServer, messages: list[dict[str, Any]] = USER, **fields: Any
) -> httpx.Response:
    body = {"model": "m", "messages": messages, **fields}
    return httpx.post(server.base_url + "/chat/completions", json=body, timeout=5)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer(["four"]) as running:
        yield running


# ---------------------------------------------------------------------------------------------
# Replies


def test_text_reply_has_the_openai_shape(server: StubServer) -> None:
    body = chat(server).json()
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["model"] == "m"
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "four"},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}


def test_a_list_of_replies_is_indexed_by_the_assistant_turns_so_far() -> None:
    replies: list[Any] = [
        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 2}}]},
        tool_call("check", {"x": 4}, call_id="call_fixed"),
        "it is 4",
    ]
    with StubServer(replies) as server:
        first = chat(server).json()["choices"][0]
        turn1 = [*USER, {"role": "assistant", "content": "x"}]
        second = chat(server, turn1).json()["choices"][0]
        turn3 = turn1 * 3
        last = chat(server, turn3).json()["choices"][0]
    call = first["message"]["tool_calls"][0]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"] == {"name": "add", "arguments": '{"a": 2, "b": 2}'}
    assert first["message"]["content"] is None and first["finish_reason"] == "tool_calls"
    assert second["message"]["tool_calls"][0]["id"] == "call_fixed"
    assert last["message"]["content"] == "it is 4"  # the last reply repeats


def test_a_reply_function_sees_the_request_and_may_be_async() -> None:
    seen: list[dict[str, Any]] = []

    async def reply(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        await asyncio.sleep(0)
        return {"content": "fine", "reasoning_content": "thinking", "finish_reason": "length"}

    with StubServer(reply) as server:
        choice = chat(server, temperature=0.5).json()["choices"][0]
    assert seen[0]["temperature"] == 0.5
    assert choice["message"]["reasoning_content"] == "thinking"
    assert choice["finish_reason"] == "length"


def test_a_whole_body_reply_is_sent_as_given() -> None:
    body = {"choices": [], "usage": None}
    with StubServer([body]) as server:
        got = chat(server).json()
    assert got["choices"] == [] and got["usage"] is None and got["model"] == "m"


def test_call_first_tool_then_answer_plays_a_tool_using_model() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "convert",
                "parameters": {
                    "type": "object",
                    "properties": {"value": {"type": "number"}, "unit": {"type": "string"}},
                    "required": ["value", "unit"],
                },
            },
        }
    ]
    with StubServer(call_first_tool_then_answer("42 km")) as server:
        first = chat(server, tools=tools).json()["choices"][0]["message"]
        after = [*USER, first, {"role": "tool", "tool_call_id": "c", "content": "42"}]
        second = chat(server, after, tools=tools).json()["choices"][0]["message"]
        no_tools = chat(server).json()["choices"][0]["message"]
    assert first["tool_calls"][0]["function"] == {
        "name": "convert",
        "arguments": '{"value": 1.0, "unit": "x"}',
    }
    assert second == {"role": "assistant", "content": "42 km"}
    assert no_tools["content"] == "42 km"


def test_logprobs_and_token_ids_when_asked(server: StubServer) -> None:
    plain = chat(server).json()
    rich = chat(server, logprobs=True, return_token_ids=True).json()
    assert plain["choices"][0]["logprobs"] is None and "prompt_token_ids" not in plain
    choice = rich["choices"][0]
    assert [t["token"] for t in choice["logprobs"]["content"]] == ["four"]
    assert len(choice["token_ids"]) == 1 and len(rich["prompt_token_ids"]) == 5


def test_models_endpoint(server: StubServer) -> None:
    data = httpx.get(server.base_url + "/models").json()
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == ["stub-model"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("GET", "/v1/nothing", None, 404, "no route GET /v1/nothing"),
        ("GET", "/v1/chat/completions", None, 405, "use POST for /v1/chat/completions"),
        ("POST", "/v1/chat/completions", {"model": "m"}, 400, "a `messages` list"),
    ],
)
def test_bad_requests_get_openai_style_errors(
    server: StubServer, method: str, path: str, body: Any, status: int, message: str
) -> None:
    response = httpx.request(method, server.url + path, json=body)
    assert response.status_code == status
    assert message in response.json()["error"]["message"]


# ---------------------------------------------------------------------------------------------
# Recording and counting


def test_requests_are_recorded_with_headers_and_bodies(server: StubServer) -> None:
    httpx.post(
        server.base_url + "/chat/completions",
        json={"model": "m", "messages": USER},
        headers={"Authorization": "Bearer sk-abc"},
    )
    httpx.get(server.base_url + "/models")
    first, second = server.requests
    assert (first.method, first.path) == ("POST", "/v1/chat/completions")
    assert first.headers["authorization"] == "Bearer sk-abc"
    assert first.body == {"model": "m", "messages": USER}
    assert second.body is None
    assert server.chat_requests == [first]
    counts = server.counts
    assert counts["requests"] == 2 and counts["replies"] == 1 and counts["faults"] == 0
    server.reset()
    assert server.requests == [] and server.counts["requests"] == 0


def test_api_key_is_checked_when_set() -> None:
    with StubServer(api_key="sk-right") as server:
        wrong = httpx.post(server.base_url + "/chat/completions", json={"messages": USER})
        right = httpx.post(
            server.base_url + "/chat/completions",
            json={"messages": USER},
            headers={"Authorization": "Bearer sk-right"},
        )
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    assert right.status_code == 200


def test_in_flight_and_connections_are_counted() -> None:
    async def many(url: str) -> None:
        async with httpx.AsyncClient() as client:
            body = {"messages": USER}
            await asyncio.gather(*(client.post(url, json=body) for _ in range(5)))

    with StubServer(latency_s=0.2) as server:
        asyncio.run(many(server.base_url + "/chat/completions"))
        counts = server.counts
    assert counts["max_in_flight"] == 5 and counts["in_flight"] == 0
    assert counts["connections"] == 5


# ---------------------------------------------------------------------------------------------
# Latency and failures


def test_latency_fixed_and_computed() -> None:
    with StubServer(latency_s=0.2) as server:
        start = time.perf_counter()
        chat(server)
        assert time.perf_counter() - start >= 0.2
    with StubServer(latency_s=lambda request: request["delay"]) as server:
        start = time.perf_counter()
        chat(server, delay=0.3)
        assert time.perf_counter() - start >= 0.3


def test_fail_first_n_then_replies() -> None:
    with StubServer(["ok"], fail_first_n=2, fault=Fault.http(503)) as server:
        statuses = [chat(server).status_code for _ in range(3)]
        counts = server.counts
    assert statuses == [503, 503, 200]
    assert counts["faults"] == 2 and counts["replies"] == 1


def test_failure_rate_is_seeded() -> None:
    def pattern(seed: int) -> list[int]:
        with StubServer(failure_rate=0.5, seed=seed) as server:
            return [chat(server).status_code for _ in range(12)]

    first = pattern(7)
    assert first == pattern(7)
    assert set(first) == {200, 500}


def test_injected_faults_come_in_order(server: StubServer) -> None:
    server.inject(Fault.http(500, "first"), Fault.rate_limit(retry_after=2))
    first, second, third = chat(server), chat(server), chat(server)
    assert (first.status_code, first.json()["error"]["message"]) == (500, "first")
    assert second.status_code == 429 and second.headers["retry-after"] == "2"
    assert second.json()["error"]["type"] == "rate_limit_error"
    assert third.status_code == 200


def test_retry_after_may_be_an_http_date(server: StubServer) -> None:
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.inject(Fault.http(503, retry_after=date))
    assert chat(server).headers["retry-after"] == date


def test_faults_may_carry_more_headers(server: StubServer) -> None:
    server.inject(Fault.http(429, headers={"retry-after-ms": "250", "x-request-id": "r1"}))
    response = chat(server)
    assert response.headers["retry-after-ms"] == "250" and response.headers["x-request-id"] == "r1"


def test_context_overflow_fault_uses_openai_wording(server: StubServer) -> None:
    server.inject(Fault.context_overflow(limit=1024))
    response = chat(server)
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 1024 tokens.")


def test_a_reply_function_may_return_a_fault() -> None:
    with StubServer(lambda request: Fault.http(502)) as server:
        assert chat(server).status_code == 502


def test_drop_closes_the_connection_without_a_response(server: StubServer) -> None:
    server.inject(Fault.drop())
    with pytest.raises(httpx.RemoteProtocolError, match="without sending"):
        chat(server)
    assert chat(server).status_code == 200


def test_hang_outlasts_the_client_timeout(server: StubServer) -> None:
    server.inject(Fault.hang(5))
    start = time.perf_counter()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.base_url + "/chat/completions", json={"messages": USER}, timeout=0.3)
    assert time.perf_counter() - start >= 0.3  # the client gave up; the hang did not end first
    assert chat(server).status_code == 200


def test_malformed_body_is_not_json(server: StubServer) -> None:
    server.inject(Fault.malformed())
    response = chat(server)
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()


# ---------------------------------------------------------------------------------------------
# Configuration, lifecycle, command line


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replies": []}, "StubServer: replies must be a non-empty list of replies or a function"),
        (
            {"replies": "hi"},
            "StubServer: replies must be a non-empty list of replies or a function",
        ),
        ({"failure_rate": 1.5}, "StubServer: failure_rate must be in [0, 1], got 1.5"),
    ],
)
def test_bad_settings_are_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        StubServer(**kwargs)


def test_url_needs_a_running_server() -> None:
    with pytest.raises(ConfigError, match=re.escape("StubServer: start it first")):
        _ = StubServer().base_url


def test_binds_loopback_on_a_free_port_and_stops() -> None:
    server = StubServer().start()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", server.base_url)
    assert server.port != 0
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.base_url + "/models")


def test_a_busy_port_is_a_config_error(server: StubServer) -> None:
    with pytest.raises(
        ConfigError, match=re.escape(f"could not listen on 127.0.0.1:{server.port}")
    ):
        StubServer(port=server.port).start()


@contextlib.contextmanager
def _spawned(*args: str) -> Iterator[str]:
    """Run the command-line server in its own process; yield its base URL."""
    command = [sys.executable, "-m", "rk_agent.testing.stub_server", "--port", "0", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            match = re.fullmatch(r"stub server listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
            assert match, line
            yield match[1]
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_command_line_serves_until_stopped() -> None:
    with _spawned("--reply", "hello there", "--latency", "0.01") as base_url:
        body = {"model": "m", "messages": USER}
        reply = httpx.post(base_url + "/chat/completions", json=body, timeout=5).json()
    assert reply["choices"][0]["message"]["content"] == "hello there"


@pytest.mark.parametrize("module", [stub_server, stub_replies])
def test_docstring_examples_run(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted >= 2


# ---------------------------------------------------------------------------------------------
# Throughput


async def _load(base_url: str, clients: int, requests: int) -> tuple[float, list[dict[str, Any]]]:
    """Send ``requests`` chat requests over ``clients`` keep-alive connections; return
    (requests per second, the parsed replies)."""
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    payload = json.dumps({"model": "m", "messages": USER}).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json"
        f"\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode()
    replies: list[dict[str, Any]] = []
    left = iter(range(requests))

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        for _ in left:
            writer.write(head + payload)
            response = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", response)[1])  # type: ignore[index]
            replies.append(json.loads(await reader.readexactly(length)))
        writer.close()
        await writer.wait_closed()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return requests / (time.perf_counter() - start), replies


@pytest.mark.slow
@pytest.mark.parametrize(("latency", "clients", "requests"), [(0.1, 128, 3000), (0.0, 64, 5000)])
def test_throughput_under_load(latency: float, clients: int, requests: int) -> None:
    with _spawned("--latency", str(latency), "--reply", "four") as base_url:
        rate, replies = asyncio.run(_load(base_url, clients, requests))
    print(f"\nstub server: {rate:,.0f} requests/s (latency {latency}s, {clients} clients)")
    assert len(replies) == requests
    assert all(r["choices"][0]["message"]["content"] == "four" for r in replies)
    assert len({r["id"] for r in replies}) == requests
