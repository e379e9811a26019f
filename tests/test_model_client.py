"""Tests for `rk_agent.model_client`, over real HTTP against the loopback stub server
(and a port nobody listens on)."""

from __future__ import annotations

import asyncio
import doctest
import re
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from rk_agent import __version__, model_client
from rk_agent.endpoint_errors import Endpoint, server_message
from rk_agent.errors import ContextOverflowError, EndpointError
from rk_agent.model_client import ModelClient, SyncModelClient
from rk_agent.retry import server_wait
from rk_agent.testing.stub_server import Fault, StubServer

KEY = "sk-test-0123456789abcdef-SECRET"
BODY = {"model": "stub", "messages": [{"role": "user", "content": "2+2?"}]}
T = TypeVar("T")


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer(["4"]) as stub:
        yield stub


def client_for(url: str, **endpoint: Any) -> ModelClient:
    settings: dict[str, Any] = {"model": "stub", "key": KEY, "timeout_s": 5.0}
    settings.update(endpoint)
    return ModelClient(Endpoint(url=url, **settings))


def run(client: ModelClient, work: Callable[[ModelClient], Awaitable[T]]) -> T:
    async def main() -> T:
        try:
            return await work(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


def post(client: ModelClient) -> Any:
    return run(client, lambda c: c.request("POST", "/chat/completions", BODY))


def test_a_request_sends_json_with_the_key_and_returns_the_decoded_reply(
    server: StubServer,
) -> None:
    reply = post(client_for(server.base_url))
    assert reply["choices"][0]["message"]["content"] == "4"
    [request] = server.chat_requests
    assert request.body == BODY
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == f"rk-agent/{__version__}"


def test_the_tools_are_sent_as_they_are_at_each_request(server: StubServer) -> None:
    # Their JSON is kept from one request to the next, and must follow edits in place.
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    bodies = [{**BODY, "tools": tools, "tool_choice": "auto"}, {"tools": tools, **BODY}]

    async def send(client: ModelClient) -> None:
        for body in bodies:
            await client.request("POST", "/chat/completions", body)
        tools[0]["function"]["name"] = "subtract"
        tools.append({"type": "function", "function": {"name": "é", "parameters": {}}})
        await client.request("POST", "/chat/completions", bodies[0])

    run(client_for(server.base_url), send)
    sent = [request.body for request in server.chat_requests]
    assert sent[:2] == [
        {**BODY, "tools": [tools[0] | {"function": {**tools[0]["function"], "name": "add"}}],
         "tool_choice": "auto"},
        {"tools": [tools[0] | {"function": {**tools[0]["function"], "name": "add"}}], **BODY},
    ]  # fmt: skip
    assert sent[2] == {**BODY, "tools": tools, "tool_choice": "auto"}


def test_get_without_a_body(server: StubServer) -> None:
    listed = run(client_for(server.base_url), lambda c: c.request("GET", "/models"))
    assert listed["object"] == "list" and listed["data"]


def test_a_status_error_carries_the_servers_message_and_its_retry_after(
    server: StubServer,
) -> None:
    server.inject(Fault.rate_limit(retry_after=2))
    with pytest.raises(EndpointError) as info:
        post(client_for(server.base_url))
    error = info.value
    assert str(error) == (
        f"{server.base_url}: HTTP 429: Rate limit reached for requests. Please try again later."
    )
    assert (error.status, error.retryable, error.url) == (429, True, server.base_url)
    assert server_wait(error) == 2.0  # what the retry policy waits for


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (404, False), (408, True), (500, True), (503, True)]
)
def test_retryable_follows_the_retry_policy(
    server: StubServer, status: int, retryable: bool
) -> None:
    server.inject(Fault.http(status, "nope"))
    with pytest.raises(EndpointError, match=f"HTTP {status}: nope$") as info:
        post(client_for(server.base_url))
    assert (info.value.status, info.value.retryable) == (status, retryable)


