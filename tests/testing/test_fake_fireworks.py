"""The fake Fireworks API holds clients to the documented contract; the docstring examples run."""

from __future__ import annotations

import doctest
from collections.abc import Iterator

import httpx
import pytest

from rk_agent.testing import fake_fireworks
from rk_agent.testing.fake_fireworks import FakeFireworks
from tests.fireworks.conftest import ACCOUNT, SECRET

AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def fake() -> Iterator[FakeFireworks]:
    with FakeFireworks(api_key=SECRET, account_id=ACCOUNT) as server:
        yield server


def post(fake: FakeFireworks, path: str, body: object) -> httpx.Response:
    return httpx.post(f"{fake.url}/v1/accounts/acme/{path}", json=body, headers=AUTH)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"dataset_id": "d", "dataset": {}},
         "invalid JSON: unknown field 'dataset_id' in CreateDatasetRequest (fields are camelCase)"),
        ({"datasetId": "d", "dataset": {"exampleCount": 3}},
         "invalid value for int64 field exampleCount: 3 (send int64 as a JSON string)"),
        ({"datasetId": "d"}, "missing required field: dataset"),
    ],
)  # fmt: skip
def test_dataset_bodies_are_checked(fake: FakeFireworks, body: object, message: str) -> None:
    answer = post(fake, "datasets", body)
    assert answer.status_code == 400
    assert answer.json() == {"code": 3, "message": message, "details": []}


def test_signed_uploads_are_checked(fake: FakeFireworks) -> None:
    post(fake, "datasets", {"datasetId": "d", "dataset": {}})
    assert post(fake, "datasets/d:validateUpload", {}).json()["message"] == (
        "failed precondition: no file was uploaded for datasets/d"
    )
    sizes = {"filenameToSize": {"f.jsonl": 4}}
    assert post(fake, "datasets/d:getUploadEndpoint", sizes).json()["message"] == (
        "invalid value for int64 field filenameToSize['f.jsonl']: 4 (send int64 as a JSON string)"
    )
    url = post(fake, "datasets/d:getUploadEndpoint", {"filenameToSize": {"f.jsonl": "4"}}).json()[
        "filenameToSignedUrls"
    ]["f.jsonl"]
    good = {"Content-Type": "application/octet-stream", "X-Goog-Content-Length-Range": "4,4"}
    assert httpx.put(url, content=b"abcd", headers={**good, **AUTH}).status_code == 400
    assert httpx.put(url, content=b"abc", headers=good).text == "expected 4 bytes, got 3"
    range_ = {**good, "X-Goog-Content-Length-Range": "0,4"}
    assert httpx.put(url, content=b"abcd", headers=range_).status_code == 400
    assert httpx.put(url.replace("/_signed/", "/_signed/0"), content=b"abcd",
                     headers=good).status_code == 403  # fmt: skip


def test_requests_need_the_key_and_the_account(fake: FakeFireworks) -> None:
    answer = httpx.get(f"{fake.url}/v1/accounts/acme/datasets/d")
    assert answer.status_code == 401 and answer.json()["code"] == 16
    other = httpx.get(f"{fake.url}/v1/accounts/other/datasets/d", headers=AUTH)
    assert other.status_code == 403
    assert httpx.get(f"{fake.url}/verifyApiKey").status_code == 401


def test_job_bodies_are_checked(fake: FakeFireworks) -> None:
    body = {"dataset": "accounts/acme/datasets/d", "evaluator": "accounts/acme/evaluators/e",
            "trainingConfig": {"base_model": "m"}}  # fmt: skip
    assert post(fake, "reinforcementFineTuningJobs", body).json()["message"] == (
        "invalid JSON: unknown field 'base_model' in trainingConfig (fields are camelCase)"
    )
    body["trainingConfig"] = {"baseModel": "m", "warmStartFrom": "w"}
    assert post(fake, "reinforcementFineTuningJobs", body).json()["message"] == (
        "trainingConfig: exactly one of baseModel and warmStartFrom"
    )
    body["trainingConfig"] = {"baseModel": "m"}
    assert post(fake, "reinforcementFineTuningJobs", body).status_code == 404  # no dataset


def test_injected_faults_match_method_and_path(fake: FakeFireworks) -> None:
    fake.fail_next(500, "boom", method="POST", path="datasets", times=1)
    assert httpx.get(f"{fake.url}/verifyApiKey", headers=AUTH).status_code == 200
    assert post(fake, "datasets", {"datasetId": "d", "dataset": {}}).json()["message"] == "boom"
    assert post(fake, "datasets", {"datasetId": "d", "dataset": {}}).status_code == 200


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(fake_fireworks)
    assert tried > 0 and failures == 0
