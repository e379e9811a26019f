"""The reward server over real HTTP on loopback: uvicorn in a background thread (`serving`)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rk_agent import RewardFunction, reward_function
from rk_agent.errors import ConfigError, EndpointError, RewardInputError, UnknownNameError
from rk_agent.server import (
    check_bind,
    create_app,
    is_loopback,
    load_served_reward,
    serve_rewards,
    serving,
)
from rk_agent.types import EvaluateResult

SECRET = "rk-server-SECRET-0123456789abcdef"
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
JSON = {"content-type": "application/json"}


@reward_function
def exact(response: str, ground_truth: str, bonus: float = 0.0) -> float:
    """1.0 when the reply equals the ground truth (plus a bonus)."""
    if ground_truth == "raise":
        raise ValueError("this sample makes the reward raise")
    return float(response.strip() == ground_truth) + bonus


@reward_function
def echo(messages: list[dict[str, Any]], **kwargs: Any) -> EvaluateResult:
    """Says what it was called with."""
    seen = {"messages": messages, **kwargs}
    return EvaluateResult(score=1.0, reason=json.dumps(seen, sort_keys=True))


BATCH_IN_FLIGHT = {"now": 0, "peak": 0}  # the server's event loop runs every call


@reward_function
async def counted_sleepy(response: str) -> float:
    BATCH_IN_FLIGHT["now"] += 1
    BATCH_IN_FLIGHT["peak"] = max(BATCH_IN_FLIGHT["peak"], BATCH_IN_FLIGHT["now"])
    await asyncio.sleep(0.3)
    BATCH_IN_FLIGHT["now"] -= 1
    return 1.0


RELEASE_SLOW = threading.Event()


HELD_FINISHED = threading.Event()  # set when a held call returns
HELD_STARTED = threading.Event()  # set when a held call begins


@reward_function
def held(response: str, ground_truth: str) -> float:
    """Blocks its worker thread on ``ground_truth="slow"`` until the test releases it."""
    if ground_truth == "slow":
        HELD_STARTED.set()
        RELEASE_SLOW.wait(timeout=30)
        HELD_FINISHED.set()
    return float(response.strip() == ground_truth)


@reward_function
async def async_held(response: str, ground_truth: str) -> float:
    """Awaits on ``ground_truth="slow"`` (the server's event loop stays free) until released."""
    if ground_truth == "slow":
        for _ in range(3000):
            if RELEASE_SLOW.is_set():
                break
            await asyncio.sleep(0.01)
        HELD_FINISHED.set()
    return float(response.strip() == ground_truth)


@reward_function
def strict(response: str, mode: str = "exact") -> float:
    if mode not in ("exact", "fuzzy"):
        raise ConfigError(f"mode must be 'exact' or 'fuzzy', got {mode!r}.")
    return 1.0


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(exact) as base:
        yield base


def post(url: str, body: Any, key: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(url, json=body, headers=headers, timeout=10, **kwargs)


# --- wire format and round trips ------------------------------------------------------------


def test_remote_reward_function_round_trips(url: str) -> None:
    local = RewardFunction(exact, bonus=0.5)
    for path in ("/evaluate", "/reward"):
        remote = RewardFunction(mode="remote", endpoint=url + path, bonus=0.5)
        assert remote(messages=CHAT, ground_truth="4") == local(messages=CHAT, ground_truth="4")
        assert remote(messages=CHAT, ground_truth="4").score == 1.5
    remote = RewardFunction(mode="remote", endpoint=url + "/evaluate")
    assert asyncio.run(remote.acall(messages=CHAT, ground_truth="5")).score == 0.0


def test_fields_reach_the_reward_as_reward_kit_sends_them() -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    with serving(echo) as url:
        body = {
            "messages": CHAT, "original_messages": CHAT[:1], "ground_truth": {"x": 1},
            "tools": tools, "top_level": "a", "clash": "top", "kwargs": {"clash": "kwargs"},
        }  # fmt: skip
        result = EvaluateResult.model_validate_json(post(url + "/evaluate", body).content)
        empty = EvaluateResult.model_validate_json(
            post(url + "/reward", {"messages": CHAT}).content
        )
    seen = json.loads(result.reason or "")
    assert seen == {
        "messages": CHAT, "original_messages": CHAT[:1], "ground_truth": {"x": 1},
        "tools": tools, "top_level": "a", "clash": "kwargs",
    }  # fmt: skip
    # Only what the sample sets is passed: the reward's own defaults apply to the rest.
    assert json.loads(empty.reason or "") == {"messages": CHAT}


def test_messages_in_the_forms_only_the_model_widens_to_are_accepted() -> None:
    # Bodies are read by a validator without the widening ones first; a body it refuses (tool
    # call arguments as an object, null fields) goes through the model, which takes them.
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
    chat = [CHAT[0], {"role": "assistant", "content": None, "tool_calls": [call], "name": None}]
    as_dumped = {
        "role": "assistant",
        "tool_calls": [{**call, "function": {"name": "add", "arguments": '{"a": 1}'}}],
    }
    with serving(echo) as url:
        one = post(url + "/evaluate", {"messages": chat})
        many = post(url + "/batch", {"samples": [{"messages": chat}, {"messages": CHAT}]})
        plain = post(url + "/evaluate", {"messages": CHAT})
    assert one.status_code == 200 and "date" in one.headers and "server" not in one.headers
    assert json.loads(one.json()["reason"])["messages"] == [CHAT[0], as_dumped]
    reasons = [json.loads(r["reason"])["messages"] for r in many.json()["results"]]
    assert reasons == [[CHAT[0], as_dumped], CHAT]
    assert json.loads(plain.json()["reason"]) == {"messages": CHAT}


def test_batch_scores_each_sample_on_its_own(url: str) -> None:
    samples = [
        {"messages": CHAT, "ground_truth": "4"},
        {"messages": CHAT, "ground_truth": "raise"},
        {"messages": CHAT, "ground_truth": "5", "kwargs": {"bonus": 0.25}},
    ]
    response = post(url + "/batch", {"samples": samples})
    assert response.status_code == 200
    results = [EvaluateResult.model_validate(r) for r in response.json()["results"]]
    assert [r.score for r in results] == [1.0, 0.0, 0.25]
    assert [r.is_score_valid for r in results] == [True, False, True]
    assert results[1].error == "ValueError: this sample makes the reward raise"
    empty = post(url + "/batch", {"samples": []})
    assert empty.status_code == 422
    assert empty.json()["detail"][0]["loc"] == ["body", "samples"]


def test_batch_runs_samples_concurrently() -> None:
    BATCH_IN_FLIGHT.update(now=0, peak=0)
    with serving(counted_sleepy) as url:
        response = post(url + "/batch", {"samples": [{"messages": CHAT}] * 20})
    assert [r["score"] for r in response.json()["results"]] == [1.0] * 20
    assert BATCH_IN_FLIGHT["peak"] == 20  # all at once, not one after the other


# --- failures ----------------------------------------------------------------------------------


def test_bad_input_gets_422_naming_the_field(url: str) -> None:
    missing = post(url + "/evaluate", {"ground_truth": "4"})
    assert missing.status_code == 422
    assert missing.json()["detail"] == [
        {"type": "missing", "loc": ["body", "messages"], "msg": "Field required",
         "input": {"ground_truth": "4"}}
    ]  # fmt: skip
    robot = post(url + "/evaluate", {"messages": [{"role": "robot", "content": "beep"}]})
    assert robot.status_code == 422
    error = robot.json()["detail"][0]
    assert error["loc"] == ["body", "messages", 0, "role"]
    assert error["msg"].startswith("Input should be 'system', 'developer', 'user'")
    in_batch = post(url + "/batch", {"samples": [{"messages": CHAT}, {"messages": "hi"}]})
    assert in_batch.json()["detail"][0]["loc"] == ["body", "samples", 1, "messages"]
    not_json = httpx.post(url + "/evaluate", content=b"{not json", headers=JSON, timeout=10)
    assert not_json.status_code == 422
    assert not_json.json()["detail"][0]["type"] == "json_invalid"


def test_a_sample_that_does_not_fit_the_reward_gets_422_with_the_message(url: str) -> None:
    response = post(url + "/evaluate", {"messages": CHAT})  # no ground_truth
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "type": "reward_input",
            "loc": ["body"],
            "msg": "reward 'exact' cannot be called with these arguments: exact() missing 1 "
            "required positional argument: 'ground_truth'. It takes: bonus, ground_truth, "
            "response.",
        }
    ]
    with serving(strict) as strict_url:
        bad_option = post(strict_url + "/batch", {"samples": [
            {"messages": CHAT}, {"messages": CHAT, "mode": "lenient"},
        ]})  # fmt: skip
    assert bad_option.status_code == 422
    assert bad_option.json()["detail"] == [
        {"type": "reward_input", "loc": ["body", "samples", 1],
         "msg": "mode must be 'exact' or 'fuzzy', got 'lenient'."}
    ]  # fmt: skip
    # The remote client gives up at once on a 4xx and shows the server's words.
    remote = RewardFunction(mode="remote", endpoint=url + "/evaluate")
    with pytest.raises(EndpointError, match=re.escape("answered 422: body: reward 'exact' cannot")):
        remote(messages=CHAT)


