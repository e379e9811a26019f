"""Calling a reward that runs behind an HTTP endpoint (a reward server or Fireworks).

The wire format follows reward-kit's ``POST /evaluate``: the request carries ``messages``
(OpenAI chat format), optional ``original_messages``, ``ground_truth`` and ``tools`` at the top
level and every other keyword argument under ``kwargs``; the response is an `EvaluateResult`
(see `rk_agent.server`, which serves it).

Every call retries what may succeed next time: timeouts, connection errors, 408, 429 and 5xx,
up to ``max_retries`` times, waiting ``Retry-After`` when the server sends it and otherwise a
random delay up to ``backoff_base_s * 2**attempt`` (full jitter), capped at ``backoff_max_s``
(`rk_agent.retry.REWARD_ENDPOINT_RETRY`; pass ``retry=`` for another `RetryPolicy`). Other 4xx
answers (401, 413, 422) are not retried: the same request would fail the same way.
The key comes from ``api_key=`` or, failing that, ``RK_AGENT_SERVER_API_KEY``, and never
appears in an error message or a log line.

Connections are reused: one `httpx.Client` per endpoint origin, shared by all threads, and one
`httpx.AsyncClient` per origin and event loop (closed cleanly when ``asyncio.run`` ends).
``tls=ClientTLS(cert=..., key=..., ca=...)`` presents a client certificate to a server that
demands one (mutual TLS, ``rk-agent serve --client-ca``) and trusts a private CA; calls with
other TLS settings get clients of their own.

Main names: `build_request`, `post_evaluate`, `apost_evaluate`, `post_batch`, `ClientTLS`,
`close_remote_clients`, `aclose_remote_clients`. This is the one place where httpx errors
become `EndpointError`. httpx is imported on first use.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rk_agent.errors import ConfigError, EndpointError, RewardInputError
from rk_agent.retry import REWARD_ENDPOINT_RETRY, RetryPolicy, aretry_call, retry_call
from rk_agent.types import EvaluateResult, Message

if TYPE_CHECKING:
    import httpx

__all__ = [
    "API_KEY_ENV",
    "ClientTLS",
    "aclose_remote_clients",
    "apost_evaluate",
    "build_request",
    "close_remote_clients",
    "post_batch",
    "post_evaluate",
]

logger = logging.getLogger("rk_agent.rewards.remote")

API_KEY_ENV = "RK_AGENT_SERVER_API_KEY"
"""The environment variable read for the key when ``api_key`` is not given."""

_TOP_LEVEL = ("messages", "original_messages", "ground_truth", "tools")


@dataclass(frozen=True)
class ClientTLS:
    """The client side of (mutual) TLS: a certificate to present, a CA to trust.

    Attributes:
        cert: the client certificate (PEM), for a server that demands one.
        key: its private key (PEM); ``None`` when ``cert`` holds both.
        ca: the CA bundle (PEM) that signed the server's certificate; ``None`` trusts the
            system's CAs.
    """

    cert: str | None = None
    key: str | None = None
    ca: str | None = None

    def context(self) -> Any:
        """The `ssl.SSLContext` for httpx.

        Raises:
            ConfigError: a file is missing or is not a certificate or key.
        """
        import ssl

        try:
            context = ssl.create_default_context(cafile=self.ca)
            if self.cert:
                context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load the TLS files (client_cert={self.cert!r}, key={self.key!r}, "
                f"ca_cert={self.ca!r}): {exc}. Expected PEM files: the client certificate and "
                "its key, and the CA that signed the server's certificate."
            ) from exc
        return context


def build_request(call_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body for ``POST /evaluate`` from a reward call's keyword arguments.

    Raises:
        RewardInputError: ``messages`` or ``original_messages`` are not chat messages.

    Example:
        >>> build_request({"messages": [{"role": "user", "content": "hi"}], "threshold": 1})
        {'messages': [{'role': 'user', 'content': 'hi'}], 'kwargs': {'threshold': 1}}
    """
    body: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in call_kwargs.items():
        if key in ("messages", "original_messages") and value is not None:
            try:
                body[key] = [Message.coerce(m).to_openai() for m in value]
            except (TypeError, ValueError) as exc:
                raise RewardInputError(
                    f"{key!r} is not a list of OpenAI chat messages "
                    f"({{'role': ..., 'content': ...}}): {exc}"
                ) from exc
        elif key in _TOP_LEVEL:
            body[key] = value
        else:
            extra[key] = value
    if extra:
        body["kwargs"] = extra
    return body


