"""The HTTP client of OpenAI-compatible model servers: JSON requests, typed failures.

`OpenAIPolicy` (``POST /chat/completions``) and `VLLMPolicy` (``POST /completions``,
``GET /models``) send a JSON body and read a JSON body, and so does the LLM judge
(`rk_agent.rewards.builtin.llm_judge`, through `SyncModelClient`); nothing else of the
``openai`` SDK was used. It sits with the shared modules, below the rewards and the
policies, so that both can use it. The SDK's request machinery (a deep copy of the options, URL
parsing, header objects, its own HTTP layer over ``aiohttp``) cost about 0.45 ms of CPU per
request, three times ``aiohttp``'s own work: at a few hundred requests a second that was most
of a rollout process's CPU (the figures: ``benchmarks/bench_model_client.py``). So rk-agent
speaks HTTP through this one client per endpoint, and every failure becomes an `EndpointError`
here, worded as `rk_agent.endpoint_errors` words them (`status_error`).

Failures: a timeout (connecting, or waiting for the server) and a dropped or refused connection
are retryable, with no status; a 4xx/5xx status is `status_error`'s (context
overflow, the key's origin on 401/403, ``Retry-After`` kept for the retry policy); a success
whose body is not JSON is retryable with status 200. The key never appears in a message.

Transport: one seam (`_Transport`: send a request, preconnect, close) with two sides. A plain
``http://`` server reached directly (a local vLLM, SGLang or ``transformers serve``: the
many-requests-a-second case) is spoken to through `rk_agent.http1` (kept-alive connections; the
engine's CPU per turn is 35 % higher over ``aiohttp``: docs/development.md, "Hand-made machinery:
what it buys"); ``https://`` servers and servers behind a proxy through one ``aiohttp``
session. A transport raises its HTTP stack's own errors; `ModelClient.request` translates
them, and every status of 400 or more, in one place.

Proxies: the environment's ``HTTP(S)_PROXY`` and ``NO_PROXY`` apply (the proxy's credentials
from its URL or from netrc), resolved once when the client opens, for the one server this
client talks to. ``aiohttp``'s ``trust_env`` would read them again, with netrc, on two worker
threads for every request: most of a turn's CPU and two thread hand-offs of waiting.

Synchronous callers (a reward is a plain function, called from any thread) use
`SyncModelClient`: the same client on an event loop of its own, in one daemon thread
(`rk_agent.loop_thread.LoopThread`), so that every caller shares its kept-alive connections.

Main names: `ModelClient`, `SyncModelClient`.

Example:
    >>> import asyncio
    >>> from rk_agent.endpoint_errors import Endpoint
    >>> from rk_agent.testing.stub_server import StubServer
    >>> async def models(client):
    ...     try:
    ...         return await client.request("GET", "/models")
    ...     finally:
    ...         await client.aclose()
    >>> with StubServer(["4"]) as server:
    ...     client = ModelClient(Endpoint(url=server.base_url, model="stub"))
    ...     body = asyncio.run(models(client))
    >>> body["object"]
    'list'
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, urlsplit

import pydantic_core

from rk_agent import __version__
from rk_agent.endpoint_errors import (
    Endpoint,
    server_message,
    status_error,
    timeout_error,
    unreachable_error,
)
from rk_agent.errors import ConfigError, EndpointError
from rk_agent.http1 import BadReply, Http1Pool, Reply, header_lines, request_head
from rk_agent.loop_thread import LoopThread
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy
from rk_agent.secrets import redact

__all__ = ["ModelClient", "StatusReply", "SyncModelClient"]


_ssl: Any = None


def ssl_context() -> Any:
    """One TLS context for every client: loading the CA bundle costs ~30 ms each time."""
    global _ssl
    if _ssl is None:
        import ssl

        _ssl = ssl.create_default_context()
    return _ssl


class StatusReply(Exception):
    """The HTTP reply behind a status `EndpointError` (its ``__cause__``): `rk_agent.retry`
    reads the server's ``Retry-After`` from ``response.headers``."""

    def __init__(self, status: int, text: str, response: Any) -> None:
        super().__init__(f"HTTP {status}: {text[:200]}")
        self.response = response


