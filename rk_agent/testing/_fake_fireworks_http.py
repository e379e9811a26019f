"""HTTP plumbing of the fake Fireworks API: requests as recorded, replies, the handler.

Private to `rk_agent.testing.fake_fireworks`, which re-exports `FakeRequest`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from rk_agent.testing import _fake_fireworks_rules as rules


class _Server(Protocol):
    def _handle(self, request: FakeRequest) -> Reply: ...


@dataclass(frozen=True)
class FakeRequest:
    """One request as the fake received it.

    Attributes:
        method: the HTTP method.
        path: the path, without the query.
        query: the query parameters.
        headers: the headers, names in lower case.
        body: the raw body.
    """

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body as JSON (``None`` when empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def form(self) -> dict[str, tuple[str | None, bytes]]:
        """A multipart body's parts, ``{name: (filename, bytes)}``."""
        return rules.parse_multipart(self.headers.get("content-type", ""), self.body)

    @property
    def signed(self) -> bool:
        """Whether this went to a signed URL (not the API)."""
        return self.path.startswith("/_signed/")


@dataclass
class Fault:
    status: int
    message: str
    remaining: int
    retry_after: str | None
    method: str | None
    path: str | None
    lost: bool = False  # the request is carried out; only its answer is replaced

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or self.path in path
        )


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 429: 8, 500: 13, 503: 14}


def error(status: int, message: str) -> Reply:
    return Reply(status, {"code": _GRPC_CODES.get(status, 2), "message": message, "details": []})


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10
    fake: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the fake records requests instead

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        request = FakeRequest(
            method=self.command,
            path=parts.path,
            query=dict(parse_qsl(parts.query)),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=rules.read_body(self.rfile, self.headers),
        )
        reply = self.fake._handle(request)
        if isinstance(reply.body, bytes):
            data, kind = reply.body, "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(reply.body).encode(), "application/json"
        self.send_response(reply.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve
