"""Datasets against the fake API: exact bodies, both upload flows, polling until READY."""

from __future__ import annotations

import json
import re

import pytest

from rk_agent.errors import FireworksError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.datasets import (
    dataset_jsonl,
    delete_dataset,
    get_dataset,
    upload_dataset,
    wait_for_dataset,
)
from rk_agent.testing.fake_fireworks import FakeFireworks

ROWS = [
    {"messages": [{"role": "user", "content": "What is 15 * 23?"}], "ground_truth": "345"},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "2+2?"}], "ground_truth": "4"},
]  # fmt: skip
DATA = dataset_jsonl(ROWS)


def test_jsonl_is_one_compact_object_per_line() -> None:
    lines = DATA.decode().splitlines()
    assert [json.loads(line) for line in lines] == ROWS
    assert lines[0].startswith('{"messages":[{"role":"user"')


def test_small_file_flow(fake: FakeFireworks, client: FireworksClient) -> None:
    dataset = upload_dataset(client, "math-set", ROWS, display_name="Math", poll_s=0.01)
    assert (dataset.name, dataset.state, dataset.example_count) == (
        "accounts/acme/datasets/math-set", "READY", 2,
    )  # fmt: skip
    assert fake.calls() == [
        "GET /v1/accounts/acme/datasets/math-set",
        "POST /v1/accounts/acme/datasets",
        "POST /v1/accounts/acme/datasets/math-set:upload",
        "GET /v1/accounts/acme/datasets/math-set",  # UPLOADING
        "GET /v1/accounts/acme/datasets/math-set",  # READY
    ]
    create, upload = fake.requests[1], fake.requests[2]
    assert create.json == {
        "datasetId": "math-set",
        "dataset": {"displayName": "Math", "exampleCount": "2", "format": "FORMAT_UNSPECIFIED",
                    "evalProtocol": {}},
    }  # fmt: skip
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert upload.form == {"file": ("dataset.jsonl", DATA)}
    assert fake.files["datasets/math-set"] == DATA


def test_large_file_flow_through_a_signed_url(fake: FakeFireworks, client: FireworksClient) -> None:
    upload_dataset(client, "big", DATA, small_limit=10, poll_s=0.01)
    assert fake.calls()[1:6] == [
        "POST /v1/accounts/acme/datasets",
        "POST /v1/accounts/acme/datasets/big:getUploadEndpoint",
        "PUT /_signed/…",
        "POST /v1/accounts/acme/datasets/big:validateUpload",
        "GET /v1/accounts/acme/datasets/big",
    ]
    endpoint, put, validate = fake.requests[2], fake.requests[3], fake.requests[4]
    assert endpoint.json == {"filenameToSize": {"dataset.jsonl": str(len(DATA))}}
    assert put.body == DATA and "authorization" not in put.headers
    assert put.headers["x-goog-content-length-range"] == f"{len(DATA)},{len(DATA)}"
    assert validate.json == {} and validate.headers["authorization"].startswith("Bearer ")
    assert fake.files["datasets/big"] == DATA


def test_a_ready_dataset_of_that_id_is_reused(fake: FakeFireworks, client: FireworksClient) -> None:
    upload_dataset(client, "same", ROWS, poll_s=0.01)
    before = len(fake.requests)
    assert upload_dataset(client, "same", ROWS, poll_s=0.01).state == "READY"
    assert fake.calls()[before:] == ["GET /v1/accounts/acme/datasets/same"]
    with pytest.raises(FireworksError, match=re.escape("dataset 'same' already exists (state")):
        upload_dataset(client, "same", ROWS, reuse=False)


def test_a_file_the_service_rejects(fake: FakeFireworks, client: FireworksClient) -> None:
    with pytest.raises(FireworksError) as caught:
        upload_dataset(client, "bad", b'{"prompt": "no messages"}\n')
    assert str(caught.value) == (
        "Fireworks API POST /v1/accounts/acme/datasets/bad:upload: HTTP 400: invalid dataset "
        "file: line 1: expected a non-empty 'messages' list"
    )


def test_waiting_gives_up_with_the_state(fake: FakeFireworks, client: FireworksClient) -> None:
    client.request("POST", client.account_path("datasets"), json={
        "datasetId": "stuck", "dataset": {}})  # fmt: skip
    message = "dataset 'stuck' is still UPLOADING after 0.05s."
    with pytest.raises(FireworksError, match=re.escape(message)):
        wait_for_dataset(client, "stuck", poll_s=0.01, timeout_s=0.05)


def test_get_and_delete(fake: FakeFireworks, client: FireworksClient) -> None:
    assert get_dataset(client, "none") is None
    upload_dataset(client, "gone", ROWS, poll_s=0.01)
    delete_dataset(client, "gone")
    delete_dataset(client, "gone")  # already gone: nothing happens
    assert get_dataset(client, "gone") is None and "gone" not in fake.datasets


def test_a_create_whose_reply_was_lost_is_not_repeated(
    fake: FakeFireworks, client: FireworksClient
) -> None:
    fake.fail_next(503, "reply lost", method="POST", path="/datasets", lost_reply=True)
    assert upload_dataset(client, "lost", ROWS, poll_s=0.01).state == "READY"
    assert fake.calls()[1:4] == [
        "POST /v1/accounts/acme/datasets",  # created; the 503 hides it
        "POST /v1/accounts/acme/datasets",  # 409: it exists, so go on
        "POST /v1/accounts/acme/datasets/lost:upload",
    ]
    assert len(fake.datasets) == 1
