"""`DaemonThreads`: threads for calls that may never return, which cannot hold up the exit.

Tool calls and environment steps are user code run off the event loop so that a time limit
can be kept: a call past its limit is abandoned (a thread cannot be stopped) and the episode
goes on. `concurrent.futures.ThreadPoolExecutor` and asyncio's default executor join their
threads before the process ends (``asyncio.run`` waits for the default executor's threads, and
`concurrent.futures` joins its own at exit), so one abandoned call that hangs kept
``rk-agent rollout`` from ever returning after its episodes were written. These threads are
daemon threads: the process ends without them, as it would with a hung call it had killed.

A pool grows a thread when a call finds none idle, up to ``max_threads`` (the calls beyond
wait in order); an idle thread waits for the next call and is reused. A copy of the process
made by ``fork`` starts the pool afresh (the parent's threads do not exist in it).

Main names: `DaemonThreads`.

Example:
    >>> import asyncio
    >>> pool = DaemonThreads(max_threads=2, name="demo")
    >>> pool.submit(sum, [1, 2, 3]).result()
    6
    >>> asyncio.run(pool.run(max, 4, 2))
    4
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["DaemonThreads"]

T = TypeVar("T")

_Call = tuple["concurrent.futures.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreads:
    """Up to ``max_threads`` daemon threads, each running one submitted call at a time.

    Args:
        max_threads: the most threads the pool starts.
        name: the threads' names start with it (``name-0``, ``name-1``, ...).
    """

    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads
        self.name = name
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._started = 0  # threads started (none ends)
        self._idle = 0  # threads waiting for a call that no `submit` has claimed

    @property
    def threads(self) -> int:
        """Threads started so far (in this process)."""
        return self._started if self._pid == os.getpid() else 0

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        """Run ``fn(*args, **kwargs)`` on one of the threads; its future is returned at once.

        Cancelling the future before the call starts keeps it from running; once it runs, it
        runs to its end (or forever) on its thread, which the process does not wait for.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        start = None
        if self._pid != os.getpid():  # a forked copy: the parent's threads are not here
            self._lock = threading.Lock()  # (nor the thread that may have held it)
            self._reset()
        with self._lock:
            self._calls.put((future, fn, args, kwargs))
            if self._idle:
                self._idle -= 1  # that thread takes this call
            elif self._started < self.max_threads:
                start = self._started
                self._started += 1
        if start is not None:
            thread = threading.Thread(
                target=self._serve, args=(self._calls,), name=f"{self.name}-{start}", daemon=True
            )
            thread.start()
        return future

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``await`` ``fn(*args, **kwargs)`` run on one of the threads, in a copy of the
        caller's context (as `asyncio.to_thread`). Cancelling the await abandons the call."""
        context = contextvars.copy_context()
        return await asyncio.wrap_future(self.submit(context.run, fn, *args, **kwargs))

    def _serve(self, calls: queue.SimpleQueue[_Call]) -> None:
        while True:
            future, fn, args, kwargs = calls.get()
            result = None
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the caller's to see, as with any executor
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs, result  # hold nothing of a call while idle
            with self._lock:
                self._idle += 1