def test_a_raising_reward_gets_200_invalid_and_the_server_keeps_serving(url: str) -> None:
    for _ in range(3):
        response = post(url + "/evaluate", {"messages": CHAT, "ground_truth": "raise"})
        assert response.status_code == 200
        result = EvaluateResult.model_validate_json(response.content)
        assert not result.is_score_valid and result.score == 0.0
        assert result.error == "ValueError: this sample makes the reward raise"
    assert post(url + "/evaluate", {"messages": CHAT, "ground_truth": "4"}).json()["score"] == 1.0


def test_an_app_can_be_served_again() -> None:
    app = create_app(exact)
    for _ in range(2):  # the second time, its thread pool starts afresh
        with serving(app) as url:
            assert (
                post(url + "/evaluate", {"messages": CHAT, "ground_truth": "4"}).json()["score"]
                == 1.0
            )


def test_middleware_added_to_the_app_sees_every_request_and_the_key_still_applies() -> None:
    # Without added middleware the scoring endpoints answer in front of FastAPI's layers; with
    # it, every request goes through it first, scoring ones and refused ones included.
    app = create_app(exact, api_key=SECRET)
    seen: list[str] = []

    @app.middleware("http")
    async def note(request: Any, call_next: Any) -> Any:
        seen.append(request.url.path)
        response = await call_next(request)
        response.headers["x-seen"] = "yes"
        return response

    body = {"messages": CHAT, "ground_truth": "4"}
    with serving(app) as url:
        scored = post(url + "/evaluate", body, key=SECRET)
        refused = post(url + "/batch", {"samples": [body]})
        health = httpx.get(url + "/health")
        docs = httpx.get(url + "/openapi.json")
    assert (scored.json()["score"], scored.headers["x-seen"]) == (1.0, "yes")
    assert (refused.status_code, refused.headers["x-seen"]) == (401, "yes")
    assert health.headers["x-seen"] == "yes" and docs.headers["x-seen"] == "yes"
    assert seen == ["/evaluate", "/batch", "/health", "/openapi.json"]


