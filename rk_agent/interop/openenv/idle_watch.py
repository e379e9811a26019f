"""Answering for idle OpenEnv connections: the pings a server sends while nothing is asked.

A `rk_agent.interop.openenv.connection.Connection` reads its socket only while a request waits
for its answer. Between requests (the model is writing its next turn) a server may ping it, and
servers drop a client that does not answer (uvicorn and websockets ping every 20 s and wait 20
s for the pong). One daemon thread, started with the first connection, looks every
`PERIOD_S` at the connections idle that long and lets each answer what arrived
(`Connection.answer_idle`: a pong; a close is recorded for the next request). It does nothing
per message: the steps' own reads answer the pings that arrive during a request.

Main names: `watch`, `forget`, `PERIOD_S`.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

__all__ = ["PERIOD_S", "forget", "watch"]

PERIOD_S = 2.0
"""How often idle connections are looked at (well under the 20 s a server waits for a pong)."""

_watched: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def watch(connection: Any) -> None:
    """Answer for ``connection`` while it is idle, until `forget` (or until it is dropped)."""
    global _thread
    with _lock:
        _watched.add(connection)
        if _thread is None or not _thread.is_alive():  # (a forked copy has no thread)
            _thread = threading.Thread(target=_run, name="rk-openenv-idle", daemon=True)
            _thread.start()


def forget(connection: Any) -> None:
    """Stop answering for ``connection`` (it is closed)."""
    with _lock:
        _watched.discard(connection)


def _run() -> None:
    while True:
        time.sleep(PERIOD_S)
        _answer_idle(time.monotonic())


def _answer_idle(now: float) -> None:
    with _lock:
        connections = list(_watched)
    for connection in connections:
        if now - connection.idle_since >= PERIOD_S:
            try:
                connection.answer_idle()
            except Exception:  # a broken connection fails its next request with the reason
                continue
