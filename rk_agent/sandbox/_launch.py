"""Starting a sandboxed run's process, with one made ready ahead of each run.

Main names:
    launch: a `Launch` for a run, at once: a process already started, in the run's own fresh
        cgroups (and, in mode ``bwrap``, its finished sandbox), waiting for the run.
    Launch: that process, its pipes, cgroups and work dir; `Launch.release` hands it the run
        and lets it go, `Launch.discard` ends it and cleans up.
    spare_pids: the launchers waiting for a run (children of this process, part of no run).

**Why ahead of time.** Two costs of a run do not depend on the run:

- joining its cgroups: writing a pid to ``cgroup.procs`` makes the kernel wait for an RCU
  grace period (``cgroup_threadgroup_rwsem``) unless another join happened within the last
  one: 10 to 30 ms on a busy machine, as long as the run itself;
- in mode ``bwrap``, building the sandbox: new namespaces, mounts, the work dir (3-4 ms of
  CPU, more in wall time on a busy machine).

So a background thread keeps one launcher per run in flight ready for the next run: a shell
that joined fresh, empty cgroups and then (mode ``process``) waits for a go line, or (mode
``bwrap``) a bwrap that built the sandbox and started the interpreter in it as the PID
namespace's init (`rk_agent.sandbox._bootstrap.INIT`), whose second process waits for the
run's settings. Nothing of a run (its code, input, environment, limits) reaches a launcher
before the run takes it; each launcher serves one run only and is then killed with everything
in it, as before. Spares are killed, their cgroups removed, when rk-agent exits; a spare whose
parent died reads end-of-file, starts no code and exits (``--die-with-parent`` kills bwrap's
anyway).

**The end of a run** (mode ``bwrap``). bwrap reports the host pid of the namespace's init
(``--info-fd``); the launcher holds a pidfd of it, taken while bwrap's monitor is its parent
(so it is that process, whatever pid is reused later). `Launch.discard` sends it SIGKILL
before it kills the monitor's group: the namespace dies with its init, and every process in
it, whatever the program did to the init, with or without cgroups.
Every launcher is spawned and stopped by `rk_agent.processes` (a session of its own; a stop is
SIGKILL to its group at once; no ``preexec_fn``, so Popen keeps ``vfork``), and the spares are
closed by its exit hook.
The kernel's work is the same; it is no longer on the run's clock. The thread that starts
spares lives as long as the process, since ``--die-with-parent`` follows the starting thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rk_agent.errors import SandboxError
from rk_agent.processes import Child, on_exit, spawn
from rk_agent.sandbox import _bwrap
from rk_agent.sandbox._bootstrap import SETUP_EXIT, SETUP_MARK, child_env, python_argv
from rk_agent.sandbox._process_limits import RunCgroup, cgroup_controllers, new_run_cgroup
from rk_agent.sandbox._seccomp import filter_fd
from rk_agent.sandbox._types import SandboxMode

__all__ = ["Launch", "launch", "spare_pids"]

_MAX_SPARES = 8  # per kind of launcher: one per run in flight is enough

Kind = tuple[SandboxMode, int | None]
"""What a launcher is made for: the mode, and in mode ``bwrap`` the work dir's size cap."""


@dataclass
class Launch:
    """A started process waiting for its run (see the module docs).

    Attributes:
        mode: how it contains the run.
        child: the process (bwrap, the shell in front of the interpreter, or the interpreter);
            the leader of its own process group.
        cgroup: the run's cgroups, joined already, or ``None`` where there are none.
        cwd: mode ``process``: the private work dir; ``None`` in mode ``bwrap``.
        channel: the parent's (read) end of the data channel.
        settings_fd: where the bootstrap reads its settings.
        go_fd: a line here lets the process go (``None``: it does not wait).
        init: mode ``bwrap``: a pidfd of the PID namespace's init (module docs), ``None``
            where there is none.
    """

    mode: SandboxMode
    child: Child[bytes]
    cgroup: RunCgroup | None
    cwd: str | None
    channel: int
    settings_fd: int
    go_fd: int | None
    init: int | None = None
    fds: set[int] = field(default_factory=set)  # the parent's descriptors still open

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        """The process's `subprocess.Popen`: its pipes and return code."""
        return self.child.popen

    def release(self, run_settings: bytes) -> None:
        """Let the process go and hand it the run's settings (code included). A process that
        died meanwhile shows in the run's result, not here."""
        with contextlib.suppress(BrokenPipeError):
            if self.go_fd is not None:
                os.write(self.go_fd, b"\n")
            view = memoryview(run_settings)
            while view:  # the bootstrap reads as it goes: more than a pipe holds is fine
                view = view[os.write(self.settings_fd, view) :]
        for fd in (self.go_fd, self.settings_fd):
            if fd is not None:
                self.close(fd)

    def discard(self) -> None:
        """Kill the process group (and cgroups), reap the process, close and remove the rest.

        In mode ``bwrap`` the PID namespace's init is killed first, by its pidfd (module docs),
        and with it every process of the run; then the group, bwrap itself (when it dies, so
        would the init: ``--die-with-parent``). Every member of the cgroups is sent SIGKILL
        here; removing the emptied cgroups (which waits for the killed processes to finish
        exiting: the namespaces' teardown, 1-5 ms) is left to the spares' thread, off the run's
        clock, and goes on killing whatever is still in them.
        """
        if self.init is not None:
            with contextlib.suppress(OSError):  # ProcessLookupError: it ended already
                signal.pidfd_send_signal(self.init, signal.SIGKILL)
            os.close(self.init)
            self.init = None
        self.child.stop()  # SIGKILL at once (a grace of 0), also to what forked meanwhile
        if self.cgroup is not None:
            self.cgroup.kill()
            _remove_soon(self.cgroup)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        for fd in list(self.fds):
            self.close(fd)
        if self.cwd is not None:
            shutil.rmtree(self.cwd, ignore_errors=True)

    def close(self, fd: int) -> None:
        """Close one of the parent's descriptors, once: a second close of a number another
        thread has meanwhile reused would close that thread's file."""
        if fd in self.fds:
            self.fds.discard(fd)
            os.close(fd)


