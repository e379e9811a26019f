"""`InlineBudget`: run a callable in the caller's thread once it has shown it is quick.

Environment steps and tool calls are sync code that may block (a sandboxed subprocess, a
network tool), so the rollout engine runs them on threads, off the event loop, and a tool call
runs on a thread of its own so that its timeout can be kept. For the quick ones (a built-in
tool's arithmetic, a reward over a short conversation: a fraction of a millisecond) the thread
costs more than the work: two hand-offs, each waiting for the GIL and for the loop to wake up.
At a few thousand steps a second that was a third of a rollout process's time.

So each such callable has a budget that watches its times. It starts off the caller's thread;
once its first ``trials`` calls there used at most ``promote_s`` of CPU (median) and took at
most ``demote_s`` of wall time (median), it runs inline. A callable that used little CPU but
took long may be waiting on something outside the process, or only for the GIL: on a thread,
the wall time also counts those waits, and at the start of a run, when every episode starts at
once on a busy machine, they can be tens of milliseconds. So such a callable is measured again
later, twice, after 4x and 16x its ``trials`` calls (still off the thread), and stays off the
thread for good only when it is slow every time; one whose CPU time is over budget stays off
at once. Inline calls that take longer than
``demote_s`` send it back off the thread for good once they are a pattern (a decaying share
of the inline calls over a quarter: three slow calls in a row, or one in three), not for one
garbage-collector pause: a call that keeps being slow on the event loop holds up every other
episode. A callable that must never run inline (one that waits on the network, or may hang
past its timeout) says so: ``mode=False``; ``mode=True`` runs it inline from the start.

What inline gives up: a call running inline cannot be timed out (a thread can at least be
abandoned), so a callable that was quick for its first ``trials`` calls and then hangs holds up
its caller. That is why tools and environments that wait on anything outside the process
should say ``False`` (an environment with MCP tools does).

Main names: `InlineBudget`.

Example:
    >>> budget = InlineBudget(trials=2)
    >>> budget.inline
    False
    >>> budget.record(0.004, cpu_s=0.0001, inline=False)
    >>> budget.record(0.003, cpu_s=0.0002, inline=False)
    >>> budget.inline
    True
    >>> budget.record(0.5, inline=True)  # one slow call: a pause, not a pattern
    >>> budget.inline
    True
    >>> budget.record(0.5, inline=True); budget.record(0.5, inline=True)
    >>> budget.inline  # three in a row: off the thread for good
    False
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["InlineBudget"]

_SLOW_SHARE = 0.25  # 0.1, 0.19, 0.271: the third slow call in a row crosses it
_ROUNDS = 3  # rounds of trials a callable quick on CPU but slow on the clock gets


class InlineBudget:
    """Learns whether a callable is quick enough to run in its caller's thread.

    Args:
        promote_s: run inline once the first ``trials`` calls used at most this much CPU
            (median).
        demote_s: ... and took at most this long (median); inline calls that take longer
            send the callable off the thread for good once they are a pattern.
        trials: calls measured off the thread before deciding.
        mode: ``None`` learns from the times; ``True`` is always inline; ``False`` never.

    Records may come from several threads at once: a lost or doubled sample only moves the
    decision by one call, so no lock is taken.
    """

    __slots__ = (
        "_cpu",
        "_round",
        "_skip",
        "_slow",
        "_wall",
        "demote_s",
        "demoted",
        "inline",
        "mode",
        "promote_s",
        "trials",
    )

    def __init__(
        self,
        *,
        promote_s: float = 0.002,
        demote_s: float = 0.02,
        trials: int = 8,
        mode: bool | None = None,
    ) -> None:
        self.promote_s = promote_s
        self.demote_s = demote_s
        self.trials = trials
        self.mode = mode
        self.inline = mode is True
        self.demoted = False
        self._slow = 0.0  # decaying share of slow inline calls
        self._round = 0  # rounds of trials that did not promote it
        self._skip = 0  # calls off the thread left before the next round
        self._wall: list[float] = []
        self._cpu: list[float] = []

    def __repr__(self) -> str:
        state = "inline" if self.inline else "demoted" if self.demoted else "threaded"
        return f"InlineBudget({state}, mode={self.mode!r})"

    def call(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` in this thread, its time recorded as an inline call."""
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            self.record(time.perf_counter() - started, inline=True)

    def off_thread(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` on the worker thread this is handed to, its wall time and
        the thread's CPU time recorded as a call off the caller's thread (a call that outlives
        its caller's timeout records when it ends: far over budget)."""
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            wall = time.perf_counter() - started
            self.record(wall, inline=False, cpu_s=time.thread_time() - cpu)

    def record(self, seconds: float, *, inline: bool, cpu_s: float | None = None) -> None:
        """Take the wall time of one call (and, off the thread, the CPU time its thread used:
        `time.thread_time`), and decide again."""
        if self.mode is not None or self.demoted:
            return
        if inline:
            self._slow = 0.9 * self._slow + (0.1 if seconds > self.demote_s else 0.0)
            if self._slow > _SLOW_SHARE:
                self.inline = False
                self.demoted = True
            return
        if self._skip:
            self._skip -= 1
            return
        self._wall.append(seconds)
        self._cpu.append(seconds if cpu_s is None else cpu_s)
        if len(self._wall) >= self.trials:
            quick_cpu = statistics.median(self._cpu) <= self.promote_s
            self.inline = quick_cpu and statistics.median(self._wall) <= self.demote_s
            if not self.inline:
                self._round += 1
                if not quick_cpu or self._round >= _ROUNDS:
                    self.demoted = True  # it computes long, or it waits every time: stop
                else:  # waiting, perhaps only for the GIL: measure again later
                    self._skip = self.trials * 4**self._round
            self._wall.clear()
            self._cpu.clear()