def test_wrong_method_and_unknown_path(url: str) -> None:
    wrong = httpx.get(url + "/evaluate")
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
    assert httpx.get(url + "/nowhere").status_code == 404


# --- concurrency and timeouts --------------------------------------------------------------


@pytest.mark.parametrize("reward", [held, async_held], ids=["sync", "async"])
def test_a_slow_reward_does_not_stall_other_requests(reward: Any) -> None:
    # The slow request holds its worker thread (or awaits) until the fast ones are all answered.
    RELEASE_SLOW.clear()

    async def run() -> tuple[list[int], bool, int]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            slow = asyncio.create_task(
                client.post("/evaluate", json={"messages": CHAT, "ground_truth": "slow"})
            )
            await asyncio.sleep(0.05)
            fast = [
                (await client.post("/evaluate", json={"messages": CHAT, "ground_truth": "4"}))
                for _ in range(5)
            ]
            slow_still_running = not slow.done()
            RELEASE_SLOW.set()
            return [r.status_code for r in fast], slow_still_running, (await slow).status_code

    with serving(reward) as url:
        fast_codes, slow_still_running, slow_code = asyncio.run(run())
    assert fast_codes == [200] * 5
    assert slow_still_running  # answered one after the other while the slow one ran
    assert slow_code == 200


