"""The remote reward client against real servers on loopback: retries, errors, keys, connections."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import re
import socket
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from rk_agent import RewardFunction, reward_function
from rk_agent.errors import ConfigError, EndpointError, RewardInputError
from rk_agent.retry import REWARD_ENDPOINT_RETRY, RetryPolicy
from rk_agent.rewards.remote import (
    API_KEY_ENV,
    apost_evaluate,
    build_request,
    post_batch,
    post_evaluate,
)
from rk_agent.server import serving

SECRET = "rk-remote-SECRET-0123456789abcdef"
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


class Recorder:
    """What the test server saw: calls per path, the Authorization header, the client port."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.auth: list[str | None] = []
        self.ports: list[int] = []
        self.times: list[float] = []

    def see(self, request: Request) -> int:
        key = f"{request.url.path}?{request.url.query}"
        self.calls[key] += 1
        self.auth.append(request.headers.get("authorization"))
        self.ports.append(request.client.port if request.client else 0)
        self.times.append(time.monotonic())
        return self.calls[key]


def _test_app(seen: Recorder) -> FastAPI:
    app = FastAPI()

    @app.post("/flaky/{failures}")
    async def flaky(failures: int, request: Request) -> Any:
        if seen.see(request) <= failures:
            return JSONResponse({"detail": "warming up, try again"}, status_code=503)
        return {"score": 1.0, "reason": "finally"}

    @app.post("/always/{status}")
    async def always(status: int, request: Request) -> Any:
        seen.see(request)
        return JSONResponse({"detail": f"no luck ({status})"}, status_code=status)

    @app.post("/limited")
    async def limited(request: Request) -> Any:
        wait = request.query_params.get("wait", "0.3")
        if seen.see(request) == 1:
            return JSONResponse({"error": "slow down"}, 429, headers={"Retry-After": wait})
        return {"score": 0.5}

    @app.post("/hang")
    async def hang(request: Request) -> Any:
        seen.see(request)
        await asyncio.sleep(1.0)
        return {"score": 1.0}

    @app.post("/garbage")
    async def garbage(request: Request) -> Any:
        seen.see(request)
        return {"not": "a result"}

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[Recorder]]]:
    holder = [Recorder()]

    class Current(Recorder):  # delegates to whichever recorder the test installed
        def see(self, request: Request) -> int:
            return holder[0].see(request)

    with serving(_test_app(Current())) as url:
        yield url, holder


@pytest.fixture
def url(server: tuple[str, list[Recorder]]) -> str:
    return server[0]


@pytest.fixture
def seen(server: tuple[str, list[Recorder]]) -> Recorder:
    server[1][0] = Recorder()
    return server[1][0]


def call(sync: bool, endpoint: str, **kwargs: Any) -> Any:
    if sync:
        return post_evaluate(endpoint, {"messages": CHAT}, **kwargs)
    return asyncio.run(apost_evaluate(endpoint, {"messages": CHAT}, **kwargs))


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_retries_a_503_twice_then_succeeds(url: str, seen: Recorder, sync: bool) -> None:
    result = call(sync, f"{url}/flaky/2", **FAST)
    assert (result.score, result.reason) == (1.0, "finally")
    assert seen.calls["/flaky/2?"] == 3


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_gives_up_with_the_servers_message(url: str, seen: Recorder, sync: bool) -> None:
    endpoint = f"{url}/always/503"
    message = f"reward endpoint {endpoint} answered 503: no luck (503) (gave up after 3 attempts)"
    with pytest.raises(EndpointError, match=re.escape(message)) as info:
        call(sync, endpoint, max_retries=2, **FAST)
    assert (info.value.status, info.value.retryable, info.value.url) == (503, True, endpoint)
    assert seen.calls["/always/503?"] == 3


@pytest.mark.parametrize("status", [400, 401, 413, 422])
def test_no_retry_on_4xx(url: str, seen: Recorder, status: int) -> None:
    endpoint = f"{url}/always/{status}"
    with pytest.raises(
        EndpointError, match=re.escape(f"answered {status}: no luck ({status})")
    ) as info:
        post_evaluate(endpoint, {"messages": CHAT}, **FAST)
    assert not info.value.retryable and "gave up" not in str(info.value)
    assert seen.calls[f"/always/{status}?"] == 1


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_retry_after_is_honoured_and_capped(url: str, seen: Recorder, sync: bool) -> None:
    waits: list[float] = []  # the policy's sleep records the waits instead of sleeping
    retry = REWARD_ENDPOINT_RETRY.replace(max_s=2.0, sleep=waits.append)
    assert call(sync, f"{url}/limited?wait=0.3", retry=retry).score == 0.5
    assert call(sync, f"{url}/limited?wait=30", retry=retry).score == 0.5
    assert waits == [0.3, 2.0]  # honoured; 30 s asked, 2 s allowed
    assert seen.calls["/limited?wait=0.3"] == seen.calls["/limited?wait=30"] == 2


def test_a_retry_policy_sets_the_attempts_and_delays(url: str, seen: Recorder) -> None:
    waits: list[float] = []
    with pytest.raises(EndpointError, match=re.escape("(gave up after 3 attempts)")):
        post_evaluate(
            f"{url}/always/503", {"messages": CHAT},
            retry=RetryPolicy(max_retries=2, base_s=0.5, jitter="none", sleep=waits.append),
        )  # fmt: skip
    assert waits == [0.5, 1.0] and seen.calls["/always/503?"] == 3


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_timeouts_and_connection_errors_are_retried(url: str, seen: Recorder, sync: bool) -> None:
    endpoint = f"{url}/hang"
    message = f"reward endpoint {endpoint} did not answer within 0.2 s. (gave up after 2 attempts)"
    with pytest.raises(EndpointError, match=re.escape(message)) as info:
        call(sync, endpoint, timeout=0.2, max_retries=1, **FAST)
    assert info.value.retryable and info.value.status is None
    assert seen.calls["/hang?"] == 2
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/evaluate"
    with pytest.raises(EndpointError, match=r"cannot reach reward endpoint .*gave up after 3"):
        call(sync, closed, api_key=SECRET, max_retries=2, **FAST)


