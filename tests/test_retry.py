"""`rk_agent.retry`: the one backoff policy. Delays, Retry-After, caps, seeded jitter, what is
retried and how often, sync and async; no test sleeps (the policy's ``sleep`` records waits)."""

from __future__ import annotations

import asyncio
import doctest
import email.utils
import random
import re
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

import rk_agent.retry
from rk_agent.errors import ConfigError, EndpointError, FireworksError
from rk_agent.retry import (
    FIREWORKS_API_RETRY,
    JUDGE_RETRY,
    MODEL_ENDPOINT_RETRY,
    REWARD_ENDPOINT_RETRY,
    RetryPolicy,
    aretry_call,
    retry_after_seconds,
    retry_call,
    server_wait,
)


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(rk_agent.retry)
    assert tried > 0 and failures == 0


def test_the_ceiling_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_s=0.25, max_s=1.5, jitter="none")
    assert [policy.delay(a) for a in range(6)] == [0.25, 0.5, 1.0, 1.5, 1.5, 1.5]
    assert policy.delay(10_000) == 1.5  # no overflow however long it went on


@pytest.mark.parametrize(
    ("jitter", "low_fraction"), [("full", 0.0), ("equal", 0.5)], ids=["full", "equal"]
)
def test_jitter_is_drawn_under_the_ceiling(jitter: Any, low_fraction: float) -> None:
    policy = RetryPolicy(base_s=0.1, max_s=0.25, jitter=jitter, rng=random.Random(7))
    for attempt, ceiling in enumerate([0.1, 0.2, 0.25, 0.25]):
        drawn = [policy.delay(attempt) for _ in range(300)]
        low = ceiling * low_fraction
        assert low <= min(drawn) < low + (ceiling - low) / 4
        assert ceiling - (ceiling - low) / 4 < max(drawn) <= ceiling


def test_seeded_jitter_repeats() -> None:
    def draws(seed: int) -> list[float]:
        policy = RetryPolicy(rng=random.Random(seed))
        return [policy.delay(a) for a in range(5)]

    assert draws(3) == draws(3) != draws(4)


def test_retry_after_wins_and_is_capped() -> None:
    policy = RetryPolicy(base_s=5.0, max_s=2.0, jitter="none")
    assert policy.delay(0, retry_after=0.3) == 0.3
    assert policy.delay(3, retry_after=0.0) == 0.0
    assert policy.delay(0, retry_after=3600.0) == 2.0


def test_retryable_statuses() -> None:
    default = RetryPolicy()
    assert [s for s in (400, 401, 404, 408, 409, 413, 422, 429) if default.retries_status(s)] == [
        408,
        429,
    ]
    assert all(default.retries_status(s) for s in (500, 502, 503, 504, 599))
    assert MODEL_ENDPOINT_RETRY.retries_status(409) and JUDGE_RETRY.retries_status(409)
    assert not FIREWORKS_API_RETRY.retries_status(409)  # "already exists" there
    no_5xx = RetryPolicy(statuses=frozenset({429}), retry_server_errors=False)
    assert no_5xx.retries_status(429) and not no_5xx.retries_status(503)