@pytest.mark.parametrize("reward", [held, async_held], ids=["sync", "async"])
def test_the_timeout_answers_without_waiting_for_the_reward(reward: Any) -> None:
    RELEASE_SLOW.clear()
    HELD_FINISHED.clear()
    body = {"messages": CHAT, "ground_truth": "slow"}
    try:
        with serving(reward, timeout_s=0.2) as url:
            response = post(url + "/evaluate", body)
            reward_still_running = not HELD_FINISHED.is_set()
            healthy = post(url + "/evaluate", {**body, "ground_truth": "4"})
            RELEASE_SLOW.set()
    finally:
        RELEASE_SLOW.set()
    assert reward_still_running  # answered at the timeout, not when the reward returned
    assert response.status_code == 200 and healthy.status_code == 200
    result = EvaluateResult.model_validate_json(response.content)
    assert not result.is_score_valid
    name = reward.reward_spec.name
    assert result.error == (
        f"TimeoutError: reward {name!r} did not finish within 0.2 s (the server's per-sample "
        "timeout; raise it with --timeout)"
    )


def test_the_wait_for_a_free_thread_does_not_count_against_the_timeout() -> None:
    RELEASE_SLOW.clear()

    async def run() -> tuple[EvaluateResult, EvaluateResult]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            slow = asyncio.create_task(
                client.post("/evaluate", json={"messages": CHAT, "ground_truth": "slow"})
            )
            await asyncio.sleep(0.1)  # the slow one holds the only thread
            queued = asyncio.create_task(
                client.post("/evaluate", json={"messages": CHAT, "ground_truth": "4"})
            )
            await asyncio.sleep(1.0)  # two timeouts of waiting for the thread
            RELEASE_SLOW.set()
            answers = await asyncio.gather(slow, queued)
        return tuple(EvaluateResult.model_validate_json(a.content) for a in answers)  # type: ignore[return-value]

    try:
        with serving(held, timeout_s=0.5, threads=1) as url:
            slow, queued = asyncio.run(run())
    finally:
        RELEASE_SLOW.set()
    assert not slow.is_score_valid and "did not finish within 0.5 s" in str(slow.error)
    assert queued.is_score_valid and queued.score == 1.0  # its own run was quick


def test_a_saturated_server_sheds_load_with_503_and_retry_after() -> None:
    RELEASE_SLOW.clear()
    HELD_STARTED.clear()
    box: dict[str, Any] = {}

    async def run() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = {"messages": CHAT, "ground_truth": "4"}
            holder = asyncio.create_task(
                client.post("/evaluate", json={"messages": CHAT, "ground_truth": "slow"})
            )
            await asyncio.to_thread(HELD_STARTED.wait, 30)  # the only thread is held
            waiting = asyncio.create_task(client.post("/evaluate", json=body))
            await asyncio.sleep(1.0)  # time for it to take the one place in the queue
            shed = await client.post("/evaluate", json=body)
            remote = RewardFunction(mode="remote", endpoint=url + "/evaluate")
            caller = threading.Thread(
                target=lambda: box.update(result=remote(messages=CHAT, ground_truth="4"))
            )
            caller.start()  # meets a 503, honours Retry-After, tries again
            await asyncio.sleep(0.3)
            RELEASE_SLOW.set()
            await holder
            await asyncio.to_thread(caller.join, 30)
            return shed, await waiting

    try:
        with serving(held, timeout_s=30, threads=1, max_queue=1) as url:
            shed, waited = asyncio.run(run())
    finally:
        RELEASE_SLOW.set()
    assert shed.status_code == 503 and shed.headers["retry-after"] == "1"
    assert shed.json()["detail"].startswith(
        "the reward server is saturated: 1 samples are waiting for its 1 worker threads (0 "
        "stuck), about 1."
    )
    assert waited.status_code == 200 and waited.json()["score"] == 1.0
    assert box["result"].score == 1.0  # the client honoured Retry-After and got its score


