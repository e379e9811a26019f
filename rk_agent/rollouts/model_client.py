"""The HTTP client of the served-model policies: JSON requests to an OpenAI-compatible server.

`OpenAIPolicy` (``POST /chat/completions``) and `VLLMPolicy` (``POST /completions``,
``GET /models``) send a JSON body and read a JSON body; nothing else of the ``openai`` SDK was
used. Its request machinery (a deep copy of the options, URL parsing, header objects, its own
HTTP layer over ``aiohttp``) cost about 0.45 ms of CPU per request, three times ``aiohttp``'s
own work: at a few hundred requests a second that was most of a rollout process's CPU (the
figures: ``benchmarks/bench_model_client.py``). So the policies speak HTTP through this one
``aiohttp`` session per policy, and every failure becomes an `EndpointError` here, worded as
`rk_agent.openai_errors` words the SDK's (`status_error`), so that a 503 reads the same from
either.

Failures: a timeout (connecting, or waiting for the server) and a dropped or refused connection
are retryable, with no status; a 4xx/5xx status is `status_error`'s (context
overflow, the key's origin on 401/403, ``Retry-After`` kept for the retry policy); a success
whose body is not JSON is retryable with status 200. The key never appears in a message.

Proxies: the environment's ``HTTP(S)_PROXY`` and ``NO_PROXY`` apply (the proxy's credentials
from its URL or from netrc), resolved once when the session opens, for the one server this
client talks to. ``aiohttp``'s ``trust_env`` would read them again, with netrc, on two worker
threads for every request: most of a turn's CPU and two thread hand-offs of waiting.

Main names: `ModelClient`.

Example:
    >>> import asyncio
    >>> from rk_agent.openai_errors import Endpoint
    >>> from rk_agent.rollouts.stub_server import StubServer
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

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rk_agent import __version__
from rk_agent.errors import EndpointError
from rk_agent.openai_errors import (
    Endpoint,
    server_message,
    status_error,
    timeout_error,
    unreachable_error,
)
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy
from rk_agent.secrets import redact

if TYPE_CHECKING:
    import aiohttp

__all__ = ["ModelClient", "StatusReply"]


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
        self._proxy: dict[str, Any] = {}
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
        if self._session is None:
            import aiohttp

            timeout = self.endpoint.timeout_s or None
            self._proxy = _env_proxy(self.endpoint.url)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections, ssl=ssl_context()),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
                headers=self._headers,
            )

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request (no retry) and return the decoded JSON reply.

        Raises:
            EndpointError: as the module docstring says (``ContextOverflowError`` included).
        """
        import aiohttp

        self.open()
        assert self._session is not None
        url = self.endpoint.url + path
        data = None if body is None else json.dumps(body).encode()
        try:
            async with self._session.request(method, url, data=data, **self._proxy) as response:
                raw = await response.read()
                status = response.status
                if status >= 400:
                    text = raw.decode("utf-8", "replace")
                    reply = StatusReply(status, self._clean(text), response)
                    message = server_message(text, response.reason)
                    raise status_error(status, message, self.endpoint, self.retry) from reply
        except EndpointError:
            raise
        except TimeoutError as exc:  # aiohttp's socket timeouts are TimeoutErrors too
            raise timeout_error(self.endpoint) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise unreachable_error(exc, self.endpoint) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            detail = self._clean(f"{type(exc).__name__}: {exc}")
            raise EndpointError(
                f"{self.endpoint.url} sent a body that is not JSON: {detail}",
                status=status,
                retryable=True,
                url=self.endpoint.url,
            ) from exc

    async def aclose(self) -> None:
        """Close the session and its connections (the client opens a new one when used
        again, in whatever event loop is running then)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _clean(self, text: str) -> str:
        return redact(text, [self.endpoint.key])[:500]


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
