"""One OpenEnv WebSocket session over a plain socket; the server's failures as errors.

rk-agent's environments are stepped by one thread at a time (a rollout's worker thread, or the
caller's), and every step waits for the server's answer. So a session is a blocking socket
that the stepping thread writes a message to and reads the answer from, framed by websockets'
sans-I/O protocol: no event loop, and no thread hand-off per message (which cost more CPU than
the message itself).

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
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any, NoReturn

from rk_agent.binding import is_loopback
from rk_agent.errors import EnvError, ToolServerError
from rk_agent.interop.openenv import idle_watch
from rk_agent.interop.openenv.wire import Endpoints

__all__ = ["Connection"]

_CAPACITY = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})
_MAX_MESSAGE = 2**27  # OpenEnv's own client takes 100 MB observations (screenshots)
_READ = 1 << 16
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
        self._protocol: Any = None
        self._frames: list[Any] = []  # frames read but not yet taken (those after the handshake)
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
        from websockets.client import ClientProtocol
        from websockets.exceptions import InvalidHandshake, InvalidStatus
        from websockets.uri import parse_uri

        uri = parse_uri(self.ends.ws)
        protocol = ClientProtocol(uri, max_size=_MAX_MESSAGE)  # no compression: loopback, LAN
        request = protocol.connect()
        if self._token:
            request.headers["Authorization"] = f"Bearer {self._token}"
        protocol.send_request(request)
        deadline = time.monotonic() + self.open_timeout_s
        with self._busy:
            try:
                sock = _connect(uri, self.ends.host, self.open_timeout_s)
            except (OSError, InvalidHandshake) as exc:  # TimeoutError is an OSError
                raise self._cannot_connect(exc) from None
            self._sock, self._protocol = sock, protocol
            try:
                sock.sendall(b"".join(protocol.data_to_send()))
                events: list[Any] = []
                while not events:
                    self._feed(sock, protocol, deadline)
                    events = protocol.events_received()
                # What came with the handshake's answer (a refused session's error) is the
                # answer to the first request.
                self._frames = events[1:]
            except (OSError, _Closed) as exc:
                self._drop(sock)
                raise self._cannot_connect(exc) from None
            finally:
                self.idle_since = time.monotonic()
            failed = protocol.handshake_exc
            if isinstance(failed, InvalidStatus):
                self._drop(sock)
                status = failed.response.status_code
                auth = status in (401, 403)
                hint = (
                    " (set OPENENV_TOKEN to the server's token)"
                    if auth
                    else " (is the URL an OpenEnv server's? it serves sessions at /ws)"
                )
                what = f"refused the connection: HTTP {status}{hint}"
                raise self._error(what, status, auth=auth)
            if failed is not None:
                self._drop(sock)
                raise self._cannot_connect(failed)
            if self._sock is not sock:  # closed by another thread meanwhile
                sock.close()
                raise EnvError(f"the session with {self.ends.ws} was closed while it opened.")
        idle_watch.watch(self)

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
        from websockets.protocol import State

        if self._failure is not None:
            raise self._failure
        with self._busy:
            sock, protocol = self._sock, self._protocol
            if sock is None:
                if self._failure is not None:
                    raise self._failure
                raise EnvError(f"the session with {self.ends.ws} is not open.")
            try:
                # Closing (a refused session, or closed while idle): its last words are read.
                if protocol.state is State.OPEN:
                    protocol.send_text(json.dumps(message, ensure_ascii=False).encode())
                    # A refused session's error frame may still be there to read, below.
                    with contextlib.suppress(OSError):
                        sock.sendall(b"".join(protocol.data_to_send()))
                raw = self._message(sock, protocol, time.monotonic() + self.timeout_s)
            except (OSError, _Closed) as exc:  # TimeoutError is an OSError
                if self._sock is not sock:  # `close` shut it down from another thread
                    raise self._broken(
                        sock, "session closed (the environment was closed)"
                    ) from None
                if isinstance(exc, TimeoutError):
                    raise self._broken(sock, f"sent no answer in {self.timeout_s:g} s") from None
                if isinstance(exc, _Closed):
                    raise self._broken(sock, f"closed the session ({exc})") from None
                raise self._broken(sock, f"dropped the connection ({exc})") from None
            finally:
                self.idle_since = time.monotonic()
                if self._sock is not sock:
                    sock.close()  # closed meanwhile: the socket is this thread's to close
        return self._answer(raw)

    def _message(self, sock: socket.socket, protocol: Any, deadline: float) -> bytes:
        """The next whole text or binary message (pings answered on the way)."""
        from websockets.frames import Opcode

        parts: list[bytes] = []
        frames = self._frames
        while True:
            frames.extend(protocol.events_received())
            while frames:
                frame = frames.pop(0)
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                    parts.append(bytes(frame.data))
                    if frame.fin:
                        return parts[0] if len(parts) == 1 else b"".join(parts)
                elif frame.opcode is Opcode.CLOSE:
                    raise _Closed(_why_closed(protocol))
            self._feed(sock, protocol, deadline)

    def _feed(self, sock: socket.socket, protocol: Any, deadline: float) -> None:
        """Read once from the socket into the protocol, and send what it answers (pongs)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        data = sock.recv(_READ)
        if data:
            protocol.receive_data(data)
        else:
            protocol.receive_eof()
        out = protocol.data_to_send()
        if out and any(out):
            sock.sendall(b"".join(out))
        if not data:
            raise _Closed(_why_closed(protocol))
        if protocol.parser_exc is not None:
            raise _Closed(f"it sent what is not WebSocket: {protocol.parser_exc}")

    def answer_idle(self) -> None:
        """Read what the server sent while nothing was asked (a ping, a close) and answer it:
        `rk_agent.interop.openenv.idle_watch` calls it on a connection idle for a while. A
        message nobody asked for is dropped; a close or the end of the connection is a failure
        the next request raises."""
        import select

        if not self._busy.acquire(blocking=False):
            return  # in use: the request reads it
        try:
            sock, protocol = self._sock, self._protocol
            if sock is None:
                return
            pending = isinstance(sock, ssl.SSLSocket) and sock.pending()
            if not pending and not select.select([sock], [], [], 0)[0]:
                return
            try:
                self._feed(sock, protocol, time.monotonic() + 1.0)
                protocol.events_received()  # pings are answered; nothing else was asked
                self._frames.clear()
            except _Closed as exc:
                self._broken(sock, f"closed the session ({exc})")
            except OSError as exc:
                self._broken(sock, f"dropped the connection ({exc})")
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
            with _quietly():
                sock.shutdown(socket.SHUT_RDWR)  # wakes the request; the server sees the end
            if not self._busy.acquire(timeout=_CLOSE_WAIT_S):
                return  # the request closes it on its way out
        try:
            with _quietly():
                self._protocol.send_close()
                sock.settimeout(0)  # a server that reads nothing cannot hold the close up
                sock.sendall(b"".join(self._protocol.data_to_send()))
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