class ModelClient:
    """The client of one model server; its transport opens on first use in the running loop.

    Args:
        endpoint: the base URL, model, key (sent as ``Authorization: Bearer``) and timeout
            (for connecting, and for each wait for the server).
        max_connections: connections kept open at most.
        retry: which statuses count as retryable (the policy retries; this client does not).
        headers: more headers for every request (e.g. OpenAI's ``OpenAI-Organization``).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        max_connections: int = 64,
        retry: RetryPolicy = MODEL_ENDPOINT_RETRY,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.max_connections = max_connections
        self.retry = retry
        self._transport: _Transport | None = None
        self._tools: Any = None  # the last `tools` field sent (a copy) and its JSON
        self._tools_json = b""
        self._headers = {
            "Authorization": f"Bearer {endpoint.key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"rk-agent/{__version__}",
            **(headers or {}),
        }

    def __repr__(self) -> str:
        return f"ModelClient(url={self.endpoint.url!r})"

    def open(self) -> None:
        """Import the HTTP stack and open the transport now (in the running event loop) rather
        than on the first request."""
        self._opened()

    def _opened(self) -> _Transport:
        if self._transport is None:
            self._transport = _transport_for(self.endpoint, self._headers, self.max_connections)
        return self._transport

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request (no retry) and return the decoded JSON reply.

        Raises:
            EndpointError: as the module docstring says (``ContextOverflowError`` included).
        """
        transport = self._opened()
        data = None if body is None else self._encode(body)
        try:
            answer = await transport.send(method, path, data)
        except Exception as exc:
            raise self._translated(exc) from exc
        if answer.status >= 400:
            text = answer.body.decode("utf-8", "replace")
            reply = StatusReply(answer.status, self._clean(text), answer)
            message = server_message(text, answer.reason)
            raise status_error(answer.status, message, self.endpoint, self.retry) from reply
        try:
            return _from_json(answer.body)
        except ValueError as exc:
            detail = self._clean(f"{type(exc).__name__}: {exc}")
            raise EndpointError(
                f"{self.endpoint.url} sent a body that is not JSON: {detail}",
                status=answer.status,
                retryable=True,
                url=self.endpoint.url,
            ) from exc

    def _translated(self, exc: Exception) -> Exception:
        """A transport's failure as this client's error: the one place where the HTTP stacks'
        errors become `EndpointError` (anything else, a bug, is raised as it is)."""
        if isinstance(exc, TimeoutError):  # aiohttp's socket timeouts are TimeoutErrors too
            return timeout_error(self.endpoint)
        if isinstance(exc, BadReply):
            return EndpointError(
                f"{self.endpoint.url} sent a reply that is not HTTP/1.1: {self._clean(str(exc))}",
                retryable=True,
                url=self.endpoint.url,
            )
        if isinstance(exc, OSError) or _is_aiohttp_error(exc):
            return unreachable_error(exc, self.endpoint)
        return exc

    def _encode(self, body: Any) -> bytes:
        """``body`` as JSON (pydantic-core's encoder: a third of the standard library's time).
        A ``tools`` field (kilobytes of schemas, the same in every request of a run: two
        thirds of the encoding time) is encoded again only when it changes; the copy it is
        compared with is a deep one, so edits in place show."""
        tools = body.get("tools") if isinstance(body, dict) else None
        if not tools:
            return _to_json(body)
        if tools != self._tools:
            self._tools_json = _to_json(tools)
            self._tools = json.loads(self._tools_json)
        rest = _to_json({key: value for key, value in body.items() if key != "tools"})
        return b"".join(
            (rest[:-1], b"," if len(rest) > 2 else b"", b'"tools":', self._tools_json, b"}")
        )

    async def preconnect(self, count: int) -> int:
        """Open up to ``count`` connections to a plain-HTTP server now (`Http1Pool.preconnect`)
        and return how many were opened; 0 through ``aiohttp`` (TLS, a proxy), which opens
        them as requests need them."""
        return await self._opened().preconnect(count)

    async def aclose(self) -> None:
        """Close the transport and its connections (the client opens a new one when used
        again, in whatever event loop is running then)."""
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()

    def _clean(self, text: str) -> str:
        return redact(text, [self.endpoint.key])[:500]


