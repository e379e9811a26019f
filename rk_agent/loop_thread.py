"""Running coroutines from sync code: the one bridge rk-agent uses.

Sync code meets async code in a few places: a reward (a plain function, called from any thread)
asking a model server (`rk_agent.model_client.SyncModelClient`), MCP and verifiers clients
used from an environment's sync steps, an async tool called like a function, and the trainers'
sync hooks playing episodes. Two needs, two names:

- `LoopThread`: one asyncio event loop on a daemon thread, kept for many calls, for clients
  whose connections live on that loop. ``run`` hands it a coroutine and waits
  (``run_coroutine_threadsafe``); the thread is a daemon, so a call that never returns cannot
  keep the process from ending. It starts on first use, again after `LoopThread.stop`, and
  anew in a child made by ``fork`` (the parent's thread does not exist there).
- `run_sync`: a coroutine run to its end once, on a fresh loop (``asyncio.run``), also when
  the calling thread already runs one (a notebook, a trainer's hook called from async code):
  then on a daemon thread of its own.

Why not anyio's blocking portal (installed): the same hand-off with a task and a cancel scope
around each call; from 16 threads at 0 ms of model latency it measured no faster, and at real
latencies both are the model's pace (``benchmarks/bench_machinery.py``, ``bridge``;
docs/development.md, "Hand-made machinery: what it buys").

Main names: `LoopThread`, `run_sync`.

Example:
    >>> import asyncio
    >>> async def double(x: int) -> int:
    ...     await asyncio.sleep(0)
    ...     return 2 * x
    >>> loop = LoopThread(name="demo")
    >>> loop.run(double(21))
    42
    >>> loop.stop()
    >>> run_sync(double(4))
    8
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "run_sync"]

T = TypeVar("T")


class LoopThread:
    """An asyncio event loop on a daemon thread, started on first use (again after `stop`).

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str = "rk-loop") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def __repr__(self) -> str:
        return f"LoopThread({self.name!r}, {'stopped' if self.stopped else 'running'})"

    @property
    def stopped(self) -> bool:
        """Whether no loop runs now (never started, or stopped; `run` starts one)."""
        return self._loop is None or self._pid != os.getpid()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if need be)."""
        return self._started()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result, from any other thread.

        Past ``timeout_s`` it is cancelled and `TimeoutError` raised; an interrupt of the
        waiting thread (``KeyboardInterrupt``) cancels it too.

        Raises:
            RuntimeError: called from the loop's own thread (it would wait for itself).
        """
        loop = self._started()
        if _running_loop() is loop:
            coroutine.close()
            raise RuntimeError(f"LoopThread {self.name!r}: run was called from its own loop")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result in {timeout_s:g} s") from None
        except BaseException:
            future.cancel()
            raise

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run ``coroutine`` on the loop without waiting for it (`drain` or `stop` waits)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._started())
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)

    def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for what `spawn` started."""
        with self._lock:
            pending = list(self._pending)
        if pending and (self._loop is None or _running_loop() is not self._loop):
            concurrent.futures.wait(pending, timeout=timeout_s)

    def stop(self, timeout_s: float = 0.0) -> None:
        """Stop the loop once what `spawn` started is done (at most ``timeout_s``; what is still
        scheduled then is dropped) and let its thread end; a later `run` starts a new one."""
        self.drain(timeout_s)
        with self._lock:
            loop, self._loop = self._loop, None
            thread, self._thread = self._thread, None
        if loop is None or self._pid != os.getpid() or loop.is_closed():
            return  # never started, or the parent's (a forked child stops nothing of it)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)  # tasks still running are abandoned with the loop

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():  # a forked copy: the parent's thread is not here
                self._pid, self._loop, self._thread, self._pending = os.getpid(), None, None, set()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_serve, args=(loop, ready), name=self.name, daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end on a fresh event loop and return its result: in this
    thread (``asyncio.run``) when no loop runs here, else on a daemon thread of its own (this
    thread waits; its own loop is held up meanwhile, as by any sync call)."""
    if _running_loop() is None:
        return asyncio.run(coroutine)
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def play() -> None:
        try:
            future.set_result(asyncio.run(coroutine))
        except BaseException as exc:  # the caller's to see
            future.set_exception(exc)

    threading.Thread(target=play, name="rk-run-sync", daemon=True).start()
    return future.result()


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