def test_a_sample_that_waits_too_long_for_a_thread_gets_503() -> None:
    # --max-wait (0.5 s here) bounds the wait for a thread, whatever the queue's length.
    RELEASE_SLOW.clear()

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            slow = asyncio.create_task(
                client.post("/evaluate", json={"messages": CHAT, "ground_truth": "slow"})
            )
            await asyncio.sleep(0.1)
            stuck = await client.post("/evaluate", json={"messages": CHAT, "ground_truth": "4"})
            RELEASE_SLOW.set()
            await slow
            return stuck

    try:
        with serving(held, timeout_s=0.2, threads=1, max_wait_s=0.5) as url:
            stuck = asyncio.run(run())
    finally:
        RELEASE_SLOW.set()
    assert stuck.status_code == 503 and stuck.headers["retry-after"] == "1"


def test_batches_beyond_max_batches_wait_their_turn() -> None:
    BATCH_IN_FLIGHT.update(now=0, peak=0)
    body = {"samples": [{"messages": CHAT}] * 5}

    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            answers = await asyncio.gather(*(client.post("/batch", json=body) for _ in range(3)))
        return [a.status_code for a in answers]

    with serving(counted_sleepy, max_batches=1) as url:
        codes = asyncio.run(run())
    assert codes == [200, 200, 200]
    assert BATCH_IN_FLIGHT["peak"] == 5  # one batch at a time


# --- auth and limits -------------------------------------------------------------------------


def test_api_key_auth() -> None:
    with serving(exact, api_key=SECRET) as url:
        body = {"messages": CHAT, "ground_truth": "4"}
        missing = post(url + "/evaluate", body)
        wrong = post(url + "/evaluate", body, key="not-the-key")
        wrong_scheme = httpx.post(
            url + "/batch", json={"samples": [body]}, headers={"Authorization": f"Basic {SECRET}"}
        )
        right = post(url + "/evaluate", body, key=SECRET)
        health = httpx.get(url + "/health")
        docs = httpx.get(url + "/openapi.json")
        remote = RewardFunction(mode="remote", endpoint=url + "/evaluate", api_key=SECRET)
        assert remote(messages=CHAT, ground_truth="4").score == 1.0
        unkeyed = RewardFunction(mode="remote", endpoint=url + "/evaluate")
        with pytest.raises(EndpointError, match="answered 401: this reward server needs") as info:
            unkeyed(messages=CHAT, ground_truth="4")
        assert not info.value.retryable
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {
        "detail": "this reward server needs an API key: send 'Authorization: Bearer <key>'."
    }
    assert wrong.status_code == 401
    assert wrong.json() == {"detail": "the API key sent is not this server's key."}
    assert wrong_scheme.status_code == 401
    assert right.status_code == 200 and right.json()["score"] == 1.0
    assert health.json() == {"status": "ok", "reward": "exact"}
    assert docs.status_code == 200
    for response in (missing, wrong, wrong_scheme, right, health, docs):
        assert SECRET not in response.text and "not-the-key" not in response.text


