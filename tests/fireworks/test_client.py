"""The client over real HTTP to the fake API: headers, retries, typed errors, dry runs."""

from __future__ import annotations

import logging
import random
import re
import socket
from typing import Any

import pytest

from rk_agent import __version__
from rk_agent.errors import ConfigError, EndpointError, FireworksError
from rk_agent.fireworks.auth import Credentials
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.dry_run import PlannedRequest
from rk_agent.retry import FIREWORKS_API_RETRY
from rk_agent.testing.fake_fireworks import FakeFireworks
from tests.fireworks.conftest import ACCOUNT, SECRET


def make(fake: FakeFireworks, key: str = SECRET, account: str | None = ACCOUNT,
         **options: Any) -> FireworksClient:  # fmt: skip
    options = {"backoff_s": 0.001, "backoff_max_s": 0.05, **options}
    return FireworksClient(Credentials(key, account, fake.url, "FIREWORKS_API_KEY"), **options)


def test_every_api_call_sends_these_headers(fake: FakeFireworks, client: FireworksClient) -> None:
    client.request("POST", client.account_path("datasets"), json={
        "datasetId": "d", "dataset": {"exampleCount": "1"}})  # fmt: skip
    [request] = fake.requests
    assert (request.method, request.path) == ("POST", "/v1/accounts/acme/datasets")
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "application/json"
    assert request.headers["user-agent"] == f"rk-agent/{__version__}"
    assert request.json == {"datasetId": "d", "dataset": {"exampleCount": "1"}}


def test_the_account_is_looked_up_from_the_key(fake: FakeFireworks) -> None:
    with make(fake, account=None) as client:
        assert client.account_id == ACCOUNT
        assert client.account_id == ACCOUNT  # asked once
    assert fake.calls() == ["GET /verifyApiKey"]
    assert fake.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_429_is_retried_honouring_retry_after(fake: FakeFireworks) -> None:
    fake.fail_next(429, "rate limited: slow down", times=2, retry_after="0.2")
    waits: list[float] = []  # the policy's sleep records the waits instead of sleeping
    with make(fake, retry=FIREWORKS_API_RETRY.replace(sleep=waits.append)) as client:
        assert client.request("GET", client.account_path("datasets/none"), allow_404=True) is None
    assert len(fake.requests) == 3
    assert waits == [0.2, 0.2]  # two waits of Retry-After 0.2 s


def test_the_backoff_is_equal_jitter_under_a_doubling_ceiling(fake: FakeFireworks) -> None:
    fake.fail_next(503, "busy", times=3)
    waits: list[float] = []
    with make(fake, backoff_s=1.0, backoff_max_s=3.0) as client:
        assert client.retry == FIREWORKS_API_RETRY.replace(base_s=1.0, max_s=3.0)
        client.retry = client.retry.replace(sleep=waits.append, rng=random.Random(5))
        assert client.request("GET", client.account_path("datasets/x"), allow_404=True) is None
    assert len(waits) == 3
    for wait, ceiling in zip(waits, [1.0, 2.0, 3.0], strict=True):
        assert ceiling / 2 <= wait <= ceiling


def test_409_already_exists_is_not_retried(fake: FakeFireworks) -> None:
    fake.fail_next(409, "dataset already exists", times=2)
    with make(fake) as client, pytest.raises(FireworksError) as caught:
        client.request("POST", client.account_path("datasets"), json={"datasetId": "d"})
    assert not caught.value.retryable and caught.value.attempts == 1
    assert len(fake.requests) == 1


def test_5xx_gives_up_with_the_api_message(fake: FakeFireworks) -> None:
    fake.fail_next(503, "backend unavailable", times=10)
    with make(fake, max_retries=2) as client, pytest.raises(FireworksError) as caught:
        client.request("GET", client.account_path("datasets/x"))
    error = caught.value
    assert str(error) == (
        "Fireworks API GET /v1/accounts/acme/datasets/x: HTTP 503: backend unavailable "
        "(gave up after 3 attempts)"
    )
    assert (error.status, error.retryable, error.api_message) == (503, True, "backend unavailable")
    assert error.attempts == 3
    assert error.url == f"{fake.url}/v1/accounts/acme/datasets/x"
    assert isinstance(error, EndpointError) and len(fake.requests) == 3


