"""A small client for the Fireworks control-plane API: auth, retries, typed errors, dry runs.

Main names: `FireworksClient`, `ApiModel` (and, from `rk_agent.fireworks.dry_run`,
`PlannedRequest`).

Every call goes through `FireworksClient.request`, the one place where HTTP becomes data or a
`FireworksError`:

* ``Authorization: Bearer <key>`` on API calls, **never** on signed upload URLs (those go to
  cloud storage, which must not see the key); the key is redacted from every message.
* Timeouts; retries with exponential backoff on 408, 429, 5xx, connection errors and timeouts,
  honouring ``Retry-After`` (`rk_agent.retry.FIREWORKS_API_RETRY`); then a `FireworksError`
  carrying the status, the API's own message and a hint (401: where the key came from).
* A **dry run** (``dry_run=True``) sends nothing: each request is recorded as a
  `PlannedRequest` (secrets redacted) and answered with a plausible placeholder, so the code
  that builds requests runs unchanged and shows exactly what it would send.

Request and response bodies use the API's camelCase; `ApiModel` reads responses into
snake_case attributes (``exampleCount`` -> ``example_count``).

Example:
    >>> client = FireworksClient.dry(account_id="my-team")
    >>> client.request("POST", client.account_path("datasets"), json={"datasetId": "d"})["name"]
    'accounts/my-team/datasets/d'
    >>> print(client.planned[0].describe())
    POST https://api.fireworks.ai/v1/accounts/my-team/datasets
    Authorization: Bearer ***
    {
      "datasetId": "d"
    }
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from rk_agent import __version__
from rk_agent.errors import EndpointError, FireworksError
from rk_agent.fireworks.auth import Credentials, resolve_credentials
from rk_agent.fireworks.dry_run import (
    DRY_ACCOUNT,
    DRY_SIGNED_URL,
    PlannedRequest,
    dry_response,
    strip_query,
)
from rk_agent.retry import FIREWORKS_API_RETRY, RetryPolicy, retry_call
from rk_agent.secrets import redact

if TYPE_CHECKING:
    import httpx

__all__ = ["ApiModel", "FireworksClient"]

logger = logging.getLogger("rk_agent.fireworks")

_MAX_MESSAGE = 600


class ApiModel(BaseModel):
    """A Fireworks API object: camelCase on the wire, snake_case in Python, extra fields kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def to_api(self) -> dict[str, Any]:
        """The camelCase JSON body, without unset (``None``) fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class FireworksClient:
    """The Fireworks API over httpx, with retries and typed errors.

    Args:
        credentials: key, account and base URL (default: `resolve_credentials` from the
            environment and ``~/.fireworks/auth.ini``).
        timeout_s: per-request timeout for API calls.
        upload_timeout_s: per-request timeout for file uploads and downloads.
        max_retries: further attempts after a retryable failure (408, 429, 5xx, timeouts).
        backoff_s: the first retry's base delay; doubles each time, with jitter.
        backoff_max_s: the longest wait between attempts, ``Retry-After`` included.
        retry: the whole retry policy instead of the three above (default
            `rk_agent.retry.FIREWORKS_API_RETRY` with them).
        dry_run: record requests instead of sending them (see `FireworksClient.dry`).
        on_request: called with each `PlannedRequest` of a dry run (e.g. to print it).

    Raises:
        ConfigError: no API key was found (except in a dry run).
    """

    def __init__(
        self,
        credentials: Credentials | None = None,
        *,
        timeout_s: float = 30.0,
        upload_timeout_s: float = 600.0,
        max_retries: int = FIREWORKS_API_RETRY.max_retries,
        backoff_s: float = FIREWORKS_API_RETRY.base_s,
        backoff_max_s: float = FIREWORKS_API_RETRY.max_s,
        retry: RetryPolicy | None = None,
        dry_run: bool = False,
        on_request: Callable[[PlannedRequest], None] | None = None,
    ) -> None:
        self.credentials = credentials if credentials is not None else resolve_credentials()
        self.dry_run = dry_run
        if not dry_run:
            self.credentials.require_key()
        self.timeout_s = timeout_s
        self.upload_timeout_s = upload_timeout_s
        self.retry = retry or FIREWORKS_API_RETRY.replace(
            max_retries=max_retries, base_s=backoff_s, max_s=backoff_max_s
        )
        self.max_retries = self.retry.max_retries
        self.backoff_s = self.retry.base_s
        self.backoff_max_s = self.retry.max_s
        self.on_request = on_request
        self.planned: list[PlannedRequest] = []
        self._account_id = self.credentials.account_id
        self._http: httpx.Client | None = None

    @classmethod
    def dry(
        cls,
        *,
        account_id: str | None = None,
        api_base: str | None = None,
        on_request: Callable[[PlannedRequest], None] | None = None,
    ) -> FireworksClient:
        """A dry-run client: the configured credentials if any, sending nothing."""
        found = resolve_credentials(account_id=account_id, api_base=api_base)
        return cls(found, dry_run=True, on_request=on_request)

    def __repr__(self) -> str:
        return (
            f"FireworksClient(api_base={self.api_base!r}, account_id={self._account_id!r}, "
            f"dry_run={self.dry_run})"
        )

    def __enter__(self) -> FireworksClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        if self._http is not None:
            self._http.close()
            self._http = None

    # ------------------------------------------------------------------ names

    @property
    def api_base(self) -> str:
        """The API's base URL."""
        return self.credentials.api_base

    @property
    def account_id(self) -> str:
        """The account: configured, or looked up from the key (``GET /verifyApiKey``) once."""
        if self._account_id is None:
            if self.dry_run:
                self._record(
                    PlannedRequest(
                        "GET", f"{self.api_base}/verifyApiKey",
                        headers={"Authorization": "Bearer ***"},
                        note="the account, from the x-fireworks-account-id header "
                        f"({DRY_ACCOUNT} below)",
                    )
                )  # fmt: skip
                self._account_id = DRY_ACCOUNT
                return DRY_ACCOUNT
            self._account_id = self._lookup_account()
        return self._account_id

    def account_path(self, suffix: str) -> str:
        """``/v1/accounts/{account}/{suffix}``."""
        return f"/v1/accounts/{self.account_id}/{suffix}"

    def resource_name(self, collection: str, resource_id: str) -> str:
        """A fully qualified name, ``accounts/{account}/{collection}/{id}``; a name that is
        already qualified (starts with ``accounts/``) is returned as it is."""
        if resource_id.startswith("accounts/"):
            return resource_id
        return f"accounts/{self.account_id}/{collection}/{resource_id}"

    def _lookup_account(self) -> str:
        response = self._send("GET", "/verifyApiKey", what="look up the account of the API key")
        account = response.headers.get("x-fireworks-account-id")
        if not account:
            raise FireworksError(
                "the Fireworks API did not say which account the API key belongs to (no "
                "x-fireworks-account-id header from /verifyApiKey). Set FIREWORKS_ACCOUNT_ID.",
                status=response.status_code,
                url=f"{self.api_base}/verifyApiKey",
            )
        return account

    # ------------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        allow_404: bool = False,
        note: str | None = None,
    ) -> dict[str, Any] | None:
        """Call the API and return its JSON body (``{}`` when empty).

        Args:
            method: the HTTP method.
            path: the path under the base URL (``/v1/accounts/...``).
            json: the JSON body.
            params: query parameters (``None`` values are left out).
            files: multipart files, ``{field: (filename, bytes, content type)}``.
            allow_404: return ``None`` on 404 instead of raising.
            note: a comment for the dry-run listing.

        Raises:
            FireworksError: the API refused the request, or it kept failing after the retries.
        """
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if self.dry_run:
            return self._plan(method, path, json, query, files, allow_404, note)
        response = self._send(
            method, path, json=json, params=query, files=files, allow_404=allow_404
        )
        if response.status_code == 404 and allow_404:
            return None
        if not response.content:
            return {}
        try:
            body = response.json()
        except ValueError:
            raise FireworksError(
                f"Fireworks API {method} {path}: HTTP {response.status_code} with a body that "
                f"is not JSON: {self._clean(response.text)[:200]}",
                status=response.status_code,
                url=str(response.request.url),
            ) from None
        return body if isinstance(body, dict) else {"value": body}

    def put_signed(self, url: str, data: bytes, *, filename: str) -> None:
        """Upload ``data`` to a signed URL from ``:getUploadEndpoint`` (no API key sent).

        Sends ``Content-Type: application/octet-stream`` and
        ``X-Goog-Content-Length-Range: N,N``, as Fireworks' own tools do for Google Cloud
        Storage.

        Raises:
            FireworksError: the upload failed after the retries.
        """
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Goog-Content-Length-Range": f"{len(data)},{len(data)}",
        }
        if self.dry_run:
            shown = url if url == DRY_SIGNED_URL else strip_query(url)
            self._record(
                PlannedRequest(
                    "PUT", shown, content=f"<{len(data)} bytes: {filename}>", headers=headers,
                    note="no Authorization header: the signed URL carries the permission",
                )
            )  # fmt: skip
            return
        self._send("PUT", url, content=data, headers=headers, signed=True, what="upload")

    def get_signed(self, url: str) -> str:
        """Download a text file from a signed URL (build logs); no API key sent."""
        if self.dry_run:
            self._record(PlannedRequest("GET", strip_query(url)))
            return ""
        return self._send("GET", url, signed=True, what="download").text

    # ------------------------------------------------------------------ internals

    def _client(self) -> httpx.Client:
        import httpx

        if self._http is None:
            self._http = httpx.Client(
                base_url=self.api_base,
                timeout=httpx.Timeout(self.timeout_s),
                headers={"User-Agent": f"rk-agent/{__version__}", "Accept": "application/json"},
            )
        return self._http

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        signed: bool = False,
        allow_404: bool = False,
        what: str | None = None,
    ) -> httpx.Response:
        import httpx

        request_headers = dict(headers or {})
        if not signed:
            request_headers["Authorization"] = f"Bearer {self.credentials.require_key()}"
        timeout = self.upload_timeout_s if (signed or files) else self.timeout_s
        shown = strip_query(path) if signed else path

        def attempt() -> httpx.Response:
            started = time.monotonic()
            try:
                response = self._client().request(
                    method, path, json=json, params=params, files=files, content=content,
                    headers=request_headers, timeout=timeout,
                )  # fmt: skip
            except httpx.TimeoutException as exc:
                raise FireworksError(
                    f"Fireworks API {method} {shown}: no answer within {timeout:g}s (timeout)",
                    retryable=True, url=self._url(shown),
                ) from exc  # fmt: skip
            except httpx.TransportError as exc:
                raise FireworksError(
                    f"Fireworks API {method} {shown}: could not connect to {self.api_base}: "
                    f"{self._clean(f'{type(exc).__name__}: {exc}')}",
                    retryable=True, url=self._url(shown),
                ) from exc  # fmt: skip
            logger.debug(
                "%s %s -> %s (%.2fs)", method, shown, response.status_code,
                time.monotonic() - started,
            )  # fmt: skip
            if response.is_success or (allow_404 and response.status_code == 404):
                return response
            cause = httpx.HTTPStatusError(
                f"HTTP {response.status_code}", request=response.request, response=response
            )
            raise self._status_error(method, shown, response, what) from cause

        def retrying(error: EndpointError, failed: int, delay: float) -> None:
            logger.info("%s; retrying in %.1fs", error.message, delay)

        return retry_call(attempt, self.retry, on_retry=retrying)

    def _status_error(
        self, method: str, path: str, response: httpx.Response, what: str | None
    ) -> FireworksError:
        status = response.status_code
        api_message = self._clean(_api_message(response))
        message = f"Fireworks API {method} {path}: HTTP {status}: {api_message}"
        if what:
            message = f"could not {what}: {message}"
        if status in (401, 403):
            message += (
                f" (check the API key; it came from {self.credentials.key_source}, and the "
                f"account {self._account_id or '(looked up from the key)'})"
            )
        return FireworksError(
            message[:_MAX_MESSAGE + 200],
            status=status,
            retryable=self.retry.retries_status(status),
            url=self._url(path),
            api_message=api_message,
        )  # fmt: skip

    def _url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else f"{self.api_base}{path}"

    def _clean(self, text: str) -> str:
        text = redact(text, [self.credentials.api_key])
        return " ".join(text.split())[:_MAX_MESSAGE]

    def _record(self, planned: PlannedRequest) -> None:
        self.planned.append(planned)
        if self.on_request is not None:
            self.on_request(planned)

    def _plan(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, Any],
        files: Mapping[str, tuple[str, bytes, str]] | None,
        allow_404: bool,
        note: str | None,
    ) -> dict[str, Any] | None:
        url = f"{self.api_base}{path}"
        if query:
            url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
        content = None
        if files:
            content = "multipart/form-data: " + ", ".join(
                f"{field}={name} ({len(data)} bytes)" for field, (name, data, _) in files.items()
            )
        self._record(
            PlannedRequest(
                method, url, json=redact(body, [self.credentials.api_key]), content=content,
                headers={"Authorization": "Bearer ***"}, note=note,
            )
        )  # fmt: skip
        return dry_response(method, path, body, query, allow_404)


def _api_message(response: httpx.Response) -> str:
    """The API's own error message: gRPC-gateway ``{"code", "message"}``, ``{"error": ...}``,
    or the body's text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase or "(empty body)"
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, str):
            return error
        if isinstance(error, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(error.get(key), str) and error[key]:
                    return str(error[key])
    return json.dumps(body)[:_MAX_MESSAGE]