def post_evaluate(
    endpoint: str,
    call_kwargs: Mapping[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 30.0,
    max_retries: int = REWARD_ENDPOINT_RETRY.max_retries,
    backoff_base_s: float = REWARD_ENDPOINT_RETRY.base_s,
    backoff_max_s: float = REWARD_ENDPOINT_RETRY.max_s,
    retry: RetryPolicy | None = None,
    tls: ClientTLS | None = None,
) -> EvaluateResult:
    """POST one sample to a reward endpoint and return its `EvaluateResult`, retrying failures.

    Args:
        endpoint: the URL, e.g. ``http://127.0.0.1:8000/evaluate``.
        call_kwargs: the reward call's keyword arguments (see `build_request`).
        api_key: sent as ``Authorization: Bearer ...``; default ``RK_AGENT_SERVER_API_KEY``.
        timeout: seconds per attempt.
        max_retries: further attempts after the first on retryable failures.
        backoff_base_s: the first retry waits up to this long; the ceiling doubles per attempt.
        backoff_max_s: the longest wait between attempts, ``Retry-After`` included.
        retry: the whole retry policy instead of the three above (e.g. to record the waits
            instead of sleeping, in a test).
        tls: a client certificate and CA for mutual TLS (`ClientTLS`).

    Raises:
        EndpointError: the last attempt's failure: connection failure, timeout, a non-2xx
            status (with the server's message), or a reply that is not an `EvaluateResult`.
            ``retryable`` tells whether it was a transient kind. The key never appears in it.
        ConfigError: ``endpoint`` is not an http(s) URL.
    """
    retry = retry or _policy(max_retries, backoff_base_s, backoff_max_s)
    call = _Call(endpoint, build_request(call_kwargs), api_key, timeout, retry, tls)
    return call.result(_send(call))


async def apost_evaluate(
    endpoint: str,
    call_kwargs: Mapping[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 30.0,
    max_retries: int = REWARD_ENDPOINT_RETRY.max_retries,
    backoff_base_s: float = REWARD_ENDPOINT_RETRY.base_s,
    backoff_max_s: float = REWARD_ENDPOINT_RETRY.max_s,
    retry: RetryPolicy | None = None,
    tls: ClientTLS | None = None,
) -> EvaluateResult:
    """`post_evaluate` for async code: the same arguments, retries and errors, no threads."""
    retry = retry or _policy(max_retries, backoff_base_s, backoff_max_s)
    call = _Call(endpoint, build_request(call_kwargs), api_key, timeout, retry, tls)
    return call.result(await _asend(call))


def post_batch(
    endpoint: str,
    samples: Sequence[Mapping[str, Any]],
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
    max_retries: int = REWARD_ENDPOINT_RETRY.max_retries,
    backoff_base_s: float = REWARD_ENDPOINT_RETRY.base_s,
    backoff_max_s: float = REWARD_ENDPOINT_RETRY.max_s,
    retry: RetryPolicy | None = None,
    tls: ClientTLS | None = None,
) -> list[EvaluateResult]:
    """POST many samples to a reward server's ``/batch`` in one request; one result each.

    The server scores them concurrently. Arguments, retries and errors as in `post_evaluate`
    (``endpoint`` is the ``/batch`` URL; ``timeout`` covers the whole batch).

    Example:
        >>> from rk_agent.server import serving
        >>> chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<a>1</a>"}]
        >>> with serving("format") as url:
        ...     [r.score for r in post_batch(f"{url}/batch", [{"messages": chat, "tags": ["a"]}])]
        [1.0]
    """
    body = {"samples": [build_request(sample) for sample in samples]}
    retry = retry or _policy(max_retries, backoff_base_s, backoff_max_s)
    call = _Call(endpoint, body, api_key, timeout, retry, tls)
    return call.results(_send(call), len(samples))


def _policy(max_retries: int, base_s: float, max_s: float) -> RetryPolicy:
    return REWARD_ENDPOINT_RETRY.replace(max_retries=max_retries, base_s=base_s, max_s=max_s)


def _send(call: _Call) -> httpx.Response:
    """POST until a 2xx answer, retrying what may pass next time; raise the last failure."""
    client = _sync_client(call.origin, call.tls)

    def attempt() -> httpx.Response:
        try:
            response = client.post(
                call.endpoint, json=call.body, headers=call.headers, timeout=call.timeout
            )
        except Exception as exc:
            raise call.failed(exc) from exc
        return call.checked(response)

    return retry_call(attempt, call.retry, on_retry=call.retrying)


async def _asend(call: _Call) -> httpx.Response:
    """`_send` on the event loop."""
    client = await _async_client(call.origin, call.tls)

    async def attempt() -> httpx.Response:
        try:
            response = await client.post(
                call.endpoint, json=call.body, headers=call.headers, timeout=call.timeout
            )
        except Exception as exc:
            raise call.failed(exc) from exc
        return call.checked(response)

    return await aretry_call(attempt, call.retry, on_retry=call.retrying)


class _Call:
    """One remote evaluation: the request, and how each failure is worded and retried."""

    def __init__(
        self,
        endpoint: str,
        body: dict[str, Any],
        api_key: str | None,
        timeout: float,
        retry: RetryPolicy,
        tls: ClientTLS | None = None,
    ) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"reward endpoint {endpoint!r} is not an http(s) URL; expected e.g. "
                "'http://127.0.0.1:8000/evaluate'."
            )
        self.endpoint = endpoint
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.body = body
        key = api_key or os.environ.get(API_KEY_ENV)
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout = timeout
        self.retry = retry
        self.tls = tls

    def failed(self, exc: Exception) -> EndpointError:
        """The `EndpointError` for an exception raised while sending (httpx's or another)."""
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            error = EndpointError(
                f"reward endpoint {self.endpoint} did not answer within {self.timeout:g} s.",
                retryable=True,
                url=self.endpoint,
            )
        elif isinstance(exc, httpx.TransportError):
            error = EndpointError(
                f"cannot reach reward endpoint {self.endpoint}: {type(exc).__name__}: {exc}. Is "
                "the reward server running, and is the URL right?",
                retryable=True,
                url=self.endpoint,
            )
        else:
            error = EndpointError(
                f"calling reward endpoint {self.endpoint} failed: {type(exc).__name__}: {exc}",
                url=self.endpoint,
            )
        return error

    def checked(self, response: httpx.Response) -> httpx.Response:
        """``response`` when its status is below 400; else the `EndpointError` for it, raised
        from an ``httpx.HTTPStatusError`` (which carries the server's ``Retry-After`` to the
        retries)."""
        import httpx

        status = response.status_code
        if status < 400:
            return response
        cause = httpx.HTTPStatusError(f"HTTP {status}", request=response.request, response=response)
        raise EndpointError(
            f"reward endpoint {self.endpoint} answered {status}: {_server_message(response)}",
            status=status,
            retryable=self.retry.retries_status(status),
            url=self.endpoint,
        ) from cause

    def retrying(self, error: EndpointError, attempt: int, delay: float) -> None:
        logger.warning(
            "%s Retrying in %.2f s (attempt %d of %d).",
            error, delay, attempt + 2, self.retry.attempts,
        )  # fmt: skip

    def result(self, response: httpx.Response) -> EvaluateResult:
        try:
            return EvaluateResult.model_validate_json(response.content)
        except ValueError as exc:
            raise self._not_results(response, "an EvaluateResult") from exc

    def results(self, response: httpx.Response, expected: int) -> list[EvaluateResult]:
        try:
            results = [EvaluateResult.model_validate(r) for r in response.json()["results"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise self._not_results(response, '{"results": [EvaluateResult, ...]}') from exc
        if len(results) != expected:
            raise self._not_results(response, f"{expected} results (got {len(results)})")
        return results

    def _not_results(self, response: httpx.Response, what: str) -> EndpointError:
        return EndpointError(
            f"reward endpoint {self.endpoint} answered with something that is not {what}: "
            f"{response.text[:200]!r}",
            status=response.status_code,
            url=self.endpoint,
        )


def _server_message(response: httpx.Response) -> str:
    """The server's own words: ``detail`` / ``error`` / ``message``; FastAPI's 422 list as
    ``body.messages.0.role: Input should be ...``."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or "(empty body)"
    if isinstance(data, dict):
        for key in ("detail", "error", "message"):
            if key in data:
                return _as_text(data[key])[:500]
    return str(data)[:300]


def _as_text(detail: Any) -> str:
    if isinstance(detail, list) and all(isinstance(d, dict) and "msg" in d for d in detail):
        return "; ".join(
            ".".join(str(p) for p in d.get("loc", ())) + f": {d['msg']}"
            if d.get("loc")
            else d["msg"]
            for d in detail
        )
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        return str(detail["message"])
    return str(detail)


# --------------------------------------------------------------------------------------------
# Shared clients

_lock = threading.Lock()
_Key = tuple[str, ClientTLS | None]  # an origin, and the TLS settings its clients use
_sync_clients: dict[_Key, httpx.Client] = {}
_closes_at_exit = False
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[_Key, tuple[httpx.AsyncClient, AsyncIterator[Any]]]
] = weakref.WeakKeyDictionary()


def _sync_client(origin: str, tls: ClientTLS | None = None) -> httpx.Client:
    with _lock:
        client = _sync_clients.get((origin, tls))
        if client is None or client.is_closed:
            import httpx

            global _closes_at_exit
            if not _closes_at_exit:  # close them at exit, sockets and all (no ResourceWarning)
                atexit.register(close_remote_clients)
                _closes_at_exit = True
            client = httpx.Client(timeout=30.0, verify=tls.context() if tls else True)
            _sync_clients[origin, tls] = client
        return client


async def _async_client(origin: str, tls: ClientTLS | None = None) -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    with _lock:
        entry = _async_clients.setdefault(loop, {}).get((origin, tls))
    if entry is not None and not entry[0].is_closed:
        return entry[0]
    holder = _hold_async_client(loop, (origin, tls))
    client: httpx.AsyncClient = await holder.__anext__()
    with _lock:
        _async_clients.setdefault(loop, {})[origin, tls] = (client, holder)
    return client


async def _hold_async_client(
    loop: asyncio.AbstractEventLoop, key: _Key
) -> AsyncIterator[httpx.AsyncClient]:
    """Own one client for the life of the loop. An async generator, because ``asyncio.run``
    closes the loop's unfinished async generators before closing the loop itself: that runs
    the ``finally`` below on the still-running loop, so the connections close cleanly instead
    of leaking sockets (and ResourceWarnings) when the loop is gone."""
    import httpx

    tls = key[1]
    client = httpx.AsyncClient(timeout=30.0, verify=tls.context() if tls else True)
    try:
        yield client
    finally:
        with _lock:
            clients = _async_clients.get(loop, {})
            if clients.get(key, (None,))[0] is client:
                del clients[key]
        await client.aclose()


def close_remote_clients() -> None:
    """Close the shared sync clients and their pooled connections.

    Async clients close by themselves when their ``asyncio.run`` ends; `aclose_remote_clients`
    closes them earlier. Safe at any time: the next call opens a new client.
    """
    with _lock:
        clients = list(_sync_clients.values())
        _sync_clients.clear()
    for client in clients:
        client.close()


async def aclose_remote_clients() -> None:
    """Close the running event loop's shared async clients (for long-lived loops)."""
    loop = asyncio.get_running_loop()
    with _lock:
        holders = [holder for _, holder in _async_clients.pop(loop, {}).values()]
    for holder in holders:
        await holder.aclose()  # type: ignore[attr-defined]