def launch(mode: SandboxMode, disk_bytes: int | None) -> Launch:
    """A process for one run, started (see the module docs).

    Args:
        mode: the sandbox mode.
        disk_bytes: mode ``bwrap``: the size cap of the work dir (``None``: tmpfs default).

    Raises:
        SandboxError: it cannot be started.
    """
    kind: Kind = (mode, disk_bytes if mode is SandboxMode.BWRAP else None)
    if mode is SandboxMode.PROCESS and not cgroup_controllers():
        return _spawn(kind)  # nothing to do ahead of time
    spare = _get_spares().take(kind)
    return spare if spare is not None else _spawn(kind)


def _spawn(kind: Kind) -> Launch:
    """Start a process for one run of ``kind``, in fresh cgroups where there are any."""
    mode, disk_bytes = kind
    bwrap = mode is SandboxMode.BWRAP
    settings_r, settings_w = os.pipe()
    channel_r, channel_w = os.pipe()
    mine, theirs = [settings_w, channel_r], [settings_r, channel_w]
    cgroup: RunCgroup | None = None
    cwd: str | None = None
    go_w: int | None = None
    info_r: int | None = None
    try:
        cgroup = new_run_cgroup()
        if bwrap:
            info_r, info_w = os.pipe()  # bwrap writes the init's pid there (module docs)
            mine.append(info_r)
            theirs += [info_w, filter_fd()]  # bwrap reads the filter before the program starts
        elif cgroup is not None:  # the shell that joins the cgroup waits for the run
            go_r, go_w = os.pipe()
            mine.append(go_w)
            theirs.append(go_r)
        python = python_argv(settings_r, channel_w, max(theirs) + 1, init=bwrap)
        if bwrap:
            options = _bwrap.bwrap_options(
                env=child_env(_bwrap.WORKDIR), disk_bytes=disk_bytes, seccomp_fd=theirs[-1]
            )
            command = [_bwrap.require_bwrap(), "--as-pid-1", "--info-fd", str(theirs[-2]),
                       *options, "--", *python]  # fmt: skip
        else:
            cwd = tempfile.mkdtemp(prefix="rk-sandbox-")
            command = python
        if cgroup is not None:
            command = _join_cgroup(command, cgroup, go_fd=None if bwrap else theirs[-1])
        child = _spawn_child(
            command,
            cwd=cwd,
            # bwrap gets no environment at all: its init's /proc/1/environ is readable inside.
            env=child_env(cwd) if cwd is not None else {},
            pass_fds=theirs,
        )
    except BaseException:
        for fd in (*mine, *theirs):
            os.close(fd)
        if cgroup is not None:
            cgroup.remove()
        if cwd is not None:
            shutil.rmtree(cwd, ignore_errors=True)
        raise
    for fd in theirs:  # the child holds them now: end-of-file when it ends
        os.close(fd)
    run = Launch(
        mode=mode, child=child, cgroup=cgroup, cwd=cwd, channel=channel_r, settings_fd=settings_w,
        go_fd=go_w, fds=set(mine),
    )  # fmt: skip
    if info_r is not None:
        run.init = _init_pidfd(info_r, child.popen.pid)
        run.close(info_r)
    return run


def _init_pidfd(info_fd: int, monitor: int) -> int | None:
    """A pidfd of the PID namespace's init, from bwrap's ``--info-fd`` report (read to its
    end: bwrap writes it once the namespace exists, before anything runs in it); ``None`` when
    bwrap ended before, or the init is no longer bwrap's monitor's child (it ended meanwhile).
    """
    report = b""
    while chunk := os.read(info_fd, 4096):
        report += chunk
    try:
        pid = int(json.loads(report)["child-pid"])
        pidfd = os.pidfd_open(pid)
    except (ValueError, KeyError, TypeError, OSError):
        return None
    try:  # taken before this check: the pidfd is the monitor's child, the init, for good
        status = Path(f"/proc/{pid}/status").read_text()
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
    except (OSError, StopIteration, IndexError):
        parent = ""
    if parent != str(monitor):
        os.close(pidfd)
        return None
    return pidfd


