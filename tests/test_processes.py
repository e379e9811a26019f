"""Child processes in groups of their own: stopped whole, with escalation, at exit too, and
killed with the process that started them."""

from __future__ import annotations

import contextlib
import doctest
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import rk_agent.processes
from rk_agent.processes import on_exit, spawn

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and pdeathsig")

# A shell that reports the pid of a sleep it started, then waits (``trap`` lines go first).
PARENT_OF_SLEEP = "{trap} sleep 60 & echo $!; wait"


def running(process: psutil.Process) -> bool:
    """Alive and not a zombie (the same process: psutil checks its start time)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone_within(pids: list[int], seconds: float = 10.0) -> bool:
    """Whether every one of ``pids`` ended within ``seconds`` (orphans are reaped by init)."""
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            processes.append(psutil.Process(pid))
    deadline = time.monotonic() + seconds
    while any(running(p) for p in processes):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def read_pid(child: rk_agent.processes.Child[str]) -> int:
    assert child.popen.stdout is not None
    return int(child.popen.stdout.readline())


def parent_of_sleep(trap: str = "", **options: object) -> tuple[rk_agent.processes.Child[str], int]:
    child = spawn(
        ["sh", "-c", PARENT_OF_SLEEP.format(trap=trap)], text=True, stdout=subprocess.PIPE,
        **options,  # type: ignore[arg-type]
    )  # fmt: skip
    return child, read_pid(child)


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(rk_agent.processes)
    assert tried > 0 and failures == 0


def test_a_stop_reaches_the_childs_children() -> None:
    child, sleep = parent_of_sleep()
    assert child.stop() == -15  # SIGTERM was enough
    assert gone_within([sleep])
    assert child.popen.stdout is not None
    child.popen.stdout.close()


def test_a_child_that_ignores_sigterm_is_killed_after_its_grace() -> None:
    child, sleep = parent_of_sleep(trap="trap '' TERM;", grace_s=0.5)
    assert child.stop() == -9
    assert gone_within([sleep])
    assert child.popen.stdout is not None
    child.popen.stdout.close()


def test_a_grandchild_that_ignores_sigterm_is_killed_though_the_child_ended() -> None:
    child = spawn(
        [sys.executable, "-c",
         "import signal, subprocess, sys, time\n"
         "sleeper = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)'],"
         " stdout=subprocess.PIPE)\n"
         "sleeper.stdout.readline()\n"
         "print(sleeper.pid, flush=True)\n"
         "time.sleep(60)\n"],
        text=True, stdout=subprocess.PIPE,
    )  # fmt: skip
    grandchild = read_pid(child)
    assert child.stop(grace_s=0.5) == -15  # the child itself ended at SIGTERM
    assert gone_within([grandchild])
    assert child.popen.stdout is not None
    child.popen.stdout.close()


def test_a_child_that_already_exited_is_only_reaped_and_stop_is_idempotent() -> None:
    child = spawn(["sh", "-c", "exit 3"])
    child.popen.wait()
    assert child.stop() == 3
    assert child.stop() == 3


def test_two_threads_stopping_one_child_get_one_status() -> None:
    child, sleep = parent_of_sleep(trap="trap '' TERM;", grace_s=0.3)
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(child.stop())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert statuses == [-9, -9]
    assert gone_within([sleep])
    assert child.popen.stdout is not None
    child.popen.stdout.close()


def test_a_missing_program_fails_at_spawn() -> None:
    with pytest.raises(FileNotFoundError):
        spawn(["/nonexistent/rk-agent-no-such-program"])
    errors: list[BaseException] = []

    def from_a_thread() -> None:  # through the spawner thread, raised here all the same
        try:
            spawn(["/nonexistent/rk-agent-no-such-program"])
        except FileNotFoundError as exc:
            errors.append(exc)

    thread = threading.Thread(target=from_a_thread)
    thread.start()
    thread.join(timeout=30)
    assert len(errors) == 1


# ---------------------------------------------------------------------------- fresh interpreters

AT_EXIT = """
import json, os, sys
from rk_agent.processes import on_exit, spawn
polite = spawn(["sh", "-c", "trap 'echo TERM >> {log}; exit 0' TERM; sleep 60 & wait"])
stubborn = spawn(["sh", "-c", "trap '' TERM; sleep 60 & wait"], grace_s=0.5)
def cleanup():
    alive = all(c.popen.poll() is None for c in (polite, stubborn))
    with open({log!r}, "a") as out:
        out.write(f"cleanup ran, children alive: {{alive}}\\n")
def broken():
    raise RuntimeError("this cleanup fails")
on_exit(cleanup)
on_exit(broken)
on_exit(lambda: print("cancelled, never runs"))()
print(json.dumps([polite.pid, stubborn.pid]), flush=True)
"""


def test_at_exit_the_cleanups_run_then_every_child_is_stopped(tmp_path: Path) -> None:
    log = tmp_path / "log"
    done = subprocess.run(
        [sys.executable, "-c", AT_EXIT.format(log=str(log))],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pids = json.loads(done.stdout)
    assert gone_within(pids)
    assert log.read_text() == "cleanup ran, children alive: True\nTERM\n"
    assert "RuntimeError: this cleanup fails" in done.stderr  # logged; the rest still ran
    assert "cancelled" not in done.stdout


PARENT_DIES = """
import json, os, signal, subprocess, threading
from rk_agent.processes import spawn
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
main = spawn(["sleep", "60"], **quiet)
box = []
thread = threading.Thread(target=lambda: box.append(spawn(["sleep", "60"], **quiet)))
thread.start()
thread.join()  # the thread that asked is gone: its child must live on
stays = spawn(["sleep", "60"], die_with_parent=False, **quiet)
print(json.dumps({"main": main.pid, "thread": box[0].pid, "stays": stays.pid}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no exit hook runs
"""


def test_a_child_dies_with_the_process_that_spawned_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARENT_DIES], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -9, done.stderr
    pids = json.loads(done.stdout)
    stays = psutil.Process(pids["stays"])
    try:
        assert gone_within([pids["main"], pids["thread"]])
        assert running(stays)  # die_with_parent=False: it outlives its parent
    finally:
        stays.kill()


def test_a_child_spawned_off_the_main_thread_outlives_that_thread() -> None:
    box: list[rk_agent.processes.Child[bytes]] = []
    thread = threading.Thread(target=lambda: box.append(spawn(["sleep", "60"])))
    thread.start()
    thread.join(timeout=30)
    task = Path(f"/proc/self/task/{thread.native_id}")
    deadline = time.monotonic() + 30
    while task.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not task.exists()
    # Had the child been tied to that thread, its SIGKILL would be sent by now and win.
    assert box[0].stop() == -15


FORKED = """
import os, sys
from rk_agent.processes import spawn
child = spawn(["sleep", "60"])
fork = os.fork()
if fork == 0:
    sys.exit(0)  # runs the exit hook: it must leave its parent's child alone
os.waitpid(fork, 0)
print(child.popen.poll() is None)
"""


def test_a_forked_copy_does_not_stop_its_parents_children() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"


def test_a_cancelled_cleanup_is_not_kept() -> None:
    calls: list[str] = []
    cancel = on_exit(lambda: calls.append("ran"))
    cancel()
    cancel()
    assert calls == []
