"""The reward server's connections, before any request reaches the app.

uvicorn (0.54) sets no deadline on a request head or body: a client that connects and sends
part of a head holds its socket, and its file descriptor, for as long as it likes, and
``limit_concurrency`` only answers 503 once a whole head has arrived.
`GuardedHttpToolsProtocol` (uvicorn's httptools protocol with these additions) closes that gap:

- a deadline for each request: its head must arrive within ``header_timeout_s`` of the
  connection opening (or of the previous answer on a kept-alive connection), and its body
  within ``body_timeout_s`` of the head; a connection past either is answered 408 and closed;
- a cap on open connections (``max_connections``, kept below the process's file descriptor
  limit): a new connection past it takes the place of the oldest one that has not sent a
  complete head (a slow client, or an idle kept-alive one), or, when every connection is busy
  with a request, is answered 503 with ``Retry-After`` and closed;
- a cap on each request head, counted as it arrives, and chunked trailers that never count
  as headers (`rk_agent.server._heads.HeadLimit`): 431 past it;
- the lines it logs go through `rk_agent.server._logs.RateLimited` (one line per cause per
  interval, with a count of the rest);
- an answer with a ``Content-Length`` leaves in one write, its head held until its body's
  first part (`_OneWrite`): uvicorn writes the two apart, two sends and two packets.

The app sees none of this: a cut connection is a disconnect.

Over TLS asyncio tells the protocol of a connection only once its handshake is done, so
uvicorn's server runs on `TlsHandshakeLoop` (``Config(loop=tls_loop(limits))``): asyncio's
loop, which hands each connection to its protocol when it is accepted, before the handshake
(`_Guard.handshake_began`). From then on it counts against ``max_connections`` and waits in
line with the connections without a head: the oldest is closed to make room (the new one is
closed when every connection is busy), and a handshake not done within ``header_timeout_s`` is
cut (asyncio's own handshake timeout, 60 s, is set to that too).

Main names:
    ConnectionLimits: the settings, and the connections waiting for a head.
    GuardedHttpToolsProtocol: the protocol class given to uvicorn (``Config(http=...)``);
        httptools rather than h11, whose pure-Python parsing was the server's largest cost
        per request.
    fd_headroom: how many connections the file descriptor limit leaves room for.
    TlsHandshakeLoop, tls_loop: the event loop for TLS, and its factory for ``Config(loop=...)``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import resource
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rk_agent.server._heads import MAX_HEAD_BYTES, MAX_HEADERS, HeadLimit

__all__ = [
    "BACKLOG",
    "FD_RESERVE",
    "ConnectionLimits",
    "GuardedHttpToolsProtocol",
    "TlsHandshakeLoop",
    "fd_headroom",
    "tls_loop",
]

logger = logging.getLogger("rk_agent.server")

FD_RESERVE = 128
"""File descriptors left to the reward, its threads, logs and sandboxes (never given to clients)."""

BACKLOG = 128
"""The listen backlog, and so the most connections asyncio accepts in one go (uvicorn's 2048
would let one burst of slow clients take 2048 descriptors before the cap could close any)."""


def fd_headroom() -> int:
    """Connections the soft file descriptor limit (``ulimit -n``) leaves room for: less the
    reserve and two bursts of accepted connections (one not yet seen by the protocol, one
    whose evicted connections close on the next turn of the loop)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(16, soft - FD_RESERVE - 2 * BACKLOG)


