"""The code sandbox: real subprocesses, real limits, real attacks (loops, fork and memory bombs)."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from rk_agent.errors import SandboxError
from rk_agent.rewards.sandbox import (
    SandboxLimits,
    SandboxResult,
    SandboxStatus,
    process_limit_backend,
    run_python,
    run_python_async,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux")

SHORT = SandboxLimits(timeout_s=1.5, memory_mb=256)


def _processes_in(directory: str) -> list[int]:
    """Live processes whose working directory is (or was) ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = str((entry / "cwd").readlink())
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cwd.startswith(directory) and state != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _assert_nothing_left(result: SandboxResult) -> None:
    workdir = result.stdout.splitlines()[0]
    assert workdir.startswith("/")
    deadline = time.monotonic() + 1.0
    while _processes_in(workdir) and time.monotonic() < deadline:
        time.sleep(0.02)  # init reaps the killed orphans
    assert _processes_in(workdir) == []
    assert not Path(workdir).exists()


# --------------------------------------------------------------------------------------------
# Ordinary runs


def test_stdin_to_stdout() -> None:
    result = run_python("a, b = map(int, input().split())\nprint(a + b)", stdin="2 40\n")
    assert result.status is SandboxStatus.OK
    assert result.ok
    assert (result.stdout, result.stderr, result.exit_code) == ("42\n", "", 0)
    assert result.reason == "ok"
    assert not result.timed_out
    assert result.wall_time_s > 0


def test_exception_is_an_error_with_the_users_traceback_only() -> None:
    result = run_python("x = 1\n1 / 0\n")
    assert result.status is SandboxStatus.ERROR
    assert result.exit_code == 1
    assert result.reason == "exit code 1: ZeroDivisionError: division by zero"
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert 'File "solution.py", line 2, in <module>' in result.stderr
    assert "<string>" not in result.stderr  # the bootstrap's frame is hidden


def test_exit_status_and_syntax_error() -> None:
    assert run_python("import sys; sys.exit(3)").model_dump(include={"exit_code", "reason"}) == {
        "exit_code": 3,
        "reason": "exit code 3",
    }
    bad = run_python("def f(:\n    pass\n")
    assert bad.status is SandboxStatus.ERROR
    assert bad.reason.startswith("exit code 1: SyntaxError")


def test_code_runs_as_main_in_isolated_mode() -> None:
    code = "import sys\nprint(__name__, sys.flags.isolated, sys.flags.dont_write_bytecode)"
    assert run_python(code).stdout == "__main__ 1 1\n"


def test_child_dies_of_a_signal() -> None:
    result = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert result.status is SandboxStatus.KILLED
    assert (result.signal, result.exit_code, result.reason) == (
        "SIGSEGV",
        None,
        "killed by SIGSEGV",
    )


def test_undecodable_output_is_replaced_not_raised() -> None:
    result = run_python("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe')")
    assert result.stdout == "ok \ufffd\ufffd"


def test_large_stdin_the_program_ignores_does_not_block() -> None:
    result = run_python("print('done')", stdin="x" * 5_000_000, limits=SHORT)
    assert (result.status, result.stdout) == (SandboxStatus.OK, "done\n")
    read_all = run_python("import sys\nprint(len(sys.stdin.read()))", stdin="y" * 3_000_000)
    assert read_all.stdout == "3000000\n"


# --------------------------------------------------------------------------------------------
# Isolation


def test_no_environment_variable_is_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-secret-123")
    monkeypatch.setenv("PYTHONPATH", "/nonexistent")
    result = run_python("import os\nprint(sorted(os.environ))\nprint(dict(os.environ))")
    assert "fw-secret-123" not in result.stdout
    assert "FIREWORKS_API_KEY" not in result.stdout
    names = eval(result.stdout.splitlines()[0])  # our own child's output: a list literal
    assert set(names) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "HOME",
        "TMPDIR",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "LC_CTYPE",  # added by CPython's locale coercion on some systems
    }


