"""Tests for `rk_agent.loop_thread`: the one bridge from sync code to coroutines."""

from __future__ import annotations

import asyncio
import os
import re
import threading

import pytest

from rk_agent.loop_thread import LoopThread, run_sync


async def _double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


async def _where() -> str:
    return threading.current_thread().name


def test_a_loop_thread_runs_coroutines_from_many_threads_on_one_daemon_thread() -> None:
    loop = LoopThread(name="rk-test-loop")
    try:
        results: list[int] = []
        threads = [
            threading.Thread(target=lambda i=i: results.append(loop.run(_double(i))))
            for i in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [2 * i for i in range(8)]
        assert loop.run(_where()) == "rk-test-loop"
        thread = next(t for t in threading.enumerate() if t.name == "rk-test-loop")
        assert thread.daemon
    finally:
        loop.stop()


def test_a_call_past_its_timeout_is_cancelled_and_raises_timeout_error() -> None:
    loop = LoopThread()
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        with pytest.raises(TimeoutError, match=re.escape("no result in 0.05 s")):
            loop.run(forever(), 0.05)
        assert cancelled.wait(5)
    finally:
        loop.stop()


def test_an_error_of_the_coroutine_reaches_the_caller() -> None:
    async def boom() -> None:
        raise ValueError("boom")

    loop = LoopThread()
    try:
        with pytest.raises(ValueError, match="boom"):
            loop.run(boom())
    finally:
        loop.stop()


def test_a_call_from_its_own_loop_is_refused_not_deadlocked() -> None:
    loop = LoopThread(name="rk-own")

    async def inner() -> None:
        loop.run(_double(1))

    try:
        with pytest.raises(RuntimeError, match="run was called from its own loop"):
            loop.run(inner())
    finally:
        loop.stop()


def test_stop_waits_for_what_spawn_started_and_a_later_run_starts_anew() -> None:
    loop = LoopThread()
    done = threading.Event()

    async def later() -> None:
        await asyncio.sleep(0.01)
        done.set()

    loop.spawn(later())
    loop.stop(timeout_s=5)
    assert done.is_set()
    assert loop.stopped
    assert loop.run(_double(3)) == 6
    assert not loop.stopped
    loop.stop()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_starts_its_own_loop() -> None:
    loop = LoopThread()
    try:
        loop.run(_double(1))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the parent's loop thread does not exist here
            try:
                os.write(write, str(loop.run(_double(5), 5)).encode())
            finally:
                os._exit(0)
        os.close(write)
        assert os.read(read, 16) == b"10"
        os.waitpid(pid, 0)
        assert loop.run(_double(2)) == 4  # the parent's loop is untouched
    finally:
        loop.stop()


def test_run_sync_outside_and_inside_a_running_loop() -> None:
    assert run_sync(_double(2)) == 4

    async def inside() -> int:
        return run_sync(_double(3))  # on a thread of its own: this loop is busy

    assert asyncio.run(inside()) == 6