class TlsHandshakeLoop(asyncio.SelectorEventLoop):
    """asyncio's event loop, whose TLS servers count a connection from its accept, not from
    the end of its handshake (module docstring), and give a client ``handshake_timeout_s`` to
    finish its handshake (the server's ``header_timeout_s``: the time it has to send a head).

    uvicorn passes no handshake timeout to ``create_server``; asyncio's default is 60 s, and
    asyncio tells the protocol nothing before the handshake is done: 1,100 clients that never
    sent a ClientHello held 1,100 descriptors outside ``max_connections``. Given to uvicorn as
    ``Config(loop=tls_loop(limits))``.
    """

    def __init__(self, handshake_timeout_s: float) -> None:
        super().__init__()
        self.handshake_timeout_s = handshake_timeout_s

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl") is not None and kwargs.get("ssl_handshake_timeout") is None:
            kwargs["ssl_handshake_timeout"] = self.handshake_timeout_s
        return await super().create_server(*args, **kwargs)

    def _make_ssl_transport(
        self,
        rawsock: Any,
        protocol: Any,
        sslcontext: Any,
        waiter: asyncio.Future[Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """asyncio's, called when a connection is accepted: the guarded protocol learns of
        the connection now, before its handshake."""
        transport = super()._make_ssl_transport(  # type: ignore[misc]
            rawsock, protocol, sslcontext, waiter, **kwargs
        )
        if kwargs.get("server_side") and waiter is not None and isinstance(protocol, _Guard):
            protocol.handshake_began(transport, waiter)
        return transport


def tls_loop(limits: ConnectionLimits) -> Callable[[], TlsHandshakeLoop]:
    """The loop factory of a TLS server with ``limits`` (it pickles: uvicorn's workers get it)."""
    return functools.partial(TlsHandshakeLoop, limits.header_timeout_s)


class ConnectionLimits:
    """The settings of `GuardedHttpToolsProtocol` (one per server, on its uvicorn ``Config``),
    and the connections it watches.

    The deadlines are kept by one sweep every `tick_s` (a tenth of the shorter deadline, at
    most 1 s), not by a timer per request: a connection past its deadline is cut up to one
    tick late. Every connection waits the same time for a head (and for a body), so the oldest
    wait is first in its dict and a sweep stops at the first that has time left.
    """

    def __init__(
        self,
        *,
        header_timeout_s: float,
        body_timeout_s: float,
        max_connections: int,
        max_head_bytes: int = MAX_HEAD_BYTES,
        max_headers: int = MAX_HEADERS,
    ) -> None:
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.max_connections = max_connections
        self.max_head_bytes = max_head_bytes  # read by `HeadLimit`
        self.max_headers = max_headers
        self.tick_s = min(1.0, max(0.01, min(header_timeout_s, body_timeout_s) / 10))
        # Connections waiting for a request head (or in their TLS handshake), and for a
        # request body: when the wait began, oldest first (dicts keep insertion order).
        self.waiting: dict[_Guard, float] = {}
        self.reading: dict[_Guard, float] = {}
        self.handshaking: set[_Guard] = set()  # accepted, in their TLS handshake: they count
        self._sweep: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:  # uvicorn's workers get a pickled Config
        return {
            **self.__dict__, "waiting": {}, "reading": {}, "handshaking": set(), "_sweep": None,
            "_loop": None,
        }  # fmt: skip

    def watch(self, guard: _Guard, loop: asyncio.AbstractEventLoop, *, head: bool) -> None:
        """Start ``guard``'s wait for a request head (or body) now (last in line)."""
        waits = self.waiting if head else self.reading
        waits.pop(guard, None)
        waits[guard] = loop.time()
        if self._sweep is None or self._loop is not loop:
            self._loop = loop
            self._sweep = loop.call_later(self.tick_s, self._cut_late)

    def unwatch(self, guard: _Guard) -> None:
        self.waiting.pop(guard, None)
        self.reading.pop(guard, None)

    def _cut_late(self) -> None:
        """Cut every connection past its deadline; sweep again while any is watched."""
        loop = self._loop
        assert loop is not None
        now = loop.time()
        late: list[_Guard] = []
        for waits, seconds in ((self.waiting, self.header_timeout_s),
                               (self.reading, self.body_timeout_s)):  # fmt: skip
            for guard, since in waits.items():
                if now - since < seconds:
                    break
                late.append(guard)
        for guard in late:
            guard._expired()
        if self.waiting or self.reading:
            self._sweep = loop.call_later(self.tick_s, self._cut_late)
        else:
            self._sweep = None


_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"retry-after: 1\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


def _raw(template: bytes, detail: str) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    return template % (len(body), body)


class _Guard:
    """Request deadlines and a connection cap over a uvicorn HTTP protocol (module docstring).

    Mixed in before a uvicorn protocol class (h11's and httptools' share what it uses):
    ``connections``, ``cycle`` (``more_body``, ``response_started``, ``response_complete``,
    ``keep_alive``), ``transport``, ``loop`` and ``on_response_complete``. Reads its
    `ConnectionLimits` from ``config.connection_limits``.
    """

    connections: set[Any]
    cycle: Any
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)  # type: ignore[call-arg]
        self.limits: ConnectionLimits = config.connection_limits
        self._armed = False  # whether the limits watch this connection for a deadline
        self._armed_for: Any = None  # the request cycle current when the deadline was set
        self._waiting_for_head = True
        self._handshake: asyncio.BaseTransport | None = None  # while in its TLS handshake

    def handshake_began(self, transport: asyncio.BaseTransport, done: asyncio.Future[Any]) -> None:
        """A TLS connection was accepted (by `TlsHandshakeLoop`): it counts from now, and its
        handshake and head share the head's deadline; ``done`` resolves when the handshake
        ends, either way."""
        self._handshake = transport
        self.limits.handshaking.add(self)
        done.add_done_callback(self._handshake_ended)
        if self._admit():
            self._arm(head=True)

    def _handshake_ended(self, done: asyncio.Future[Any]) -> None:
        self.limits.handshaking.discard(self)
        if self._handshake is not None:  # it failed, or was cut: the protocol never started
            self._handshake = None
            self._disarm()

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        if self._handshake is not None:  # TLS, handshake done: admitted when it was accepted
            self._handshake = None
            self.limits.handshaking.discard(self)
        elif not self._admit():
            return
        self._arm(head=True)

    def _admit(self) -> bool:
        """Make room for this new connection past ``max_connections``: close the oldest one
        that has not sent a complete head (or finished its TLS handshake); refuse this one
        (False) when every connection is busy with a request."""
        limits = self.limits
        if len(self.connections) + len(limits.handshaking) <= limits.max_connections:
            return True
        if not limits.waiting:
            logger.warning(
                "refused a connection: all %d connections (--max-connections) are busy with "
                "requests",
                limits.max_connections,
            )
            self._cut(_raw(_REFUSED, "too many connections; retry after 1 s"))
            return False
        oldest = next(iter(limits.waiting))
        logger.warning(
            "closed the oldest connection without a complete request head to make room (%d "
            "connections, --max-connections)",
            limits.max_connections,
        )
        oldest._cut(b"")
        return True

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if not self._armed:
            return
        cycle: Any = self.cycle
        if self._armed_for is not cycle:  # a new request head arrived: its deadline is met
            self._disarm()
            if cycle is not None and cycle.more_body:
                self._arm(head=False)  # the body's starts now
        elif not self._waiting_for_head and not cycle.more_body:
            self._disarm()  # the body is complete

    def on_headers_complete(self) -> None:
        super().on_headers_complete()  # type: ignore[misc]
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # a new request's cycle
            cycle.transport = _OneWrite(self.transport, cycle)

    def on_response_complete(self) -> None:
        closing = self.transport.is_closing()
        super().on_response_complete()  # type: ignore[misc]  # starts a pipelined request
        if closing or self.transport.is_closing():
            return
        self._disarm()
        cycle: Any = self.cycle
        if cycle is None or cycle.response_complete:
            self._arm(head=True)  # nothing pipelined: the next request's head
        elif not self.pipeline and cycle.more_body:  # type: ignore[attr-defined]
            # A pipelined request, started now: its head was in already (its deadline met
            # when it came), its body's deadline starts now that reading has resumed.
            self._arm(head=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self, *, head: bool) -> None:
        self._armed_for = self.cycle
        self._waiting_for_head = head
        self._armed = True
        self.limits.watch(self, self.loop, head=head)

    def _disarm(self) -> None:
        if self._armed:
            self._armed = False
            self.limits.unwatch(self)

    def _expired(self) -> None:
        """Called by `ConnectionLimits` once the deadline has passed."""
        if self._handshake is not None:
            part, seconds = "TLS handshake", self.limits.header_timeout_s
        elif self._waiting_for_head:
            part, seconds = "request head", self.limits.header_timeout_s
        else:
            part, seconds = "request body", self.limits.body_timeout_s
        logger.warning("closed a connection whose %s did not arrive within %g s", part, seconds)
        self._cut(
            _raw(_TIMED_OUT, f"the {part} did not arrive within {seconds:g} s; send it at once")
        )

    def _cut(self, answer: bytes) -> None:
        """Answer (when the connection is not mid-answer) and close it."""
        self._disarm()
        if self._handshake is not None:  # nothing can be written before the handshake
            # On the next turn of the loop: a connection accepted just now starts its TLS
            # protocol there, and closing before that would be forgotten.
            self.loop.call_soon(self._handshake.abort)  # type: ignore[attr-defined]
            return
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if answer and (cycle is None or cycle.response_complete or not cycle.response_started):
            self.transport.write(answer)
        if cycle is not None:
            cycle.keep_alive = False
        self.transport.close()


class _OneWrite:
    """The transport as one request cycle of uvicorn's sees it: the head of an answer with a
    ``Content-Length`` is held until the body's first part and written with it (uvicorn writes
    them apart: two sends, two packets, and the client woken twice). Anything else (a chunked
    answer's head, the answer to ``HEAD``, ``100 Continue``) is written as it comes; closing
    writes a head still held first."""

    __slots__ = ("_cycle", "_head", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None
        self._started = False  # the head has been written (or is held)

    def write(self, data: bytes) -> None:
        if self._head is not None:  # the body's first part
            data, self._head = self._head + data, None
        elif not self._started and self._cycle.response_started:  # the head
            self._started = True
            cycle = self._cycle
            if cycle.chunked_encoding is False and cycle.scope["method"] != "HEAD":
                self._head = data
                return
        self._transport.write(data)

    def close(self) -> None:
        if self._head is not None:
            self._transport.write(self._head)
            self._head = None
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


class GuardedHttpToolsProtocol(_Guard, HeadLimit, HttpToolsProtocol):  # type: ignore[misc]
    """uvicorn's httptools protocol with request deadlines, a connection cap and a head cap
    (`rk_agent.server._heads`)."""