def test_extra_env_is_passed() -> None:
    result = run_python("import os\nprint(os.environ['MODE'])", env={"MODE": "eval"})
    assert result.stdout == "eval\n"


def test_fresh_working_directory_is_removed_afterwards() -> None:
    code = (
        "import os\nprint(os.getcwd())\nprint(os.environ['HOME'])\n"
        "open('out.txt', 'w').write('x' * 1000)\nos.mkdir('sub')\nopen('sub/f', 'w').write('y')\n"
        "print(sorted(os.listdir('.')))"
    )
    result = run_python(code)
    workdir, home, listing = result.stdout.splitlines()
    assert workdir == home
    assert Path(workdir).name.startswith("rk-sandbox-")
    assert workdir != str(Path.cwd())
    assert listing == "['out.txt', 'solution.py', 'sub']"
    assert not Path(workdir).exists()
    second = run_python("import os\nprint(os.getcwd())")
    assert second.stdout.strip() != workdir


def test_background_processes_die_with_the_run() -> None:
    code = (
        "import os, subprocess\nprint(os.getcwd())\n"
        "p = subprocess.Popen(['sleep', '30'])\nprint(p.pid, flush=True)\n"
    )
    result = run_python(code, limits=SHORT)
    assert result.status is SandboxStatus.OK
    pid = int(result.stdout.splitlines()[1])
    deadline = time.monotonic() + 1.0
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)
    _assert_nothing_left(result)


@pytest.mark.skipif(process_limit_backend() != "cgroup", reason="needs a pids cgroup")
def test_setsid_escapee_is_killed_by_the_cgroup() -> None:
    code = (
        "import os, time\nprint(os.getcwd(), flush=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    print(os.getpid(), flush=True)\n"
        "    time.sleep(60)\nelse:\n    time.sleep(0.2)\n"
    )
    result = run_python(code, limits=SHORT)
    assert result.status is SandboxStatus.OK
    escaped = int(result.stdout.splitlines()[1])
    deadline = time.monotonic() + 1.0
    while _alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(escaped)
    _assert_nothing_left(result)


# --------------------------------------------------------------------------------------------
# Attacks: each ends as a failed run with a clear reason, and the caller lives on


def test_infinite_loop_times_out() -> None:
    started = time.monotonic()
    result = run_python("while True:\n    pass\n", limits=SandboxLimits(timeout_s=1))
    assert result.status is SandboxStatus.TIMEOUT
    assert result.timed_out
    assert result.reason == "timed out after 1 s (wall clock)"
    assert time.monotonic() - started < 3


def test_sleeping_forever_times_out_on_the_wall_clock() -> None:
    result = run_python("import time\ntime.sleep(60)", limits=SandboxLimits(timeout_s=1))
    assert (result.status, result.timed_out) == (SandboxStatus.TIMEOUT, True)


def test_cpu_limit_ends_a_busy_loop_before_the_wall_clock() -> None:
    limits = SandboxLimits(timeout_s=20, cpu_time_s=1)
    started = time.monotonic()
    result = run_python("while True:\n    pass\n", limits=limits)
    assert result.status is SandboxStatus.TIMEOUT
    assert result.reason == "CPU time limit of 1 s exceeded"
    assert time.monotonic() - started < 5


def test_memory_bomb_hits_the_memory_limit() -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(10_000_000))\n"
    result = run_python(code, limits=SHORT)
    assert result.status is SandboxStatus.MEMORY
    assert result.reason == "memory limit of 256 MiB exceeded (MemoryError)"
    assert not result.timed_out


def test_one_gigabyte_print_is_cut_at_the_output_cap() -> None:
    limits = SandboxLimits(timeout_s=3, max_output_bytes=100_000)
    code = "import sys\nfor _ in range(1_000_000):\n    sys.stdout.write('x' * 1000)\n"
    started = time.monotonic()
    result = run_python(code, limits=limits)
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert result.reason == "output limit: wrote more than 100000 bytes to stdout"
    assert result.stdout_truncated
    assert len(result.stdout) == 100_000  # the parent never kept more than the cap
    assert time.monotonic() - started < 2.5


