"""The client's side of RFC 6455 (WebSocket), as much as an OpenEnv session needs.

An OpenEnv session sends one small JSON message per step and reads one answer. Framing them
with a general library (websockets' sans-I/O protocol: its request and response objects, a
parser generator per connection, a system call for every mask) cost the client more than the
rest of the round trip; this module does what the session needs and no more:

- `handshake`: the opening request (``Sec-WebSocket-Key``, an ``Authorization`` header), and
  `read_handshake`, which checks the server's answer (101 and the key's accept value; no
  extension, since none is offered, so no compression);
- `frame`: one masked client frame (text, close, pong), the masks drawn from the system's
  random source a page at a time;
- `FrameReader`: the server's frames, fed as they arrive, read as whole messages (text or
  binary, fragments joined), pings (to answer), pongs (ignored) and the close (its code and
  reason); anything else breaks the protocol (`ProtocolError`). Messages are capped in size.

Main names: `handshake`, `read_handshake`, `frame`, `FrameReader`, `ProtocolError`,
`HandshakeRefused`, `TEXT`, `CLOSE`, `PING`, `PONG`.

Example:
    >>> reader = FrameReader(max_size=1 << 20)
    >>> reader.feed(bytes([0x81, 0x07]) + b'{"a":')  # a text frame of 7 bytes, 5 of them here
    >>> reader.next() is None
    True
    >>> reader.feed(b"1}")
    >>> reader.next()
    (1, b'{"a":1}')
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import threading
from urllib.parse import unquote, urlsplit

__all__ = [
    "CLOSE",
    "PING",
    "PONG",
    "TEXT",
    "FrameReader",
    "HandshakeRefused",
    "ProtocolError",
    "frame",
    "handshake",
    "read_handshake",
]

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_DATA = frozenset({TEXT, BINARY})
_CONTROL = frozenset({CLOSE, PING, PONG})
_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3
_MAX_HEAD = 1 << 16  # the most a handshake's answer may hold before its blank line

_random = bytearray()
_random_lock = threading.Lock()


class ProtocolError(Exception):
    """The server broke the WebSocket protocol (the message says how)."""


class HandshakeRefused(ProtocolError):
    """The server answered the opening handshake with another status than 101.

    Attributes:
        status: the HTTP status.
    """

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _random_bytes(n: int) -> bytes:
    """``n`` bytes of the system's random source, read a page at a time (a mask is 4)."""
    global _random
    with _random_lock:
        if len(_random) < n:
            _random = bytearray(os.urandom(4096))
        out = bytes(_random[:n])
        del _random[:n]
    return out


def handshake(url: str, token: str | None) -> tuple[bytes, bytes]:
    """The opening request for the ``ws://``/``wss://`` ``url`` (``Authorization: Bearer
    <token>`` when given, else HTTP basic from the URL's user and password if any): ``(the
    request, the value the answer's Sec-WebSocket-Accept must have)``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = 443 if parts.scheme == "wss" else 80
    if parts.port is not None and parts.port != default:
        host = f"{host}:{parts.port}"
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    key = base64.b64encode(_random_bytes(16))
    lines = [
        f"GET {resource} HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key.decode()}",
        "Sec-WebSocket-Version: 13",
        "User-Agent: rk-agent",
    ]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    elif parts.username is not None:
        user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        lines.append(f"Authorization: Basic {base64.b64encode(user.encode()).decode()}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return request, base64.b64encode(hashlib.sha1(key + _ACCEPT_GUID).digest())


def read_handshake(data: bytes | bytearray, accept: bytes) -> int | None:
    """Where the answer to the opening handshake ends in ``data`` (what follows is frames),
    or ``None`` when it has not all come yet.

    Raises:
        HandshakeRefused: the status is not 101.
        ProtocolError: not a WebSocket handshake's answer.
    """
    end = data.find(b"\r\n\r\n")
    if end < 0:
        if len(data) > _MAX_HEAD:
            raise ProtocolError("an HTTP answer without end")
        return None
    status_line, *lines = data[:end].decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    status = rest[:3]
    if not version.startswith("HTTP/1.") or not status.isdigit():
        raise ProtocolError(f"not an HTTP answer: {status_line[:80]!r}")
    if status != "101":
        raise HandshakeRefused(int(status))
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("upgrade", "").lower() != "websocket":
        raise ProtocolError("the answer does not upgrade to websocket")
    if "upgrade" not in headers.get("connection", "").lower():
        raise ProtocolError("the answer's Connection header does not say upgrade")
    if headers.get("sec-websocket-accept", "").encode("latin-1") != accept:
        raise ProtocolError("the answer's Sec-WebSocket-Accept does not match the key")
    if headers.get("sec-websocket-extensions"):
        raise ProtocolError("the server chose an extension that was not offered")
    return end + 4


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked client frame (a client masks every frame it sends)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    mask = _random_bytes(4)
    if not n:
        return head + mask
    key = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "little") ^ int.from_bytes(key, "little")).to_bytes(
        n, "little"
    )
    return head + mask + masked


class FrameReader:
    """The server's frames, fed as they arrive (`feed`), read one at a time (`next`).

    Args:
        max_size: the most a message (its fragments together) may hold.
    """

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buffer = bytearray()
        self._parts: list[bytes] = []
        self._kind: int | None = None  # the opcode of a message whose fragments are coming
        self._size = 0

    def feed(self, data: bytes | bytearray) -> None:
        """Take what arrived from the server."""
        self._buffer += data

    def next(self) -> tuple[int, bytes] | None:
        """The next whole message as ``(TEXT or BINARY, payload)``, or control frame as
        ``(CLOSE, code and reason)``, ``(PING, data)`` or ``(PONG, data)``; ``None`` until more
        has been fed.

        Raises:
            ProtocolError: a frame the protocol does not allow, or a message over
                ``max_size``.
        """
        while True:
            found = self._frame()
            if found is None:
                return None
            final, opcode, payload = found
            if opcode in _CONTROL:
                if not final or len(payload) > 125:
                    raise ProtocolError("a fragmented or long control frame")
                return opcode, payload
            if opcode in _DATA:
                if self._kind is not None:
                    raise ProtocolError("a new message before the last one's end")
                if final:
                    return opcode, payload
                self._kind, self._parts, self._size = opcode, [payload], len(payload)
                continue
            if opcode != CONTINUATION or self._kind is None:
                raise ProtocolError(f"an unexpected frame (opcode {opcode:#x})")
            self._parts.append(payload)
            self._size += len(payload)
            if final:
                kind, parts, self._kind, self._parts = self._kind, self._parts, None, []
                return kind, b"".join(parts)

    def _frame(self) -> tuple[bool, int, bytes] | None:
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        first, second = buffer[0], buffer[1]
        if first & 0x70:
            raise ProtocolError("a reserved bit is set (no extension was agreed)")
        if second & 0x80:
            raise ProtocolError("a masked frame from the server")
        opcode = first & 0x0F
        length, start = second & 0x7F, 2
        if length == 126:
            if len(buffer) < 4:
                return None
            length, start = int.from_bytes(buffer[2:4], "big"), 4
        elif length == 127:
            if len(buffer) < 10:
                return None
            length, start = int.from_bytes(buffer[2:10], "big"), 10
        if opcode not in _CONTROL and length > self.max_size - self._size * (
            self._kind is not None
        ):
            raise ProtocolError(f"a message over {self.max_size} bytes")
        end = start + length
        if len(buffer) < end:
            return None
        payload = bytes(buffer[start:end])
        del buffer[:end]
        return bool(first & 0x80), opcode, payload
