"""`rk_agent.daemon_threads`: real threads, a real forked copy, a real interpreter exit."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import subprocess
import sys
import threading

import pytest

from rk_agent.daemon_threads import DaemonThreads

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_calls_run_on_named_daemon_threads_and_raise_to_the_caller() -> None:
    pool = DaemonThreads(max_threads=2, name="t-named")
    thread = pool.submit(threading.current_thread).result(timeout=30)
    assert thread.daemon and thread.name == "t-named-0"
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(timeout=30)


def test_an_idle_thread_is_reused_and_no_more_than_max_threads_start() -> None:
    pool = DaemonThreads(max_threads=2, name="t-reuse")
    for _ in range(5):  # one after another: one thread does them all
        pool.submit(lambda: None).result(timeout=30)
    assert pool.threads == 1
    release, running = threading.Event(), threading.Semaphore(0)

    def held() -> str:
        running.release()
        release.wait(30)
        return threading.current_thread().name

    futures = [pool.submit(held) for _ in range(5)]
    assert running.acquire(timeout=30) and running.acquire(timeout=30)
    assert pool.threads == 2  # the three others wait for one of the two
    assert not running.acquire(timeout=0.2)
    release.set()
    names = {f.result(timeout=30) for f in futures}
    assert names == {"t-reuse-0", "t-reuse-1"}


def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    pool = DaemonThreads(max_threads=1, name="t-cancel")
    release, ran = threading.Event(), []
    first = pool.submit(release.wait, 30)
    second = pool.submit(ran.append, "second")
    assert second.cancel()
    release.set()
    assert first.result(timeout=30) is True
    pool.submit(lambda: None).result(timeout=30)  # the thread is past the cancelled call
    assert ran == []


def test_run_awaits_in_a_copy_of_the_callers_context_and_a_cancelled_await_abandons() -> None:
    pool = DaemonThreads(max_threads=2, name="t-async")
    release = threading.Event()

    async def main() -> tuple[str, bool]:
        REQUEST.set("episode 7")
        seen = await pool.run(REQUEST.get)
        hung = asyncio.ensure_future(pool.run(release.wait, 30))
        done, _ = await asyncio.wait([hung], timeout=0.1)
        hung.cancel()
        return seen, bool(done)

    try:
        assert asyncio.run(main()) == ("episode 7", False)  # asyncio.run returned: not joined
    finally:
        release.set()


def _in_a_forked_copy(pool: DaemonThreads, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    out.put((pool.threads, pool.submit(lambda: 6 * 7).result(timeout=30), pool.threads))


def test_a_forked_copy_starts_its_own_threads() -> None:
    pool = DaemonThreads(max_threads=1, name="t-fork")
    release = threading.Event()
    pool.submit(release.wait, 30)  # the parent's one thread is busy, and not in the copy
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_in_a_forked_copy, args=(pool, out))
    child.start()
    try:
        assert out.get(timeout=60) == (0, 42, 1)
    finally:
        release.set()
        child.join(60)
    assert child.exitcode == 0


def test_a_call_that_never_returns_does_not_keep_the_process_from_exiting() -> None:
    script = (
        "import threading\n"
        "from rk_agent.daemon_threads import DaemonThreads\n"
        "DaemonThreads(1, 'hung').submit(threading.Event().wait)\n"
        "print('done', flush=True)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (finished.returncode, finished.stdout) == (0, "done\n")


def test_max_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_threads must be at least 1, got 0"):
        DaemonThreads(0, "none")