class _Answer(Protocol):
    """What a transport got back: status, reason phrase, headers (read for ``Retry-After``)
    and body. `rk_agent.http1.Reply` is one as it is."""

    @property
    def status(self) -> int: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def body(self) -> bytes: ...


class _Transport(Protocol):
    """How `ModelClient` reaches its server: the one seam under it."""

    def send(self, method: str, path: str, data: bytes | None) -> Awaitable[_Answer]:
        """One request; failures raise the HTTP stack's own errors (`ModelClient` translates
        them). The request itself may be sent only once it is awaited."""
        ...

    async def preconnect(self, count: int) -> int:
        """Open up to ``count`` connections now; how many were opened."""
        ...

    async def aclose(self) -> None:
        """Close every connection."""
        ...


def _transport_for(endpoint: Endpoint, headers: dict[str, str], max_connections: int) -> _Transport:
    """`rk_agent.http1` for a plain ``http://`` server reached directly, else ``aiohttp``
    (TLS, a proxy from the environment)."""
    timeout = endpoint.timeout_s or None
    proxy = _env_proxy(endpoint.url)
    parts = urlsplit(endpoint.url)
    if parts.scheme == "http" and not proxy and parts.hostname:
        return _Http1Transport(endpoint, parts, headers, max_connections, timeout)
    return _AiohttpTransport(endpoint, headers, max_connections, timeout, proxy)


class _Http1Transport:
    """Requests over `rk_agent.http1.Http1Pool` (kept-alive connections)."""

    def __init__(
        self,
        endpoint: Endpoint,
        parts: SplitResult,
        headers: dict[str, str],
        max_connections: int,
        timeout: float | None,
    ) -> None:
        host = parts.hostname
        assert host is not None
        try:
            self._fixed = header_lines(headers)
        except ValueError as exc:
            raise ConfigError(f"cannot send requests to {endpoint.url}: {exc}.") from None
        self._host = parts.netloc.rpartition("@")[2]  # no credentials in the Host header
        self._base = parts.path.rstrip("/")
        self._pool = Http1Pool(
            host.strip("[]"), parts.port or 80, limit=max_connections,
            connect_timeout_s=timeout, read_timeout_s=timeout,
        )  # fmt: skip

    def send(self, method: str, path: str, data: bytes | None) -> Awaitable[Reply]:
        # The pool's own coroutine, awaited by the caller: no frame of this seam's in between
        # (a turn's CPU: docs/development.md, "Hand-made machinery: what it buys").
        head = request_head(
            method, self._base + path, self._host, self._fixed, None if data is None else len(data)
        )
        return self._pool.request(head if data is None else head + data)

    async def preconnect(self, count: int) -> int:
        return await self._pool.preconnect(count)

    async def aclose(self) -> None:
        self._pool.close()


class _AiohttpTransport:
    """Requests over one ``aiohttp`` session (TLS, proxies)."""

    def __init__(
        self,
        endpoint: Endpoint,
        headers: dict[str, str],
        max_connections: int,
        timeout: float | None,
        proxy: dict[str, Any],
    ) -> None:
        import aiohttp

        self._url = endpoint.url
        self._proxy = proxy
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max_connections, ssl=ssl_context()),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
            headers=headers,
        )

    async def send(self, method: str, path: str, data: bytes | None) -> _AiohttpAnswer:
        url = self._url + path
        async with self._session.request(method, url, data=data, **self._proxy) as response:
            body = await response.read()
            return _AiohttpAnswer(response.status, response.reason, response.headers, body)

    async def preconnect(self, count: int) -> int:
        return 0  # connections open as requests need them

    async def aclose(self) -> None:
        await self._session.close()


