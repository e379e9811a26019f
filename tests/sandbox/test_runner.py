"""The code sandbox: real bwrap runs and real subprocesses, real limits, both modes.

The attack suite (resource and escape attacks) is in ``test_sandbox_attacks.py``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from rk_agent.errors import ConfigError, SandboxError
from rk_agent.sandbox import (
    SandboxLimits,
    SandboxMode,
    SandboxResult,
    SandboxStatus,
    _bwrap,
    isolation_report,
    process_limit_backend,
    run_python,
    run_python_async,
    sandbox_mode,
)
from tests.sandbox.support import BWRAP_PROBLEM, needs_bwrap

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux")
PROCESS = SandboxMode.PROCESS

SHORT = SandboxLimits(timeout_s=1.5, memory_mb=256)


def _processes_in(directory: str) -> list[int]:
    """(Mode ``process``.) Live processes whose working directory is (or was) ``directory``."""
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
    """(Mode ``process``.) Nothing runs in the run's directory, and the directory is gone."""
    workdir = result.stdout.splitlines()[0]
    assert workdir.startswith("/")
    deadline = time.monotonic() + 1.0
    while _processes_in(workdir) and time.monotonic() < deadline:
        time.sleep(0.02)  # init reaps the killed orphans
    assert _processes_in(workdir) == []
    assert not Path(workdir).exists()


# --------------------------------------------------------------------------------------------
# Ordinary runs (the default mode, bwrap)


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_stdin_to_stdout(mode: SandboxMode) -> None:
    result = run_python(
        "a, b = map(int, input().split())\nprint(a + b)", stdin="2 40\n", sandbox=mode
    )
    assert result.mode is mode
    assert result.status is SandboxStatus.OK
    assert result.ok
    assert (result.stdout, result.stderr, result.exit_code) == ("42\n", "", 0)
    assert result.reason == "ok"
    assert not result.timed_out
    assert result.wall_time_s > 0


@needs_bwrap
def test_exception_is_an_error_with_the_users_traceback_only() -> None:
    result = run_python("x = 1\n1 / 0\n")
    assert result.status is SandboxStatus.ERROR
    assert result.exit_code == 1
    assert result.reason == "exit code 1: ZeroDivisionError: division by zero"
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert 'File "solution.py", line 2, in <module>' in result.stderr
    assert "<string>" not in result.stderr  # the bootstrap's frame is hidden


@needs_bwrap
def test_exit_status_and_syntax_error() -> None:
    assert run_python("import sys; sys.exit(3)").model_dump(include={"exit_code", "reason"}) == {
        "exit_code": 3,
        "reason": "exit code 3",
    }
    bad = run_python("def f(:\n    pass\n")
    assert bad.status is SandboxStatus.ERROR
    assert bad.reason.startswith("exit code 1: SyntaxError")


@needs_bwrap
def test_code_runs_as_main_in_isolated_mode() -> None:
    code = "import sys\nprint(__name__, sys.flags.isolated, sys.flags.dont_write_bytecode)"
    assert run_python(code).stdout == "__main__ 1 1\n"


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_child_dies_of_a_signal(mode: SandboxMode) -> None:
    result = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", sandbox=mode)
    assert result.status is SandboxStatus.KILLED
    assert (result.signal, result.exit_code, result.reason) == (
        "SIGSEGV",
        None,
        "killed by SIGSEGV",
    )


@needs_bwrap
def test_undecodable_output_is_replaced_not_raised() -> None:
    result = run_python("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe')")
    assert result.stdout == "ok \ufffd\ufffd"


@needs_bwrap
def test_large_stdin_the_program_ignores_does_not_block() -> None:
    result = run_python("print('done')", stdin="x" * 5_000_000, limits=SHORT)
    assert (result.status, result.stdout) == (SandboxStatus.OK, "done\n")
    read_all = run_python("import sys\nprint(len(sys.stdin.read()))", stdin="y" * 3_000_000)
    assert read_all.stdout == "3000000\n"


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_data_channel_comes_back_capped(mode: SandboxMode) -> None:
    code = "import os\nos.write(3, b'[1, 2]\\n')\nprint('out')"
    result = run_python(code, data_channel=True, sandbox=mode)
    assert (result.data, result.stdout, result.data_truncated) == ("[1, 2]\n", "out\n", False)
    flood = "import os\nwhile True:\n    os.write(3, b'x' * 4096)"
    limits = SandboxLimits(timeout_s=3, max_output_bytes=10_000)
    flooded = run_python(flood, data_channel=True, limits=limits, sandbox=mode)
    assert flooded.status is SandboxStatus.OUTPUT_LIMIT
    assert flooded.reason == "output limit: wrote more than 10000 bytes to the data channel"
    assert len(flooded.data) == 10_000
    without = run_python("import os\nos.write(3, b'x')", sandbox=mode)
    assert without.status is SandboxStatus.ERROR  # no channel: fd 3 is not open
    assert "Bad file descriptor" in without.reason


