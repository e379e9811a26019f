"""Calling a served reward: sync ones in a thread pool, async ones on the loop, with a timeout.

Also what the server knows of its threads: how long a new sample would wait for one (load is
shed by that time, not by a count) and which are stuck in a reward past its timeout (``/health``).

Main names (private to `rk_agent.server`):
    ThreadPool: worker threads that settle asyncio futures directly.
    RewardCaller: calls the reward; its wait estimate and health.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.rewards.decorator import AnyRewardFn
from rk_agent.types import EvaluateResult

__all__ = ["Misuse", "RewardCaller", "Saturated", "ThreadPool"]

logger = logging.getLogger("rk_agent.server")


class ThreadPool:
    """Worker threads for sync rewards that settle asyncio futures directly.

    ``loop.run_in_executor`` costs about 100 us more per call on CPython 3.11 (a
    `concurrent.futures.Future` chained to an asyncio one), as much as the rest of a request;
    see ``benchmarks/bench_reward_server.py``. Threads start on demand, up to ``size``.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # One token per thread waiting for a call: threads append theirs, `submit` (on the
        # event loop, the one consumer) takes one (deque appends and pops are atomic; a
        # `threading.Semaphore` took a Python-level lock each time).
        self._idle: collections.deque[None] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._done: collections.deque[tuple[Any, ...]] = collections.deque()
        self._wake_pending = False
        self.running: dict[int, float] = {}  # thread ident -> when its current call started
        self.service_s = 0.0  # moving average of a call's run time, for the wait estimate
        self.completed = 0  # calls finished (the first sets `service_s` outright)

    def queued(self) -> int:
        """Calls waiting for a thread (approximate: a snapshot of the queue)."""
        return self._queue.qsize()

    def submit(
        self, fn: Callable[[], Any], started: list[float] | None = None
    ) -> asyncio.Future[Any]:
        """Run ``fn`` on a worker thread; ``started`` (when given) gets the monotonic time the
        call left the queue, so a timeout can count the call's own time only."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((loop, future, fn, started))
        if self._idle:
            self._idle.pop()  # a thread that waits takes the call
        else:
            with self._lock:
                if len(self._threads) < self.size:
                    thread = threading.Thread(
                        target=self._work, args=(self._queue, self._idle), daemon=True,
                        name=f"rk-reward-{len(self._threads)}",
                    )  # fmt: skip
                    thread.start()
                    self._threads.append(thread)
        return future

    def _work(self, calls: queue.SimpleQueue[Any], idle: collections.deque[None]) -> None:
        while (item := calls.get()) is not None:
            loop, future, fn, started = item
            if not future.done():  # done already: its request gave up while it waited
                begun = time.monotonic()
                if started is not None:
                    started.append(begun)
                me = threading.get_ident()
                self.running[me] = begun
                try:
                    self._done.append((loop, future, True, fn()))
                except BaseException as exc:
                    self._done.append((loop, future, False, exc))
                self.running.pop(me, None)  # `close` may have replaced the dict meanwhile
                took = time.monotonic() - begun
                self.service_s += (1.0 if not self.completed else 0.05) * (took - self.service_s)
                self.completed += 1
                if not self._wake_pending:  # else the loop is about to drain it anyway
                    self._wake_pending = True
                    try:
                        loop.call_soon_threadsafe(self._drain, loop)
                    except RuntimeError:  # the loop is closed: nobody waits for it
                        self._wake_pending = False
            idle.append(None)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Settle every finished call (one loop wake-up for many results under load)."""
        self._wake_pending = False
        while self._done:
            owner, future, ok, value = self._done.popleft()
            if owner is loop:
                _settle(future, ok, value)
            else:  # a pool that outlived an event loop and serves another one
                with contextlib.suppress(RuntimeError):
                    owner.call_soon_threadsafe(_settle, future, ok, value)

    def stuck(self, after_s: float) -> int:
        """Threads whose current call has run longer than ``after_s``."""
        now = time.monotonic()
        return sum(1 for begun in list(self.running.values()) if now - begun > after_s)

    def close(self) -> None:
        """Let the threads finish their current call and exit; a later `submit` starts anew
        (an app served again, e.g. by a second `serving` block)."""
        with self._lock:
            for _ in self._threads:
                self._queue.put(None)
            self._queue, self._idle, self._threads = queue.SimpleQueue(), collections.deque(), []
            self._wake_pending = False
            self.running = {}


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.done():
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class _TimedOut(Exception):
    pass