@dataclass(frozen=True, slots=True)
class _AiohttpAnswer:
    """An ``aiohttp`` response, read whole (an `_Answer`)."""

    status: int
    reason: str | None
    headers: Mapping[str, str]
    body: bytes


def _is_aiohttp_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of ``aiohttp``'s client errors (without importing it first)."""
    aiohttp = sys.modules.get("aiohttp")
    return aiohttp is not None and isinstance(exc, aiohttp.ClientError)


def _to_json(value: Any) -> bytes:
    try:
        return pydantic_core.to_json(value)
    except ValueError:  # what it cannot encode: the standard library's error, as before
        return json.dumps(value).encode()


def _from_json(raw: bytes) -> Any:
    try:
        return pydantic_core.from_json(raw)
    except ValueError:  # the standard library's error names the cause as users know it
        return json.loads(raw)


class SyncModelClient:
    """A `ModelClient` for synchronous callers, from any thread.

    Requests run on an event loop of the client's own, in one daemon thread started by the
    first request; each call blocks until its reply. Calls from many threads at once share the
    client's connections. In a child process made by ``fork`` the parent's thread does not
    exist: the first request there starts the child's own loop and connections.

    Args:
        endpoint: as for `ModelClient`.
        **options: `ModelClient`'s other arguments (``max_connections``, ``retry``,
            ``headers``).

    Example:
        >>> from rk_agent.endpoint_errors import Endpoint
        >>> from rk_agent.testing.stub_server import StubServer
        >>> with StubServer(["4"]) as server:
        ...     client = SyncModelClient(Endpoint(url=server.base_url, model="stub"))
        ...     body = client.request("POST", "/chat/completions", {"model": "stub",
        ...                           "messages": [{"role": "user", "content": "2+2?"}]})
        ...     client.close()
        >>> body["choices"][0]["message"]["content"]
        '4'
    """

    def __init__(self, endpoint: Endpoint, **options: Any) -> None:
        self.endpoint = endpoint
        self._options = options
        self._lock = threading.Lock()
        self._loop = LoopThread(name="rk-agent-model-client")
        self._client: ModelClient | None = None
        self._pid = 0  # the process that made `_client`

    def __repr__(self) -> str:
        return f"SyncModelClient(url={self.endpoint.url!r})"

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """`ModelClient.request`, waited for: the decoded JSON reply.

        Raises:
            EndpointError: as `ModelClient.request` (no retry).
        """
        return self._loop.run(self._running().request(method, path, body))

    def close(self) -> None:
        """Close the connections and stop the loop's thread (a later request starts them
        again). Done at the interpreter's exit for a client still open."""
        atexit.unregister(self.close)
        with self._lock:
            client, self._client = self._client, None
        if client is None or self._pid != os.getpid():
            return  # never started, or the parent's (a forked child closes nothing of it)
        self._loop.run(client.aclose())
        self._loop.stop()

    def _running(self) -> ModelClient:
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client, self._pid = ModelClient(self.endpoint, **self._options), os.getpid()
                atexit.register(self.close)  # no connection left for the collector to find
            return self._client


def _env_proxy(url: str) -> dict[str, Any]:
    """``proxy`` and ``proxy_auth`` for requests to ``url`` as the environment sets them
    (``HTTP(S)_PROXY``, ``NO_PROXY``, netrc for the proxy's credentials), or nothing."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:  # no proxy for this scheme, or NO_PROXY names the host
        return {}
    return {"proxy": proxy, "proxy_auth": auth}
