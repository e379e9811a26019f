"""One OpenEnv WebSocket session, on an event loop of its own; the server's failures as errors.

A WebSocket client is bound to the event loop it was opened on, and rk-agent's environments are
stepped from worker threads, one call at a time. So each environment owns an `EventLoopThread`:
one asyncio loop running on a daemon thread (`rk_agent.daemon_threads`: a server that never
answers cannot hold up the exit), on which its sessions are opened, used and closed, the calls
handed over with ``run_coroutine_threadsafe``. Never ``asyncio.run`` per step: a connection
made on one loop cannot be used from the next.

`Connection` is one session of ``/ws``: `Connection.open` connects (sending ``Authorization:
Bearer <token>`` when there is one), `Connection.start` connects and sends the episode's first
messages (one hand-off to the loop), `Connection.request` sends one message and reads its answer,
`Connection.close` closes the socket (which ends the session). Failures are
rk-agent's errors, so that an episode that met one fails instead of scoring 0:

- the server cannot be reached, refuses the handshake (401/403: ``auth``), is at capacity, drops
  the connection or does not answer in time: `rk_agent.errors.ToolServerError` (``retryable``
  except for a refused handshake); the connection is closed and stays closed;
- the server's environment refused or failed the action (an ``error`` answer such as
  ``VALIDATION_ERROR`` or ``EXECUTION_ERROR``): `rk_agent.errors.EnvError`.

Main names: `EventLoopThread`, `Connection`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from rk_agent.binding import is_loopback
from rk_agent.daemon_threads import DaemonThreads
from rk_agent.errors import EnvError, ToolServerError
from rk_agent.interop.openenv.wire import Endpoints

__all__ = ["Connection", "EventLoopThread"]

T = TypeVar("T")

_loop_threads = DaemonThreads(max_threads=4096, name="rk-openenv-loop")
_CAPACITY = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})
_CLOSE_S = 2.0  # how long a close waits for the server's side of the handshake


class EventLoopThread:
    """An asyncio event loop on a daemon thread, started on first use (again after `stop`)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (at most ``timeout_s``: then it is
        cancelled and `TimeoutError` raised). An interrupt of the waiting thread cancels it."""
        loop = self._started()
        if loop is _running_loop():
            coro.close()
            raise RuntimeError("EventLoopThread.run was called from its own loop")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result in {timeout_s:g} s") from None
        except BaseException:
            future.cancel()
            raise

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` on the loop without waiting for it (`drain` or `stop` waits)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._started())
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for what `spawn` started."""
        with self._lock:
            pending = list(self._pending)
        if pending and _running_loop() is not self._loop:
            concurrent.futures.wait(pending, timeout=timeout_s)

    def stop(self, timeout_s: float = 0.0) -> None:
        """Stop the loop once what `spawn` started is done (at most ``timeout_s``; what is still
        scheduled then is dropped); a later `run` starts a new one."""
        self.drain(timeout_s)
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                _loop_threads.submit(_serve, loop, ready)
                ready.wait()
                self._loop = loop
            return self._loop


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        loop.close()


class Connection:
    """One session of an OpenEnv server's ``/ws`` (see the module docstring); its methods run on
    one event loop.

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
        self._ws: Any = None
        self._failure: Exception | None = None

    @property
    def closed(self) -> bool:
        """Whether there is no socket to close (never opened, closed, or failed)."""
        return self._ws is None

    async def open(self) -> None:
        """Connect: one new session on the server.

        Raises:
            ToolServerError: the server cannot be reached or refused the connection.
        """
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus

        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        try:
            self._ws = await connect(
                self.ends.ws,
                additional_headers=headers,
                open_timeout=self.open_timeout_s,
                close_timeout=_CLOSE_S,
                compression=None,  # loopback and LAN: deflating costs more than it saves
                max_size=2**27,  # OpenEnv's own client takes 100 MB observations (screenshots)
                proxy=None if is_loopback(self.ends.host) else True,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            auth = status in (401, 403)
            hint = (
                " (set OPENENV_TOKEN to the server's token)"
                if auth
                else " (is the URL an OpenEnv server's? it serves sessions at /ws)"
            )
            what = f"refused the connection: HTTP {status}{hint}"
            raise self._error(what, status, auth=auth) from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            raise self._error(f"cannot connect ({why}); is it running?", retryable=True) from None

    async def start(self, messages: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """`open`, then each of ``messages`` in turn: the answers' data (what an episode's start
        needs, the reset and the tool list, in one hand-off to the loop). Not sent all at
        once: a server that refuses the session answers with an error and closes, and a message
        that arrives after its close is answered with a reset that can drop the error unread.
        """
        await self.open()
        return [await self.request(message) for message in messages]

    async def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send ``message`` and return the ``data`` of its answer.

        Raises:
            ToolServerError: the connection failed, or the server is at capacity.
            EnvError: the server's environment refused or failed the action.
        """
        from websockets.exceptions import ConnectionClosed

        if self._failure is not None:
            raise self._failure
        if self._ws is None:
            raise EnvError(f"the session with {self.ends.ws} is not open.")
        try:
            # A refused session's error frame may still be there to read, below.
            with contextlib.suppress(ConnectionClosed):
                await self._ws.send(json.dumps(message, ensure_ascii=False))
            async with asyncio.timeout(self.timeout_s):
                raw = await self._ws.recv()
        except TimeoutError:
            raise self._broken(f"sent no answer in {self.timeout_s:g} s") from None
        except ConnectionClosed as exc:
            raise self._broken(f"closed the session ({_closed(exc)})") from None
        except OSError as exc:
            raise self._broken(f"dropped the connection ({exc})") from None
        return self._answer(raw)

    async def close(self) -> None:
        """Close the socket, which ends the session on the server (once; failures to do so are
        ignored). OpenEnv's own client also sends ``{"type": "close"}`` first; the server ends
        the session on either, and the close frame alone costs one message less."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            await ws.close()
        except Exception:  # a socket that is already gone is closed
            return

    def _answer(self, raw: str | bytes) -> dict[str, Any]:
        try:
            frame = json.loads(raw)
        except ValueError:
            raise self._broken(f"sent something that is not JSON: {str(raw)[:120]!r}") from None
        data = frame.get("data") if isinstance(frame, dict) else None
        if not isinstance(data, dict):
            raise self._broken(f"sent an answer without data: {str(raw)[:120]!r}")
        if frame.get("type") != "error":
            return data
        code, text = str(data.get("code", "")), str(data.get("message", "no message"))
        if code in _CAPACITY:
            raise self._broken(f"refused the session ({code}: {text})", retryable=True)
        errors = data.get("errors")
        detail = f"; {json.dumps(errors, default=str)[:400]}" if errors else ""
        raise EnvError(
            f"OpenEnv server {self.ends.ws} refused the action ({code}: {text}{detail})."
        )

    def _broken(self, what: str, *, retryable: bool = True) -> ToolServerError:
        """The connection failed: it is closed, and every later request fails the same way."""
        error = self._error(what, retryable=retryable)
        self._failure = error
        ws, self._ws = self._ws, None
        if ws is not None:
            asyncio.get_running_loop().create_task(_drop(ws))
        return error

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


async def _drop(ws: Any) -> None:
    try:
        await ws.close()
    except Exception:  # it is gone either way
        return


def _closed(exc: Any) -> str:
    frame = getattr(exc, "rcvd", None)
    if frame is None:
        return "no close frame: the connection dropped"
    return f"code {frame.code}" + (f": {frame.reason}" if frame.reason else "")
