"""`rk_agent.http1` against a raw server on loopback that writes replies byte by byte
as a script says: lengths, chunks, closes, interim replies, garbage and silence."""

from __future__ import annotations

import asyncio
import gzip
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rk_agent.http1 import (
    BadReply,
    Http1Pool,
    Reply,
    ServerDisconnected,
    header_lines,
    request_head,
)

# script(connection number, request number on it, request bytes) -> (bytes to send, close after)
Script = Callable[[int, int, bytes], tuple[bytes, bool]]


class RawServer:
    """Accepts connections on loopback; answers each request with what ``script`` says."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.open_now = 0
        self.most_open = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                number = self.connections
                self.connections += 1
                self.open_now += 1
                self.most_open = max(self.most_open, self.open_now)
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            data, index = b"", 0
            try:
                while True:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        data += chunk
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = int(re.search(rb"(?i)content-length: (\d+)", head + b"\r\n")[1]
                                 if b"ontent-" in head else 0)  # fmt: skip
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    data = rest[length:]
                    answer, close = self.script(number, index, head + b"\r\n\r\n" + rest[:length])
                    index += 1
                    if answer:
                        conn.sendall(answer)
                    if close:
                        return
            finally:
                with self._lock:
                    self.open_now -= 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], RawServer]]:
    made: list[RawServer] = []

    def start(script: Script) -> RawServer:
        made.append(RawServer(script))
        return made[-1]

    yield start
    for server in made:
        server.close()


def ok(body: bytes = b'{"ok": true}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def post(body: bytes = b"{}") -> bytes:
    head = request_head(
        "POST", "/v1/x", "127.0.0.1", b"Content-Type: application/json\r\n", len(body)
    )
    return head + body


def run(pool: Http1Pool, work: Callable[[Http1Pool], Any]) -> Any:
    async def main() -> Any:
        try:
            return await work(pool)
        finally:
            pool.close()

    return asyncio.run(main())


def pool_for(server: RawServer, **options: Any) -> Http1Pool:
    options = {"limit": 8, "connect_timeout_s": 5.0, "read_timeout_s": 10.0, **options}
    return Http1Pool("127.0.0.1", server.port, **options)


async def many(pool: Http1Pool, n: int) -> list[Reply]:
    return [await pool.request(post()) for _ in range(n)]


def test_a_sized_reply_and_one_connection_kept_for_every_request(serve: Any) -> None:
    seen: list[bytes] = []

    def script(conn: int, index: int, request: bytes) -> tuple[bytes, bool]:
        seen.append(request)
        return ok(b'{"n": %d}' % index), False

    server = serve(script)
    replies = run(pool_for(server), lambda p: many(p, 3))
    assert [r.body for r in replies] == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}']
    assert replies[0].status == 200 and replies[0].reason == "OK"
    assert server.connections == 1
    assert seen[0] == (b"POST /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                       b"\r\nContent-Length: 2\r\n\r\n{}")  # fmt: skip


def test_chunked_replies_with_extensions_and_trailers(serve: Any) -> None:
    body = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = body + b'4;ext=1\r\n{"a"\r\n5\r\n: 1}\n\r\n0\r\n\r\n'
    second = body + b"2\r\n{}\r\n0\r\nX-Trailer: yes\r\n\r\n"
    server = serve(lambda conn, index, _: ((first, second)[index % 2], False))
    replies = run(pool_for(server), lambda p: many(p, 2))
    assert [r.body for r in replies] == [b'{"a": 1}\n', b"{}"]
    assert server.connections == 1  # both read to their end: the connection is kept


def test_a_reply_that_ends_with_the_connection(serve: Any) -> None:
    server = serve(lambda conn, index, _: (b"HTTP/1.1 200 OK\r\n\r\nall of it", True))
    replies = run(pool_for(server), lambda p: many(p, 2))
    assert [r.body for r in replies] == [b"all of it", b"all of it"]
    assert server.connections == 2


def test_connection_close_and_http_1_0_are_not_reused(serve: Any) -> None:
    answers = [
        ok(extra=b"Connection: close\r\n"),
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ]
    server = serve(lambda conn, index, _: (answers[conn % 2], False))
    run(pool_for(server), lambda p: many(p, 3))
    assert server.connections == 3


def test_interim_replies_are_skipped_and_gzip_is_decoded(serve: Any) -> None:
    packed = gzip.compress(b'{"zipped": 1}')
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(packed, b"Content-Encoding: gzip\r\n")
    server = serve(lambda conn, index, _: (answer, False))
    (reply,) = run(pool_for(server), lambda p: many(p, 1))
    assert reply.body == b'{"zipped": 1}' and reply.headers["content-encoding"] == "gzip"


def test_no_content_has_no_body(serve: Any) -> None:
    server = serve(lambda conn, index, _: (b"HTTP/1.1 204 No Content\r\n\r\n", False))
    replies = run(pool_for(server), lambda p: many(p, 2))
    assert [(r.status, r.body) for r in replies] == [(204, b""), (204, b"")]
    assert server.connections == 1


def test_headers_are_read_case_blind_and_repeated_ones_joined(serve: Any) -> None:
    extra = b"Retry-After: 2\r\nX-Thing: a\r\nx-thing: b\r\n"
    answer = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n" + extra + b"\r\n"
    server = serve(lambda conn, index, _: (answer, False))
    (reply,) = run(pool_for(server), lambda p: many(p, 1))
    assert reply.status == 429 and reply.reason == "Too Many Requests"
    assert reply.headers["retry-after"] == "2" and reply.headers["x-thing"] == "a, b"


def test_a_kept_connection_the_server_closed_is_replaced_once(serve: Any) -> None:
    # The server closes each connection after its first reply, without saying so: the next
    # request goes out on a dead connection, gets nothing back, and is sent once more.
    server = serve(lambda conn, index, _: (ok(), True))

    async def twice(pool: Http1Pool) -> list[Reply]:
        first = await pool.request(post())
        await asyncio.sleep(0.05)  # let the close arrive
        return [first, await pool.request(post())]

    replies = run(pool_for(server), twice)
    assert [r.status for r in replies] == [200, 200]
    assert server.connections == 2


def test_a_connection_lost_mid_reply_is_an_error_not_a_resend(serve: Any) -> None:
    server = serve(lambda conn, index, _: (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{", True))
    with pytest.raises(ServerDisconnected, match="closed the connection mid-reply"):
        run(pool_for(server), lambda p: many(p, 1))
    assert server.connections == 1


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line: 'SSH-2.0-OpenSSH'"),
        (b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", "not an HTTP header line: 'No colon here'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
         "a Content-Length that is not a number"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not a chunk size: b'zz'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Encoding: br\r\n\r\nabc",
         "a body in an encoding it was not asked for: 'br'"),
    ],
)  # fmt: skip
def test_a_reply_that_is_not_http_is_a_bad_reply(serve: Any, answer: bytes, message: str) -> None:
    server = serve(lambda conn, index, _: (answer, False))
    with pytest.raises(BadReply, match=re.escape(message)):
        run(pool_for(server), lambda p: many(p, 1))


def test_silence_is_a_timeout_and_the_connection_is_dropped(serve: Any) -> None:
    server = serve(lambda conn, index, _: (b"" if index == 0 and conn == 0 else ok(), False))

    async def work(pool: Http1Pool) -> Reply:
        with pytest.raises(TimeoutError):
            await pool.request(post())
        return await pool.request(post())

    reply = run(pool_for(server, read_timeout_s=0.3), work)
    assert reply.status == 200 and server.connections == 2


def test_each_silent_request_times_out_at_its_own_deadline(serve: Any) -> None:
    server = serve(lambda conn, index, data: (b"" if b"silent" in data else ok(), False))
    ended: list[str] = []

    async def one(pool: Http1Pool, name: str, after_s: float) -> None:
        await asyncio.sleep(after_s)
        try:
            await pool.request(post(b'{"silent": 1}' if "silent" in name else b"{}"))
        except TimeoutError:
            ended.append(f"{name} timed out")
        else:
            ended.append(f"{name} answered")

    async def work(pool: Http1Pool) -> None:
        await asyncio.gather(
            one(pool, "silent first", 0.0), one(pool, "spoken", 0.1),
            one(pool, "silent second", 0.4),
        )  # fmt: skip

    run(pool_for(server, read_timeout_s=0.3), work)
    assert ended == ["spoken answered", "silent first timed out", "silent second timed out"]


def test_a_pool_used_again_in_another_event_loop_still_times_out(serve: Any) -> None:
    server = serve(lambda conn, index, data: (b"" if b"silent" in data else ok(), False))
    pool = pool_for(server, read_timeout_s=0.3)

    async def silent(pool: Http1Pool) -> None:
        with pytest.raises(TimeoutError):
            await pool.request(post(b'{"silent": 1}'))

    async def unfinished(pool: Http1Pool) -> None:  # leaves the first loop's timer armed
        task = asyncio.ensure_future(pool.request(post(b'{"silent": 1}')))
        await asyncio.sleep(0.05)
        task.cancel()

    run(pool, unfinished)
    run(pool, silent)
    run(pool, silent)


def test_preconnect_opens_idle_connections_that_requests_then_use(serve: Any) -> None:
    server = serve(lambda conn, index, _: (ok(), False))

    async def work(pool: Http1Pool) -> list[int]:
        opened = [await pool.preconnect(10), await pool.preconnect(10)]  # the limit: 4
        await asyncio.gather(*(pool.request(post()) for _ in range(4)))
        return opened

    assert run(pool_for(server, limit=4), work) == [4, 0]
    assert server.connections == 4  # the requests used the connections opened ahead


def test_preconnect_to_nobody_opens_nothing_and_leaves_the_error_to_requests() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        pool = Http1Pool("127.0.0.1", port, limit=2, connect_timeout_s=5.0, read_timeout_s=5.0)

        async def work(pool: Http1Pool) -> int:
            opened = await pool.preconnect(2)
            with pytest.raises(ConnectionError):
                await pool.request(post())
            return opened

        assert run(pool, work) == 0


def test_nobody_listening_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = Http1Pool("127.0.0.1", port, limit=2, connect_timeout_s=5, read_timeout_s=5)
    with pytest.raises(ConnectionRefusedError):
        run(pool, lambda p: many(p, 1))


def test_at_most_limit_connections_are_open(serve: Any) -> None:
    def script(conn: int, index: int, request: bytes) -> tuple[bytes, bool]:
        threading.Event().wait(0.02)  # long enough for the requests to pile up
        return ok(), False

    server = serve(script)

    async def crowd(pool: Http1Pool) -> list[Reply]:
        return await asyncio.gather(*(pool.request(post()) for _ in range(40)))

    replies = run(pool_for(server, limit=3), crowd)
    assert len(replies) == 40 and all(r.status == 200 for r in replies)
    assert server.most_open <= 3 and server.connections == 3


def test_a_slot_comes_back_from_a_request_cancelled_failed_or_cancelled_while_waiting(
    serve: Any,
) -> None:
    server = serve(lambda conn, index, data: (b"" if b"silent" in data else ok(), False))

    async def work(pool: Http1Pool) -> Reply:
        holder = asyncio.ensure_future(pool.request(post(b'{"silent": 1}')))  # holds the slot
        await asyncio.sleep(0.05)
        waiter = asyncio.ensure_future(pool.request(post()))  # waits for it
        await asyncio.sleep(0.05)
        assert not waiter.done()
        waiter.cancel()  # cancelled while waiting: takes no slot
        holder.cancel()  # cancelled while its reply is awaited: gives its slot back
        for task in (waiter, holder):
            with pytest.raises(asyncio.CancelledError):
                await task
        with pytest.raises(TimeoutError):  # failed: gives its slot back
            await pool.request(post(b'{"silent": 2}'))
        return await asyncio.wait_for(pool.request(post()), 5)  # the one slot is free

    reply = run(pool_for(server, limit=1, read_timeout_s=0.2), work)
    assert reply.status == 200


def test_header_lines_refuse_what_would_smuggle_a_header() -> None:
    assert header_lines({"Authorization": "Bearer k", "X-A": 1}) == (
        b"Authorization: Bearer k\r\nX-A: 1\r\n"
    )
    for bad in ({"X-A": "v\r\nX-Evil: 1"}, {"X-A\n": "v"}, {"X:A": "v"}, {"X-A": "v\x00"}):
        with pytest.raises(ValueError, match="holds a line break or another character"):
            header_lines(bad)