def test_401_says_where_the_key_came_from_and_never_shows_it(server: StubServer) -> None:
    server.inject(Fault.http(401, f"key {KEY} is not valid"))
    with pytest.raises(EndpointError) as info:
        post(client_for(server.base_url, key_source="FIREWORKS_API_KEY"))
    assert str(info.value) == (
        f"{server.base_url}: HTTP 401: key *** is not valid "
        "(check the API key; it came from: FIREWORKS_API_KEY)"
    )
    assert KEY not in repr(info.value.__cause__) and info.value.retryable is False


def test_404_gets_the_model_hint(server: StubServer) -> None:
    server.inject(Fault.http(404, "Model not found"))
    with pytest.raises(EndpointError, match=r"HTTP 404: Model not found \(try this\)$"):
        post(client_for(server.base_url, model_hint="try this"))


def test_context_overflow(server: StubServer) -> None:
    server.inject(Fault.context_overflow(2048))
    with pytest.raises(ContextOverflowError, match="does not fit the context window of 'stub'"):
        post(client_for(server.base_url))


def test_a_timeout_is_retryable_without_a_status(server: StubServer) -> None:
    server.inject(Fault.hang(5))
    with pytest.raises(EndpointError) as info:
        post(client_for(server.base_url, timeout_s=0.3))
    assert str(info.value) == f"{server.base_url} did not answer within 0.3s (timeout)"
    assert (info.value.status, info.value.retryable) == (None, True)


def test_a_dropped_connection_is_retryable(server: StubServer) -> None:
    server.inject(Fault.drop())
    with pytest.raises(EndpointError) as info:
        post(client_for(server.base_url))
    assert str(info.value).startswith(f"could not reach {server.base_url}: ServerDisconnected")
    assert (info.value.status, info.value.retryable) == (None, True)


def test_nobody_listening_is_retryable() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    expected = f"could not reach {url}: ConnectionRefusedError: "
    with pytest.raises(EndpointError, match="^" + re.escape(expected)) as info:
        post(client_for(url))
    assert (info.value.status, info.value.retryable) == (None, True)


def test_a_body_that_is_not_json(server: StubServer) -> None:
    server.inject(Fault.malformed())
    expected = "sent a body that is not JSON: JSONDecodeError"
    with pytest.raises(EndpointError, match=expected) as info:
        post(client_for(server.base_url))
    assert (info.value.status, info.value.retryable) == (200, True)


def test_open_connects_nothing_and_the_client_works_again_after_aclose(
    server: StubServer,
) -> None:
    client = client_for(server.base_url)

    async def open_only(c: ModelClient) -> None:
        c.open()

    run(client, open_only)
    assert server.counts["connections"] == 0
    post(client)  # a new event loop: a new session
    post(client)
    assert server.counts["connections"] == 2 and len(server.chat_requests) == 2


