"""The size of a request head, counted as its bytes arrive, and trailers that never count.

uvicorn's httptools protocol sets no limit on a request head: a client could send megabytes of
tiny header fields (each kept as a pair of bytes objects, the whole list kept after the 401
that answered them) or one value of 64 MiB, which httptools grows by concatenation, each
read copying all the value so far. `HeadLimit` counts the bytes of each head as they are read
and answers **431** once a head passes `MAX_HEAD_BYTES` (the request line and the header
fields; 64 KiB) or `MAX_HEADERS` fields (100), before the head is parsed any further, before
authentication, and closes the connection.

To count exactly, the bytes read are fed to the parser in pieces that end where a head does:
a read that holds more than a head may still take is cut at the head's blank line (or
refused when there is none within the limit), and a large read of a body is cut where the
body ends (its ``Content-Length``; a chunked body in slices of `_SLICE` bytes). A pipelined
head that begins inside a piece is counted as if the whole piece were its own (never more
than the limit).

Chunked trailers (header fields after a chunked body) are never headers: the app sees the
head's fields only, so an ``Authorization`` sent as a trailer authenticates nothing. Their bytes
are counted like a head's: more than `MAX_HEAD_BYTES` of a chunked body without a body byte
(chunk framing, trailers) is answered 431.

Main names (private to `rk_agent.server`):
    HeadLimit: the mixin, over a uvicorn httptools protocol (below `_connections._Guard`).
    MAX_HEAD_BYTES, MAX_HEADERS: the limits.
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["MAX_HEADERS", "MAX_HEAD_BYTES", "HeadLimit"]

logger = logging.getLogger("rk_agent.server")

MAX_HEAD_BYTES = 64 * 1024
"""Bytes of a request head at most: its request line and header fields (431 past it)."""

MAX_HEADERS = 100
"""Header fields of a request at most (431 past it)."""

_SLICE = 16 * 1024
"""A chunked body is fed in slices of this size: where it ends is known to within one."""

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


class _Dropped(list[tuple[bytes, bytes]]):
    """Where trailer fields go once a head is complete: nowhere."""

    def append(self, item: tuple[bytes, bytes]) -> None:
        pass


_TRAILERS = _Dropped()


class HeadLimit:
    """The head limits over a uvicorn httptools protocol (module docstring).

    Mixed in before ``HttpToolsProtocol``; uses its ``parser`` callbacks, ``headers``,
    ``scope`` and ``transport``, and ``_cut`` (`rk_agent.server._connections`), which answers
    and closes. Reads the limits from ``config.connection_limits``.
    """

    headers: list[tuple[bytes, bytes]]
    scope: Any
    transport: Any

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)  # type: ignore[call-arg]
        limits = config.connection_limits
        self._head_cap: int = limits.max_head_bytes
        self._max_headers: int = limits.max_headers
        self._head_left: int | None = self._head_cap  # None while a body arrives
        self._body_seen = 0  # body bytes of the request that arrives
        self._gap = 0  # bytes of a body since its last body byte (chunk framing, trailers)
        self._last = b""  # the piece fed last (a head's blank line may straddle two reads)
        self._ended: Any = None  # the scope of a message that ended within the current piece
        self._too_many = False

    def _cut(self, answer: bytes) -> None:  # pragma: no cover - `_Guard._cut` answers
        raise NotImplementedError

    def data_received(self, data: bytes) -> None:
        while data:
            if self._head_left is not None:  # a head (or the next one) arrives
                if len(data) <= self._head_left:
                    piece, data = data, b""
                else:
                    end = self._head_end(data, self._head_left)
                    if end < 0:
                        self._refuse(f"the request head is over {self._head_cap} bytes")
                        return
                    piece, data = data[:end], data[end:]
                self._head_left -= len(piece)  # a head that ends in it sets None
            elif len(data) <= _SLICE:
                piece, data = data, b""
            else:  # a large read of a body: up to the body's end
                left = self._body_left()
                size = left if left is not None and left > 0 else _SLICE
                piece, data = data[:size], data[size:]
            self._last = piece
            self._ended = None
            seen = self._body_seen
            super().data_received(piece)  # type: ignore[misc]
            if self.transport.is_closing():
                return
            if self._too_many:
                self._refuse(f"the request head has more than {self._max_headers} header fields")
                return
            if self._head_left is None:  # still in a body
                self._gap = self._gap + len(piece) if self._body_seen == seen else 0
                if self._gap > self._head_cap:
                    self._refuse(
                        f"the chunked body sent over {self._head_cap} bytes without a body byte "
                        "(chunk framing or trailers)"
                    )
                    return
            elif self._ended is not None and self.scope is not self._ended:
                # A head began after a message ended in this piece: count all of it as its own.
                self._head_left = max(0, min(self._head_left, self._head_cap - len(piece)))

    def _head_end(self, data: bytes, room: int) -> int:
        """Where the head that arrives ends in ``data`` (just after its blank line), when
        that is within the ``room`` it has left; else -1."""
        tail = self._last[-3:]
        at = (tail + data[: room + 1]).find(b"\r\n\r\n")
        return -1 if at < 0 else at + 4 - len(tail)

    def _body_left(self) -> int | None:
        """Bytes of the body still to come (its ``Content-Length`` less what came); ``None``
        for a chunked body."""
        for name, value in self.scope["headers"]:
            if name == b"transfer-encoding":
                return None  # llhttp refuses a Content-Length with it
            if name == b"content-length":
                return int(value) - self._body_seen  # llhttp checked it: digits, one value
        return None

    def on_headers_complete(self) -> None:
        if len(self.headers) > self._max_headers:
            self._too_many = True  # answered once the parser returns; no request starts
            self._head_left = None
            return
        super().on_headers_complete()  # type: ignore[misc]
        self._head_left = None
        self._body_seen = self._gap = 0
        self.headers = _TRAILERS  # the scope keeps the head's fields; trailers go nowhere

    def on_body(self, body: bytes) -> None:
        if self._too_many:
            return
        self._body_seen += len(body)
        super().on_body(body)  # type: ignore[misc]

    def on_message_complete(self) -> None:
        if self._too_many:
            return
        super().on_message_complete()  # type: ignore[misc]
        self._head_left = self._head_cap
        self._ended = self.scope

    def _refuse(self, why: str) -> None:
        logger.warning("refused a request: %s (431)", why)
        body = json.dumps(
            {"detail": f"{why}; the limit is {self._head_cap} bytes and {self._max_headers} "
                       "header fields. Send large data in the body."}
        ).encode()  # fmt: skip
        self._cut(_TOO_LARGE % (len(body), body))
