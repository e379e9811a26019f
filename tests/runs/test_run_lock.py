"""The run directory's lock, held and killed by real processes."""

from __future__ import annotations

import pickle
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError, RunLockedError
from rk_agent.runs.run_lock import LockHolder, RunLock, _command_line, process_alive

HOLD = """
import sys
from rk_agent.runs.run_lock import RunLock
lock = RunLock.acquire(sys.argv[1])
print("held", flush=True)
sys.stdin.readline()  # hold until told (or killed)
lock.release()
print("released", flush=True)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process that holds ``tmp_path/run.lock`` until its stdin gets a line."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "run.lock"), "--api-key", "sk-secret-42"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    yield process
    if process.poll() is None:
        process.kill()
    process.communicate()


def test_a_second_writer_is_refused_with_the_holder_named(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    with pytest.raises(RunLockedError) as error:
        RunLock.acquire(tmp_path / "run.lock")
    message = str(error.value)
    assert message.startswith(
        f"{tmp_path} is being written by pid {holder.pid} on {socket.gethostname()} "
        "(`python -c ... "
    )
    assert "--api-key '***'" in message and "sk-secret-42" not in message
    assert f"or stop it (`kill {holder.pid}`) and then finish the run with" in message
    assert f"`rk-agent rollout --resume {tmp_path}`; to start a separate run" in message
    assert (error.value.pid, error.value.path) == (holder.pid, str(tmp_path))
    again = pickle.loads(pickle.dumps(error.value))
    assert str(again) == message and again.pid == holder.pid
    # A clean release frees it and leaves no record.
    assert holder.stdin is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout is not None and holder.stdout.readline() == "released\n"
    with RunLock.acquire(tmp_path / "run.lock") as lock:
        assert lock.previous is None and lock.holder.pid != holder.pid


def test_a_killed_holder_leaves_a_lock_the_next_writer_takes_over(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    recorded = RunLock.recorded_holder(tmp_path / "run.lock")
    assert recorded is not None and recorded.pid == holder.pid
    assert recorded.is_alive() is False and not process_alive(holder.pid)
    with RunLock.acquire(tmp_path / "run.lock") as lock:  # the OS released the flock
        assert lock.previous == recorded
        assert RunLock.recorded_holder(tmp_path / "run.lock") == lock.holder
    assert RunLock.recorded_holder(tmp_path / "run.lock") is None


def test_the_lock_file_must_be_creatable(tmp_path: Path) -> None:
    file = tmp_path / "missing" / "run.lock"
    expected = f"cannot create the lock file {file}: No such file or directory. The run directory"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        RunLock.acquire(file)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["/x/bin/rk-agent", "rollout", "--api-key", "sk-1", "--n", "3"],
         "rk-agent rollout --api-key '***' --n 3"),
        (["/x/rk_agent/__main__.py", "rollout", "--api-key=sk-1", "--output", "a b"],
         "rk-agent rollout '--api-key=***' --output 'a b'"),
        (["/x/other/__main__.py", "go"], "python -m other go"),
        (["-c", "x"], "python -c ... x"),
        ([], "python"),
    ],
)  # fmt: skip
def test_the_command_line_is_recorded_without_keys(argv: list[str], line: str) -> None:
    assert _command_line(argv) == line


def test_a_holder_on_another_machine_is_not_judged() -> None:
    me = LockHolder.this_process()
    assert me.is_alive() is True
    assert me.model_copy(update={"host": "elsewhere"}).is_alive() is None