@pytest.mark.slow
def test_one_gigabyte_written_at_once() -> None:
    limits = SandboxLimits(timeout_s=3, memory_mb=2048)
    result = run_python("import sys\nsys.stdout.buffer.write(b'x' * 10**9)", limits=limits)
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert len(result.stdout) == limits.max_output_bytes
    with_default_memory = run_python("print('x' * 10**9)", limits=SandboxLimits(timeout_s=3))
    assert with_default_memory.status is SandboxStatus.MEMORY


def test_stderr_flood_is_cut_too() -> None:
    code = "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)\n"
    result = run_python(code, limits=SandboxLimits(timeout_s=3, max_output_bytes=10_000))
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert result.reason.endswith("to stderr")
    assert result.stderr_truncated
    assert len(result.stderr) == 10_000


def test_file_size_limit() -> None:
    code = "open('big.bin', 'wb').write(b'0' * 3 * 1024 * 1024)"
    result = run_python(code, limits=SandboxLimits(max_file_size_mb=1))
    assert result.status is SandboxStatus.ERROR
    assert "File too large" in result.reason


@pytest.mark.skipif(
    process_limit_backend() == "none",
    reason="no process limit works here (root without cgroups): a fork bomb would hit the host",
)
@pytest.mark.parametrize(
    "bomb",
    [
        "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "while True:\n    os.fork()\n",
    ],
    ids=["persistent", "plain"],
)
def test_fork_bomb_ends_and_leaves_nothing_behind(bomb: str) -> None:
    code = f"import os\nprint(os.getcwd(), flush=True)\n{bomb}"
    started = time.monotonic()
    result = run_python(code, limits=SandboxLimits(timeout_s=2, max_processes=16))
    assert result.status in (SandboxStatus.TIMEOUT, SandboxStatus.ERROR)
    assert "processes" in result.reason or result.timed_out
    assert time.monotonic() - started < 5
    _assert_nothing_left(result)
    assert run_python("print('still alive')").stdout == "still alive\n"


# --------------------------------------------------------------------------------------------
# Concurrency, async, configuration


def test_safe_to_call_from_many_threads() -> None:
    def one(i: int) -> str:
        return run_python(f"print(int(input()) * {i})", stdin="3").stdout

    with ThreadPoolExecutor(max_workers=6) as pool:
        outputs = list(pool.map(one, range(12)))
    assert outputs == [f"{3 * i}\n" for i in range(12)]


def test_async_variant_runs_concurrently() -> None:
    async def main() -> list[SandboxResult]:
        return await asyncio.gather(
            run_python_async("import time\ntime.sleep(0.5)\nprint('a')"),
            run_python_async("import time\ntime.sleep(0.5)\nprint('b')"),
        )

    started = time.monotonic()
    first, second = asyncio.run(main())
    assert (first.stdout, second.stdout) == ("a\n", "b\n")
    assert time.monotonic() - started < 1.5


def test_limits_validate_and_derive_cpu_seconds() -> None:
    assert SandboxLimits(timeout_s=2.5).cpu_seconds == 3
    assert SandboxLimits(timeout_s=10, cpu_time_s=1).cpu_seconds == 1
    with pytest.raises(ValidationError, match="greater than 0"):
        SandboxLimits(timeout_s=0)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        SandboxLimits(timeout=3)  # type: ignore[call-arg]


def test_result_round_trips_through_json() -> None:
    result = run_python("print('hi')")
    assert SandboxResult.model_validate_json(result.model_dump_json()) == result


def test_process_limit_backend_is_known() -> None:
    assert process_limit_backend() in ("cgroup", "rlimit", "none")


def test_not_posix_raises_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    message = (
        "the code sandbox needs a POSIX system with process groups and the `resource` module "
        "(Linux is the target); this is 'win32'."
    )
    with pytest.raises(SandboxError, match=re.escape(message)):
        run_python("print(1)")