class Saturated(Exception):
    """Every worker thread is busy and the call waited too long for one: answered with 503."""


class Misuse(Exception):
    """A sample does not fit the reward; answered with 422."""

    def __init__(self, loc: list[str | int], error: Exception) -> None:
        super().__init__(str(error))
        self.loc = loc
        self.error = error


class RewardCaller:
    """Calls the reward: sync ones in the thread pool, async ones on the loop, with a timeout.

    Load is shed by time, not by count: a sample is refused (503) when the samples before it
    would keep it waiting for a thread longer than ``max_wait_s`` (their number times the
    average run time of the calls that finished, plus what the running calls have left, over
    the threads not stuck; `expected_wait`), and a sample that has waited that long for a
    thread is answered 503 too (so a reward slow from its first call is shed by that).

    Both limits of a sync call (its wait for a thread, then its own run) are checked by one
    sweep of the calls in flight every `tick_s` (a twentieth of the shorter limit, at most
    0.5 s), not by a timer per call: a limit is answered up to one tick late.
    """

    STUCK_AFTER_S = 60.0
    """Without a timeout, a call running this long counts as stuck (`health`)."""

    def __init__(
        self,
        reward: AnyRewardFn,
        timeout_s: float | None,
        threads: int | None,
        max_wait_s: float = 10.0,
        max_queue: int | None = None,
    ) -> None:
        self.reward = reward
        self.name = reward.reward_spec.name
        self.is_async = reward.reward_spec.is_async
        self.timeout_s = timeout_s
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.pool = ThreadPool(threads or min(32, (os.cpu_count() or 1) + 4))
        limits = [max_wait_s] + ([timeout_s] if timeout_s is not None else [])
        self.tick_s = min(0.5, max(0.005, min(limits) / 20))
        # Sync calls in flight: their future -> when they were queued, and the list the
        # worker thread puts their start in (oldest first).
        self._calls: dict[asyncio.Future[Any], tuple[float, list[float]]] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_loop: asyncio.AbstractEventLoop | None = None

    def expected_wait(self) -> float:
        """Seconds a new sample would wait for a thread (``inf`` when every thread is stuck).

        Stuck threads (`stuck`, reported by `health`) are left out: the wait is the other
        threads' work over the other threads."""
        queued = self.pool.queued()
        if not queued and len(self.pool.running) < self.pool.size:
            return 0.0  # a thread is free
        # Each queued call runs as long as the calls that finished did, on average. What a call
        # running now has left: the rest of that average, or, once it is past it, as long
        # again as it has run (a call that runs long tends to run on). A running call's age
        # is not the queue's run time: a quick call kept from the GIL for 40 ms by a burst of
        # requests is not a 40 ms reward, and 255 queued samples times 40 ms would shed them.
        # A stuck call (past the timeout) never frees its thread: neither its thread nor its
        # age counts (its age grew without bound and shed work the other threads could do).
        now, service, after = time.monotonic(), self.pool.service_s, self.stuck_after_s
        ages = [now - begun for begun in list(self.pool.running.values())]
        live = [age for age in ages if age <= after]
        free = self.pool.size - (len(ages) - len(live))
        if free <= 0:
            return float("inf")
        left = sum(max(service - age, age) for age in live)
        return (left + queued * service) / free

    def saturated(self) -> bool:
        """Whether a new sync sample should be refused: it would wait past ``max_wait_s``."""
        if self.is_async:
            return False
        if self.max_queue is not None and self.pool.queued() >= self.max_queue:
            return True
        return self.expected_wait() > self.max_wait_s

    @property
    def stuck_after_s(self) -> float:
        """A call running longer than this is stuck: the timeout, else `STUCK_AFTER_S`."""
        return self.timeout_s or self.STUCK_AFTER_S

    def stuck(self) -> int:
        """Worker threads whose reward has run past the timeout (they cannot be stopped)."""
        return self.pool.stuck(self.stuck_after_s)

    def health(self) -> tuple[int, dict[str, Any]]:
        """``/health``: 200 while a sample can be scored, 503 once every thread is stuck.

        ``{"status": "ok", "reward": name}``; with stuck threads, ``"degraded"`` (200) or
        ``"unhealthy"`` (503), and ``threads``, ``stuck``, ``queued`` and ``detail``.
        """
        state: dict[str, Any] = {"status": "ok", "reward": self.name}
        stuck = 0 if self.is_async else self.stuck()
        if not stuck:
            return 200, state
        state.update(threads=self.pool.size, stuck=stuck, queued=self.pool.queued())
        state["detail"] = (
            f"{stuck} of {self.pool.size} worker threads are stuck in reward {self.name!r} "
            f"(running past {self.stuck_after_s:g} s; a thread cannot be "
            "stopped)"
        )
        if stuck >= self.pool.size:
            state["status"] = "unhealthy"
            state["detail"] += ": no sample can be scored; restart the server"
            return 503, state
        state["status"] = "degraded"
        return 200, state

    async def score(self, kwargs: dict[str, Any], loc: list[str | int]) -> EvaluateResult:
        try:
            result = await (self._async(kwargs) if self.is_async else self._sync(kwargs))
        except (TimeoutError, _TimedOut):
            return self._timed_out()
        except Saturated:
            raise  # the request is answered 503, not with an invalid score
        except (RewardInputError, ConfigError) as exc:
            raise Misuse(loc, exc) from exc
        except Exception as exc:  # the decorator catches the reward's own errors; this is a bug
            logger.exception("serving reward %r failed", self.name)
            return EvaluateResult.invalid(f"{type(exc).__name__}: {exc}")
        if isinstance(result, EvaluateResult):
            return result
        return EvaluateResult.invalid(f"reward {self.name!r} returned {type(result).__name__}")

    async def _sync(self, kwargs: dict[str, Any]) -> Any:
        started: list[float] = []
        future = self.pool.submit(functools.partial(self.reward, **kwargs), started)
        self._calls[future] = (time.monotonic(), started)
        loop = future.get_loop()
        if self._sweep is None or self._sweep_loop is not loop:
            self._sweep_loop = loop
            self._sweep = loop.call_later(self.tick_s, self._check_calls)
        try:
            return await future
        finally:
            del self._calls[future]

    def _check_calls(self) -> None:
        """Answer the calls past a limit: 503 for one that waited ``max_wait_s`` for a thread,
        the timeout for one that has run ``timeout_s`` (its own run: not the wait)."""
        now, timeout, loop = time.monotonic(), self.timeout_s, self._sweep_loop
        for future, (queued_since, started) in list(self._calls.items()):
            if future.get_loop() is not loop:  # a call on a loop served before: its own ends it
                continue
            if not started:  # still queued behind busy threads
                if now - queued_since >= self.max_wait_s:
                    _settle(future, False, Saturated())
            elif timeout is not None and now - started[0] >= timeout:
                _settle(future, False, _TimedOut())
        if self._calls and loop is not None:
            self._sweep = loop.call_later(self.tick_s, self._check_calls)
        else:
            self._sweep = None

    async def _async(self, kwargs: dict[str, Any]) -> Any:
        call = cast("Awaitable[EvaluateResult]", self.reward(**kwargs))
        return await asyncio.wait_for(call, self.timeout_s)

    def _timed_out(self) -> EvaluateResult:
        error = (
            f"TimeoutError: reward {self.name!r} did not finish within {self.timeout_s:g} s "
            "(the server's per-sample timeout; raise it with --timeout)"
        )
        if not self.is_async:
            logger.warning("%s; its worker thread runs on until the reward returns", error)
        return EvaluateResult.invalid(error)
