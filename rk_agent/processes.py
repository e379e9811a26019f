"""Child processes: each in a group of its own, stopped whole with escalation, never left behind.

Main names:
    spawn: start a program in a new session (so a new process group, away from the terminal's
        Ctrl-C), registered until it is stopped, and on Linux killed if this process dies.
    Child: a started child; `Child.stop` ends its whole group with escalation (SIGTERM, a grace
        period, SIGKILL), reaps it, and is safe to call twice, from two threads, or after the
        child died on its own.
    on_exit: a cleanup that runs at interpreter exit, before the children still registered are
        stopped (for owners whose processes another library starts).

**At exit** one `atexit` hook runs the `on_exit` cleanups, newest first, then stops every child
still registered: SIGTERM to every group at once, then each is waited for up to its own grace
period and killed. A forked copy of this process (``os.fork``, a ``fork`` multiprocessing
worker) starts with an empty registry: it never stops its parent's children.

**Parent death.** Where the kernel has it (Linux's ``PR_SET_PDEATHSIG``), a child spawned with
``die_with_parent`` gets SIGKILL when this process dies, even by SIGKILL, when no exit hook
runs. The signal reaches the child itself, not what it started: a child with children of its
own needs its own mechanism (bwrap's ``--die-with-parent``, a protocol's end of input). The
kernel sends it when the *thread* that forked the child ends, so children spawned off the main
thread are forked by one long-lived daemon thread here, which ends only with the process.

The call must be made in the child between ``fork`` and ``exec``, hence Popen's
``preexec_fn``: a pre-resolved ``prctl`` through ctypes and a check that the parent did not die
before it, nothing else (no import, no lock; CPython re-initialises the child's interpreter
state after the fork). The cost is that Popen must ``fork`` instead of ``vfork``: the parent's
page tables are copied, about 2 ms in a small process and 90 ms with 1 GB resident (measured
on 2 cores). Wrapping the command in a helper that sets the signal and execs (``setpriv
--pdeathsig``, a Python one-liner) would keep ``vfork`` but costs an extra exec (3 ms and 20 ms)
and changes how a missing program fails (no ``FileNotFoundError`` at spawn). Callers that start
processes often, from a large process, or that have their own mechanism pass
``die_with_parent=False``. Should CPython retire ``preexec_fn`` (gh-82616), this is the one
place to change.

**Who uses it.**

- The code sandbox (`rk_agent.sandbox._launch`) spawns every launcher here, with
  ``die_with_parent=False`` and a grace of 0: bwrap's own ``--die-with-parent`` covers mode
  ``bwrap`` (a PID namespace, so the whole run), a launcher waiting for a run reads end-of-file
  when we die, and the hot path keeps ``vfork``. Untrusted code gets no SIGTERM to linger on: a
  stop is SIGKILL to the group at once. The spares' thread and cgroups are shut down by an
  `on_exit` cleanup.
- The tunnel client of ``rk-agent serve --tunnel`` (`rk_agent.selfhost.tunnel`) is spawned and
  stopped here (SIGTERM, 5 s, SIGKILL), and dies with the server.
- MCP stdio servers are started and stopped by the ``mcp`` SDK (``stdio_client``: a new session,
  then stdin closed, SIGTERM to the group, SIGKILL; the MCP specification's order), which takes
  no spawn function; replacing its transport to pass ours would mean keeping a copy of it.
  `rk_agent.mcp.servers.McpServers` registers its ``close`` with `on_exit` instead, and a server
  learns of our death the protocol's way, by the end of its stdin.
- Ray starts its own processes in ``ray.init`` (with its own parent-death signal, or a reaper
  process) and stops them in ``ray.shutdown``. `rk_agent.rollouts.ray_workers.ray_session`
  registers that shutdown with `on_exit` while a Ray it started is up.

Example:
    >>> child = spawn(["sh", "-c", "sleep 60 & wait"])  # a child with a child of its own
    >>> child.stop()  # SIGTERM to both: the shell ends by it, and so does its sleep
    -15
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, AnyStr, Generic, Literal, TypeVar, overload

__all__ = ["Child", "on_exit", "spawn"]

logger = logging.getLogger("rk_agent.processes")

T = TypeVar("T")

DEFAULT_GRACE_S = 5.0
"""How long a child may take to exit after SIGTERM before its group is killed."""

_SWEEPS = 100  # SIGKILLs to the group, 1 ms apart, for processes forked while it was killed
_PR_SET_PDEATHSIG = 1
_POSIX = hasattr(os, "killpg")


class Child(Generic[AnyStr]):
    """A child process started by `spawn`, the leader of its own process group.

    Attributes:
        popen: the `subprocess.Popen` (its pipes, ``pid`` and ``returncode``).
        grace_s: how long `stop` waits after SIGTERM, unless told otherwise.
    """

    def __init__(self, popen: subprocess.Popen[AnyStr], grace_s: float) -> None:
        self.popen: subprocess.Popen[AnyStr] = popen
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._stopped = False

    def __repr__(self) -> str:
        return f"Child(pid={self.popen.pid}, args={self.popen.args!r})"

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group's id."""
        return self.popen.pid

    def stop(self, grace_s: float | None = None) -> int:
        """End the child's process group and reap the child; its exit status.

        SIGTERM goes to the whole group, then the group has ``grace_s`` seconds to be gone (the
        child exited and every other member too); whatever is left gets SIGKILL. With a grace
        of 0 the group gets SIGKILL at once. Processes forked while the group was being killed
        are killed too. A second call (from any thread) waits for the first and returns the
        same status; a child that already exited is only reaped.

        Args:
            grace_s: seconds between SIGTERM and SIGKILL (default: the child's ``grace_s``).

        Returns:
            The child's return code (``-N``: ended by signal N).
        """
        with self._lock:
            if not self._stopped:
                grace = self.grace_s if grace_s is None else grace_s
                if grace > 0:
                    self._send(signal.SIGTERM)
                    self._wait_group(time.monotonic() + grace)
                self._send(getattr(signal, "SIGKILL", signal.SIGTERM))
                self.popen.wait()
                self._sweep()
                self._stopped = True
        _forget(self)
        return self.popen.wait()

    def _send(self, signum: int) -> None:
        with contextlib.suppress(OSError):  # ESRCH: all gone; EPERM: a member we may not signal
            if _POSIX:
                os.killpg(self.popen.pid, signum)
            elif self.popen.poll() is None:
                self.popen.send_signal(signum)

    def _wait_group(self, deadline: float) -> None:
        delay = 0.001
        while self.popen.poll() is None or self._group_alive():
            now = time.monotonic()
            if now >= deadline:
                return
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 0.05)

    def _group_alive(self) -> bool:
        if not _POSIX:
            return False
        try:
            os.killpg(self.popen.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # a member we may not signal is still a member
        return True

    def _sweep(self) -> None:
        if not _POSIX:
            return
        for _ in range(_SWEEPS):
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except OSError:
                return
            time.sleep(0.001)


@overload
def spawn(
    argv: Sequence[str],
    *,
    text: Literal[True],
    die_with_parent: bool = ...,
    grace_s: float = ...,
    **popen: Any,
) -> Child[str]: ...


@overload
def spawn(
    argv: Sequence[str],
    *,
    text: Literal[False] = ...,
    die_with_parent: bool = ...,
    grace_s: float = ...,
    **popen: Any,
) -> Child[bytes]: ...


def spawn(
    argv: Sequence[str],
    *,
    text: bool = False,
    die_with_parent: bool = True,
    grace_s: float = DEFAULT_GRACE_S,
    **popen: Any,
) -> Child[Any]:
    """Start ``argv`` in a session of its own and register it until it is stopped.

    Args:
        argv: the program and its arguments.
        text: pipes in text mode (`subprocess.Popen`'s ``text``).
        die_with_parent: on Linux, SIGKILL the child when this process dies (see the module
            docs for the cost: Popen forks instead of vforking).
        grace_s: how long `Child.stop` (and the exit hook) waits between SIGTERM and SIGKILL;
            0: SIGKILL at once.
        **popen: the rest of `subprocess.Popen`'s arguments (``stdin``, ``stdout``, ``cwd``,
            ``env``, ``pass_fds``...); the session and ``preexec_fn`` are this function's.

    Returns:
        The `Child`; stop it with `Child.stop`.

    Raises:
        OSError: the program could not be started (``FileNotFoundError`` for a missing one).

    Example:
        >>> child = spawn(["sleep", "60"], grace_s=1.0)
        >>> child.pid == child.popen.pid, child.stop(), child.stop()
        (True, -15, -15)
    """

    def start() -> Child[Any]:
        preexec = _pdeathsig_hook() if die_with_parent else None
        process = subprocess.Popen(
            list(argv), text=text, start_new_session=True, preexec_fn=preexec, **popen
        )
        child: Child[Any] = Child(process, grace_s)
        with _LOCK:
            _registry().children[child] = None
        return child

    if die_with_parent and sys.platform == "linux" and not _on_main_thread():
        return _registry_spawner().run(start)
    return start()


def on_exit(cleanup: Callable[[], object]) -> Callable[[], None]:
    """Run ``cleanup`` at interpreter exit, before the children still registered are stopped.

    Cleanups run newest first; one that raises is logged and the others still run. For owners
    whose processes another library starts and stops (MCP's SDK, Ray), and for state that must
    go with children (the sandbox's cgroups).

    Args:
        cleanup: called with no arguments, once at most.

    Returns:
        A function that takes ``cleanup`` off the list (call it once the owner cleaned up
        itself); calling it again does nothing.

    Example:
        >>> cancel = on_exit(lambda: print("closing"))
        >>> cancel()  # closed by hand: nothing left to do at exit
    """
    token = object()
    with _LOCK:
        registry = _registry()
        registry.cleanups[token] = cleanup

    def cancel() -> None:
        with _LOCK:
            registry.cleanups.pop(token, None)

    return cancel


# --------------------------------------------------------------------------------------------
# The registry of one process


class _Registry:
    """What this process must clean up at exit; a forked copy starts a new one."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.children: dict[Child[Any], None] = {}  # ordered, by identity
        self.cleanups: dict[object, Callable[[], object]] = {}
        self.spawner: _Spawner | None = None


_LOCK = threading.Lock()
_state: _Registry | None = None
_hooked = False


def _registry() -> _Registry:
    """This process's registry (call with `_LOCK` held); the exit hook is set up on first use."""
    global _state, _hooked
    if _state is None or _state.pid != os.getpid():
        _state = _Registry()
    if not _hooked:
        atexit.register(_at_exit)
        _hooked = True
    return _state


def _forget(child: Child[Any]) -> None:
    with _LOCK:
        if _state is not None and _state.pid == os.getpid():
            _state.children.pop(child, None)


def _at_exit() -> None:
    with _LOCK:
        if _state is None or _state.pid != os.getpid():
            return
        cleanups = list(reversed(_state.cleanups.values()))
        _state.cleanups.clear()
    for cleanup in cleanups:
        try:
            cleanup()
        except Exception:
            logger.warning("a cleanup at exit failed: %r", cleanup, exc_info=True)
    with _LOCK:
        children = list(_state.children)
    started = time.monotonic()
    for child in children:  # every group gets SIGTERM now; each is waited for in turn
        if child.grace_s > 0:
            child._send(signal.SIGTERM)
    for child in children:
        child.stop(grace_s=max(0.0, started + child.grace_s - time.monotonic()))


# --------------------------------------------------------------------------------------------
# Parent death


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _pdeathsig_hook() -> Callable[[], None] | None:
    """The ``preexec_fn`` that makes the child die with this process (Linux), else ``None``."""
    if sys.platform != "linux":
        return None
    prctl = _prctl()
    parent = os.getpid()
    kill = signal.SIGKILL

    def die_with_parent() -> None:  # in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was set
            os.kill(os.getpid(), kill)

    return die_with_parent


_libc_prctl: Any = None


def _prctl() -> Any:
    global _libc_prctl
    if _libc_prctl is None:
        import ctypes

        _libc_prctl = ctypes.CDLL(None, use_errno=True).prctl
    return _libc_prctl


_Job = tuple[Callable[[], Any], "concurrent.futures.Future[Any]"]


class _Spawner:
    """One daemon thread that forks the children that die with this process: the kernel ties
    the parent-death signal to the forking thread, and this one ends only with the process."""

    def __init__(self) -> None:
        self._todo: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._work, name="rk-spawner", daemon=True).start()

    def run(self, start: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._todo.put((start, future))
        return future.result()

    def _work(self) -> None:
        while True:
            start, future = self._todo.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)


def _registry_spawner() -> _Spawner:
    with _LOCK:
        registry = _registry()
        if registry.spawner is None:
            registry.spawner = _Spawner()
        return registry.spawner
