"""The reward server's request path, as one plain ASGI layer in front of FastAPI.

FastAPI's per-request machinery (routing, dependency solving, body parsing) costs about as much
as the whole scoring path, so `RewardEndpoints` answers ``POST /evaluate``, ``/reward`` and
``/batch`` (and ``/health``) itself, checks the names a loopback server answers
(`rk_agent.binding.HostRule`), the API key and the body size for every path, requires
``Content-Type: application/json`` on the scoring endpoints (415), and hands the rest (the
docs, 404s) to FastAPI. `RewardApp` puts it in front of FastAPI's own
layers too (its error, telemetry and body-limit middleware, which read the environment on
every request), unless middleware was added to the app: then every request takes FastAPI's
whole stack, with `RewardEndpoints` inside the added middleware, so that it sees them all.
``benchmarks/bench_reward_server.py`` measures it.

Main names (private to `rk_agent.server`, which documents the behaviour):
    EvaluateRequest, BatchRequest, BatchResponse: the wire models.
    RewardEndpoints: the ASGI layer.
    RewardApp: the FastAPI app with `RewardEndpoints` in front.
    openapi_schema: the OpenAPI schema, with the endpoints `RewardEndpoints` answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.middleware import Middleware

from rk_agent.binding import HostRule
from rk_agent.server._budget import ByteBudget
from rk_agent.server._logs import AnswerLog
from rk_agent.server._reward_caller import Misuse, RewardCaller, Saturated
from rk_agent.trusted_json import validate_trusted_json
from rk_agent.types import EvaluateResult, Message

__all__ = [
    "BatchRequest",
    "BatchResponse",
    "EvaluateRequest",
    "RewardApp",
    "RewardEndpoints",
    "openapi_schema",
]

logger = logging.getLogger("rk_agent.server")

_OPEN_PATHS = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
_SCORING_PATHS = frozenset({"/evaluate", "/reward", "/batch"})
_RETRY_AFTER_S = 1
_MESSAGE_FIELDS = frozenset({"messages", "original_messages"})
_CLOSE = {"connection": "close"}  # an answer given before the body was read ends the connection
_SMALL_BODY = 64 * 1024
"""Bytes of each body outside the budget: uvicorn buffers about this much of every connection
anyway, so small samples never wait behind large bodies."""
_ECHO_CHARS = 200
"""A 422 names the offending input, cut to this many characters (never the whole body back)."""


class EvaluateRequest(BaseModel):
    """One sample to score (the body of ``POST /evaluate`` and ``POST /reward``).

    Fields other than these are passed to the reward as keyword arguments too.
    """

    model_config = ConfigDict(extra="allow")

    messages: list[Message] = Field(description="the conversation, ending with the reply to score")
    original_messages: list[Message] | None = Field(
        default=None, description="the prompt part; the reward defaults it to messages[:-1]"
    )
    ground_truth: Any = Field(default=None, description="the reference answer, any JSON")
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="the OpenAI tool schemas offered to the model"
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="more keyword arguments for the reward"
    )

    def call_kwargs(self) -> dict[str, Any]:
        """The reward's keyword arguments: only what the sample sets, messages as plain dicts."""
        out: dict[str, Any] = {**(self.__pydantic_extra__ or {}), **self.kwargs}
        given = self.__pydantic_fields_set__
        # One dump for all messages, without null fields (as `Message.to_openai`); the
        # serializer itself, without `model_dump`'s handling of its many options.
        dumped = self.__pydantic_serializer__.to_python(
            self, include=given & _MESSAGE_FIELDS, exclude_none=True
        )
        out.update(dumped)
        for key in ("ground_truth", "tools"):
            if key in given:
                out[key] = getattr(self, key)
        return out


class BatchRequest(BaseModel):
    """Many samples in one request (the body of ``POST /batch``); each is scored on its own."""

    samples: list[EvaluateRequest] = Field(min_length=1)


class BatchResponse(BaseModel):
    """The answer of ``POST /batch``: one result per sample, in order."""

    results: list[EvaluateResult]