def test_401_carries_the_api_message_and_never_the_key(fake: FakeFireworks) -> None:
    wrong = "fw-WRONG-key-987654321"
    with make(fake, key=wrong) as client, pytest.raises(FireworksError) as caught:
        client.request("GET", client.account_path("datasets/x"))
    message = (
        "Fireworks API GET /v1/accounts/acme/datasets/x: HTTP 401: unauthenticated: invalid "
        "API key (check the API key; it came from FIREWORKS_API_KEY, and the account acme)"
    )
    assert str(caught.value) == message
    assert caught.value.status == 401 and not caught.value.retryable
    assert len(fake.requests) == 1  # not retried
    assert wrong not in repr(caught.value.__dict__)


def test_an_api_message_that_echoes_the_key_is_redacted(fake: FakeFireworks) -> None:
    fake.fail_next(400, f"bad request from key {SECRET}")
    with make(fake) as client, pytest.raises(FireworksError) as caught:
        client.request("GET", client.account_path("datasets/x"))
    assert SECRET not in str(caught.value) and "from key ***" in str(caught.value)


def test_a_server_that_is_not_there_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    creds = Credentials(SECRET, ACCOUNT, f"http://127.0.0.1:{port}", "argument")
    client = FireworksClient(creds, max_retries=1, backoff_s=0.001)
    with client, pytest.raises(FireworksError, match=re.escape("could not connect to")) as caught:
        client.request("GET", "/v1/accounts/acme/datasets")
    assert caught.value.retryable and caught.value.status is None
    assert "(gave up after 2 attempts)" in str(caught.value)


def test_a_missing_key_fails_before_any_request(fake: FakeFireworks) -> None:
    with pytest.raises(ConfigError, match=re.escape("no Fireworks API key")):
        FireworksClient(Credentials(None, ACCOUNT, fake.url))
    assert fake.requests == []


def test_signed_urls_get_no_authorization(fake: FakeFireworks, client: FireworksClient) -> None:
    client.request("POST", client.account_path("datasets"), json={
        "datasetId": "d", "dataset": {}})  # fmt: skip
    answer = client.request("POST", client.account_path("datasets/d:getUploadEndpoint"),
                            json={"filenameToSize": {"f.jsonl": "3"}})  # fmt: skip
    url = answer["filenameToSignedUrls"]["f.jsonl"]  # type: ignore[index]
    client.put_signed(url, b"abc", filename="f.jsonl")
    put = fake.requests[-1]
    assert put.method == "PUT" and "authorization" not in put.headers
    assert put.headers["x-goog-content-length-range"] == "3,3"
    assert put.headers["content-type"] == "application/octet-stream"


def test_logs_never_hold_the_key(
    fake: FakeFireworks, client: FireworksClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_next(503, "try again")
    with caplog.at_level(logging.DEBUG, logger="rk_agent.fireworks"):
        client.request("GET", client.account_path("datasets/x"), allow_404=True)
    assert caplog.records and SECRET not in caplog.text


def test_repr_hides_the_key(client: FireworksClient) -> None:
    assert SECRET not in repr(client) and SECRET not in repr(client.credentials)


def test_a_dry_run_sends_nothing_and_redacts(fake: FakeFireworks) -> None:
    shown: list[PlannedRequest] = []
    creds = Credentials(SECRET, None, fake.url, "argument")
    with FireworksClient(creds, dry_run=True, on_request=shown.append) as client:
        body = {"wandbConfig": {"apiKey": "wandb-SECRET", "project": "p"}, "note": SECRET}
        created = client.request("POST", client.account_path("things"), json=body)
        assert client.request("GET", client.account_path("things/x"), allow_404=True) is None
    assert fake.requests == []
    assert created == {"name": "accounts/ACCOUNT_ID/things", "state": ""}
    assert shown[0].describe().splitlines()[0] == (
        f"GET {fake.url}/verifyApiKey    # the account, from the x-fireworks-account-id header "
        "(ACCOUNT_ID below)"
    )
    shown.pop(0)
    text = "\n".join(p.describe() for p in shown)
    assert SECRET not in text and "wandb-SECRET" not in text
    assert shown[0].json == {"wandbConfig": {"apiKey": "***", "project": "p"}, "note": "***"}
    assert shown[0].describe().splitlines()[:2] == [
        f"POST {fake.url}/v1/accounts/ACCOUNT_ID/things", "Authorization: Bearer ***",
    ]  # fmt: skip


def test_fireworks_errors_pickle_with_their_attributes() -> None:
    import pickle

    error = FireworksError(
        "build failed", status=None, url="http://x", api_message="pip failed", logs="log tail"
    )
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is FireworksError and str(again) == "build failed"
    assert again.__dict__ == error.__dict__
    assert isinstance(again, EndpointError) and isinstance(again, ConnectionError)