def test_two_authorization_headers_are_refused_whichever_comes_last() -> None:
    body = {"messages": CHAT, "ground_truth": "4"}
    with serving(exact, api_key=SECRET) as url:
        answers = [
            httpx.post(url + "/evaluate", json=body, headers=[
                ("Authorization", first), ("Authorization", second)])
            for first, second in ((f"Bearer {SECRET}", "Bearer x"),
                                  ("Bearer x", f"Bearer {SECRET}"))
        ]  # fmt: skip
    assert [a.status_code for a in answers] == [401, 401]
    assert answers[1].json() == {
        "detail": "send one 'Authorization: Bearer <key>' header, not several."
    }


@pytest.mark.parametrize("path", ["/evaluate", "/batch"])
def test_a_body_that_is_not_utf8_gets_a_400_that_says_so(path: str) -> None:
    body = b'{"messages": [{"role": "user", "content": "\xff\xfe"}], "ground_truth": "4"}'
    with serving(exact) as url:
        response = httpx.post(url + path, content=body, headers=JSON, timeout=10)
    assert response.status_code == 400  # a 4xx: the remote client does not retry it
    assert response.json() == {
        "detail": "request body is not valid UTF-8: byte 0xff at offset 43 (invalid start "
        "byte); send the JSON body encoded as UTF-8."
    }


def test_body_size_limit() -> None:
    with serving(exact, max_body_bytes=2000) as url:
        small = post(url + "/evaluate", {"messages": CHAT, "ground_truth": "4"})
        big = {"messages": [{"role": "user", "content": "x" * 3000}], "ground_truth": "4"}
        declared = post(url + "/evaluate", big)

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is checked as it streams
            data = json.dumps(big).encode()
            yield from (data[i : i + 500] for i in range(0, len(data), 500))

        streamed = httpx.post(url + "/evaluate", content=chunks(), headers=JSON, timeout=10)
        small_streamed = httpx.post(
            url + "/evaluate", content=iter([json.dumps({"messages": CHAT}).encode()]),
            headers=JSON, timeout=10,
        )  # fmt: skip
    assert small.status_code == 200
    assert declared.status_code == 413
    length = len(declared.request.content)
    assert declared.json() == {
        "detail": f"request body too large: {length} bytes, the limit is 2000 bytes "
        "(--max-body-mb). Send fewer samples per /batch request."
    }
    assert streamed.status_code == 413
    assert streamed.json()["detail"].startswith("request body too large: over 2000 bytes")
    assert small_streamed.status_code == 422  # read in full, then validated: no ground_truth


# --- binding and settings ---------------------------------------------------------------------


def test_refuses_a_public_address_without_a_key() -> None:
    message = (
        "refusing to serve on 0.0.0.0 without an API key: anyone who can reach this machine "
        "could call the reward. Set a key with --api-key or RK_AGENT_SERVER_API_KEY (clients "
        "send 'Authorization: Bearer <key>'), bind --host 127.0.0.1, or pass --allow-public "
        "(allow_public=True) if the network is trusted."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        serve_rewards(exact, host="0.0.0.0")
    with pytest.raises(ConfigError, match="refusing to serve on :: without"):
        check_bind("::", None, allow_public=False)
    with pytest.raises(
        ConfigError, match=re.escape("refusing to serve on rewards.example.com without")
    ):
        check_bind("rewards.example.com", "", allow_public=False)
    check_bind("0.0.0.0", SECRET, allow_public=False)
    check_bind("0.0.0.0", None, allow_public=True)
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
        check_bind(host, None, allow_public=False)
    assert not is_loopback("192.168.1.10")


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match=re.escape("the API key is empty")):
        create_app(exact, api_key="  ")
    with pytest.raises(ConfigError, match=re.escape("max_body_bytes must be > 0, got 0.")):
        create_app(exact, max_body_bytes=0)
    with pytest.raises(ConfigError, match=re.escape("timeout_s must be > 0 seconds")):
        create_app(exact, timeout_s=0)
    with pytest.raises(ConfigError, match=re.escape("threads must be >= 1, got 0.")):
        create_app(exact, threads=0)
    with pytest.raises(ConfigError, match="workers > 1 start separate processes"):
        serve_rewards(exact, workers=2)
    with pytest.raises(ConfigError, match=re.escape("max_wait_s must be > 0 seconds, got 0.")):
        create_app(exact, max_wait_s=0)
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "body_budget_bytes (100) must be >= max_body_bytes (200): a body of the largest size "
            "must fit."
        ),
    ):
        create_app(exact, max_body_bytes=200, body_budget_bytes=100)
    with pytest.raises(ConfigError, match=re.escape("header_timeout_s must be > 0 seconds")):
        serve_rewards(exact, header_timeout_s=-1)
    with pytest.raises(ConfigError, match=re.escape("max_connections must be >= 1, got 0.")):
        serve_rewards(exact, max_connections=0)
    with pytest.raises(UnknownNameError, match="Did you mean 'math'"):
        create_app("maht")


