"""The sandbox's system-call filter: its tables against the kernel's headers, the program it
compiles run through a small classic-BPF interpreter, and the real filter in real runs."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from rk_agent.errors import SandboxError
from rk_agent.sandbox import SandboxLimits, SandboxStatus, run_python
from rk_agent.sandbox._seccomp import ARCHES, DENIED, filter_program
from tests.sandbox.support import needs_bwrap

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050001, 0x00050026
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/aarch64-linux-gnu/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_the_syscall_tables_match_the_kernel_headers(machine: str) -> None:
    header = HEADERS[machine]
    if not header.exists():
        pytest.skip(f"{header} is not installed (Debian: linux-libc-dev for this machine's)")
    numbers = {
        name: int(nr)
        for name, nr in re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", header.read_text())
    }
    table = ARCHES[machine][1]
    assert {name: numbers.get(name) for name in table} == table
    missing = [name for name in DENIED if name not in table]
    assert all(name not in numbers for name in missing)  # left out only where it does not exist


def run_filter(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the program returns for one system call: a tiny interpreter of the classic-BPF
    instructions it uses (word loads, jeq/jge/jset on constants, ret)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif op in (0x15, 0x35, 0x45):
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += jt if taken else jf
        elif op == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {op:#x} at {pc}")
        pc += 1


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_the_program_allows_and_refuses_what_it_says(machine: str) -> None:
    arch, table, x32 = ARCHES[machine]
    program = filter_program(machine)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096  # the kernel's limit
    for name in DENIED:
        if name in table:
            assert run_filter(program, arch, table[name]) == EPERM, name
    assert run_filter(program, arch, table["clone3"]) == ENOSYS
    assert run_filter(program, arch, table["clone"], SIGCHLD) == ALLOW  # fork
    assert run_filter(program, arch, table["clone"], 0x003D0F00) == ALLOW  # a thread
    assert run_filter(program, arch, table["clone"], CLONE_NEWUSER | SIGCHLD) == EPERM
    for nr in (0, 1, 3, 60, 63, 231):  # read, write, close and the like on either table
        if nr not in table.values():
            assert run_filter(program, arch, nr) == ALLOW
    assert run_filter(program, 0x40000003, table["ptrace"]) == EPERM  # another architecture
    assert run_filter(program, 0x40000003, 3) == EPERM
    if x32:
        assert run_filter(program, arch, 0x40000000 | 3) == EPERM


def test_an_unknown_architecture_is_named() -> None:
    with pytest.raises(SandboxError, match=re.escape("knows x86_64 and aarch64, not 'riscv64'")):
        filter_program("riscv64")


# --------------------------------------------------------------------------------------------
# The real filter, in real runs

SYSCALLS = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
out = {name: call(nr, *args) for name, nr, args in json.loads(sys.argv_calls)}
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitpid(pid, 0)[1] >> 8
import threading, subprocess
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["thread"] = "ok"
out["subprocess"] = subprocess.run(["true"]).returncode
print(json.dumps(out))
"""


@needs_bwrap
def test_denied_calls_are_refused_inside_and_ordinary_work_goes_on() -> None:
    import json
    import platform

    machine = platform.machine()
    if machine not in ARCHES:
        pytest.skip(f"no table for {machine}")
    table = ARCHES[machine][1]
    calls = [
        ("ptrace_attach_init", table["ptrace"], (16, 1, 0, 0)),
        ("ptrace_seize_init", table["ptrace"], (0x4206, 1, 0, 0)),
        ("process_vm_readv", table["process_vm_readv"], (1, 0, 0, 0, 0, 0)),
        ("unshare_user", table["unshare"], (CLONE_NEWUSER,)),
        ("clone_newuser", table["clone"], (CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)),
        ("clone3", table["clone3"], (0, 0)),
        ("bpf", table["bpf"], (0, 0, 0)),
        ("userfaultfd", table["userfaultfd"], (0,)),
        ("keyctl", table["keyctl"], (0, 0)),
        ("perf_event_open", table["perf_event_open"], (0, 0, -1, -1, 0)),
        ("mount", table["mount"], (0, 0, 0, 0, 0)),
        ("setns", table["setns"], (0, 0)),
    ]
    if ARCHES[machine][2]:
        calls.append(("x32_ptrace", 0x40000000 | table["ptrace"], (16, 1, 0, 0)))
    code = SYSCALLS.replace("sys.argv_calls", repr(json.dumps(calls)))
    result = run_python(code, limits=SandboxLimits(timeout_s=20, max_processes=16))
    assert result.status is SandboxStatus.OK, result.stderr
    out = json.loads(result.stdout)
    assert out.pop("clone3") == "ENOSYS"
    assert out == {name: "EPERM" for name, _, _ in calls if name != "clone3"} | {
        "fork": 7, "thread": "ok", "subprocess": 0,
    }  # fmt: skip