def test_a_reply_that_is_not_a_result_is_not_retried(url: str, seen: Recorder) -> None:
    with pytest.raises(EndpointError, match="not an EvaluateResult") as info:
        post_evaluate(f"{url}/garbage", {"messages": CHAT}, **FAST)
    assert (info.value.status, info.value.retryable) == (200, False)
    assert seen.calls["/garbage?"] == 1


def test_the_key_comes_from_config_or_the_environment_and_never_shows(
    url: str, seen: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    post_evaluate(f"{url}/flaky/0", {"messages": CHAT})
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    post_evaluate(f"{url}/flaky/0", {"messages": CHAT})
    RewardFunction(mode="remote", endpoint=f"{url}/flaky/0", api_key="explicit")(messages=CHAT)
    assert seen.auth == [None, f"Bearer {SECRET}", "Bearer explicit"]
    with pytest.raises(EndpointError) as info:
        post_evaluate(f"{url}/always/500", {"messages": CHAT}, max_retries=1, **FAST)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


def test_connections_are_reused(url: str, seen: Recorder) -> None:
    for _ in range(3):
        post_evaluate(f"{url}/flaky/0", {"messages": CHAT})

    async def three() -> None:
        for _ in range(3):
            await apost_evaluate(f"{url}/flaky/0", {"messages": CHAT})

    asyncio.run(three())
    sync_ports, async_ports = seen.ports[:3], seen.ports[3:]
    assert len(set(sync_ports)) == 1 and len(set(async_ports)) == 1


def _open_sockets() -> int:
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone already
            count += str(fd.readlink()).startswith("socket:")
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts sockets through /proc")
def test_async_clients_close_with_their_event_loop(url: str) -> None:
    call(False, f"{url}/flaky/0")
    time.sleep(0.1)
    before = _open_sockets()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # a new loop each time: each gets its own client, closed at the end
            assert call(False, f"{url}/flaky/0").score == 1.0
        gc.collect()
    time.sleep(0.1)  # the server closes its side
    assert _open_sockets() <= before
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


SLEEPY_IN_FLIGHT = {"now": 0, "peak": 0}  # the server's event loop runs every call


@reward_function
async def sleepy(response: str) -> float:
    SLEEPY_IN_FLIGHT["now"] += 1
    SLEEPY_IN_FLIGHT["peak"] = max(SLEEPY_IN_FLIGHT["peak"], SLEEPY_IN_FLIGHT["now"])
    await asyncio.sleep(0.3)
    SLEEPY_IN_FLIGHT["now"] -= 1
    return 1.0


def test_acall_scores_many_samples_at_once_without_threads() -> None:
    SLEEPY_IN_FLIGHT.update(now=0, peak=0)
    with serving(sleepy) as url:
        remote = RewardFunction(mode="remote", endpoint=f"{url}/evaluate")

        async def many() -> list[float]:
            results = await asyncio.gather(*(remote.acall(messages=CHAT) for _ in range(100)))
            return [r.score for r in results]

        scores = asyncio.run(many())
    assert scores == [1.0] * 100
    # More calls at once than a pool of 32 threads (one blocking call each) could carry.
    assert SLEEPY_IN_FLIGHT["peak"] > 32


def test_a_422_from_the_reward_server_reads_well() -> None:
    with serving("format") as url, pytest.raises(EndpointError) as info:
        post_evaluate(f"{url}/evaluate", {"messages": CHAT, "tools": "nope"})
    assert str(info.value) == (
        f"reward endpoint {url}/evaluate answered 422: body.tools: Input should be a valid array"
    )


def test_messages_are_checked_before_sending() -> None:
    robot = [{"role": "robot", "content": "beep"}]
    with pytest.raises(RewardInputError, match=re.escape("'messages' is not a list of OpenAI")):
        post_evaluate("http://127.0.0.1:9/evaluate", {"messages": robot})


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(
        ConfigError, match=re.escape("reward endpoint 'localhost:8000/evaluate' is")
    ):
        post_evaluate("localhost:8000/evaluate", {"messages": CHAT})
    with pytest.raises(ConfigError, match=re.escape("max_retries must be an int >= 0, got -1.")):
        post_evaluate("http://127.0.0.1:9/evaluate", {"messages": CHAT}, max_retries=-1)


def test_post_batch_scores_many_samples_in_one_request(url: str, seen: Recorder) -> None:
    answer = [CHAT[0], {"role": "assistant", "content": "<answer>4</answer>"}]
    samples = [{"messages": answer, "tags": ["answer"]}, {"messages": CHAT, "tags": ["answer"]}]
    with serving("format") as batch_url:
        results = post_batch(f"{batch_url}/batch", samples)
    assert [r.score for r in results] == [1.0, 0.0]
    wanted = 'answered with something that is not {"results": [EvaluateResult, ...]}'
    with pytest.raises(EndpointError, match=re.escape(wanted)):
        post_batch(f"{url}/flaky/0", samples)  # answers one result, not a batch
    assert seen.calls["/flaky/0?"] == 1


def test_build_request_puts_extra_arguments_under_kwargs() -> None:
    body = build_request({"messages": CHAT, "ground_truth": "4", "tools": [], "threshold": 1})
    assert body == {"messages": CHAT, "ground_truth": "4", "tools": [], "kwargs": {"threshold": 1}}
