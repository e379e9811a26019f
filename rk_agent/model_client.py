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

Transport: a plain ``http://`` server reached directly (a local vLLM, SGLang or
``transformers serve``: the many-requests-a-second case) is spoken to through
`rk_agent.http1` (kept-alive connections, a third of ``aiohttp``'s CPU per request);
``https://`` servers and servers behind a proxy through one ``aiohttp`` session.

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
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
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
from rk_agent.http1 import BadReply, Http1Pool, header_lines, request_head
from rk_agent.loop_thread import LoopThread
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy
from rk_agent.secrets import redact

if TYPE_CHECKING:
    import aiohttp

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
    """An ``aiohttp`` session for one model server, opened on first use in the running loop.

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
        self._session: aiohttp.ClientSession | None = None
        self._pool: Http1Pool | None = None
        self._proxy: dict[str, Any] = {}
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
        """Import the HTTP stack and open the session now (in the running event loop) rather
        than on the first request."""
        if self._session is None and self._pool is None:
            import aiohttp

            timeout = self.endpoint.timeout_s or None
            self._proxy = _env_proxy(self.endpoint.url)
            parts = urlsplit(self.endpoint.url)
            if parts.scheme == "http" and not self._proxy and parts.hostname:
                self._open_pool(parts, timeout)
                return
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections, ssl=ssl_context()),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
                headers=self._headers,
            )

    def _open_pool(self, parts: SplitResult, timeout: float | None) -> None:
        host = parts.hostname
        assert host is not None
        port = parts.port or 80
        try:
            self._fixed = header_lines(self._headers)
        except ValueError as exc:
            raise ConfigError(f"cannot send requests to {self.endpoint.url}: {exc}.") from None
        self._host = parts.netloc.rpartition("@")[2]  # no credentials in the Host header
        self._base = parts.path.rstrip("/")
        self._pool = Http1Pool(
            host.strip("[]"), port, limit=self.max_connections, connect_timeout_s=timeout,
            read_timeout_s=timeout,
        )  # fmt: skip

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request (no retry) and return the decoded JSON reply.

        Raises:
            EndpointError: as the module docstring says (``ContextOverflowError`` included).
        """
        import aiohttp

        self.open()
        data = None if body is None else self._encode(body)
        try:
            if self._pool is not None:
                status, raw = await self._pooled(method, path, data)
            else:
                status, raw = await self._session_request(method, path, data)
        except EndpointError:
            raise
        except TimeoutError as exc:  # aiohttp's socket timeouts are TimeoutErrors too
            raise timeout_error(self.endpoint) from exc
        except BadReply as exc:
            raise EndpointError(
                f"{self.endpoint.url} sent a reply that is not HTTP/1.1: {self._clean(str(exc))}",
                retryable=True,
                url=self.endpoint.url,
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise unreachable_error(exc, self.endpoint) from exc
        try:
            return _from_json(raw)
        except ValueError as exc:
            detail = self._clean(f"{type(exc).__name__}: {exc}")
            raise EndpointError(
                f"{self.endpoint.url} sent a body that is not JSON: {detail}",
                status=status,
                retryable=True,
                url=self.endpoint.url,
            ) from exc

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

    async def _pooled(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        assert self._pool is not None
        head = request_head(
            method, self._base + path, self._host, self._fixed, None if data is None else len(data)
        )
        reply = await self._pool.request(head if data is None else head + data)
        if reply.status >= 400:
            self._raise_status(reply.status, reply.body, reply.reason, reply)
        return reply.status, reply.body

    async def _session_request(
        self, method: str, path: str, data: bytes | None
    ) -> tuple[int, bytes]:
        assert self._session is not None
        url = self.endpoint.url + path
        async with self._session.request(method, url, data=data, **self._proxy) as response:
            raw = await response.read()
            if response.status >= 400:
                self._raise_status(response.status, raw, response.reason, response)
            return response.status, raw

    def _raise_status(self, status: int, raw: bytes, reason: str | None, response: Any) -> None:
        text = raw.decode("utf-8", "replace")
        reply = StatusReply(status, self._clean(text), response)
        message = server_message(text, reason)
        raise status_error(status, message, self.endpoint, self.retry) from reply

    async def preconnect(self, count: int) -> int:
        """Open up to ``count`` connections to a plain-HTTP server now (`Http1Pool.preconnect`)
        and return how many were opened; 0 through ``aiohttp`` (TLS, a proxy), which opens
        them as requests need them."""
        self.open()
        return 0 if self._pool is None else await self._pool.preconnect(count)

    async def aclose(self) -> None:
        """Close the session and its connections (the client opens a new one when used
        again, in whatever event loop is running then)."""
        session, self._session = self._session, None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        if session is not None:
            await session.close()

    def _clean(self, text: str) -> str:
        return redact(text, [self.endpoint.key])[:500]


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
