"""Fireworks datasets: create one, upload its JSONL file, wait until it is READY.

Main names: `Dataset`, `upload_dataset`, `create_dataset`, `get_dataset`, `upload_dataset_file`,
`wait_for_dataset`, `delete_dataset`, `dataset_jsonl`.

The flow (documented contract, see the page "Fireworks" in the docs):

1. ``POST /v1/accounts/{a}/datasets`` with ``{"datasetId", "dataset": {"displayName",
   "exampleCount": "<n>", "format": "FORMAT_UNSPECIFIED", "evalProtocol": {}}}`` (int64 values
   are JSON strings).
2. Small files (up to 150 MB): ``POST …/datasets/{id}:upload``, multipart field ``file``.
   Larger files: ``POST …:getUploadEndpoint`` with ``{"filenameToSize": {"name": "<bytes>"}}``,
   ``PUT`` the bytes to the signed URL it returns, then ``POST …:validateUpload`` with ``{}``.
3. ``GET …/datasets/{id}`` until ``state`` is ``READY``.

Example:
    >>> from rk_agent.fireworks.client import FireworksClient
    >>> client = FireworksClient.dry(account_id="me")
    >>> rows = [{"messages": [{"role": "user", "content": "2+2?"}], "ground_truth": "4"}]
    >>> upload_dataset(client, "tiny", rows).state
    'READY'
    >>> [f"{r.method} {r.url.split('/me/')[1]}" for r in client.planned]
    ['GET datasets/tiny', 'POST datasets', 'POST datasets/tiny:upload', 'GET datasets/tiny']
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rk_agent.errors import FireworksError
from rk_agent.fireworks.client import ApiModel, FireworksClient

__all__ = [
    "SMALL_UPLOAD_LIMIT",
    "ApiStatus",
    "Dataset",
    "create_dataset",
    "dataset_jsonl",
    "delete_dataset",
    "get_dataset",
    "upload_dataset",
    "upload_dataset_file",
    "wait_for_dataset",
]

SMALL_UPLOAD_LIMIT = 150 * 1024 * 1024
"""Files up to this size go through ``:upload``; larger ones through a signed URL."""

DATASET_FILENAME = "dataset.jsonl"


class ApiStatus(ApiModel):
    """The ``status`` of a resource: a gRPC code and a message."""

    code: str | int | None = None
    message: str | None = None


class Dataset(ApiModel):
    """A dataset as the API returns it.

    Attributes:
        name: ``accounts/{account}/datasets/{id}``.
        state: ``UPLOADING``, ``READY`` or ``STATE_UNSPECIFIED``.
        display_name: the human-readable name.
        example_count: rows in the file (sent and returned as a string).
        status: the API's status, when it has something to say.
    """

    name: str = ""
    state: str = "STATE_UNSPECIFIED"
    display_name: str | None = None
    example_count: int | None = None
    status: ApiStatus | None = None

    @property
    def id(self) -> str:
        """The last part of the name."""
        return self.name.rsplit("/", 1)[-1]


def dataset_jsonl(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """The rows as JSONL bytes (one compact JSON object per line, UTF-8)."""
    return b"".join(
        json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        for row in rows
    )


def get_dataset(client: FireworksClient, dataset_id: str) -> Dataset | None:
    """The dataset, or ``None`` when there is none of that id."""
    body = client.request("GET", client.account_path(f"datasets/{dataset_id}"), allow_404=True)
    return None if body is None else Dataset.model_validate(body)


def create_dataset(
    client: FireworksClient,
    dataset_id: str,
    *,
    example_count: int,
    display_name: str | None = None,
) -> Dataset:
    """Create the dataset record (before its file is uploaded).

    Raises:
        FireworksError: the API refused (e.g. 409: the id is taken).
    """
    body = {
        "datasetId": dataset_id,
        "dataset": {
            "displayName": display_name or dataset_id,
            "exampleCount": str(example_count),
            "format": "FORMAT_UNSPECIFIED",
            "evalProtocol": {},
        },
    }
    answer = client.request("POST", client.account_path("datasets"), json=body)
    return Dataset.model_validate(answer or {})


def delete_dataset(client: FireworksClient, dataset_id: str) -> None:
    """Delete the dataset (nothing happens when it does not exist)."""
    client.request("DELETE", client.account_path(f"datasets/{dataset_id}"), allow_404=True)


def upload_dataset_file(
    client: FireworksClient,
    dataset_id: str,
    data: bytes,
    *,
    filename: str = DATASET_FILENAME,
    small_limit: int = SMALL_UPLOAD_LIMIT,
) -> None:
    """Upload the dataset's file: ``:upload`` when small, the signed-URL flow when large.

    Args:
        client: the API client.
        dataset_id: a dataset created with `create_dataset`.
        data: the file's bytes (JSONL).
        filename: the file's name on the service.
        small_limit: the largest file sent through ``:upload``.

    Raises:
        FireworksError: a step failed.
    """
    base = client.account_path(f"datasets/{dataset_id}")
    if len(data) <= small_limit:
        client.request(
            "POST", f"{base}:upload", files={"file": (filename, data, "application/jsonl")}
        )
        return
    answer = client.request(
        "POST", f"{base}:getUploadEndpoint", json={"filenameToSize": {filename: str(len(data))}}
    )
    url = ((answer or {}).get("filenameToSignedUrls") or {}).get(filename)
    if not url:
        raise FireworksError(
            f"Fireworks API POST {base}:getUploadEndpoint returned no upload URL for "
            f"{filename!r} (got: {sorted((answer or {}).get('filenameToSignedUrls') or {})})."
        )
    client.put_signed(url, data, filename=filename)
    client.request("POST", f"{base}:validateUpload", json={})


def wait_for_dataset(
    client: FireworksClient,
    dataset_id: str,
    *,
    poll_s: float = 2.0,
    timeout_s: float = 600.0,
    on_update: Callable[[Dataset], None] | None = None,
) -> Dataset:
    """Poll until the dataset is ``READY``.

    Raises:
        FireworksError: the dataset disappeared, or is not ready within ``timeout_s``.
    """
    path = client.account_path(f"datasets/{dataset_id}")
    deadline = time.monotonic() + timeout_s
    while True:
        dataset = Dataset.model_validate(
            client.request("GET", path, note="repeated until state is READY") or {}
        )
        if on_update is not None:
            on_update(dataset)
        if dataset.state == "READY" or client.dry_run:
            return dataset
        if time.monotonic() >= deadline:
            detail = (
                f": {dataset.status.message}" if dataset.status and dataset.status.message else ""
            )
            raise FireworksError(
                f"dataset {dataset_id!r} is still {dataset.state} after {timeout_s:g}s{detail}. "
                "Check it in the Fireworks console, or wait longer (timeout_s).",
                url=f"{client.api_base}{path}",
            )
        time.sleep(poll_s)


def upload_dataset(
    client: FireworksClient,
    dataset_id: str,
    rows: Iterable[Mapping[str, Any]] | bytes,
    *,
    display_name: str | None = None,
    reuse: bool = True,
    small_limit: int = SMALL_UPLOAD_LIMIT,
    poll_s: float = 2.0,
    timeout_s: float = 600.0,
) -> Dataset:
    """Create a dataset from rows (or JSONL bytes), upload it and wait until it is READY.

    Args:
        client: the API client.
        dataset_id: the id (lowercase letters, digits, hyphens).
        rows: the rows, or the JSONL file's bytes.
        display_name: the human-readable name (default: the id).
        reuse: when a READY dataset of this id exists, use it as it is (ids made from a hash
            of the content, as `rk_agent.fireworks.launch` makes them, stay correct).
        small_limit: the largest file sent through ``:upload``.
        poll_s: seconds between polls.
        timeout_s: how long to wait for READY.

    Raises:
        FireworksError: a step failed, or a dataset of this id exists and ``reuse`` is off.
    """
    data = rows if isinstance(rows, bytes) else dataset_jsonl(rows)
    existing = get_dataset(client, dataset_id)
    if existing is not None:
        if reuse and existing.state == "READY":
            return existing
        raise FireworksError(
            f"dataset {dataset_id!r} already exists (state {existing.state}). Choose another "
            "id, or delete it first (delete_dataset).",
            status=409,
        )
    count = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    try:
        create_dataset(client, dataset_id, example_count=count, display_name=display_name)
    except FireworksError as exc:
        # Absent a moment ago: a create whose reply was lost, then retried. Carry on.
        if exc.status != 409 or exc.attempts < 2:
            raise
    upload_dataset_file(client, dataset_id, data, small_limit=small_limit)
    return wait_for_dataset(client, dataset_id, poll_s=poll_s, timeout_s=timeout_s)
