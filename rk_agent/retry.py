"""Retrying HTTP calls: one backoff policy for every client, and how long a server asked us to wait.

Every client of rk-agent that talks HTTP (the remote reward client, the OpenAI-compatible
policy, the LLM judge, the Fireworks API client) retries through `retry_call` or `aretry_call`
under a `RetryPolicy`. A call is tried again when it raised an `EndpointError` with
``retryable`` set (the client decides that where it translates HTTP into errors, asking its
policy's `RetryPolicy.retries_status` for status codes); between tries it waits what the server
asked for (``Retry-After``, ``retry-after-ms``), else a jittered exponential delay, both capped.
When it gives up, the error's message says after how many attempts.

Each client's defaults are written down here, and nowhere else:

========================  ==========  =======  ======  ======  =========================
policy                    retries     base     cap     jitter  statuses (and every 5xx)
========================  ==========  =======  ======  ======  =========================
`REWARD_ENDPOINT_RETRY`   3           0.25 s   10 s    full    408, 429
`MODEL_ENDPOINT_RETRY`    5           0.5 s    30 s    full    408, 409, 429
`JUDGE_RETRY`             2           0.5 s    8 s     full    408, 409, 429
`FIREWORKS_API_RETRY`     4           1 s      30 s    equal   408, 429
`MCP_RECONNECT_RETRY`     5           0.2 s    5 s     full    (reconnects, not requests)
========================  ==========  =======  ======  ======  =========================

409 means "busy, try again" on an inference server (OpenAI's own SDK retries it) but "already
exists" on the Fireworks control plane, where trying again cannot help.

Main names: `RetryPolicy`, `retry_call`, `aretry_call`, `server_wait`, `retry_after_seconds`,
and the presets above.

Example:
    >>> policy = RetryPolicy(max_retries=2, base_s=1.0, max_s=3.0, jitter="none")
    >>> [policy.delay(attempt) for attempt in range(3)]
    [1.0, 2.0, 3.0]
    >>> policy.delay(0, retry_after=30.0)  # the server's wait, capped
    3.0
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import inspect
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from rk_agent.errors import ConfigError, EndpointError, FireworksError

__all__ = [
    "FIREWORKS_API_RETRY",
    "JUDGE_RETRY",
    "MCP_RECONNECT_RETRY",
    "MODEL_ENDPOINT_RETRY",
    "REWARD_ENDPOINT_RETRY",
    "Jitter",
    "RetryPolicy",
    "aretry_call",
    "retry_after_seconds",
    "retry_call",
    "server_wait",
]

T = TypeVar("T")

Jitter = Literal["full", "equal", "none"]
"""How a delay is drawn under its exponential ceiling ``min(max_s, base_s * 2**attempt)``:
``"full"`` anywhere in ``[0, ceiling]``, ``"equal"`` in ``[ceiling / 2, ceiling]``, ``"none"``
the ceiling itself."""

OnRetry = Callable[[EndpointError, int, float], object]
"""Called before each wait with the failure, the attempt that failed (0 is the first) and the
delay in seconds."""


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before trying a failed HTTP call again.

    Attributes:
        max_retries: further attempts after the first; 0 tries once.
        base_s: the first retry's ceiling; it doubles with each attempt.
        max_s: the longest wait between attempts, a server's ``Retry-After`` included.
        jitter: how the delay is drawn under the ceiling (see `Jitter`).
        statuses: HTTP statuses worth another try besides 5xx (see `retries_status`).
        retry_server_errors: whether every 5xx is worth another try.
        sleep: waits between attempts; default `time.sleep` (`asyncio.sleep` in
            `aretry_call`). Tests pass e.g. ``waits.append`` to record the waits and skip them;
            a function that returns an awaitable is awaited.
        rng: draws the jitter; default the `random` module. Pass ``random.Random(seed)`` for
            repeatable delays.

    Raises:
        ConfigError: a negative or non-integer ``max_retries``, a negative delay, or an
            unknown ``jitter``.

    Example:
        >>> RetryPolicy().retries_status(503), RetryPolicy().retries_status(404)
        (True, False)
    """

    max_retries: int = 3
    base_s: float = 0.25
    max_s: float = 10.0
    jitter: Jitter = "full"
    statuses: frozenset[int] = frozenset({408, 429})
    retry_server_errors: bool = True
    sleep: Callable[[float], object] | None = field(default=None, compare=False, repr=False)
    rng: random.Random | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"max_retries must be an int >= 0, got {retries!r}.")
        for name in ("base_s", "max_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ConfigError(f"{name} must be a number of seconds >= 0, got {value!r}.")
        if self.jitter not in ("full", "equal", "none"):
            raise ConfigError(f"jitter must be 'full', 'equal' or 'none', got {self.jitter!r}.")
        object.__setattr__(self, "statuses", frozenset(self.statuses))

    @property
    def attempts(self) -> int:
        """How many times a call is tried at most (``max_retries + 1``)."""
        return self.max_retries + 1

    def replace(self, **changes: Any) -> RetryPolicy:
        """A copy with some fields changed (checked like a new one).

        Example:
            >>> REWARD_ENDPOINT_RETRY.replace(max_retries=0).attempts
            1
        """
        return dataclasses.replace(self, **changes)

    def retries_status(self, status: int) -> bool:
        """Whether an HTTP answer with this status is worth another try."""
        return status in self.statuses or (self.retry_server_errors and 500 <= status <= 599)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after attempt ``attempt`` (0 is the first) failed.

        The server's ``retry_after`` when it sent one, else a jittered draw under
        ``min(max_s, base_s * 2**attempt)``; never more than ``max_s``.
        """
        if retry_after is not None:
            return min(max(0.0, retry_after), self.max_s)
        ceiling = min(self.max_s, self.base_s * 2.0 ** min(attempt, 64))
        rng = self.rng if self.rng is not None else random
        if self.jitter == "full":
            return rng.uniform(0.0, ceiling)
        if self.jitter == "equal":
            return ceiling / 2 + rng.uniform(0.0, ceiling / 2)
        return ceiling

    def next_delay(self, error: BaseException, attempt: int) -> float | None:
        """The wait before trying again after ``error`` ended attempt ``attempt``, or ``None``
        to give up: the error is not a retryable `EndpointError`, or the attempts are spent."""
        if not isinstance(error, EndpointError) or not error.retryable:
            return None
        if attempt + 1 >= self.attempts:
            return None
        return self.delay(attempt, server_wait(error))


REWARD_ENDPOINT_RETRY = RetryPolicy(max_retries=3, base_s=0.25, max_s=10.0)
"""The remote reward client (`rk_agent.rewards.remote`, ``RewardFunction(mode="remote")``)."""

MODEL_ENDPOINT_RETRY = RetryPolicy(
    max_retries=5, base_s=0.5, max_s=30.0, statuses=frozenset({408, 409, 429})
)
"""`rk_agent.policies.openai_policy.OpenAIPolicy` on a chat-completions server."""

JUDGE_RETRY = RetryPolicy(max_retries=2, base_s=0.5, max_s=8.0, statuses=frozenset({408, 409, 429}))
"""The LLM judge (`rk_agent.rewards.builtin.llm_judge`): the ``openai`` SDK's own numbers."""

FIREWORKS_API_RETRY = RetryPolicy(max_retries=4, base_s=1.0, max_s=30.0, jitter="equal")
"""The Fireworks control-plane client (`rk_agent.fireworks.client.FireworksClient`)."""

MCP_RECONNECT_RETRY = RetryPolicy(max_retries=5, base_s=0.2, max_s=5.0)
"""Reconnecting to an MCP tool server (`rk_agent.mcp`) that dropped or is not up yet: the
waits between connection attempts. Tool calls themselves are never retried by it."""


def retry_call(call: Callable[[], T], policy: RetryPolicy, *, on_retry: OnRetry | None = None) -> T:
    """Call ``call()`` until it returns, retrying under ``policy``; raise the last failure.

    Only an `EndpointError` with ``retryable`` set is tried again; anything else propagates at
    once. The error that ends the retries says how often it was tried (``(gave up after 3
    attempts)``) and, when it has an ``attempts`` attribute (`FireworksError`), sets it.

    Args:
        call: one attempt.
        policy: the retries and delays.
        on_retry: called before each wait (to log it or count it).

    Example:
        >>> tries = []
        >>> def flaky():
        ...     tries.append(1)
        ...     if len(tries) < 3:
        ...         raise EndpointError("HTTP 503", status=503, retryable=True)
        ...     return "ok"
        >>> waits = []
        >>> retry_call(flaky, RetryPolicy(sleep=waits.append)), len(waits)
        ('ok', 2)
    """
    sleep = policy.sleep if policy.sleep is not None else time.sleep
    attempt = 0
    while True:
        try:
            return call()
        except EndpointError as error:
            delay = _next_or_give_up(policy, error, attempt)
            if on_retry is not None:
                on_retry(error, attempt, delay)
        sleep(delay)
        attempt += 1


async def aretry_call(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, *, on_retry: OnRetry | None = None
) -> T:
    """`retry_call` for async code: ``await call()`` until it returns; waits with
    `asyncio.sleep` (or ``policy.sleep``, awaited when it returns an awaitable)."""
    attempt = 0
    while True:
        try:
            return await call()
        except EndpointError as error:
            delay = _next_or_give_up(policy, error, attempt)
            if on_retry is not None:
                on_retry(error, attempt, delay)
        if policy.sleep is None:
            await asyncio.sleep(delay)
        else:
            waited = policy.sleep(delay)
            if inspect.isawaitable(waited):
                await waited
        attempt += 1


def _next_or_give_up(policy: RetryPolicy, error: EndpointError, attempt: int) -> float:
    """The delay before the next attempt; raises ``error`` (marked) when there is none."""
    delay = policy.next_delay(error, attempt)
    if delay is not None:
        return delay
    tries = attempt + 1
    if error.retryable or tries > 1:
        error.message += f" (gave up after {tries} attempt{'s' if tries > 1 else ''})"
        error.args = (error.message,)
    if isinstance(error, FireworksError):
        error.attempts = tries
    raise error


def server_wait(error: BaseException) -> float | None:
    """The wait (seconds) the server asked for in the HTTP response behind ``error``.

    Looks for a ``response`` with ``headers`` on ``error`` and then on its causes
    (``__cause__``): an ``openai.APIStatusError``, an ``httpx.HTTPStatusError``. ``None`` when
    there is none, or it asks for no wait.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        headers = getattr(getattr(current, "response", None), "headers", None)
        if headers is not None:
            return retry_after_seconds(headers)
        current = current.__cause__
    return None


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a server asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an
    HTTP date. ``None`` when it asks for none (or says something unreadable).

    Example:
        >>> retry_after_seconds({"retry-after": "2"})
        2.0
        >>> retry_after_seconds({"retry-after-ms": "250"})
        0.25
    """
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
