"""Slow and many clients against a real reward server on loopback (raw sockets, bounded)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
from fastapi.responses import StreamingResponse

from rk_agent import reward_function
from rk_agent.server import create_app, serving

CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
BODY = json.dumps({"messages": CHAT, "ground_truth": "4"}).encode()
JSON = {"content-type": "application/json"}


@reward_function
def exact(response: str, ground_truth: str) -> float:
    return float(response.strip() == ground_truth)


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def head(length: int) -> bytes:
    return (
        f"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


@contextlib.contextmanager
def raw(url: str, count: int = 1) -> Iterator[list[socket.socket]]:
    """``count`` open client sockets (closed on leaving); each read waits at most 10 s."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(address(url), timeout=10)
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a read past 10 s fails the test)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def closed_by_server(sockets: list[socket.socket]) -> set[socket.socket]:
    """The sockets the server has closed (they sent heads that never end: nothing else comes)."""
    readable, _, _ = select.select(sockets, [], [], 1.0)
    closed = set()
    for sock in readable:
        with contextlib.suppress(ConnectionResetError):
            if sock.recv(65536):
                continue
        closed.add(sock)
    return closed


def test_a_request_head_that_never_ends_gets_408_and_is_closed() -> None:
    with serving(exact, header_timeout_s=0.3) as url, raw(url, 2) as (partial, silent):
        partial.sendall(b"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more
        first, second = read_all(partial), read_all(silent)
        healthy = httpx.post(url + "/evaluate", content=BODY, headers=JSON, timeout=10)
    assert first.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert first.endswith(
        b'{"detail": "the request head did not arrive within 0.3 s; send it at once"}'
    )
    assert second.startswith(b"HTTP/1.1 408")  # connected and sent nothing at all
    assert healthy.status_code == 200


def test_the_head_deadline_also_holds_between_kept_alive_requests() -> None:
    with serving(exact, header_timeout_s=0.3) as url, raw(url) as (sock,):
        sock.sendall(head(len(BODY)) + BODY)
        time.sleep(0.1)
        sock.sendall(b"POST /eval")  # a second request that stalls
        answers = read_all(sock)
    assert answers.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answers.count(b"HTTP/1.1 ") == 2 and b"HTTP/1.1 408" in answers


def test_a_body_that_never_ends_gets_408_and_is_closed() -> None:
    with serving(exact, body_timeout_s=0.3) as url, raw(url) as (sock,):
        sock.sendall(head(len(BODY)) + BODY[:-1])  # all but the last byte
        answer = read_all(sock)
        healthy = httpx.post(url + "/evaluate", content=BODY, headers=JSON, timeout=10)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert answer.endswith(b'the request body did not arrive within 0.3 s; send it at once"}')
    assert healthy.status_code == 200


def test_slow_clients_past_the_connection_limit_make_room_for_real_requests() -> None:
    limit = 20
    with serving(exact, max_connections=limit, header_timeout_s=60) as url:
        with raw(url, 3 * limit) as slow:
            for sock in slow:
                sock.sendall(b"POST /evaluate HTTP/1.1\r\n")  # heads that never end
            answered = httpx.post(url + "/evaluate", content=BODY, headers=JSON, timeout=10)
            time.sleep(0.2)
            closed = closed_by_server(slow)
            still_open = [sock for sock in slow if sock not in closed]
        again = httpx.post(url + "/evaluate", content=BODY, headers=JSON, timeout=10)
    assert answered.status_code == 200  # it took the place of the oldest slow one
    assert len(still_open) <= limit  # the rest were closed, oldest first
    assert set(still_open) <= set(slow[-limit:])
    assert again.status_code == 200


def test_when_every_connection_is_busy_a_new_one_gets_503() -> None:
    with serving(exact, max_connections=3, body_timeout_s=60) as url, raw(url, 3) as busy:
        for sock in busy:  # each one is in the middle of a request (its body)
            sock.sendall(head(len(BODY)) + BODY[:10])
        time.sleep(0.2)
        with raw(url) as (late,):
            answer = read_all(late)
        for sock in busy:
            sock.sendall(BODY[10:])
        done = [sock.recv(65536) for sock in busy]
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"retry-after: 1\r\n" in answer
    assert answer.endswith(b'{"detail": "too many connections; retry after 1 s"}')
    assert all(d.startswith(b"HTTP/1.1 200 OK") for d in done)


def test_bodies_past_the_byte_budget_wait_unread_and_small_samples_do_not() -> None:
    """Twelve clients each send all but the last byte of a large body: the bodies held stay
    within the budget (plus 64 KiB each); a small sample is answered meanwhile."""
    size = 400_000
    app = create_app(exact, max_body_bytes=size, body_budget_bytes=2 * size)
    with serving(app, body_timeout_s=60) as url, raw(url, 12) as large:
        padding = b" " * (size - len(BODY))
        for sock in large:
            sock.sendall(head(size) + BODY + padding[:-1])
        time.sleep(0.5)
        small = httpx.post(url + "/evaluate", content=BODY, headers=JSON, timeout=10)
        for sock in large:
            sock.sendall(padding[-1:])
        answers = [sock.recv(65536) for sock in large]
    assert small.status_code == 200
    assert all(a.startswith(b"HTTP/1.1 200 OK") for a in answers)
    budget = app.state.body_budget
    assert budget.peak <= budget.limit == 2 * size
    assert budget.held == 0


def read_until(sock: socket.socket, end: bytes, data: bytes = b"") -> tuple[bytes, bytes]:
    """What arrives up to and including ``end``, and what came after it (a read past 10 s
    fails the test)."""
    while end not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection before {end!r}: {data!r}"
        data += chunk
    at = data.index(end) + len(end)
    return data[:at], data[at:]


def test_every_kind_of_answer_arrives_whole_on_one_kept_alive_connection() -> None:
    # An answer with a Content-Length leaves in one write (its head held for its body); the
    # others are written as they come: a HEAD answer (no body), a streamed one, 100 Continue.
    app = create_app(exact)

    async def parts() -> AsyncIterator[bytes]:
        yield b"first "
        await asyncio.sleep(0.05)
        yield b"second"

    @app.get("/stream", response_model=None)
    async def stream() -> StreamingResponse:
        return StreamingResponse(parts(), media_type="text/plain")

    with serving(app) as url, raw(url) as (sock,):
        sock.sendall(b"HEAD /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        headed, rest = read_until(sock, b"\r\n\r\n")
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        streamed, rest = read_until(sock, b"0\r\n\r\n", rest)
        sock.sendall(head(len(BODY))[:-2] + b"Expect: 100-continue\r\n\r\n")
        continued, rest = read_until(sock, b"\r\n\r\n", rest)
        sock.sendall(BODY)
        answered, rest = read_until(sock, b'"weights":null}', rest)
        sock.sendall(head(len(BODY)) + BODY)
        again, rest = read_until(sock, b'"weights":null}', rest)
    assert headed.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: " in headed
    assert streamed.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in streamed and b"second" in streamed
    assert continued == b"HTTP/1.1 100 Continue\r\n\r\n"
    for answer in (answered, again):
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b'{"score":1.0,' in answer
    assert rest == b""


@reward_function
def slow_exact(response: str, ground_truth: str) -> float:
    """``exact``, after 0.8 s."""
    threading.Event().wait(0.8)
    return float(response.strip() == ground_truth)


def test_a_pipelined_request_whose_reward_outlasts_the_head_deadline_is_answered() -> None:
    # Issue 38: the second of two pipelined requests was watched for a head it had already
    # sent once the first was answered, and cut with "request head did not arrive" (408)
    # while its reward ran past --header-timeout.
    with serving(slow_exact, header_timeout_s=0.3) as url, raw(url) as (sock,):
        sock.sendall((head(len(BODY)) + BODY) * 2)
        first, rest = read_until(sock, b'"weights":null}')
        second, rest = read_until(sock, b'"weights":null}', rest)  # not a 408 and a close
    for answer in (first, second):
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b'{"score":1.0,' in answer
    assert rest == b""
