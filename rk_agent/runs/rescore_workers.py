"""Rescoring on worker processes: a run's lines scored on every core, handed back in order.

`RescoreWorkers` starts worker processes that score as the rescore's `Rescorer` does, hands
them the source file in chunks (byte ranges of whole lines, about `CHUNK_BYTES` each, which a
worker reads itself), and yields each chunk's `RescoredLine`s in file order. The process
writing the new run takes them as it takes the lines it rescores itself
(`rk_agent.runs.rescore`), so the new run is the same, byte for byte. At most `DEPTH`
chunks per worker are out at a time, so memory does not grow with the run.

**Starting.** Workers are forked when that is safe (`can_fork`: on Linux, from a process that
runs no other Python thread): they inherit the `Rescorer`, its rewards and environment loaded,
and start in milliseconds. Otherwise they are spawned: fresh interpreters that import rk-agent
and build their own from its `RescoreSpec` (about 2 s of CPU each on 2 shared cores), which
must come to the same success rule. A worker ignores Ctrl-C (SIGINT is held back while it
starts, then ignored in it): the process that started it stops it when the rescore ends, fails
or is interrupted (`RescoreWorkers.close`: SIGTERM, then SIGKILL), and a worker whose parent
died reads the end of its pipe and exits.

**Failures.** A reward that raises is an invalid score in a worker as in one process (the
decorator records it). An error that stops a rescore (a line that is not a trajectory, a reward
that cannot be called with an episode's arguments) is raised when its chunk's turn comes, so
the first in file order is the one raised, as in one process. A worker that dies (a reward
that crashes the interpreter, the out-of-memory killer) loses the chunks it held: a
replacement starts, the chunks it had not begun are handed out again, and the one it was
scoring is scored again one line at a time; a line that kills its worker alone is written with
an invalid score that says so (`Rescorer.unscorable`), its rewards not called again. Past
`MAX_DEATHS` deaths the rescore stops with a `WorkerError`.

Main names: `RescoreWorkers`, `can_fork`, `CHUNK_BYTES`, `DEPTH`, `MAX_DEATHS`.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import pickle
import signal
import sys
import threading
import warnings
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from rk_agent.errors import RkAgentError, WorkerError
from rk_agent.gc_tuning import freeze_inherited
from rk_agent.runs.rescorer import RescoredLine, Rescorer, RescoreSpec
from rk_agent.runs.run_dir import trajectory_lines

__all__ = ["CHUNK_BYTES", "DEPTH", "MAX_DEATHS", "RescoreWorkers", "can_fork"]

CHUNK_BYTES = 1 << 18
"""The size of a chunk of lines handed to a worker: about 50 lines of 5 kB, 15 ms of work on
one core against a fraction of a millisecond to hand it out and back, and small enough that a
run of a few thousand episodes still splits evenly between the workers."""
DEPTH = 2
"""Chunks a worker holds at a time: the one it scores and the next, so it never waits."""
MAX_DEATHS = 16
"""Worker deaths a rescore survives (each replaced); one more stops it with `WorkerError`."""

_GRACE_S = 2.0  # between SIGTERM and SIGKILL when stopping a worker


def can_fork() -> bool:
    """Whether workers can be forked from this process: on Linux, with no Python thread but
    this one (a fork copies one thread; a lock another thread held stays held in the child)."""
    return sys.platform == "linux" and threading.active_count() == 1


@dataclass
class _Chunk:
    """Lines ``[start, end)`` of the file (bytes), ``before`` lines before them; ``key`` orders
    it among the others (a chunk scored again line by line is replaced by ``key + (i,)``)."""

    key: tuple[int, ...]
    start: int
    end: int
    before: int
    single: bool = False  # one line, split from a chunk whose worker died
    died: str | None = None  # this line killed its worker: write it unscorable, with this


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    held: deque[_Chunk] = field(default_factory=deque)


class RescoreWorkers:
    """Worker processes rescoring one trajectories file in chunks (module docstring).

    Args:
        rescorer: the rescore's, its success rule chosen; the workers score as it does.
        file: the source's trajectories file.
        count: how many workers.

    Raises:
        WorkerError: a worker died while starting, or a spawned one chose another success rule.
        RkAgentError: a spawned worker could not build its `Rescorer` (its error, e.g. a reward
            registered in this process only).
    """

    def __init__(self, rescorer: Rescorer, file: Path, count: int) -> None:
        self.rescorer = rescorer
        self.file = file
        self.deaths = 0
        self._workers: list[_Worker] = []
        self._finished = False
        try:
            for _ in range(count):
                self._workers.append(self._start())
        except BaseException:
            self.close()
            raise

    @property
    def method(self) -> str:
        """How a worker starts now: ``fork`` or ``spawn`` (`can_fork`)."""
        return "fork" if can_fork() else "spawn"

    def results(self) -> Iterator[list[RescoredLine]]:
        """Each chunk's lines rescored, in file order (`RescoredLine`, one per episode line).

        Raises:
            DataError, RewardInputError, ...: the first error a worker met, in file order.
            WorkerError: more than `MAX_DEATHS` workers died.
        """
        fresh = _chunks(self.file)
        order: list[tuple[int, ...]] = []  # the keys out or to go out, in file order
        done: dict[tuple[int, ...], list[RescoredLine] | BaseException] = {}
        todo: deque[_Chunk] = deque()  # chunks to hand out again, before any fresh one
        window = (DEPTH + 1) * len(self._workers)  # chunks between the written and the read
        exhausted = False
        while True:
            while order and order[0] in done:
                out = done.pop(order.pop(0))
                if isinstance(out, BaseException):
                    raise out
                yield out
            for worker in list(self._workers):
                while len(worker.held) < DEPTH:
                    if todo:
                        chunk = todo.popleft()
                    elif not exhausted and len(order) < window:
                        new = next(fresh, None)
                        if new is None:
                            exhausted = True
                            break
                        chunk = new
                        order.append(chunk.key)
                    else:
                        break
                    if not self._send(worker, chunk):
                        todo.appendleft(chunk)
                        self._died(worker, todo, order)
                        break
            if not order:
                self._finished = True
                return
            busy = {w.conn: w for w in self._workers if w.held}
            if not busy:  # every send failed and the workers were replaced: hand out again
                continue
            for ready in wait(list(busy)):
                worker = busy[ready]  # type: ignore[index]  # wait() gives back what it got
                try:
                    key, lines, error = worker.conn.recv()
                except (EOFError, OSError):
                    self._died(worker, todo, order)
                    continue
                chunk = worker.held.popleft()
                if key != chunk.key:
                    raise WorkerError(f"a rescore worker answered chunk {key} for {chunk.key}")
                done[key] = (
                    error if error is not None else [RescoredLine.from_plain(x) for x in lines]
                )

    def close(self) -> None:
        """Stop every worker: asked to stop when every chunk was handed back, else SIGTERM;
        SIGKILL after a grace period. Safe to call twice."""
        workers, self._workers = self._workers, []
        for worker in workers:
            if self._finished:
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
            elif worker.process.is_alive():
                worker.process.terminate()
        for worker in workers:
            worker.process.join(_GRACE_S)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()

    # ---------------------------------------------------------------------------- internals

    def _start(self) -> _Worker:
        """A new worker, ready: forked with the `Rescorer`, or spawned with its spec."""
        method = self.method
        context: Any = multiprocessing.get_context(method)
        ours, theirs = context.Pipe()
        if method == "fork":
            scorer: Rescorer | RescoreSpec = self.rescorer
            # It closes its copies of this side's ends, its own among them: this process's
            # death must reach it as the end of its pipe.
            inherited = [ours, *(w.conn for w in self._workers)]
        else:
            scorer, inherited = self.rescorer.spec, []
        process = context.Process(
            target=_work, args=(scorer, self.file, theirs, inherited), daemon=True,
            name="rk-agent-rescore",
        )  # fmt: skip
        with _sigint_blocked(), _forking(method):
            process.start()
        theirs.close()
        worker = _Worker(process, ours)
        try:
            status, value = ours.recv()
        except (EOFError, OSError):
            process.join(_GRACE_S)
            raise WorkerError(
                f"a rescore worker process died while starting ({_how(process)})."
            ) from None
        if status == "error":
            raise value
        if value != self.rescorer.success_rule:
            raise WorkerError(
                f"a rescore worker process chose another success rule: {value!r}, not "
                f"{self.rescorer.success_rule!r}."
            )
        return worker

    def _send(self, worker: _Worker, chunk: _Chunk) -> bool:
        try:
            worker.conn.send((chunk.key, chunk.start, chunk.end, chunk.before, chunk.died))
        except OSError:  # it died idle
            return False
        worker.held.append(chunk)
        return True

    def _died(self, worker: _Worker, todo: deque[_Chunk], order: list[tuple[int, ...]]) -> None:
        """Replace a dead worker; hand out again what it held (module docstring)."""
        worker.process.join(_GRACE_S)
        how = _how(worker.process)
        worker.conn.close()
        held = list(worker.held)
        self.deaths += 1
        if self.deaths > MAX_DEATHS:
            raise WorkerError(
                f"{self.deaths} rescore worker processes died (the last {how}); the reward "
                f"may crash the interpreter or exhaust memory on these episodes. Rescore with "
                "workers=0 to see the crash in this process."
            )
        self._workers[self._workers.index(worker)] = self._start()
        again: list[_Chunk] = []
        if held:
            culprit = held.pop(0)
            if culprit.died is not None:
                raise WorkerError(
                    f"a rescore worker process died ({how}) writing line {culprit.before + 1} "
                    "of the source without calling its rewards."
                )
            if culprit.single:
                again.append(
                    _Chunk(
                        culprit.key, culprit.start, culprit.end, culprit.before, single=True,
                        died=f"the worker process scoring it died ({how})",
                    )
                )  # fmt: skip
            else:
                pieces = _split(self.file, culprit)
                at = order.index(culprit.key)
                order[at : at + 1] = [piece.key for piece in pieces]
                again.extend(pieces)
        again.extend(held)
        todo.extendleft(reversed(again))


def _chunks(file: Path) -> Iterator[_Chunk]:
    """The file in chunks of whole lines of about `CHUNK_BYTES`."""
    with file.open("rb") as handle:
        pending = b""
        start = before = index = 0
        while True:
            data = handle.read(CHUNK_BYTES)
            if not data:
                if pending:  # a last line without its newline
                    yield _Chunk((index,), start, start + len(pending), before)
                return
            pending += data
            cut = pending.rfind(b"\n") + 1
            if cut:
                yield _Chunk((index,), start, start + cut, before)
                index += 1
                before += pending.count(b"\n", 0, cut)
                start += cut
                pending = pending[cut:]


def _split(file: Path, chunk: _Chunk) -> list[_Chunk]:
    """``chunk`` as one chunk per line."""
    with file.open("rb") as handle:
        handle.seek(chunk.start)
        data = handle.read(chunk.end - chunk.start)
    pieces, offset = [], chunk.start
    for i, line in enumerate(io.BytesIO(data)):
        pieces.append(
            _Chunk((*chunk.key, i), offset, offset + len(line), chunk.before + i, single=True)
        )
        offset += len(line)
    return pieces


def _how(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back while a worker starts: the worker inherits the block and ignores
    SIGINT before it lets it through; here a Ctrl-C in the meantime arrives after."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _forking(method: str) -> Iterator[None]:
    """Around a fork: Python 3.12's warning about forking a process with threads counts native
    threads too; `can_fork` allowed this fork, so the only others are native pools (numpy's
    BLAS), which handle a fork themselves. (The collector: the worker freezes what it
    inherited, `rk_agent.gc_tuning.freeze_inherited`; this process's is left alone.)"""
    if method != "fork":
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        yield


def _work(
    scorer: Rescorer | RescoreSpec, file: Path, conn: Connection, inherited: list[Connection]
) -> None:
    """A worker's life: its `Rescorer` (inherited, or built from the spec), then each chunk it
    is sent rescored, until it is told to stop (``None``) or its parent is gone."""
    freeze_inherited()  # its collections leave the pages shared with the parent alone
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for other in inherited:  # the parent's ends of the pipes, its own among them
        other.close()
    try:
        if isinstance(scorer, Rescorer):
            rescorer = scorer
        else:
            rescorer = Rescorer(scorer)
            if scorer.env is not None:
                rescorer.choose_success_rule(scorer.env)
    except BaseException as exc:
        conn.send(("error", _sendable(exc)))
        return
    conn.send(("ready", rescorer.success_rule))
    try:
        with file.open("rb") as handle:
            _serve(rescorer, file, handle, conn)
    except (EOFError, BrokenPipeError):
        pass  # the parent is gone
    finally:
        rescorer.close()


def _serve(rescorer: Rescorer, file: Path, handle: Any, conn: Connection) -> None:
    while (request := conn.recv()) is not None:
        key, start, end, before, died = request
        handle.seek(start)
        data = io.BytesIO(handle.read(end - start))
        try:
            if died is None:
                lines = [
                    rescorer.rescore_line(file, n, raw).plain()
                    for n, raw in trajectory_lines(data, before)
                ]
            else:
                lines = [
                    rescorer.unscorable(file, n, raw, died).plain()
                    for n, raw in trajectory_lines(data, before)
                ]
        except Exception as exc:
            conn.send((key, None, _sendable(exc)))
            continue
        conn.send((key, lines, None))


def _sendable(exc: BaseException) -> BaseException:
    """``exc`` when it pickles, else an `RkAgentError` with its type and message."""
    try:
        pickle.dumps(exc)
    except Exception:
        return RkAgentError(f"{type(exc).__name__}: {exc}")
    return exc