class ForwardProxy:
    """A plain-HTTP forward proxy on loopback, in a background thread: it records each request
    line it gets and relays the request (one per connection) to the server it names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with client:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += client.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next(
                    (int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length")),
                    0,
                )
                while len(body) < length:
                    body += client.recv(65536)
                method, target, version = lines[0].split(" ")
                self.lines.append(lines[0])
                url = urllib.parse.urlsplit(target)
                headers = [h for h in lines[1:] if not h.lower().startswith("connection")]
                request = [f"{method} {url.path} {version}", *headers, "Connection: close"]
                with socket.create_connection((url.hostname, url.port)) as upstream:
                    upstream.sendall("\r\n".join(request).encode() + b"\r\n\r\n" + body)
                    while chunk := upstream.recv(65536):
                        client.sendall(chunk)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardProxy]:
    """A forward proxy on loopback, named by ``HTTP_PROXY`` and nothing else."""
    running = ForwardProxy()
    monkeypatch.setenv("HTTP_PROXY", running.url)
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield running
    running.close()


def test_the_environments_proxy_is_used(server: StubServer, proxy: ForwardProxy) -> None:
    reply = post(client_for(server.base_url))
    assert reply["choices"][0]["message"]["content"] == "4"
    assert proxy.lines == [f"POST {server.base_url}/chat/completions HTTP/1.1"]
    assert len(server.chat_requests) == 1


def test_through_aiohttp_a_status_error_carries_the_servers_message_and_its_retry_after(
    server: StubServer, proxy: ForwardProxy
) -> None:
    # The proxy puts the client on its aiohttp side: the same error, the same wait.
    server.inject(Fault.rate_limit(retry_after=2))
    with pytest.raises(EndpointError) as info:
        post(client_for(server.base_url))
    error = info.value
    assert proxy.lines == [f"POST {server.base_url}/chat/completions HTTP/1.1"]
    assert str(error) == (
        f"{server.base_url}: HTTP 429: Rate limit reached for requests. Please try again later."
    )
    assert (error.status, error.retryable, error.url) == (429, True, server.base_url)
    assert server_wait(error) == 2.0


def test_no_proxy_naming_the_host_goes_direct(
    server: StubServer, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    reply = post(client_for(server.base_url))
    assert reply["choices"][0]["message"]["content"] == "4"
    assert proxy.lines == []


def test_the_proxy_is_resolved_once_when_the_session_opens(
    server: StubServer, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Per request, aiohttp's trust_env read the environment and netrc on two worker threads.
    monkeypatch.delenv("HTTP_PROXY")
    client = client_for(server.base_url)

    async def twice(c: ModelClient) -> list[Any]:
        first = await c.request("POST", "/chat/completions", BODY)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)  # too late for this session
        return [first, await c.request("POST", "/chat/completions", BODY)]

    replies = run(client, twice)
    assert len(replies) == 2 and proxy.lines == []
    assert len(server.chat_requests) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"error": {"message": "Model not found"}}', "Model not found"),
        ('{"error": "plain"}', "plain"),
        ('{"detail": "Not Found"}', "Not Found"),
        ('{"detail": [{"loc": ["body"], "msg": "bad"}]}', '[{"loc": ["body"], "msg": "bad"}]'),
        ("<html>\n  Bad   Gateway\n</html>", "<html> Bad Gateway </html>"),
        ("", "Service Unavailable"),
    ],
)
def test_server_message(text: str, expected: str) -> None:
    assert server_message(text, "Service Unavailable") == expected


def test_the_sync_client_serves_many_threads_on_one_loop_of_its_own(server: StubServer) -> None:
    def loop_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "rk-agent-model-client"}

    before = loop_threads()
    client = SyncModelClient(Endpoint(url=server.base_url, model="stub", key=KEY, timeout_s=5.0))
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            replies = list(pool.map(lambda _: client.request("POST", "/chat/completions", BODY),
                                    range(32)))  # fmt: skip
        assert {r["choices"][0]["message"]["content"] for r in replies} == {"4"}
        (thread,) = loop_threads() - before  # one thread, however many callers
    finally:
        client.close()
    assert not thread.is_alive()
    assert client.request("GET", "/models")["object"] == "list"  # a new loop after close
    client.close()
    client.close()  # closing twice is fine


def test_the_sync_client_raises_the_clients_errors(server: StubServer) -> None:
    client = SyncModelClient(
        Endpoint(url=server.base_url, model="stub", key=KEY, key_source="RK_KEY", timeout_s=5.0)
    )
    server.inject(Fault.http(401, f"bad key {KEY}"))
    try:
        with pytest.raises(EndpointError) as info:
            client.request("POST", "/chat/completions", BODY)
    finally:
        client.close()
    assert str(info.value) == (
        f"{server.base_url}: HTTP 401: bad key *** (check the API key; it came from: RK_KEY)"
    )


def test_a_sync_client_left_open_closes_at_exit_quietly() -> None:
    code = (
        "from rk_agent.model_client import SyncModelClient\n"
        "from rk_agent.endpoint_errors import Endpoint\n"
        "from rk_agent.testing.stub_server import StubServer\n"
        "server = StubServer(['4']).start()\n"
        "client = SyncModelClient(Endpoint(url=server.base_url, model='stub'))\n"
        "print(client.request('GET', '/models')['object'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "list\n", "")


def test_docstring_examples_run() -> None:
    result = doctest.testmod(model_client)
    assert result.failed == 0 and result.attempted >= 1