def test_the_reward_comes_from_a_name_a_path_or_a_config(tmp_path: Path) -> None:
    assert load_served_reward("format", None).reward_spec.name == "format"
    (tmp_path / "rewards.py").write_text("def shout(response):\n    return response.isupper()\n")
    assert load_served_reward(f"{tmp_path}/rewards.py::shout", None).reward_spec.name == "shout"
    config = tmp_path / "reward.yaml"
    config.write_text("reward: {name: format, kwargs: {tags: [answer]}}\n")
    served = load_served_reward(None, config)
    answer = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<answer>1</answer>"},
    ]
    assert served(messages=answer).score == 1.0
    with pytest.raises(ConfigError, match=re.escape("give the reward to serve")):
        load_served_reward(None, None)
    with pytest.raises(ConfigError, match=re.escape("not both")):
        load_served_reward("format", config)


def test_openapi_docs_describe_the_endpoints(url: str) -> None:
    schema = httpx.get(url + "/openapi.json").json()
    assert sorted(schema["paths"]) == ["/batch", "/evaluate", "/health", "/reward"]
    request = schema["paths"]["/evaluate"]["post"]["requestBody"]["content"]["application/json"]
    assert request["schema"] == {"$ref": "#/components/schemas/EvaluateRequest"}
    assert "messages" in schema["components"]["schemas"]["EvaluateRequest"]["required"]
    assert (
        schema["info"]["description"]
        == "1.0 when the reply equals the ground truth (plus a bonus)."
    )
    docs = httpx.get(url + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_misuse_errors_stay_typed_in_process() -> None:
    # The same sample called locally raises the error the server turns into a 422.
    with pytest.raises(RewardInputError, match="cannot be called with these arguments"):
        exact(messages=CHAT)


# --- hung rewards, shedding by time, 422 echoes (issue 25) --------------------------------------


def test_health_reports_stuck_threads_and_turns_unhealthy_when_none_can_score() -> None:
    RELEASE_SLOW.clear()
    slow = {"messages": CHAT, "ground_truth": "slow"}
    try:
        with serving(held, timeout_s=0.2, threads=2) as url:
            healthy = httpx.get(url + "/health")
            first = post(url + "/evaluate", slow)  # answered at the timeout; its thread hangs
            one_stuck = httpx.get(url + "/health")
            post(url + "/evaluate", slow)
            all_stuck = httpx.get(url + "/health")
            refused = post(url + "/evaluate", {**slow, "ground_truth": "4"})
            RELEASE_SLOW.set()
            for _ in range(100):  # the threads return and the server recovers
                if (recovered := httpx.get(url + "/health")).status_code == 200:
                    break
                threading.Event().wait(0.05)
            scored = post(url + "/evaluate", {**slow, "ground_truth": "4"})
    finally:
        RELEASE_SLOW.set()
    assert healthy.json() == {"status": "ok", "reward": "held"}
    assert first.json()["error"].startswith("TimeoutError: reward 'held' did not finish")
    assert one_stuck.status_code == 200
    assert one_stuck.json() == {
        "status": "degraded", "reward": "held", "threads": 2, "stuck": 1, "queued": 0,
        "detail": "1 of 2 worker threads are stuck in reward 'held' (running past 0.2 s; a "
        "thread cannot be stopped)",
    }  # fmt: skip
    assert all_stuck.status_code == 503  # an orchestrator's health check restarts it
    assert all_stuck.json()["status"] == "unhealthy"
    assert all_stuck.json()["detail"] == (
        "2 of 2 worker threads are stuck in reward 'held' (running past 0.2 s; a thread cannot "
        "be stopped): no sample can be scored; restart the server"
    )
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "(2 stuck)" in refused.json()["detail"]
    assert recovered.json() == {"status": "ok", "reward": "held"}
    assert scored.json()["score"] == 1.0


@reward_function
def napping(response: str, ground_truth: str) -> float:
    """Sleeps ``ground_truth`` seconds; ``"slow"`` blocks until the test releases it."""
    if ground_truth == "slow":
        RELEASE_SLOW.wait(timeout=30)
    else:
        threading.Event().wait(float(ground_truth))
    return 1.0


def test_a_stuck_thread_does_not_make_the_server_refuse_work_its_free_threads_can_do() -> None:
    # Issue 38: the stuck thread's age counted in the expected wait, so once it was a few
    # seconds old a sample the free threads could soon take got 503, and more so as it aged.
    RELEASE_SLOW.clear()
    sample = {"messages": CHAT, "ground_truth": "0.3"}

    async def burst(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            first = [asyncio.create_task(client.post("/evaluate", json=sample)) for _ in range(3)]
            await asyncio.sleep(0.1)  # the three free threads are busy: the next one waits
            last = await client.post("/evaluate", json=sample)
            return [*(await asyncio.gather(*first)), last]

    try:
        with serving(napping, timeout_s=0.8, threads=4, max_wait_s=1.0) as url:
            assert post(url + "/evaluate", sample).json()["score"] == 1.0  # 0.3 s a call
            post(url + "/evaluate", {**sample, "ground_truth": "slow"})  # its thread hangs
            threading.Event().wait(3.0)  # the stuck call is ~4 s old, 4 times --max-wait
            health = httpx.get(url + "/health").json()
            answers = asyncio.run(burst(url))  # the last waits ~0.2 s for a thread
    finally:
        RELEASE_SLOW.set()
    assert (health["status"], health["stuck"]) == ("degraded", 1)
    assert [a.status_code for a in answers] == [200] * 4
    assert [a.json()["score"] for a in answers] == [1.0] * 4


def test_the_defaults_shed_nothing_a_trivial_reward_serves_at_256_connections() -> None:
    body = json.dumps({"messages": CHAT, "ground_truth": "4"}).encode()

    async def client(port: int) -> list[int]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        codes = []
        for _ in range(2):  # two requests on one kept-alive connection
            writer.write(
                b"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", head, re.I)[1])  # type: ignore[index]
            await reader.readexactly(length)
            codes.append(int(head[9:12]))
        writer.close()
        return codes

    async def run(port: int) -> list[int]:
        answers = await asyncio.gather(*(client(port) for _ in range(256)))
        return [code for codes in answers for code in codes]

    with serving(exact, threads=1) as url:  # one thread: up to 255 samples wait for it
        codes = asyncio.run(run(int(url.rsplit(":", 1)[1])))
    assert codes == [200] * 512


def test_a_422_echoes_at_most_a_little_of_the_input(url: str) -> None:
    huge = "x" * 100_000
    response = post(url + "/evaluate", {"messages": huge, "ground_truth": "4"})
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"type": "list_type", "loc": ["body", "messages"], "msg": "Input should be a valid array",
         "input": "x" * 200 + "... (100000 characters)"}
    ]  # fmt: skip
    many = post(url + "/batch", {"samples": [{"messages": ["x" * 300]}] * 500})
    assert many.status_code == 422
    assert len(many.json()["detail"]) == 20 and len(many.content) < 10_000
    small = post(url + "/evaluate", {"ground_truth": "4"})
    assert small.json()["detail"][0]["input"] == {"ground_truth": "4"}  # short: as it came