def _spawn_child(
    command: list[str], *, cwd: str | None, env: dict[str, str], pass_fds: list[int]
) -> Child[bytes]:
    try:
        return spawn(
            command,
            # bwrap's --die-with-parent kills the whole run; a waiting launcher reads end-of-file.
            die_with_parent=False,
            grace_s=0,  # untrusted code gets no SIGTERM to linger on
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd or "/",  # bwrap: no trace of the caller's directory
            env=env,
            close_fds=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise SandboxError(f"cannot start the sandbox ({command[0]}): {exc}") from exc


def _join_cgroup(command: list[str], cgroup: RunCgroup, *, go_fd: int | None) -> list[str]:
    """Prefix ``command`` with a shell that puts itself in the run's cgroups, optionally waits
    for a go line on ``go_fd``, then execs it."""
    joins = " && ".join(f"echo $$ > {shlex.quote(str(f))}" for f in cgroup.procs_files)
    failed = f'{{ echo "{SETUP_MARK}cannot join the cgroup" >&2; exit {SETUP_EXIT}; }}'
    script = f"{joins} || {failed}; "
    if go_fd is not None:
        # Not `<&N`: dash reads only single-digit descriptors that way.
        script += f"read -r _ < /proc/self/fd/{go_fd} || exit {SETUP_EXIT}; "
    return ["/bin/sh", "-c", script + 'exec "$@"', "sh", *command]


# --------------------------------------------------------------------------------------------
# Spares


class _Spares:
    """Launchers ready for the next runs, started by one long-lived thread."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._ready: dict[Kind, list[Launch]] = {}
        self._pending = 0  # requests the thread has not finished
        # What the thread does next: start a spare of a kind, remove a run's cgroups, or stop.
        self._todo: queue.SimpleQueue[Kind | RunCgroup | None] = queue.SimpleQueue()
        self._closed = False
        self.pid = os.getpid()
        self._thread = threading.Thread(target=self._work, name="rk-sandbox-spares", daemon=True)
        self._thread.start()

    def take(self, kind: Kind) -> Launch | None:
        """A ready launcher of ``kind``, or ``None``; either way one more is started for the
        next run."""
        self._queue(kind)
        while True:
            with self._lock:
                ready = self._ready.get(kind)
                if not ready:
                    return None
                found = ready.pop()
            if found.proc.poll() is None:
                return found
            found.discard()  # died waiting (its cgroup could not be joined, or it was killed)

    def remove_later(self, cgroup: RunCgroup) -> bool:
        """Have the thread remove a run's cgroups; ``False`` once it is stopping."""
        return self._queue(cgroup)

    def _queue(self, item: Kind | RunCgroup) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._pending += 1
        self._todo.put(item)
        return True

    def _work(self) -> None:
        while (item := self._todo.get()) is not None:
            try:
                if isinstance(item, RunCgroup):
                    item.remove()
                else:
                    self._add(item)
            finally:
                with self._lock:
                    self._pending -= 1
                    self._lock.notify_all()

    def _add(self, kind: Kind) -> None:
        with self._lock:
            if len(self._ready.get(kind, ())) >= _MAX_SPARES:
                return
        try:
            spare = _spawn(kind)
        except Exception:  # a run that finds no spare starts its own, and says why
            return
        with self._lock:
            if not self._closed:
                self._ready.setdefault(kind, []).append(spare)
                return
        spare.discard()

    def pids(self, timeout: float) -> set[int]:
        """The spares' pids, once none is being started (or after ``timeout`` seconds)."""
        with self._lock:
            self._lock.wait_for(lambda: self._pending == 0, timeout)
            return {spare.proc.pid for ready in self._ready.values() for spare in ready}

    def close(self) -> None:
        """Finish the removals, kill and clean up every spare (at exit); in a forked child,
        only forget them."""
        with self._lock:
            self._closed = True
            spares = [spare for ready in self._ready.values() for spare in ready]
            self._ready.clear()
        self._todo.put(None)
        if os.getpid() == self.pid:
            self._thread.join(timeout=30)
            for spare in spares:
                spare.discard()


_spares_lock = threading.Lock()
_spares: _Spares | None = None


def spare_pids(timeout: float = 5.0) -> set[int]:
    """The pids of the launchers waiting for a run, once none is being started: for checks of
    what a run left behind (a spare is not part of any run)."""
    with _spares_lock:
        spares = _spares if _spares is not None and _spares.pid == os.getpid() else None
    return spares.pids(timeout) if spares is not None else set()


def _remove_soon(cgroup: RunCgroup) -> None:
    with _spares_lock:
        spares = _spares if _spares is not None and _spares.pid == os.getpid() else None
    if spares is None or not spares.remove_later(cgroup):
        cgroup.remove()


def _get_spares() -> _Spares:
    global _spares
    with _spares_lock:
        if _spares is None or _spares.pid != os.getpid():
            _spares = _Spares()
            on_exit(_spares.close)
        return _spares
