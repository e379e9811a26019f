"""The seccomp filter of mode ``bwrap``: system calls a sandboxed program is refused.

Namespaces keep a program from seeing the machine; they do not keep it from attacking what is
inside its sandbox with it. Without a filter it could ``ptrace`` the namespace's init (pid 1 of
its PID namespace, same uid): stop it, which hangs the run until its wall timeout, or make it
outlive its parent and keep the namespace, and a daemon in it, alive after the run. (The init
is rk-agent's and not dumpable besides, so ``/proc/1/mem`` is closed too:
`rk_agent.sandbox._bootstrap`.) So bwrap loads this filter (``--seccomp FD``) just before it
starts the init: bubblewrap's monitor is not under it; the init, the program and everything
the program starts are.

Refused with ``EPERM``: debugging and reading other processes (``ptrace``,
``process_vm_readv``/``writev``, ``pidfd_getfd``, ``process_madvise``, ``kcmp``,
``perf_event_open``), kernel attack surface (``bpf``, ``userfaultfd``, ``io_uring_*``, the
keyring: ``add_key``, ``request_key``, ``keyctl``), new namespaces and mounts (``unshare``,
``setns``, ``clone`` with any namespace flag, ``mount``, ``umount2``, ``pivot_root``,
``chroot``, the new mount API), and the rest of the usual container deny list (modules, kexec,
reboot, swap, clocks, quotas, ``syslog``, accounting, handles, NUMA placement, ``iopl``).
``clone3``, whose flags a filter cannot read, gets ``ENOSYS``, so that the C library falls back
to ``clone``, whose flags it can. A system call of another architecture (x86_64's 32-bit
``int 0x80`` and x32 calls, numbered differently) is refused whatever it is, so the table
cannot be sidestepped.

The filter is a classic BPF program, written here rather than with libseccomp, so that nothing
needs installing beside the ``bwrap`` binary; the tables cover x86_64 and aarch64 (checked
against the kernel's headers in the tests).

Main names: `filter_program`, `filter_fd`.
"""

from __future__ import annotations

import os
import platform
import struct

from rk_agent.errors import SandboxError

__all__ = ["DENIED", "filter_fd", "filter_program"]

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
    "kcmp", "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "add_key", "request_key", "keyctl", "unshare", "setns", "mount",
    "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "quotactl", "quotactl_fd", "syslog", "acct",
    "name_to_handle_at", "open_by_handle_at", "lookup_dcookie", "fanotify_init", "vhangup",
    "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages", "sethostname",
    "setdomainname", "nfsservctl", "iopl", "ioperm", "uselib", "ustat", "sysfs", "_sysctl",
    "create_module", "get_kernel_syms", "query_module",
)  # fmt: skip
"""The system calls refused outright (those an architecture does not have are left out)."""

# Syscall numbers, from the kernel's uapi headers (asm/unistd_64.h; asm-generic/unistd.h).
_X86_64 = {
    "clone": 56, "clone3": 435, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 312,
    "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "reboot": 169, "swapon": 167, "swapoff": 168, "settimeofday": 164, "clock_settime": 227,
    "clock_adjtime": 305, "adjtimex": 159, "quotactl": 179, "quotactl_fd": 443, "syslog": 103,
    "acct": 163, "name_to_handle_at": 303, "open_by_handle_at": 304, "lookup_dcookie": 212,
    "fanotify_init": 300, "vhangup": 153, "mbind": 237, "set_mempolicy": 238,
    "get_mempolicy": 239, "migrate_pages": 256, "move_pages": 279, "sethostname": 170,
    "setdomainname": 171, "nfsservctl": 180, "iopl": 172, "ioperm": 173, "uselib": 134,
    "ustat": 136, "sysfs": 139, "_sysctl": 156, "create_module": 174, "get_kernel_syms": 177,
    "query_module": 178,
}  # fmt: skip
_AARCH64 = {
    "clone": 220, "clone3": 435, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 272,
    "perf_event_open": 241, "bpf": 280, "userfaultfd": 282, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "add_key": 217, "request_key": 218,
    "keyctl": 219, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
    "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
    "reboot": 142, "swapon": 224, "swapoff": 225, "settimeofday": 170, "clock_settime": 112,
    "clock_adjtime": 266, "adjtimex": 171, "quotactl": 60, "quotactl_fd": 443, "syslog": 116,
    "acct": 89, "name_to_handle_at": 264, "open_by_handle_at": 265, "lookup_dcookie": 18,
    "fanotify_init": 262, "vhangup": 58, "mbind": 235, "set_mempolicy": 237,
    "get_mempolicy": 236, "migrate_pages": 238, "move_pages": 239, "sethostname": 161,
    "setdomainname": 162, "nfsservctl": 42,
}  # fmt: skip
# machine -> (AUDIT_ARCH_*, syscall table, whether x32 calls (nr | 0x40000000) exist)
ARCHES = {
    "x86_64": (0xC000003E, _X86_64, True),
    "aarch64": (0xC00000B7, _AARCH64, False),
}

# Classic BPF (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_X32_BIT = 0x40000000
# CLONE_NEWNS, _NEWCGROUP, _NEWUTS, _NEWIPC, _NEWUSER, _NEWPID, _NEWNET (CLONE_NEWTIME is the
# exit-signal byte in clone's flags: only unshare and clone3 take it, and both are refused).
_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
_NAMESPACE_FLAGS |= 0x20000000 | 0x40000000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian)
_NR, _ARCH, _ARG0_LOW = 0, 4, 16


def filter_program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one), as bwrap's ``--seccomp`` reads it:
    ``struct sock_filter`` records in the machine's byte order.

    Raises:
        SandboxError: no syscall table for this architecture.
    """
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise SandboxError(
            f"the code sandbox's system-call filter knows x86_64 and aarch64, not {machine!r}; "
            "run code-executing rewards and envs on one of those, or, knowing what it gives "
            "up, opt into the weaker mode with sandbox='process' (`--sandbox process`)."
        )
    arch, table, x32 = ARCHES[machine]
    denied = [table[name] for name in DENIED if name in table]
    # Instructions as (code, jump-if-true, jump-if-false, k); jumps name labels until resolved.
    body: list[tuple[int, int | str, int | str, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "deny", arch),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if x32:
        body.append((_JGE, "deny", 0, _X32_BIT))
    body += [(_JEQ, "deny", 0, nr) for nr in denied]
    body += [
        (_JEQ, "no_clone3", 0, table["clone3"]),
        (_JEQ, 0, "allow", table["clone"]),
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JSET, "deny", "allow", _NAMESPACE_FLAGS),
    ]
    returns = {"allow": _ALLOW, "deny": _ERRNO | _EPERM, "no_clone3": _ERRNO | _ENOSYS}
    at = {label: len(body) + i for i, label in enumerate(returns)}
    program = bytearray()
    for index, (code, true, false, k) in enumerate(body):
        jt = at[true] - index - 1 if isinstance(true, str) else true
        jf = at[false] - index - 1 if isinstance(false, str) else false
        program += struct.pack("=HBBI", code, jt, jf, k)
    for value in returns.values():
        program += struct.pack("=HBBI", _RET, 0, 0, value)
    return bytes(program)


def filter_fd() -> int:
    """A descriptor to read this machine's filter from (the read end of a pipe that holds it
    whole); the caller passes it to bwrap and closes it.

    Raises:
        SandboxError: as `filter_program`.
    """
    program = filter_program()
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: well within a pipe's buffer
    finally:
        os.close(write)
    return read