@needs_bwrap
def test_the_isolated_view_of_the_machine() -> None:
    code = (
        "import os, socket, tempfile\n"
        "print(os.getuid(), os.getgid(), os.getcwd(), os.environ['HOME'])\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(socket.gethostname(), os.path.exists('/sys'))\n"
        "open(os.path.join(tempfile.gettempdir(), 't'), 'w').write('x')\n"
        "print(sorted(os.listdir('.')))"
    )
    lines = run_python(code).stdout.splitlines()
    assert lines[0] == "65534 65534 /sandbox /sandbox"
    assert lines[1] == "['1', '2']"  # the init and the program: its own PID namespace
    assert lines[2] == "sandbox False"
    assert lines[3] == "['solution.py', 't']"  # the temp dir is the work dir


# --------------------------------------------------------------------------------------------
# Environment and working directory


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_no_environment_variable_is_inherited(
    mode: SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-secret-123")
    monkeypatch.setenv("PYTHONPATH", "/nonexistent")
    code = "import os\nprint(sorted(os.environ))\nprint(dict(os.environ))"
    result = run_python(code, sandbox=mode)
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
        "PWD",  # the work dir, set by bwrap (or the shell that joins the cgroups)
    }


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_installed_packages_import_and_exit_works_without_site(mode: SandboxMode) -> None:
    """The interpreter starts without `site`; the bootstrap puts back what programs need."""
    import pydantic

    project = str(Path(__file__).resolve().parents[2])
    code = "import sys, pydantic\nprint(pydantic.VERSION)\nprint(sys.path)\nexit(3)"
    result = run_python(code, sandbox=mode)
    assert result.exit_code == 3, result.stderr  # `exit` is a builtin `site` used to add
    version, paths = result.stdout.splitlines()
    assert version == pydantic.VERSION
    if mode is SandboxMode.BWRAP:  # not even the name of a directory it cannot see
        assert project not in eval(paths)  # our own child's output: a list literal


@needs_bwrap
def test_extra_env_is_passed() -> None:
    result = run_python("import os\nprint(os.environ['MODE'])", env={"MODE": "eval"})
    assert result.stdout == "eval\n"


@needs_bwrap
def test_each_run_gets_an_empty_work_dir() -> None:
    first = run_python("open('left.txt', 'w').write('x')\nimport os\nprint(sorted(os.listdir()))")
    assert first.stdout == "['left.txt', 'solution.py']\n"
    second = run_python(
        "import os, tempfile\nprint(os.listdir('.'), os.listdir(tempfile.gettempdir()))"
    )
    assert second.stdout == "['solution.py'] ['solution.py']\n"


def test_process_mode_work_dir_is_fresh_and_removed_afterwards() -> None:
    code = (
        "import os\nprint(os.getcwd())\nprint(os.environ['HOME'])\n"
        "open('out.txt', 'w').write('x' * 1000)\nos.mkdir('sub')\nopen('sub/f', 'w').write('y')\n"
        "print(sorted(os.listdir('.')))"
    )
    result = run_python(code, sandbox=PROCESS)
    assert result.mode is PROCESS
    workdir, home, listing = result.stdout.splitlines()
    assert workdir == home
    assert Path(workdir).name.startswith("rk-sandbox-")
    assert workdir != str(Path.cwd())
    assert listing == "['out.txt', 'solution.py', 'sub']"
    assert not Path(workdir).exists()
    second = run_python("import os\nprint(os.getcwd())", sandbox=PROCESS)
    assert second.stdout.strip() != workdir


def test_process_mode_background_processes_die_with_the_run() -> None:
    code = (
        "import os, subprocess\nprint(os.getcwd())\n"
        "p = subprocess.Popen(['sleep', '30'])\nprint(p.pid, flush=True)\n"
    )
    result = run_python(code, limits=SHORT, sandbox=PROCESS)
    assert result.status is SandboxStatus.OK
    pid = int(result.stdout.splitlines()[1])
    deadline = time.monotonic() + 1.0
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)
    _assert_nothing_left(result)


