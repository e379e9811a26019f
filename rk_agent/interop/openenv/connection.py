"""One OpenEnv WebSocket session over a plain socket; the server's failures as errors.

rk-agent's environments are stepped by one thread at a time (a rollout's worker thread, or the
caller's), and every step waits for the server's answer. So a session is a blocking socket
that the stepping thread writes a message to and reads the answer from, framed by
`rk_agent.interop.openenv.framing`: no event loop, and no thread hand-off per message (which
cost more CPU than the message itself). On Linux the answer's time limit is the socket's own
(``SO_RCVTIMEO``): one system call per read, none to set a timer.

`Connection` is one session of ``/ws``: `Connection.open` connects (sending ``Authorization:
Bearer <token>`` when there is one; through the proxy of ``HTTPS_PROXY``/``ALL_PROXY`` and the
like for a server off loopback), `Connection.request` sends one message and reads its answer,
`Connection.close` sends the close frame and closes the socket (which ends the session on the
server), from any thread: one in the middle of a request is woken up. A server pings a client
that is idle (uvicorn every 20 s) and drops one that does not answer, so a connection idle
for a while (the model is thinking) is answered for by `rk_agent.interop.openenv.idle_watch`.
Failures are rk-agent's errors, so that an episode that met one fails instead of scoring 0:

- the server cannot be reached, refuses the handshake (401/403: ``auth``), is at capacity, drops
  the connection or does not answer in time: `rk_agent.errors.ToolServerError` (``retryable``
  except for a refused handshake); the connection is closed and stays closed;
- the server's environment refused or failed the action (an ``error`` answer such as
  ``VALIDATION_ERROR`` or ``EXECUTION_ERROR``): `rk_agent.errors.EnvError`.

Main names: `Connection`.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

from rk_agent.binding import is_loopback
from rk_agent.errors import EnvError, ToolServerError
from rk_agent.interop.openenv import idle_watch
from rk_agent.interop.openenv.framing import (
    BINARY,
    CLOSE,
    PING,
    PONG,
    TEXT,
    FrameReader,
    HandshakeRefused,
    ProtocolError,
    frame,
    handshake,
    read_handshake,
)
from rk_agent.interop.openenv.wire import Endpoints

__all__ = ["Connection"]

_CAPACITY = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})
_MAX_MESSAGE = 2**27  # OpenEnv's own client takes 100 MB observations (screenshots)
_READ = 1 << 16
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")  # SO_RCVTIMEO takes a struct timeval
_NORMAL_CLOSE = struct.pack("!H", 1000)
_CLOSE_WAIT_S = 1.0  # how long `close` waits for a request it woke up to let go of the socket
_tls: ssl.SSLContext | None = None


class _Closed(Exception):
    """The server closed the WebSocket or the connection ended (the reason as the message)."""


class Connection:
    """One session of an OpenEnv server's ``/ws`` (see the module docstring).

    Args:
        ends: the server.
        token: sent as ``Authorization: Bearer <token>`` (``None``: no header).
        open_timeout_s: the most a connection may take.
        timeout_s: the most an answer may take.
    """

    def __init__(
        self, ends: Endpoints, *, token: str | None, open_timeout_s: float, timeout_s: float
    ) -> None:
        self.ends = ends
        self._token = token
        self.open_timeout_s = open_timeout_s
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._reader = FrameReader(_MAX_MESSAGE)
        self._closed_by: tuple[int, str] | None = None  # the server's close frame
        self._read_limit = 0.0  # the socket's SO_RCVTIMEO (0: Python's own timeout)
        self._failure: Exception | None = None
        self._busy = threading.Lock()  # held by the thread that reads or writes the socket
        self._swap = threading.Lock()  # guards taking ``_sock`` away (close, failures)
        self.idle_since = time.monotonic()

    @property
    def closed(self) -> bool:
        """Whether there is no socket to close (never opened, closed, or failed)."""
        return self._sock is None

    # ---------------------------------------------------------------- open

    def open(self) -> None:
        """Connect: one new session on the server.

        Raises:
            ToolServerError: the server cannot be reached or refused the connection.
        """
        request, accept = handshake(self.ends.ws, self._token)
        deadline = time.monotonic() + self.open_timeout_s
        with self._busy:
            try:
                sock = _connect(self.ends, self.open_timeout_s)
            except OSError as exc:  # TimeoutError is an OSError
                raise self._cannot_connect(exc) from None
            self._sock = sock
            try:
                sock.sendall(request)
                answer = bytearray()
                while (end := read_handshake(answer, accept)) is None:
                    sock.settimeout(max(deadline - time.monotonic(), 0.001))
                    chunk = sock.recv(_READ)
                    if not chunk:
                        raise _Closed("no close frame: the connection dropped")
                    answer += chunk
                # What came with the answer (a refused session's error) is read as the first
                # request's answer.
                self._reader.feed(answer[end:])
                self._limit_reads(sock)
            except HandshakeRefused as exc:
                self._drop(sock)
                auth = exc.status in (401, 403)
                hint = (
                    " (set OPENENV_TOKEN to the server's token)"
                    if auth
                    else " (is the URL an OpenEnv server's? it serves sessions at /ws)"
                )
                what = f"refused the connection: HTTP {exc.status}{hint}"
                raise self._error(what, exc.status, auth=auth) from None
            except (OSError, _Closed, ProtocolError) as exc:
                self._drop(sock)
                raise self._cannot_connect(exc) from None
            finally:
                self.idle_since = time.monotonic()
            if self._sock is not sock:  # closed by another thread meanwhile
                sock.close()
                raise EnvError(f"the session with {self.ends.ws} was closed while it opened.")
        idle_watch.watch(self)

    def _limit_reads(self, sock: socket.socket) -> None:
        """Make the socket blocking, its reads limited to ``timeout_s`` by the kernel where it
        can (else by Python's timeout, which polls before every read)."""
        if _KERNEL_TIMEOUTS and not isinstance(sock, ssl.SSLSocket):
            sock.settimeout(None)
            self._set_read_limit(sock, self.timeout_s)
            seconds, micros = divmod(int(self.timeout_s * 1e6), 1_000_000)
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, micros)
            )
        else:
            sock.settimeout(self.timeout_s)

    def _set_read_limit(self, sock: socket.socket, seconds: float) -> None:
        whole, micros = divmod(max(int(seconds * 1e6), 1000), 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", whole, micros))
        self._read_limit = seconds

    def _cannot_connect(self, exc: BaseException) -> ToolServerError:
        why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        return self._error(f"cannot connect ({why}); is it running?", retryable=True)

    # ---------------------------------------------------------------- messages

    def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send ``message`` and return the ``data`` of its answer.

        Raises:
            ToolServerError: the connection failed, or the server is at capacity.
            EnvError: the server's environment refused or failed the action.
        """
        if self._failure is not None:
            raise self._failure
        with self._busy:
            sock = self._sock
            if sock is None:
                if self._failure is not None:
                    raise self._failure
                raise EnvError(f"the session with {self.ends.ws} is not open.")
            try:
                # Closed (a refused session, or closed while idle): its last words are read.
                if self._closed_by is None:
                    payload = json.dumps(message, ensure_ascii=False).encode()
                    # A refused session's error frame may still be there to read, below.
                    with contextlib.suppress(OSError):
                        sock.sendall(frame(TEXT, payload))
                raw = self._message(sock, time.monotonic() + self.timeout_s)
            except (OSError, _Closed, ProtocolError) as exc:  # TimeoutError is an OSError
                raise self._failed(sock, exc) from None
            finally:
                self.idle_since = time.monotonic()
                if self._sock is not sock:
                    sock.close()  # closed meanwhile: the socket is this thread's to close
        return self._answer(raw)

    def _failed(self, sock: socket.socket, exc: BaseException) -> ToolServerError:
        if self._sock is not sock:  # `close` shut it down from another thread
            return self._broken(sock, "session closed (the environment was closed)")
        if isinstance(exc, (TimeoutError, BlockingIOError)):  # (SO_RCVTIMEO: EAGAIN)
            return self._broken(sock, f"sent no answer in {self.timeout_s:g} s")
        if isinstance(exc, _Closed):
            return self._broken(sock, f"closed the session ({exc})")
        if isinstance(exc, ProtocolError):
            return self._broken(sock, f"broke the WebSocket protocol ({exc})")
        return self._broken(sock, f"dropped the connection ({exc})")

    def _message(self, sock: socket.socket, deadline: float) -> bytes:
        """The next whole text or binary message (pings answered on the way)."""
        reader = self._reader
        while True:
            event = reader.next()
            if event is None:
                self._read(sock, deadline)
                continue
            kind, payload = event
            if kind in (TEXT, BINARY):
                return payload
            self._control(sock, kind, payload)

    def _read(self, sock: socket.socket, deadline: float) -> None:
        """Read once from the socket into the frame reader (at most until ``deadline``)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if self._read_limit:  # the kernel's: changed only when a read is not a request's first
            slack = min(0.1, self.timeout_s / 10)
            if left < self._read_limit - slack:
                self._set_read_limit(sock, left)  # an answer in pieces: what is left of the time
            elif self._read_limit < self.timeout_s and left >= self.timeout_s - slack:
                self._set_read_limit(sock, self.timeout_s)
        chunk = sock.recv(_READ)
        if not chunk:
            raise _Closed(self._why_closed())
        self._reader.feed(chunk)

    def _control(self, sock: socket.socket, kind: int, payload: bytes) -> None:
        """Answer a ping; a close is answered and raised (`_Closed`); pongs are ignored."""
        if kind == PING:
            with contextlib.suppress(OSError):
                sock.sendall(frame(PONG, payload))
        elif kind == CLOSE:
            if self._closed_by is None:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self._closed_by = (code, payload[2:].decode("utf-8", "replace"))
                with contextlib.suppress(OSError):
                    sock.sendall(frame(CLOSE, payload[:2]))
            raise _Closed(self._why_closed())

    def _why_closed(self) -> str:
        if self._closed_by is None:
            return "no close frame: the connection dropped"
        code, reason = self._closed_by
        return f"code {code}" + (f": {reason}" if reason else "")

    def answer_idle(self) -> None:
        """Read what the server sent while nothing was asked (a ping, a close) and answer it:
        `rk_agent.interop.openenv.idle_watch` calls it on a connection idle for a while. A
        message nobody asked for is dropped; a close or the end of the connection is a failure
        the next request raises."""
        if not self._busy.acquire(blocking=False):
            return  # in use: the request reads it
        try:
            sock = self._sock
            if sock is None:
                return
            pending = isinstance(sock, ssl.SSLSocket) and sock.pending()
            if not pending and not select.select([sock], [], [], 0)[0]:
                return
            try:
                self._read(sock, time.monotonic() + self.timeout_s)  # it is readable: no wait
                while (event := self._reader.next()) is not None:
                    if event[0] not in (TEXT, BINARY):  # nobody asked: dropped
                        self._control(sock, *event)
            except (OSError, _Closed, ProtocolError) as exc:
                self._failed(sock, exc)
            finally:
                self.idle_since = time.monotonic()
        finally:
            self._busy.release()

    # ---------------------------------------------------------------- close

    def close(self) -> None:
        """Close the session: the close frame, then the socket (once; from any thread; never
        waits on the server). A request under way in another thread is woken up and fails.
        OpenEnv's own client sends ``{"type": "close"}`` first; the server ends the session on
        either, and the close frame alone costs one message less."""
        with self._swap:
            sock, self._sock = self._sock, None
        if sock is None:
            return
        idle_watch.forget(self)
        if not self._busy.acquire(blocking=False):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the request; the server sees the end
            if not self._busy.acquire(timeout=_CLOSE_WAIT_S):
                return  # the request closes it on its way out
        try:
            if self._closed_by is None:
                with contextlib.suppress(OSError):
                    _send_now(sock, frame(CLOSE, _NORMAL_CLOSE))
            sock.close()
        finally:
            self._busy.release()

    def _drop(self, sock: socket.socket) -> None:
        """Take the socket away and close it (its user holds ``_busy``)."""
        with self._swap:
            if self._sock is sock:
                self._sock = None
        idle_watch.forget(self)
        sock.close()

    def _broken(self, sock: socket.socket, what: str, *, retryable: bool = True) -> ToolServerError:
        """The connection failed: it is closed, and every later request fails the same way."""
        error = self._error(what, retryable=retryable)
        self._failure = error
        self._drop(sock)
        return error

    # ---------------------------------------------------------------- answers

    def _answer(self, raw: bytes) -> dict[str, Any]:
        try:
            frame = json.loads(raw)
        except ValueError:
            self._broken_now(f"sent something that is not JSON: {raw[:120]!r}")
        data = frame.get("data") if isinstance(frame, dict) else None
        if not isinstance(data, dict):
            self._broken_now(f"sent an answer without data: {raw[:120]!r}")
        if frame.get("type") != "error":
            return data
        code, text = str(data.get("code", "")), str(data.get("message", "no message"))
        if code in _CAPACITY:
            self._broken_now(f"refused the session ({code}: {text})")
        errors = data.get("errors")
        detail = f"; {json.dumps(errors, default=str)[:400]}" if errors else ""
        raise EnvError(
            f"OpenEnv server {self.ends.ws} refused the action ({code}: {text}{detail})."
        )

    def _broken_now(self, what: str) -> NoReturn:
        """A failure found in an answer already read: close the session, and raise it (and
        the same from every later request)."""
        self._failure = error = self._error(what, retryable=True)
        self.close()
        raise error

    def _error(
        self, what: str, status: int | None = None, *, auth: bool = False, retryable: bool = False
    ) -> ToolServerError:
        return ToolServerError(
            f"OpenEnv server {self.ends.ws} {what}.",
            server=f"openenv:{self.ends.url}",
            auth=auth,
            status=status,
            retryable=retryable,
            url=self.ends.ws,
        )


def _send_now(sock: socket.socket, data: bytes) -> None:
    """Send ``data`` if the socket takes it at once (a server that reads nothing cannot hold
    a close up)."""
    if isinstance(sock, ssl.SSLSocket) or not hasattr(socket, "MSG_DONTWAIT"):
        sock.settimeout(0)
        sock.sendall(data)
    else:
        sock.send(data, socket.MSG_DONTWAIT)


def _connect(ends: Endpoints, timeout_s: float) -> socket.socket:
    """A TCP connection to the server (through a proxy off loopback, when one is set), with
    TLS for ``wss://``."""
    parts = urlsplit(ends.ws)
    secure = parts.scheme == "wss"
    port = parts.port or (443 if secure else 80)
    proxy = None
    if not is_loopback(ends.host):
        from websockets.proxy import get_proxy
        from websockets.uri import parse_uri

        uri = parse_uri(ends.ws)
        proxy = get_proxy(uri)
    if proxy is None:
        sock = socket.create_connection((ends.host, port), timeout=timeout_s)
    else:
        sock = _through_proxy(proxy, uri, timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secure:
            sock.settimeout(timeout_s)
            sock = _tls_context().wrap_socket(sock, server_hostname=ends.host)
    except BaseException:
        sock.close()
        raise
    return sock


def _through_proxy(proxy: str, uri: Any, timeout_s: float) -> socket.socket:
    from websockets.exceptions import InvalidHandshake
    from websockets.proxy import parse_proxy
    from websockets.sync.client import connect_http_proxy, connect_socks_proxy
    from websockets.sync.utils import Deadline

    parsed = parse_proxy(proxy)
    try:
        if parsed.scheme.startswith("socks"):
            return connect_socks_proxy(parsed, uri, Deadline(timeout_s))
        return connect_http_proxy(parsed, uri, Deadline(timeout_s))
    except (InvalidHandshake, ImportError) as exc:  # the proxy refused; python-socks missing
        raise OSError(f"through the proxy {proxy}: {exc}") from None


def _tls_context() -> ssl.SSLContext:
    global _tls
    if _tls is None:  # loading the system's certificates costs milliseconds: once
        _tls = ssl.create_default_context()
    return _tls