# --------------------------------------------------------------------------------------------
# The ASGI layer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class RewardApp(FastAPI):
    """FastAPI, with `RewardEndpoints` answering first (module docstring).

    ``endpoints`` is set by `create_app`. FastAPI's own layers (and its OpenTelemetry spans)
    then see only the requests `RewardEndpoints` passes on (the docs, 404s); middleware added
    with ``add_middleware`` sees every request.
    """

    endpoints: RewardEndpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.user_middleware:
            await super().__call__(scope, receive, send)
            return
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        scope["app"] = self
        await self.endpoints(scope, receive, send)

    def build_middleware_stack(self) -> Any:
        """FastAPI's stack, with `endpoints` inside the added middleware (where it answers
        when middleware was added) and over FastAPI's inner layers and router (what it passes
        on to)."""
        added = self.user_middleware
        self.user_middleware = [*added, Middleware(self._over)]
        try:
            return super().build_middleware_stack()
        finally:
            self.user_middleware = added

    def _over(self, app: Any) -> RewardEndpoints:
        self.endpoints.app = app
        return self.endpoints


class RewardEndpoints:
    """ASGI layer: the host names (``hosts``, when set), the API key and the body limit on
    every path, ``/health`` and the three scoring endpoints; everything else goes on to ``app``
    (FastAPI's layers below it)."""

    def __init__(
        self,
        app: Any,
        *,
        caller: RewardCaller,
        api_key: str | None,
        max_body_bytes: int,
        max_batches: int,
        budget: ByteBudget,
        budget_wait_s: float,
        answers: AnswerLog,
        hosts: HostRule | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.caller = caller
        self.key = api_key.encode() if api_key else None
        self.max_body_bytes = max_body_bytes
        self.batches = asyncio.Semaphore(max_batches)  # bounds the /batch bodies parsed at once
        self.budget = budget
        self.budget_wait_s = budget_wait_s
        self.answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        host = origin = kind = length = None
        for name, value in scope["headers"]:  # one pass over the head's fields
            if name == b"content-length":
                length = value  # llhttp refuses a second one
            elif name == b"content-type":
                kind = value
            elif name == b"host":
                host = value if host is None else _SEVERAL
            elif name == b"origin":
                origin = value if origin is None else _SEVERAL
        if self.hosts is not None and (refused := self.hosts.refusal(host, origin)):
            await self._answer(send, path, refused[0], _detail(refused[1]))
            return
        if path == "/health" and scope["method"] == "GET":
            status, state = self.caller.health()
            await _reply(send, status, json.dumps(state).encode())
            return
        if self.key is not None and path not in _OPEN_PATHS:
            sent = [v for k, v in scope["headers"] if k == b"authorization"]
            problem = (
                "send one 'Authorization: Bearer <key>' header, not several."
                if len(sent) > 1
                else self._auth_problem(sent[0] if sent else None)
            )
            if problem:
                await self._answer(
                    send, path, 401, _detail(problem), {"www-authenticate": "Bearer"}
                )
                return
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            shown = f"{length.decode('latin-1')[:20]} bytes"
            await self._answer(send, path, 413, _detail(self._too_large(shown)), _CLOSE)
            return
        if path not in _SCORING_PATHS:
            await self.app(scope, receive, send)
        elif scope["method"] != "POST":
            await _reply(send, 405, _detail("Method Not Allowed"), {"allow": "POST"})
        elif kind != b"application/json" and not _is_json(kind):
            await self._answer(send, path, 415, _detail(_not_json(kind)))
        elif self.caller.saturated():
            await self._busy(send, path)
        else:
            declared = int(length) if length is not None else 0
            size = max(0, declared - _SMALL_BODY)
            if size and not await self.budget.take(size, self.budget_wait_s):
                await self._busy(send, path, "request bodies already fill its byte budget")
                return
            taken = [size]
            try:
                if path == "/batch":
                    async with self.batches:  # later batches wait, unread, until one finishes
                        await self._score(path, receive, send, taken, declared)
                else:
                    await self._score(path, receive, send, taken, declared)
            finally:
                self.budget.give_back(taken[0])

    async def _busy(self, send: Send, path: str, why: str = "") -> None:
        pool = self.caller.pool
        why = why or (
            f"{pool.queued()} samples are waiting for its {pool.size} worker threads "
            f"({self.caller.stuck()} stuck), about {self.caller.expected_wait():.1f} s of work"
        )
        message = (
            f"the reward server is saturated: {why}; retry after {_RETRY_AFTER_S} s (or start "
            "it with more --threads or --workers)"
        )
        await self._answer(send, path, 503, _detail(message), {"retry-after": str(_RETRY_AFTER_S)})

    async def _answer(
        self, send: Send, path: str, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.answers.answered(path, status, body)
        await _reply(send, status, body, headers)

    async def _score(
        self, path: str, receive: Receive, send: Send, taken: list[int], declared: int
    ) -> None:
        body = await self._read_body(receive, taken, declared)
        if body is None:  # the client went away, or the server's body deadline cut it
            return
        if isinstance(body, str):
            await self._answer(send, path, 413, _detail(body), _CLOSE)
            return
        if (encoding := _not_utf8(body)) is not None:
            await self._answer(send, path, 400, _detail(encoding))
            return
        try:
            status, payload = await (self._batch(body) if path == "/batch" else self._one(body))
        except Saturated:
            await self._busy(send, path)
            return
        await self._answer(send, path, status, payload)

    async def _one(self, body: bytes) -> tuple[int, bytes]:
        try:
            # JSON never holds what the widening validators take (SDK objects); a body the
            # lean validator refuses is validated by the model (its errors, its widening).
            sample = validate_trusted_json(EvaluateRequest, body)
            result = await self.caller.score(sample.call_kwargs(), ["body"])
        except ValidationError as exc:
            return 422, _validation_detail(exc)
        except Misuse as exc:
            return 422, _misuse_detail(exc)
        if not result.is_score_valid:
            self.answers.invalid += 1
        return 200, result.model_dump_json().encode()

    async def _batch(self, body: bytes) -> tuple[int, bytes]:
        try:
            samples = validate_trusted_json(BatchRequest, body).samples
            del body
            results = await asyncio.gather(
                *(self.caller.score(s.call_kwargs(), ["body", "samples", i])
                  for i, s in enumerate(samples))
            )  # fmt: skip
        except ValidationError as exc:
            return 422, _validation_detail(exc)
        except Misuse as exc:
            return 422, _misuse_detail(exc)
        self.answers.invalid += sum(not r.is_score_valid for r in results)
        return 200, b'{"results":[' + b",".join(
            r.model_dump_json().encode() for r in results
        ) + b"]}"

    def _auth_problem(self, header: bytes | None) -> str:
        assert self.key is not None
        scheme, _, token = (header or b"").partition(b" ")
        if not header or scheme.lower() != b"bearer":
            return "this reward server needs an API key: send 'Authorization: Bearer <key>'."
        if not secrets.compare_digest(token.strip(), self.key):
            return "the API key sent is not this server's key."
        return ""

    def _too_large(self, size: str) -> str:
        return (
            f"request body too large: {size}, the limit is {self.max_body_bytes} bytes "
            "(--max-body-mb). Send fewer samples per /batch request."
        )

    async def _read_body(self, receive: Receive, taken: list[int], declared: int) -> Any:
        """The whole body; the 413 message once it passes its declared size or the limit (a
        chunked body, with no ``Content-Length``, takes its budget chunk by chunk); ``None`` when
        the client went away or was cut."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes or (declared and size > declared):
                return self._too_large(f"over {min(self.max_body_bytes, declared or size)} bytes")
            if size - _SMALL_BODY > taken[0]:  # a chunked body: its share grows as it comes
                if not await self.budget.take(size - _SMALL_BODY - taken[0], self.budget_wait_s):
                    return None
                taken[0] = size - _SMALL_BODY
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def openapi_schema(app: FastAPI, name: str) -> dict[str, Any]:
    """The schema, with the three endpoints that `RewardEndpoints` answers before FastAPI."""
    if app.openapi_schema:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi
    from fastapi.routing import APIRoute

    async def evaluate(sample: EvaluateRequest) -> EvaluateResult:  # pragma: no cover - docs only
        raise NotImplementedError

    async def batch(body: BatchRequest) -> BatchResponse:  # pragma: no cover - docs only
        raise NotImplementedError

    errors: dict[int | str, dict[str, Any]] = {
        401: {"description": "missing or wrong API key"},
        403: {"description": "on loopback: sent by a page of another site (its Origin)"},
        413: {"description": "request body over the size limit"},
        415: {"description": "the body is not Content-Type: application/json"},
        421: {"description": "on loopback: a request for another name (its Host)"},
        431: {"description": "request head over 64 KiB or 100 header fields"},
    }
    documented = [
        APIRoute(
            path, evaluate, methods=["POST"], response_model=EvaluateResult, responses=errors,
            name=path.strip("/"), summary=f"Score one sample with {name!r}" + alias,
        )
        for path, alias in (("/evaluate", ""), ("/reward", " (reward-kit's name)"))
    ] + [
        APIRoute(
            "/batch", batch, methods=["POST"], response_model=BatchResponse, responses=errors,
            summary="Score many samples, each on its own, concurrently",
        )
    ]  # fmt: skip
    app.openapi_schema = get_openapi(
        title=app.title, version=app.version, description=app.description,
        routes=[*documented, *app.routes],
    )  # fmt: skip
    return app.openapi_schema


_SEVERAL = b"(several)"  # a Host or Origin sent twice: no name


def _is_json(kind: bytes | None) -> bool:
    """Whether a ``Content-Type`` is JSON (``application/json``, with parameters or not)."""
    return kind is not None and kind.partition(b";")[0].strip().lower() == b"application/json"


def _not_json(kind: bytes | None) -> str:
    got = "no Content-Type" if kind is None else repr(kind.decode("latin-1")[:100])
    return (
        f"expected Content-Type: application/json, got {got}; send the sample as JSON with "
        "that header (the reward server reads no other body, so that a page on another site, "
        "which can send text/plain without asking, cannot have a sample scored)."
    )


def _not_utf8(body: bytes) -> str | None:
    """What is wrong with a body that is not UTF-8 text (JSON must be), else ``None``."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"request body is not valid UTF-8: byte 0x{body[exc.start]:02x} at offset "
            f"{exc.start} ({exc.reason}); send the JSON body encoded as UTF-8."
        )
    return None


def _detail(message: str) -> bytes:
    return json.dumps({"detail": message}).encode()


def _validation_detail(exc: ValidationError) -> bytes:
    """FastAPI's 422 shape: each error's ``loc`` starts with ``"body"``."""
    shown = []
    for error in exc.errors(include_url=False)[:_MAX_ERRORS]:
        entry: dict[str, Any] = {**error, "loc": ["body", *error["loc"]]}
        if "input" in entry:
            entry["input"] = _capped(entry["input"])
        shown.append(entry)
    return json.dumps({"detail": shown}, default=str).encode()


_MAX_ERRORS = 20
"""A 422 lists at most this many errors (a batch of 10,000 bad samples gets 20)."""


def _capped(value: Any) -> Any:
    """``value`` as echoed in a 422: as it came when short, else its JSON cut to `_ECHO_CHARS`."""
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) <= _ECHO_CHARS:
        return value
    return f"{text[:_ECHO_CHARS]}... ({len(text)} characters)"


def _misuse_detail(exc: Misuse) -> bytes:
    return json.dumps(
        {"detail": [{"type": "reward_input", "loc": exc.loc, "msg": str(exc)}]}
    ).encode()


async def _reply(
    send: Send, status: int, body: bytes, headers: dict[str, str] | None = None
) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
