"""An OpenAI-compatible stub server on loopback: scripted replies, latency and injected failures.

Tests and benchmarks point a real client (the `openai` SDK, `OpenAIPolicy`, ``curl``) at it and
get real HTTP: keep-alive connections, status codes, ``Retry-After`` headers, dropped sockets,
hangs and broken bodies. It serves ``POST /v1/chat/completions`` (non-streaming), vLLM's
token-id ``POST /v1/completions`` (token ids in, token ids and log-probabilities out; see
`rk_agent.testing.stub_completions`) and ``GET /v1/models``, records every request it
receives with the body it answered, and counts what it did.

It is plain asyncio (no web framework), so it costs little CPU per request: one core serves
several thousand requests a second. It binds ``127.0.0.1`` unless told otherwise.

Main names:
    StubServer: the server; a context manager that runs it in a background thread.
    StubRequest: one request as the server received it.
    Fault, ReplySpec, ReplyFn, call_first_tool_then_answer: what it answers, from
        `rk_agent.testing.stub_replies` (re-exported here).

Replies are scripted with a list (``replies[i]`` answers a conversation that already has ``i``
assistant turns, or on ``/v1/completions`` a prompt that continues ``i`` earlier prompts; the
last one repeats) or a function ``reply(request_json)``. A reply is a string (the text), a dict
(an assistant message, or a whole response body), a `Message`, or a `Fault`; see
`rk_agent.testing.stub_replies` and, for token ids, `rk_agent.testing.stub_completions`
(text replies become token ids with the ``tokenizer`` given to the server).

Example:
    >>> from rk_agent.testing.stub_server import Fault, StubServer
    >>> with StubServer(["4"], fail_first_n=1, fault=Fault.http(503)) as server:
    ...     url = server.base_url   # http://127.0.0.1:PORT/v1 ; the first request gets a 503
    >>> url.startswith("http://127.0.0.1:")
    True

From a shell (prints the base URL, serves until Ctrl-C)::

    python -m rk_agent.testing.stub_server --port 8000 --latency 0.1 --tools

Throughput, measured on a shared 2-core machine with the server in its own process and a raw
asyncio HTTP/1.1 load generator (``_load`` in ``tests/testing/test_stub_server.py``; run that
file's slow test with ``-s`` to print the figures): with ``latency_s=0.1``, 1,200 requests/s
at 128 keep-alive clients (the ceiling is 128 / 0.1 s = 1,280), 2,300 at 256, 3,900 at 512;
with no latency, 8,000 to 30,000 requests/s (the load generator shares the two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from typing import Any

import pydantic_core

from rk_agent.errors import ConfigError
from rk_agent.testing.stub_completions import (
    CompletionScript,
    TextTokenizer,
    completions_body,
    prompts_of,
)
from rk_agent.testing.stub_replies import (
    Fault,
    ReplyFn,
    ReplySpec,
    call_first_tool_then_answer,
    completion_body,
    error_body,
)
from rk_agent.types import Message

__all__ = [
    "Fault",
    "ReplyFn",
    "ReplySpec",
    "StubRequest",
    "StubServer",
    "TextTokenizer",
    "call_first_tool_then_answer",
]


@dataclass
class StubRequest:
    """One request as the server received it.

    Attributes:
        method: ``"GET"`` or ``"POST"``.
        path: the request target, e.g. ``"/v1/chat/completions"``.
        headers: the headers, names lower-cased.
        body: the parsed JSON body (``None`` if there was none or it was not JSON).
        received_at: ``time.monotonic()`` when it arrived.
        response: the JSON body answered to a chat or completions request (``None`` until it
            is answered, and for a fault).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    response: Any = None


@dataclass
class _Counts:
    requests: int = 0
    replies: int = 0
    faults: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    connections: int = 0
    open_connections: int = 0