@pytest.mark.skipif(process_limit_backend() != "cgroup", reason="needs a pids cgroup")
def test_process_mode_setsid_escapee_is_killed_by_the_cgroup() -> None:
    code = (
        "import os, time\nprint(os.getcwd(), flush=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    print(os.getpid(), flush=True)\n"
        "    time.sleep(60)\nelse:\n    time.sleep(0.2)\n"
    )
    result = run_python(code, limits=SHORT, sandbox=PROCESS)
    assert result.status is SandboxStatus.OK
    escaped = int(result.stdout.splitlines()[1])
    deadline = time.monotonic() + 1.0
    while _alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(escaped)
    _assert_nothing_left(result)


# --------------------------------------------------------------------------------------------
# Limits: each ends as a failed run with a clear reason (more attacks in test_sandbox_attacks)


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_infinite_loop_times_out(mode: SandboxMode) -> None:
    limits = SandboxLimits(timeout_s=1, cpu_time_s=60)  # only the wall clock can end it
    result = run_python("while True:\n    pass\n", limits=limits, sandbox=mode)
    assert result.status is SandboxStatus.TIMEOUT
    assert result.timed_out
    assert result.reason == "timed out after 1 s (wall clock)"


@needs_bwrap
def test_sleeping_forever_times_out_on_the_wall_clock() -> None:
    result = run_python("import time\ntime.sleep(60)", limits=SandboxLimits(timeout_s=1))
    assert (result.status, result.timed_out) == (SandboxStatus.TIMEOUT, True)


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_cpu_limit_ends_a_busy_loop_before_the_wall_clock(mode: SandboxMode) -> None:
    limits = SandboxLimits(timeout_s=30, cpu_time_s=1)
    result = run_python("while True:\n    pass\n", limits=limits, sandbox=mode)
    assert result.status is SandboxStatus.TIMEOUT
    assert result.reason == "CPU time limit of 1 s exceeded"


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
def test_memory_bomb_hits_the_memory_limit(mode: SandboxMode) -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(10_000_000))\n"
    result = run_python(code, limits=SHORT, sandbox=mode)
    assert result.status is SandboxStatus.MEMORY
    assert result.reason == "memory limit of 256 MiB exceeded (MemoryError)"
    assert not result.timed_out


@needs_bwrap
@pytest.mark.slow
def test_one_gigabyte_written_at_once() -> None:
    limits = SandboxLimits(timeout_s=3, memory_mb=2048)
    result = run_python("import sys\nsys.stdout.buffer.write(b'x' * 10**9)", limits=limits)
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert len(result.stdout) == limits.max_output_bytes


@needs_bwrap
def test_stderr_flood_is_cut_too() -> None:
    code = "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)\n"
    result = run_python(code, limits=SandboxLimits(timeout_s=3, max_output_bytes=10_000))
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert result.reason.endswith("to stderr")
    assert result.stderr_truncated
    assert len(result.stderr) == 10_000


FILE_LIMITS = {
    "file_size": ("open('big.bin', 'wb').write(b'0' * 3 * 2**20)", "max_file_size_mb", 1,
                  "File too large"),
    "open_files": ("files = []\nwhile True:\n    files.append(open('solution.py'))",
                   "max_open_files", 32, "Too many open files"),
}  # fmt: skip


@needs_bwrap
@pytest.mark.parametrize("mode", list(SandboxMode))
@pytest.mark.parametrize("limit", list(FILE_LIMITS))
def test_file_limits(limit: str, mode: SandboxMode) -> None:
    code, field, value, error = FILE_LIMITS[limit]
    result = run_python(code, limits=SandboxLimits(**{field: value}), sandbox=mode)
    assert result.status is SandboxStatus.ERROR
    assert error in result.reason


# --------------------------------------------------------------------------------------------
# Concurrency, async, configuration, modes


@needs_bwrap
def test_safe_to_call_from_many_threads() -> None:
    def one(i: int) -> str:
        return run_python(f"print(int(input()) * {i})", stdin="3").stdout

    with ThreadPoolExecutor(max_workers=6) as pool:
        outputs = list(pool.map(one, range(12)))
    assert outputs == [f"{3 * i}\n" for i in range(12)]


@needs_bwrap
def test_async_variant() -> None:
    async def main() -> list[SandboxResult]:
        return await asyncio.gather(
            run_python_async("print('a')"),
            run_python_async("print('b')", sandbox="process"),
        )

    first, second = asyncio.run(main())
    assert (first.stdout, second.stdout) == ("a\n", "b\n")
    assert (first.mode, second.mode) == (SandboxMode.BWRAP, SandboxMode.PROCESS)


