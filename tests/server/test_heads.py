"""Request heads have a size, and chunked trailers are never headers (issue 38 items 5 and 11):
a real reward server on loopback and raw-socket clients, bounded in bytes and time."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator

from rk_agent import reward_function
from rk_agent.server import serving

KEY = "rk-heads-KEY-0123456789abcdef"
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
BODY = json.dumps({"messages": CHAT, "ground_truth": "4"}).encode()
START = b"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@reward_function
def exact(response: str, ground_truth: str) -> float:
    return float(response.strip() == ground_truth)


@contextlib.contextmanager
def connection(url: str) -> Iterator[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        yield sock


def answer(sock: socket.socket, data: bytes = b"") -> tuple[bytes, bytes]:
    """One answer (its head and its ``Content-Length`` body), and what came after it; a
    connection reset after the answer arrived is the server closing on unread input."""
    with contextlib.suppress(ConnectionResetError):
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )  # fmt: skip
        while len(rest) < length and (chunk := sock.recv(65536)):
            rest += chunk
        return head + b"\r\n\r\n" + rest[:length], rest[length:]
    return data, b""


def send_as_far_as_it_goes(sock: socket.socket, parts: Iterator[bytes]) -> bool:
    """Send every part; False when the server closed the connection first."""
    try:
        for part in parts:
            sock.sendall(part)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def status(reply: bytes) -> int:
    return int(reply[9:12])


def test_a_head_of_many_tiny_fields_gets_431_before_auth() -> None:
    fields = b"".join(b"x-%d: 1\r\n" % i for i in range(101))  # 1 KiB: under the byte cap
    with serving(exact, api_key=KEY) as url, connection(url) as sock:
        sock.sendall(START + fields + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        refused, _ = answer(sock)
    assert refused.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b"connection: close\r\n" in refused
    assert json.loads(refused.partition(b"\r\n\r\n")[2]) == {
        "detail": "the request head has more than 100 header fields; the limit is 65536 bytes "
        "and 100 header fields. Send large data in the body."
    }


def test_a_head_of_100_fields_is_served() -> None:
    fields = b"".join(b"x-%d: 1\r\n" % i for i in range(96))  # and Host, Type, Length, Auth
    auth = f"Authorization: Bearer {KEY}\r\n".encode()
    with serving(exact, api_key=KEY) as url, connection(url) as sock:
        sock.sendall(START + fields + auth + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        served, _ = answer(sock)
    assert status(served) == 200 and b'"score":1.0' in served


def test_a_huge_header_value_is_refused_as_it_arrives_not_once_it_ends() -> None:
    # Issue 38: a 64 MiB value cost seconds of CPU (grown by concatenation, read by read) and
    # a 19 MiB head of tiny fields half a gigabyte, kept after the 401 that answered it.
    # Here: up to 32 MiB of one value, 64 KiB at a time; the head never ends.
    with serving(exact, api_key=KEY, header_timeout_s=60) as url, connection(url) as sock:
        value = (b"x" * 65536 for _ in range(512))
        sent_all = send_as_far_as_it_goes(sock, iter([START + b"X-Big: ", *value]))
        if sent_all:  # the server read it all: end the head and see what it says
            sock.sendall(b"\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
        refused, _ = answer(sock)
    assert status(refused) == 431, refused[:200]
    assert b"the request head is over 65536 bytes" in refused
    assert not sent_all  # it closed the connection long before 32 MiB


def test_a_request_with_a_large_body_in_the_same_read_as_its_head_is_served() -> None:
    # The head is counted up to its blank line, never the body behind it in the same read;
    # and a pipelined head after a large body is counted from where the body ends.
    large = json.dumps({"messages": CHAT, "ground_truth": "4", "pad": "x" * 500_000}).encode()
    one = START + b"Content-Length: %d\r\n\r\n" % len(large) + large
    two = START + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
    with serving(exact) as url, connection(url) as sock:
        sock.sendall(one + two)
        first, rest = answer(sock)
        second, rest = answer(sock, rest)
    assert [status(first), status(second)] == [200, 200]
    assert b'"score":1.0' in first and b'"score":1.0' in second


def chunked(body: bytes, trailers: bytes) -> bytes:
    """A chunked request of ``body`` in two chunks, with ``trailers`` after the last chunk."""
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:half], body[half:]))
    return START + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n" + trailers + b"\r\n"


def test_an_authorization_sent_only_as_a_trailer_does_not_authenticate() -> None:
    # Issue 38: trailers were merged into the headers, so a key in a trailer of a request that
    # arrived in one read passed the key check.
    trailer = f"Authorization: Bearer {KEY}\r\n".encode()
    with serving(exact, api_key=KEY) as url, connection(url) as sock:
        sock.sendall(chunked(BODY, trailer))  # in one write: one read on loopback
        trailed, rest = answer(sock)
        sock.sendall(chunked(BODY, b"").replace(b"\r\n\r\n", b"\r\n" + trailer + b"\r\n", 1))
        headed, _ = answer(sock, rest)
    assert status(trailed) == 401
    assert json.loads(trailed.partition(b"\r\n\r\n")[2]) == {
        "detail": "this reward server needs an API key: send 'Authorization: Bearer <key>'."
    }
    assert status(headed) == 200  # the same key in the head


def test_trailers_past_the_head_cap_get_431() -> None:
    floods = (b"x-t%d: %s\r\n" % (i, b"y" * 1000) for i in range(4000))  # 4 MB of trailers
    with serving(exact) as url, connection(url) as sock:
        request = chunked(BODY, b"")[:-2]  # up to the last chunk; the trailers come
        sent_all = send_as_far_as_it_goes(sock, iter([request, *floods, b"\r\n"]))
        refused, _ = answer(sock)
    assert status(refused) == 431, refused[:200]
    assert b"the chunked body sent over 65536 bytes without a body byte" in refused
    assert not sent_all