@dataclass
class _Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class StubServer:
    """An OpenAI-compatible chat-completions server on loopback, for tests and benchmarks.

    Args:
        replies: a list of replies (``replies[i]`` answers a conversation with ``i`` assistant
            turns so far, the last repeats) or a function ``reply(request_json)`` (sync or
            async). Default: the text ``"ok"``.
        latency_s: seconds to wait before answering, or a function of the request JSON.
        fail_first_n: answer the first ``n`` chat or completions requests with ``fault``.
        failure_rate: answer this share of the other chat or completions requests with
            ``fault`` (seeded).
        fault: the fault for ``fail_first_n`` and ``failure_rate``; a list is sampled at random.
            Default: ``Fault.http(500)``.
        seed: seed of the failure draws.
        model: the model id served by ``/v1/models`` (chat replies echo the requested model).
        models_status: the status of ``GET /v1/models``; an error status (with an error body)
            imitates a server that cannot list its models while its completions work
            (``transformers serve`` offline answers 500).
        api_key: when set, requests without ``Authorization: Bearer <api_key>`` get a 401.
        host: the address to bind; loopback by default.
        port: the port; 0 picks a free one.
        record: keep every request (see `requests`); turn off for long benchmarks.
        tokenizer: turns text replies on ``/v1/completions`` into token ids and back (a Hugging
            Face tokenizer, or any `TextTokenizer`); ``None``: one stand-in id per word.

    Example:
        >>> import httpx
        >>> with StubServer(["hello"]) as server:
        ...     r = httpx.post(server.base_url + "/chat/completions",
        ...                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        >>> r.json()["choices"][0]["message"]["content"], server.counts["requests"]
        ('hello', 1)
    """

    def __init__(
        self,
        replies: Sequence[ReplySpec] | ReplyFn | None = None,
        *,
        latency_s: float | Callable[[dict[str, Any]], float] = 0.0,
        fail_first_n: int = 0,
        failure_rate: float = 0.0,
        fault: Fault | Sequence[Fault] | None = None,
        seed: int = 0,
        model: str = "stub-model",
        models_status: int = 200,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        tokenizer: TextTokenizer | None = None,
    ) -> None:
        if replies is None:
            replies = ["ok"]
        if not callable(replies):
            if isinstance(replies, (str, dict, Message, Fault)) or not replies:
                raise ConfigError(
                    "StubServer: replies must be a non-empty list of replies or a function "
                    f"reply(request_json); got {replies!r}"
                )
            replies = list(replies)
        if not 0.0 <= failure_rate <= 1.0:
            raise ConfigError(f"StubServer: failure_rate must be in [0, 1], got {failure_rate!r}")
        self.replies = replies
        self.latency_s = latency_s
        self.fail_first_n = fail_first_n
        self.failure_rate = failure_rate
        faults = [fault] if isinstance(fault, Fault) else list(fault or ())
        self._faults = faults or [Fault.http(500)]
        self._rng = random.Random(seed)
        self.model = model
        self.models_status = models_status
        self.api_key = api_key
        self.host = host
        self.port = port
        self.record = record
        self.tokenizer = tokenizer
        self._completion_script = None if callable(replies) else CompletionScript(replies)
        self._injected: list[Fault] = []
        self._requests: list[StubRequest] = []
        self._lock = threading.Lock()
        self._counts = _Counts()
        self._generation_requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------------------------
    # Public surface

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (valid once started)."""
        if self._server is None:
            raise ConfigError("StubServer: start it first (use `with StubServer(...) as s:`)")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``."""
        return self.url + "/v1"

    @property
    def requests(self) -> list[StubRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[StubRequest]:
        """The received ``POST /v1/chat/completions`` requests."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def completion_requests(self) -> list[StubRequest]:
        """The received ``POST /v1/completions`` requests (vLLM's token-id endpoint)."""
        return [r for r in self.requests if r.path.rstrip("/").endswith("/v1/completions")]

    @property
    def counts(self) -> dict[str, int]:
        """``requests``, ``replies``, ``faults``, ``in_flight``, ``max_in_flight``,
        ``connections`` (opened so far) and ``open_connections``."""
        return asdict(self._counts)

    def inject(self, *faults: Fault) -> None:
        """Answer the next chat or completions requests (in arrival order) with these faults,
        one each."""
        with self._lock:
            self._injected.extend(faults)

    def reset(self) -> None:
        """Forget recorded requests, counts and pending injected faults."""
        with self._lock:
            self._requests.clear()
            self._injected.clear()
            old = self._counts  # requests and connections still open stay counted
            self._counts = _Counts(in_flight=old.in_flight, open_connections=old.open_connections)
            self._generation_requests = 0

    def start(self) -> StubServer:
        """Start serving in a background thread; returns once the port is bound."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.open())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.aclose())
                loop.close()

        self._thread = threading.Thread(target=run, name="rk-agent-stub-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise ConfigError(
                f"StubServer: could not listen on {self.host}:{self.port}: {failure[0]}"
            ) from failure[0]
        return self

    def stop(self) -> None:
        """Stop the background server (open connections are closed)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def open(self) -> None:
        """Bind and start serving on the running event loop (for use inside asyncio code)."""
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=2**22, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        """Stop serving on the running event loop and close open connections."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # ------------------------------------------------------------------------------------
    # HTTP

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._counts.connections += 1
        self._counts.open_connections += 1
        try:
            while await self._one_request(reader, writer):
                pass
        except (
            ConnectionError,
            EOFError,
            ValueError,
            asyncio.LimitOverrunError,
            asyncio.CancelledError,
        ):
            pass  # the client went away, sent garbage, or the server is stopping
        finally:
            self._counts.open_connections -= 1
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Serve one request; return whether to keep the connection open."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await self._write(writer, _Response(400, error_body("bad request line", 400)), False)
            return False
        method, path, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self._write(writer, _Response(411, error_body("send Content-Length", 411)), False)
            return False
        length = int(headers.get("content-length") or 0)
        raw = await reader.readexactly(length) if length else b""
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"

        counts = self._counts
        counts.requests += 1
        counts.in_flight += 1
        counts.max_in_flight = max(counts.max_in_flight, counts.in_flight)
        try:
            response = await self._respond(method, path.split("?")[0], headers, raw)
        finally:
            self._counts.in_flight -= 1
        if response is None:  # a dropped connection or a hang
            return False
        await self._write(writer, response, keep_alive)
        return keep_alive

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, response: _Response, keep_alive: bool) -> None:
        phrase = HTTPStatus(response.status).phrase
        head = [
            f"HTTP/1.1 {response.status} {phrase}",
            "content-type: application/json",
            f"content-length: {len(response.body)}",
        ]
        head += [f"{name}: {value}" for name, value in response.headers.items()]
        if not keep_alive:
            head.append("connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)
        await writer.drain()

    async def _respond(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> _Response | None:
        try:  # pydantic-core's JSON: the stub must not be what a benchmark measures
            body = pydantic_core.from_json(raw) if raw else None
        except ValueError:
            body = None
        recorded = StubRequest(method, path, headers, body, received_at=time.monotonic())
        if self.record:
            with self._lock:
                self._requests.append(recorded)
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return _Response(401, error_body("Invalid API key provided.", 401, "invalid_api_key"))
        route = path.rstrip("/")
        if route in ("/v1/models", "/models") and method == "GET":
            if self.models_status >= 400:
                return _Response(
                    self.models_status, error_body("cannot list models", self.models_status)
                )
            data = [{"id": self.model, "object": "model", "created": 0, "owned_by": "rk-agent"}]
            return _Response(200, json.dumps({"object": "list", "data": data}).encode())
        chat = route in ("/v1/chat/completions", "/chat/completions")
        if not chat and route not in ("/v1/completions", "/completions"):
            return _Response(404, error_body(f"no route {method} {path}", 404))
        if method != "POST":
            return _Response(405, error_body(f"use POST for {path}", 405))
        if not isinstance(body, dict) or not (
            isinstance(body.get("messages"), list) if chat else prompts_of(body)
        ):
            message = (
                "the body must be a JSON object with a `messages` list"
                if chat
                else "the body must be a JSON object with a `prompt`: text, token ids "
                "(ints >= 0), or a non-empty list of either"
            )
            return _Response(400, error_body(message, 400))
        return await self._generate(body, chat=chat, recorded=recorded)

    # ------------------------------------------------------------------------------------
    # Chat completions and completions

    async def _generate(
        self, request: dict[str, Any], *, chat: bool, recorded: StubRequest
    ) -> _Response | None:
        fault = self._draw_fault()
        replies: list[Any] = []
        if fault is None:
            for one in [request] if chat else _one_request_per_prompt(request):
                reply = self._script(one, chat=chat)
                if inspect.isawaitable(reply):
                    reply = await reply
                replies.append(reply)
        latency = self.latency_s(request) if callable(self.latency_s) else self.latency_s
        if latency > 0:
            await asyncio.sleep(latency)
        fault = fault or next((r for r in replies if isinstance(r, Fault)), None)
        if fault is not None:
            self._counts.faults += 1
            return await self._fault_response(fault)
        self._counts.replies += 1
        try:
            if chat:
                body = completion_body(request, replies[0], model=self.model)
            else:
                body = completions_body(
                    request, replies, model=self.model, tokenizer=self.tokenizer
                )
        except Exception as exc:  # a broken script: say so instead of dropping the connection
            message = f"the stub could not build its reply: {type(exc).__name__}: {exc}"
            return _Response(500, error_body(message, 500))
        recorded.response = body
        return _Response(200, json.dumps(body).encode())

    def _draw_fault(self) -> Fault | None:
        with self._lock:
            self._generation_requests += 1
            if self._injected:
                return self._injected.pop(0)
            if self._generation_requests <= self.fail_first_n:
                return self._rng.choice(self._faults)
            if self.failure_rate and self._rng.random() < self.failure_rate:
                return self._rng.choice(self._faults)
        return None

    def _script(self, request: dict[str, Any], *, chat: bool) -> Any:
        if callable(self.replies):
            return self.replies(request)
        if not chat and self._completion_script is not None:
            return self._completion_script.reply((prompts_of(request) or [""])[0])
        turn = sum(
            1 for m in request["messages"] if isinstance(m, dict) and m.get("role") == "assistant"
        )
        return self.replies[min(turn, len(self.replies) - 1)]

    @staticmethod
    async def _fault_response(fault: Fault) -> _Response | None:
        if fault.kind == "drop":
            return None
        if fault.kind == "hang":
            await asyncio.sleep(fault.hang_s)
            return None
        if fault.kind == "malformed":
            return _Response(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess')
        headers = dict(fault.headers)
        if fault.retry_after is not None:
            value = fault.retry_after
            headers["retry-after"] = f"{value:g}" if isinstance(value, (int, float)) else value
        return _Response(fault.status, error_body(fault.message, fault.status, fault.code), headers)


def _one_request_per_prompt(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A completions request with several prompts, as one request per prompt (for the script)."""
    prompts = prompts_of(request) or []
    return [{**request, "prompt": p if isinstance(p, str) else list(p)} for p in prompts]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the stub server from a shell until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m rk_agent.testing.stub_server",
        description="An OpenAI-compatible stub server for tests and benchmarks (loopback).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    parser.add_argument("--reply", default="ok", help="the text every reply carries")
    parser.add_argument(
        "--tools", action="store_true", help="call the first offered tool, then answer --reply"
    )
    parser.add_argument(
        "--tool-turns", type=int, default=1, help="with --tools: tool-calling turns per episode"
    )
    parser.add_argument("--failure-rate", type=float, default=0.0, help="share of failed replies")
    parser.add_argument("--fail-status", type=int, default=500, help="status of failed replies")
    parser.add_argument("--seed", type=int, default=0, help="seed of the failure draws")
    parser.add_argument("--model", default="stub-model", help="model id of /v1/models")
    args = parser.parse_args(argv)

    replies: Sequence[ReplySpec] | ReplyFn = (
        call_first_tool_then_answer(args.reply, args.tool_turns) if args.tools else [args.reply]
    )
    server = StubServer(
        replies,
        latency_s=args.latency,
        failure_rate=args.failure_rate,
        fault=Fault.http(args.fail_status),
        seed=args.seed,
        model=args.model,
        host=args.host,
        port=args.port,
        record=False,
    )

    async def serve() -> None:
        await server.open()
        print(f"stub server listening on {server.base_url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
