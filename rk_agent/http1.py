"""A small HTTP/1.1 client for the served-model policies' plain-HTTP servers.

A rollout process sends a few thousand JSON requests a second to one model server, most often
a local one over plain HTTP (vLLM, SGLang, ``transformers serve``). ``aiohttp``'s request path
(request and response objects, header multidicts, cookie jar, tracing hooks) cost about
0.33 ms of CPU per request on a 2-core machine, most of what a rollout turn costs; writing the
request and reading the reply on a kept-alive connection costs a third of that
(``benchmarks/bench_model_client.py``). So `rk_agent.model_client.ModelClient` uses
this pool for ``http://`` servers it reaches directly, and ``aiohttp`` for ``https://`` and
for servers behind a proxy, where TLS and proxy protocols are worth a full library.

What it speaks: one request at a time per connection (no pipelining), connections kept alive
and reused last-in first-out, at most ``limit`` open; replies sized by ``Content-Length``,
``Transfer-Encoding: chunked``, or the connection's end; ``Connection: close`` honoured;
interim ``1xx`` replies skipped; a ``gzip`` or ``deflate`` body decoded (none is asked for).
A request sent on a reused connection that the server had closed meanwhile (no byte of a reply
came back) is sent again once on a new connection, as browsers and HTTP libraries do.

Failures: a connection refused or lost is an `OSError` (``ConnectionError``); a server that
does not answer within ``read_timeout_s`` (the whole reply) or accept within
``connect_timeout_s`` is a `TimeoutError`; a reply that is not HTTP/1.x is a `BadReply`. The
connection is closed after any failure.

Main names: `Http1Pool`, `Reply`, `BadReply`, `ServerDisconnected`.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from typing import Any

__all__ = ["BadReply", "Http1Pool", "Reply", "ServerDisconnected"]

_MAX_HEAD = 64 * 1024


class BadReply(ValueError):
    """The server's reply is not HTTP/1.x (a garbled status line, header or chunk)."""


