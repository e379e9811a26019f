"""Dry runs: requests planned instead of sent, shown with their secrets redacted.

Main names: `PlannedRequest`, `dry_response`, `strip_query`.

A dry-run `rk_agent.fireworks.client.FireworksClient` records each request as a
`PlannedRequest` and answers it with `dry_response`: nothing exists yet (a lookup finds
nothing, so the whole flow is shown), creations succeed, and a poll finds its resource ready at
once. Values of secret-looking fields (``apiKey``, ``token``, ``password``, ...) and the API key
itself are replaced by ``***`` (`rk_agent.secrets.redact`) before anything is stored or shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rk_agent.secrets import REDACTED

__all__ = [
    "DRY_ACCOUNT",
    "DRY_SIGNED_URL",
    "REDACTED",
    "PlannedRequest",
    "dry_response",
    "strip_query",
]

DRY_ACCOUNT = "ACCOUNT_ID"
"""The account shown in a dry run when none is configured (a real run looks it up)."""
DRY_SIGNED_URL = "<signed URL returned by :getUploadEndpoint>"


@dataclass(frozen=True)
class PlannedRequest:
    """One request as a dry run would send it (secrets already redacted).

    Attributes:
        method: ``GET``, ``POST``, ``PUT``, ``DELETE``.
        url: the full URL.
        json: the JSON body, if any.
        content: what else the body is (a multipart file, raw bytes), described in words.
        headers: headers that matter besides ``Authorization`` (``Bearer ***`` on API calls).
        note: why the request is there (``"repeated until state is READY"``).
    """

    method: str
    url: str
    json: Any = None
    content: str | None = None
    headers: Mapping[str, str] | None = None
    note: str | None = None

    def describe(self, max_chars: int | None = None) -> str:
        """The request as text: ``METHOD URL``, then its headers and body.

        Args:
            max_chars: shorten string values longer than this (file contents) to their start
                and length.
        """
        lines = [f"{self.method} {self.url}" + (f"    # {self.note}" if self.note else "")]
        lines += [f"{k}: {v}" for k, v in (self.headers or {}).items()]
        if self.content is not None:
            lines.append(self.content)
        if self.json is not None:
            body = self.json if max_chars is None else _shorten(self.json, max_chars)
            lines.append(json.dumps(body, indent=2, ensure_ascii=False))
        return "\n".join(lines)


def _shorten(value: Any, limit: int) -> Any:
    if isinstance(value, Mapping):
        return {k: _shorten(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, limit) for v in value]
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:60]}... ({len(value):,} characters)"
    return value


# A dry run's answers: created resources are still being prepared, and a poll finds them done.
_DRY_CREATED = {
    "datasets": "UPLOADING", "evaluators": "BUILDING",
    "reinforcementFineTuningJobs": "JOB_STATE_CREATING",
}  # fmt: skip
_DRY_FINISHED = {
    "datasets": "READY", "evaluators": "ACTIVE",
    "reinforcementFineTuningJobs": "JOB_STATE_CREATING",
}  # fmt: skip


def dry_response(
    method: str, path: str, body: Any, query: Mapping[str, Any], allow_404: bool
) -> dict[str, Any] | None:
    """A placeholder answer: nothing exists yet, creations succeed, waits end at once."""
    if method == "GET" and allow_404:
        return None
    resource, _, verb = path.partition(":")
    name = resource.removeprefix("/v1/").replace("/evaluatorsV2", "/evaluators")
    if verb == "getUploadEndpoint":
        names = (body or {}).get("filenameToSize", {})
        return {"filenameToSignedUrls": dict.fromkeys(names, DRY_SIGNED_URL)}
    if verb == "getBuildLogEndpoint":
        return {}
    if method == "POST" and not verb and isinstance(body, dict):
        for id_key in ("datasetId", "evaluatorId"):
            if id_key in body:
                name = f"{name}/{body[id_key]}"
        if "reinforcementFineTuningJobId" in query:
            name = f"{name}/{query['reinforcementFineTuningJobId']}"
    collection = name.split("/")[2] if name.count("/") >= 2 else ""
    states = _DRY_CREATED if method == "POST" else _DRY_FINISHED
    return {"name": name, "state": states.get(collection, "")}


def strip_query(url: str) -> str:
    """A signed URL without its query (which is the signature: a credential of its own).

    Example:
        >>> strip_query("https://storage.example/bucket/f.jsonl?X-Goog-Signature=abc")
        'https://storage.example/bucket/f.jsonl?<signature>'
    """
    return url.split("?", 1)[0] + ("?<signature>" if "?" in url else "")