def test_the_clients_defaults_are_written_down_once() -> None:
    def numbers(policy: RetryPolicy) -> tuple[Any, ...]:
        return policy.max_retries, policy.base_s, policy.max_s, policy.jitter

    assert numbers(REWARD_ENDPOINT_RETRY) == (3, 0.25, 10.0, "full")
    assert numbers(MODEL_ENDPOINT_RETRY) == (5, 0.5, 30.0, "full")
    assert numbers(JUDGE_RETRY) == (2, 0.5, 8.0, "full")
    assert numbers(FIREWORKS_API_RETRY) == (4, 1.0, 30.0, "equal")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_retries": -1}, "max_retries must be an int >= 0, got -1."),
        ({"max_retries": 1.5}, "max_retries must be an int >= 0, got 1.5."),
        ({"max_retries": True}, "max_retries must be an int >= 0, got True."),
        ({"base_s": -0.1}, "base_s must be a number of seconds >= 0, got -0.1."),
        ({"max_s": float("nan")}, "max_s must be a number of seconds >= 0, got nan."),
        ({"jitter": "some"}, "jitter must be 'full', 'equal' or 'none', got 'some'."),
    ],
)
def test_bad_settings_say_what_is_wrong(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        RetryPolicy(**changes)
    with pytest.raises(ConfigError, match=re.escape(message)):
        REWARD_ENDPOINT_RETRY.replace(**changes)


def test_a_policy_is_plain_frozen_data() -> None:
    recorded = RetryPolicy(sleep=print, rng=random.Random(1))
    assert recorded == RetryPolicy()  # sleep and rng are how it runs, not what it is
    with pytest.raises(AttributeError):
        recorded.max_retries = 9  # type: ignore[misc]
    assert RetryPolicy(statuses={429}).statuses == frozenset({429})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Running a call under a policy


class Flaky:
    """Fails with the given errors in turn, then returns ``"ok"``; counts its calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"

    async def async_call(self) -> str:
        await asyncio.sleep(0)
        return self()


def busy(status: int = 503) -> EndpointError:
    return EndpointError(f"HTTP {status}: busy", status=status, retryable=True, url="http://x")


def run(sync: bool, flaky: Flaky, policy: RetryPolicy, **kwargs: Any) -> str:
    if sync:
        return retry_call(flaky, policy, **kwargs)
    return asyncio.run(aretry_call(flaky.async_call, policy, **kwargs))


SYNC = pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])


@SYNC
def test_retries_until_it_succeeds(sync: bool) -> None:
    waits: list[float] = []
    seen: list[tuple[str, int, float]] = []
    policy = RetryPolicy(max_retries=3, base_s=0.5, jitter="none", sleep=waits.append)
    flaky = Flaky(busy(), busy(429))
    on_retry = lambda error, attempt, delay: seen.append((str(error), attempt, delay))  # noqa: E731
    assert run(sync, flaky, policy, on_retry=on_retry) == "ok"
    assert flaky.calls == 3 and waits == [0.5, 1.0]
    assert seen == [("HTTP 503: busy", 0, 0.5), ("HTTP 429: busy", 1, 1.0)]


@SYNC
def test_gives_up_after_max_retries_and_says_so(sync: bool) -> None:
    waits: list[float] = []
    policy = RetryPolicy(max_retries=2, jitter="none", sleep=waits.append)
    flaky = Flaky(busy(), busy(), busy(), busy())
    with pytest.raises(EndpointError, match=re.escape("HTTP 503: busy (gave up after 3 attempts)")):
        run(sync, flaky, policy)
    assert flaky.calls == 3 and len(waits) == 2


@SYNC
def test_a_single_retryable_failure_says_one_attempt(sync: bool) -> None:
    flaky = Flaky(busy())
    with pytest.raises(EndpointError) as info:
        run(sync, flaky, RetryPolicy(max_retries=0, sleep=[].append))
    assert str(info.value) == "HTTP 503: busy (gave up after 1 attempt)"
    assert info.value.args == (str(info.value),)


@SYNC
@pytest.mark.parametrize(
    "error",
    [
        EndpointError("HTTP 400: bad field", status=400, retryable=False),
        ValueError("not an endpoint error"),
    ],
    ids=["not-retryable", "other-exception"],
)
def test_other_failures_are_not_retried(sync: bool, error: Exception) -> None:
    waits: list[float] = []
    flaky = Flaky(error)
    with pytest.raises(type(error)) as info:
        run(sync, flaky, RetryPolicy(sleep=waits.append))
    assert info.value is error and str(error) in ("HTTP 400: bad field", "not an endpoint error")
    assert flaky.calls == 1 and waits == []


@SYNC
def test_a_late_non_retryable_failure_says_how_often_it_was_tried(sync: bool) -> None:
    flaky = Flaky(busy(), EndpointError("HTTP 404: gone", status=404))
    with pytest.raises(EndpointError, match=re.escape("HTTP 404: gone (gave up after 2 attempts)")):
        run(sync, flaky, RetryPolicy(sleep=[].append))


@SYNC
def test_a_fireworks_error_records_its_attempts(sync: bool) -> None:
    errors = [FireworksError("HTTP 502", status=502, retryable=True) for _ in range(3)]
    with pytest.raises(FireworksError) as info:
        run(sync, Flaky(*errors), RetryPolicy(max_retries=2, sleep=[].append))
    assert info.value.attempts == 3


def _status_error(status: int, headers: dict[str, str]) -> EndpointError:
    request = httpx.Request("POST", "http://127.0.0.1/x")
    response = httpx.Response(status, headers=headers, request=request)
    cause = httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)
    error = EndpointError(f"HTTP {status}", status=status, retryable=True)
    error.__cause__ = cause
    return error


@SYNC
def test_the_servers_wait_is_honoured_and_capped(sync: bool) -> None:
    waits: list[float] = []
    policy = RetryPolicy(max_retries=3, max_s=5.0, sleep=waits.append)
    flaky = Flaky(
        _status_error(429, {"Retry-After": "2"}),
        _status_error(503, {"retry-after-ms": "250"}),
        _status_error(503, {"Retry-After": "3600"}),
    )
    assert run(sync, flaky, policy) == "ok"
    assert waits == [2.0, 0.25, 5.0]


def test_the_async_runner_awaits_an_async_sleep() -> None:
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    policy = RetryPolicy(max_retries=1, base_s=0.5, jitter="none", sleep=sleep)
    assert asyncio.run(aretry_call(Flaky(busy()).async_call, policy)) == "ok"
    assert waits == [0.5]


def test_server_wait_reads_the_response_behind_the_error() -> None:
    assert server_wait(_status_error(429, {"Retry-After": "7"})) == 7.0
    assert server_wait(_status_error(429, {})) is None
    assert server_wait(busy()) is None  # no response anywhere
    looped = busy()
    looped.__cause__ = looped  # a cycle in the cause chain ends the search
    assert server_wait(looped) is None


def test_retry_after_seconds_reads_every_form(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1_800_000_000.0  # an HTTP date is read against the clock: hold it still
    monkeypatch.setattr(rk_agent.retry, "time", SimpleNamespace(time=lambda: now))
    assert retry_after_seconds(None) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    assert retry_after_seconds({"retry-after-ms": "oops", "retry-after": "4"}) == 4.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    in_an_hour = email.utils.formatdate(now + 3600, usegmt=True)
    assert 3500 < (retry_after_seconds({"retry-after": in_an_hour}) or 0) <= 3600
    past = email.utils.formatdate(now - 60, usegmt=True)
    assert retry_after_seconds({"retry-after": past}) == 0.0
