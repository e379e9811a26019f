"""The WebSocket client framing an OpenEnv session uses, checked against RFC 6455's rules and
against websockets' own parser of what a client sends (the server's side of the protocol)."""

from __future__ import annotations

import base64
import hashlib
import re
import struct

import pytest

from rk_agent.interop.openenv.framing import (
    CLOSE,
    PING,
    TEXT,
    FrameReader,
    HandshakeRefused,
    ProtocolError,
    frame,
    handshake,
    read_handshake,
)


def server_frame(opcode: int, payload: bytes, *, final: bool = True) -> bytes:
    """A frame as a server sends it (not masked)."""
    first = (0x80 if final else 0) | opcode
    n = len(payload)
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


def answer_to(request: bytes, status: str = "101 Switching Protocols", **headers: str) -> bytes:
    key = re.search(rb"Sec-WebSocket-Key: (\S+)", request)
    assert key is not None
    accept = base64.b64encode(
        hashlib.sha1(key.group(1) + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
    )
    fields = {"Upgrade": "websocket", "Connection": "Upgrade",
              "Sec-WebSocket-Accept": accept.decode(), **headers}  # fmt: skip
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_the_handshake_names_the_resource_host_and_credentials() -> None:
    request, _ = handshake("ws://127.0.0.1:8000/prefix/ws?x=1", token="secret")
    head = request.decode().split("\r\n")
    assert head[0] == "GET /prefix/ws?x=1 HTTP/1.1"
    assert "Host: 127.0.0.1:8000" in head and "Authorization: Bearer secret" in head
    assert "Sec-WebSocket-Version: 13" in head and request.endswith(b"\r\n\r\n")
    assert not any(h.startswith("Sec-WebSocket-Extensions") for h in head)  # no compression
    basic, _ = handshake("wss://me:pw@example.org/ws", token=None)
    assert b"Host: example.org\r\n" in basic  # the default port is not written
    assert b"Authorization: Basic " + base64.b64encode(b"me:pw") in basic
    v6, _ = handshake("ws://[::1]:9/ws", token=None)
    assert b"Host: [::1]:9\r\n" in v6


def test_the_answer_must_upgrade_with_the_keys_accept_value() -> None:
    request, accept = handshake("ws://127.0.0.1:8000/ws", token=None)
    answer = answer_to(request)
    assert read_handshake(answer[:-3], accept) is None  # not all of it yet
    assert read_handshake(answer + b"\x81\x00", accept) == len(answer)  # frames follow
    with pytest.raises(HandshakeRefused) as refused:
        read_handshake(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n", accept)
    assert refused.value.status == 401
    wrong = answer.replace(b"Sec-WebSocket-Accept: ", b"Sec-WebSocket-Accept: x")
    with pytest.raises(ProtocolError, match="Sec-WebSocket-Accept does not match"):
        read_handshake(wrong, accept)
    with pytest.raises(ProtocolError, match="an extension that was not offered"):
        read_handshake(answer_to(request, **{"Sec-WebSocket-Extensions": "permessage-deflate"}),
                       accept)  # fmt: skip


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536, 200_000])
def test_client_frames_are_masked_and_read_back_by_websockets_own_server_parser(
    size: int,
) -> None:
    from websockets.frames import Frame, Opcode
    from websockets.streams import StreamReader

    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    data = frame(TEXT, payload)
    assert data[1] & 0x80  # masked
    reader = StreamReader()
    reader.feed_data(data)
    parser = Frame.parse(reader.read_exact, mask=True)
    with pytest.raises(StopIteration) as done:
        next(parser)
    parsed = done.value.value
    assert (parsed.opcode, parsed.fin, parsed.data) == (Opcode.TEXT, True, payload)


def test_the_reader_joins_fragments_and_passes_control_frames_between_them() -> None:
    reader = FrameReader(max_size=1 << 20)
    stream = (
        server_frame(TEXT, b'{"a": ', final=False)
        + server_frame(PING, b"p")
        + server_frame(0x0, b"1", final=False)
        + server_frame(0x0, b"}")
        + server_frame(CLOSE, struct.pack("!H", 1001) + b"going away")
    )
    events = []
    for i in range(len(stream)):  # one byte at a time: frames split anywhere
        reader.feed(stream[i : i + 1])
        while (event := reader.next()) is not None:
            events.append(event)
    assert events == [(PING, b"p"), (TEXT, b'{"a": 1}'), (CLOSE, b"\x03\xe9going away")]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xc1\x00", "a reserved bit is set"),
        (b"\x81\x80\x00\x00\x00\x00", "a masked frame from the server"),
        (server_frame(0x0, b"x"), "an unexpected frame"),
        (server_frame(TEXT, b"a", final=False) + server_frame(TEXT, b"b"), "a new message"),
        (server_frame(PING, b"x" * 126), "a fragmented or long control frame"),
        (server_frame(TEXT, b"x" * 101), "a message over 100 bytes"),
        (server_frame(TEXT, b"x" * 60, final=False) + server_frame(0x0, b"x" * 41),
         "a message over 100 bytes"),
    ],
)  # fmt: skip
def test_what_breaks_the_protocol_is_an_error(data: bytes, why: str) -> None:
    reader = FrameReader(max_size=100)
    reader.feed(data)

    def read_all() -> None:
        while reader.next() is not None:
            pass

    with pytest.raises(ProtocolError, match=re.escape(why)):
        read_all()