def _connect(uri: Any, host: str, timeout_s: float) -> socket.socket:
    """A TCP connection to the server (through a proxy off loopback, when one is set), with
    TLS for ``wss://``."""
    proxy = None
    if not is_loopback(host):
        from websockets.proxy import get_proxy

        proxy = get_proxy(uri)
    if proxy is None:
        sock = socket.create_connection((uri.host, uri.port), timeout=timeout_s)
    else:
        sock = _through_proxy(proxy, uri, timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if uri.secure:
            sock.settimeout(timeout_s)
            sock = _tls_context().wrap_socket(sock, server_hostname=uri.host)
    except BaseException:
        sock.close()
        raise
    return sock


def _through_proxy(proxy: str, uri: Any, timeout_s: float) -> socket.socket:
    from websockets.proxy import parse_proxy
    from websockets.sync.client import connect_http_proxy, connect_socks_proxy
    from websockets.sync.utils import Deadline

    parsed = parse_proxy(proxy)
    if parsed.scheme.startswith("socks"):
        return connect_socks_proxy(parsed, uri, Deadline(timeout_s))
    return connect_http_proxy(parsed, uri, Deadline(timeout_s))


def _tls_context() -> ssl.SSLContext:
    global _tls
    if _tls is None:  # loading the system's certificates costs milliseconds: once
        _tls = ssl.create_default_context()
    return _tls


def _why_closed(protocol: Any) -> str:
    frame = protocol.close_rcvd
    if frame is None:
        return "no close frame: the connection dropped"
    return f"code {frame.code}" + (f": {frame.reason}" if frame.reason else "")


class _quietly:
    """Ignore `OSError` (and websockets' state errors) in a best-effort close."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        from websockets.exceptions import InvalidState

        return kind is not None and issubclass(kind, (OSError, InvalidState))