def test_limits_validate_and_derive_bounds() -> None:
    assert SandboxLimits(timeout_s=2.5).cpu_seconds == 3
    assert SandboxLimits(timeout_s=10, cpu_time_s=1).cpu_seconds == 1
    assert SandboxLimits().run_memory_bytes == (1024 + 64) << 20
    assert SandboxLimits(run_memory_mb=100).run_memory_bytes == 100 << 20
    assert SandboxLimits(memory_mb=None).run_memory_bytes is None
    assert SandboxLimits().memory_bound_mb == 1024 * 64 + 64
    with pytest.raises(ValidationError, match="greater than 0"):
        SandboxLimits(timeout_s=0)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        SandboxLimits(timeout=3)  # type: ignore[call-arg]


def test_result_round_trips_through_json() -> None:
    result = run_python("print('hi')", sandbox=PROCESS)
    assert SandboxResult.model_validate_json(result.model_dump_json()) == result


def test_process_limit_backend_is_known() -> None:
    assert process_limit_backend() in ("cgroup", "rlimit", "none")


def test_unknown_mode_is_a_config_error() -> None:
    message = (
        "unknown sandbox mode 'bwarp': expected one of 'bwrap', 'process' ('bwrap' isolates "
        "the code; 'process' is the weaker opt-in). Did you mean 'bwrap'?"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        run_python("print(1)", sandbox="bwarp")
    assert sandbox_mode("process") is PROCESS


def test_not_linux_raises_a_sandbox_error_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bwrap, "_checked", None)
    monkeypatch.setattr(sys, "platform", "darwin")
    message = (
        "the code sandbox isolates programs with bubblewrap, which needs Linux; this is "
        "'darwin'. Run code-executing rewards and envs on Linux (a VM, a container that allows "
        "user namespaces, or a remote worker), or, knowing what it gives up, opt into the "
        "weaker mode with sandbox='process' (`--sandbox process` on the command line)."
    )
    with pytest.raises(SandboxError, match=re.escape(message)):
        run_python("print(1)")


def test_process_mode_not_posix_raises_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    message = (
        "the code sandbox needs a POSIX system with process groups and the `resource` module "
        "(Linux is the target); this is 'win32'."
    )
    with pytest.raises(SandboxError, match=re.escape(message)):
        run_python("print(1)", sandbox=PROCESS)


def test_missing_user_namespaces_are_diagnosed_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real bwrap run that cannot create its namespaces (a user namespace limit of 0 in a
    child namespace stands in for a machine that forbids them) is named, with the fix."""
    monkeypatch.setattr(_bwrap, "_checked", None)
    real_argv = _bwrap.bwrap_argv

    def nested(command: list[str], **kwargs: object) -> list[str]:
        # bwrap inside a bwrap that allows no further user namespaces.
        inner = real_argv(command, **kwargs)  # type: ignore[arg-type]
        return [inner[0], "--unshare-user", "--disable-userns", "--dev-bind", "/", "/", *inner]

    monkeypatch.setattr(_bwrap, "bwrap_argv", nested)
    with pytest.raises(SandboxError) as caught:
        run_python("print(1)")
    text = str(caught.value)
    assert text.startswith("the code sandbox needs user namespaces, which this machine does not")
    assert "opt into the weaker mode with sandbox='process'" in text


@needs_bwrap
def test_isolation_report_says_it_works_here() -> None:
    report = isolation_report()
    assert report.isolated
    assert report.problem is None
    assert report.bwrap_version == "bubblewrap 0.11.0"
    assert report.process_limit == process_limit_backend()
    assert report.lines()[0] == "isolation: works (mode 'bwrap')"


def test_isolation_report_without_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    report = isolation_report()
    assert not report.isolated
    assert report.problem is not None and "needs Linux" in report.problem
    assert report.lines()[0] == "isolation: NOT available"
    assert BWRAP_PROBLEM is None or not report.isolated


def test_an_interpreter_under_tmp_keeps_tmp_for_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    # A checkout (and its virtual environment) under /tmp: bwrap must bind it there, so /tmp
    # cannot also be the work dir's symlink ("Can't make symlink at /tmp").
    here = _bwrap._interpreter_binds()
    monkeypatch.setattr(_bwrap, "_interpreter_binds", lambda: (*here, "/tmp/ci-checkout/.venv"))
    _bwrap._tmp_is_bound.cache_clear()
    try:
        under_tmp = _bwrap.bwrap_options(env={}, disk_bytes=None, seccomp_fd=9)
    finally:
        monkeypatch.undo()
        _bwrap._tmp_is_bound.cache_clear()
    normal = _bwrap.bwrap_options(env={}, disk_bytes=None, seccomp_fd=9)
    pairs = lambda args: list(zip(args, args[1:], args[2:], strict=False))  # noqa: E731
    assert ("--symlink", _bwrap.WORKDIR, "/tmp") not in pairs(under_tmp)
    assert ("--symlink", _bwrap.WORKDIR, "/tmp") in pairs(normal) or _bwrap._tmp_is_bound()