@dataclass(slots=True)
class Reply:
    """One HTTP reply: status, reason phrase, headers (names lower-cased) and body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class ServerDisconnected(ConnectionError):
    """The connection ended before the reply did; ``answered``: some of it had come."""

    def __init__(self, answered: bool, cause: BaseException | None) -> None:
        super().__init__(f"the server closed the connection{' mid-reply' if answered else ''}")
        self.answered = answered
        self.__cause__ = cause


class _Connection(asyncio.Protocol):
    """One kept-alive connection: sends a request, parses its reply as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Reply] | None = None
        self._head: tuple[int, str, dict[str, str]] | None = None
        self._length: int | None = None  # body bytes; -1: chunked; None: until the end
        self._answered = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, data: bytes) -> asyncio.Future[Reply]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head, self._length, self._answered, self.reusable = None, None, False, False
        self.transport.write(data)
        return self._waiter

    def time_out(self) -> None:
        """The reply did not come in time: its wait ends with a `TimeoutError`."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError())

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.close()  # bytes nobody asked for: the connection cannot be trusted again
            return
        self._answered = True
        try:
            if not self._buffer and self._head is None:
                reply = self._whole(data)  # most replies: all of it in one read
                if reply is not None:
                    waiter.set_result(reply)
                    return
            self._buffer += data
            reply = self._parse(eof=False)
        except BadReply as exc:
            self.close()
            waiter.set_exception(exc)
            return
        if reply is not None:
            waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        try:
            reply = self._parse(eof=True) if self._head is not None else None
        except BadReply as error:
            waiter.set_exception(error)
            return
        if reply is not None:
            waiter.set_result(reply)
        else:
            waiter.set_exception(ServerDisconnected(self._answered, exc))

    def _whole(self, data: bytes) -> Reply | None:
        """The reply when ``data`` is all of it and nothing more, sized by ``Content-Length``
        (read without copying it into the buffer); ``None`` for anything else, which `_parse`
        reads from the buffer."""
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = data[:end].decode("latin-1").split("\r\n")
        status, reason, headers = _head(lines)
        if 100 <= status < 200:
            return None
        length = _body_length(status, headers)
        if length is None or length < 0 or len(data) != end + 4 + length:
            return None
        self.reusable = _keeps_alive(lines[0], headers)
        return Reply(status, reason, headers, _decoded(data[end + 4 :], headers))

    def _parse(self, *, eof: bool) -> Reply | None:
        """The reply, once all of it is in the buffer; ``None`` while more is to come."""
        buffer = self._buffer
        while self._head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise BadReply(f"a reply head longer than {_MAX_HEAD} bytes")
                return None
            head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
            del buffer[: end + 4]
            status, reason, headers = _head(head)
            if 100 <= status < 200:
                continue  # an interim reply (100 Continue): the real one follows
            self._head = (status, reason, headers)
            self._length = _body_length(status, headers)
            self.reusable = _keeps_alive(head[0], headers) and self._length is not None
        status, reason, headers = self._head
        if self._length is None:
            if not eof:
                return None
            body = bytes(buffer)
            buffer.clear()
        elif self._length >= 0:
            if len(buffer) < self._length:
                return None
            body = bytes(buffer[: self._length])
            del buffer[: self._length]
        else:
            dechunked = _dechunk(buffer)
            if dechunked is None:
                return None
            body = dechunked
        if buffer:
            self.reusable = False  # bytes past the reply: do not guess what they are
        return Reply(status, reason, headers, _decoded(body, headers))


def _keeps_alive(status_line: str, headers: dict[str, str]) -> bool:
    """Whether the server keeps the connection open after this reply (HTTP/1.1, no close)."""
    return (
        status_line.startswith("HTTP/1.1") and "close" not in headers.get("connection", "").lower()
    )


def _head(lines: list[str]) -> tuple[int, str, dict[str, str]]:
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise BadReply(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise BadReply(f"not an HTTP header line: {line[:80]!r}")
        key, value = name.lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(code), reason, headers


def _body_length(status: int, headers: dict[str, str]) -> int | None:
    if status in (204, 304):
        return 0
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return -1
    length = headers.get("content-length")
    if length is None:
        return None
    if not length.isdigit():
        raise BadReply(f"a Content-Length that is not a number: {length[:40]!r}")
    return int(length)


def _dechunk(buffer: bytearray) -> bytes | None:
    """A chunked body taken from the front of ``buffer``, or ``None`` if not all of it is in."""
    out = bytearray()
    at = 0
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        size_text = bytes(buffer[at:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadReply(f"not a chunk size: {size_text[:40]!r}") from None
        if size == 0:
            if buffer[line_end + 2 : line_end + 4] == b"\r\n":
                end = line_end + 4
            else:  # trailer lines, then an empty one
                found = buffer.find(b"\r\n\r\n", line_end)
                if found < 0:
                    return None
                end = found + 4
            del buffer[:end]
            return bytes(out)
        start = line_end + 2
        if len(buffer) < start + size + 2:
            return None
        if buffer[start + size : start + size + 2] != b"\r\n":
            raise BadReply("a chunk that does not end where its size says")
        out += buffer[start : start + size]
        at = start + size + 2


def _decoded(body: bytes, headers: dict[str, str]) -> bytes:
    encoding = headers.get("content-encoding", "").lower()
    if encoding in ("", "identity") or not body:
        return body
    try:
        if encoding == "gzip":
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return zlib.decompress(body)
    except zlib.error as exc:
        raise BadReply(f"a {encoding} body that does not decode: {exc}") from None
    raise BadReply(f"a body in an encoding it was not asked for: {encoding!r}")


class Http1Pool:
    """Kept-alive connections to one ``host:port``, opened in the running event loop.

    Args:
        host: the server's host.
        port: its port.
        limit: connections open at most (requests beyond wait for one).
        connect_timeout_s: the longest wait for a connection (``None``: no limit).
        read_timeout_s: the longest wait for a whole reply (``None``: no limit).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        limit: int,
        connect_timeout_s: float | None,
        read_timeout_s: float | None,
    ) -> None:
        self.host = host
        self.port = port
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self._in_flight = 0  # requests holding a slot
        self._idle: list[_Connection] = []
        # Connections waiting for a reply, with their deadlines: every wait is as long, so
        # the order they were sent in is their deadlines' order, and one timer of the loop's
        # (for the earliest) keeps them all; a timer for each request cost more than the
        # request's own parsing.
        self._waiting: dict[_Connection, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    async def request(self, data: bytes) -> Reply:
        """Send one whole request (head and body, as bytes) and return its reply.

        Raises:
            ConnectionError: refused, or lost before the reply was whole.
            TimeoutError: no connection or no whole reply in time.
            BadReply: a reply that is not HTTP/1.x.
        """
        await self._slots.acquire()  # not ``async with``: two coroutines fewer a request
        self._in_flight += 1
        try:
            connection, reused = await self._connection()
            try:
                return await self._exchange(connection, data)
            except ServerDisconnected as lost:
                if not reused or lost.answered:
                    raise
            # It had closed while idle (no byte came back): once more, on a new connection.
            connection, _ = await self._connection(fresh=True)
            return await self._exchange(connection, data)
        finally:
            self._in_flight -= 1
            self._slots.release()

    async def _exchange(self, connection: _Connection, data: bytes) -> Reply:
        """One request and its reply on ``connection``, which is kept if it can be reused."""
        timeout = self.read_timeout_s
        if timeout is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            self._waiting[connection] = deadline
            if self._timer is None or self._timer_loop is not loop:  # a pool used anew
                self._timer, self._timer_loop = loop.call_at(deadline, self._expire), loop
        try:
            reply = await connection.send(data)
        except BaseException:
            connection.close()  # lost, timed out, cancelled, garbled: never reused
            raise
        finally:
            self._waiting.pop(connection, None)
        if connection.reusable and not connection.closed:
            self._idle.append(connection)
        else:
            connection.close()
        return reply

    def _expire(self) -> None:
        """Time out the waits past their deadline; set the timer for the next one."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._waiting:
            connection, deadline = next(iter(self._waiting.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            del self._waiting[connection]
            connection.time_out()

    async def _connection(self, *, fresh: bool = False) -> tuple[_Connection, bool]:
        """An idle connection (``True``: reused) unless ``fresh``, else a new one."""
        while self._idle and not fresh:
            connection = self._idle.pop()
            transport = connection.transport
            if not connection.closed and transport is not None and not transport.is_closing():
                return connection, True
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout_s):
            _, connection = await loop.create_connection(_Connection, self.host, self.port)
        return connection, False

    async def preconnect(self, count: int) -> int:
        """Open connections now, concurrently, until ``count`` are idle (at most the limit's
        free slots); return how many were opened. A run's first requests then go out as its
        episodes start: opened on first use, the connections of 128 episodes started at once
        were all made only once every episode had started, and the whole first wave of
        requests reached the server together. A connection that cannot be made is left to
        the first request, which reports why."""
        wanted = min(count, self.limit - self._in_flight) - len(self._idle)
        if wanted <= 0:
            return 0
        opened = await asyncio.gather(*(self._open() for _ in range(wanted)))
        made = [connection for connection in opened if connection is not None]
        self._idle.extend(made)
        return len(made)

    async def _open(self) -> _Connection | None:
        try:
            connection, _ = await self._connection(fresh=True)
        except (OSError, TimeoutError):
            return None
        return connection

    def close(self) -> None:
        """Close the idle connections (those in use close when their request ends)."""
        if self._timer is not None and not self._waiting:
            self._timer.cancel()
            self._timer = None
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def request_head(method: str, target: str, host: str, headers: bytes, length: int | None) -> bytes:
    """The head of a request: its line, ``Host``, the fixed ``headers`` (``Name: value\\r\\n``
    lines) and ``Content-Length`` when there is a body."""
    sized = b"" if length is None else b"Content-Length: %d\r\n" % length
    return b"%s %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n" % (
        method.encode(),
        target.encode(),
        host.encode(),
        headers,
        sized,
    )


def header_lines(headers: dict[str, Any]) -> bytes:
    """``Name: value\\r\\n`` lines; a name or value with a line break is refused (it would
    smuggle a header or a request into the stream).

    Raises:
        ValueError: the header that holds one (by name only: a value may be a key).
    """
    out = bytearray()
    for name, value in headers.items():
        text = str(value)
        if any(c in name or c in text for c in "\r\n\0") or ":" in name:
            raise ValueError(f"the header {name!r} holds a line break or another character "
                             "a header may not hold")  # fmt: skip
        out += f"{name}: {text}\r\n".encode("latin-1", errors="strict")
    return bytes(out)
