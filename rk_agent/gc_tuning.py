"""The garbage collector tuned for a process rk-agent owns: a rollout, a reward server, a worker.

Tuning the collector is the process's business, so only entry points do it: the CLI commands
(``rk-agent rollout``, ``rk-agent serve``) and the processes rk-agent starts itself (uvicorn's
workers, Ray rollout workers, rescore workers). A library call
(`rk_agent.rollouts.engine.run_rollouts`, `rk_agent.server.serve_rewards` unless told
``tune_gc=True``, `rk_agent.runs.rescore.rescore`) leaves its caller's collector as it found
it: its thresholds, whether it is on, what is frozen.

Rollouts. A turn allocates a few hundred container objects (messages, results, dicts), nearly
all freed at once by reference counting. What is not freed is the run's finished work: every
trajectory, kept until the run returns, a hundred-odd container objects a turn. CPython's cyclic
collector walks each of them at least once (in its youngest generation) and again in its older
ones, and finds nothing to free: a run makes no garbage cycles of its own (a 1,000-episode run
of the ``tools`` environment against the stub server: 19 collections, 0 objects freed, 60-90 ms
of collection, and ~0.05 ms of CPU a turn in all, the caches the walks clear included). A
collection also stops every episode of the process while it runs, so at concurrency 128 its
time is added to 128 replies.

`fewer_gc_pauses` (entered by ``rk-agent rollout`` around its run, and by a Ray worker around
its playing) freezes what exists when the run starts (modules, the model, the environments), so
that collections skip it, and collects the youngest generation every ``YOUNG_THRESHOLD``
allocations instead of 700. Each finished episode then calls `episode_finished` (the engine
does, and the Ray driver for each episode it receives), which freezes what exists at that
moment (the episode's trajectory, now kept by the run, and the few objects in flight): the
collector only ever walks what the episodes in flight made since. Outside `fewer_gc_pauses` it
does nothing. Garbage cycles frozen this way (an environment whose episode state refers to
itself, say) are freed by a full collection after ``FIRST_FULL_COLLECTION`` episodes, then
after twice as many, and so on (its cost grows with what is alive, so it is paid once per
doubling), and when the outermost block ends. Both settings are undone then; the collector
itself stays on, so cycles are still freed.

Servers. `tune_for_serving` freezes what start-up built (modules, the app, the reward): under
load, full collections that rescanned it all stalled every request in flight for about 30 ms
once a second (p99 latency 47 ms without, 26 ms with: ``benchmarks/bench_reward_server.py``),
and collects the youngest objects every ``YOUNG_THRESHOLD`` allocations: a collection scans
the objects of the requests in flight, whose number does not depend on how often it runs.

Forked workers. `freeze_inherited`, a forked worker's first step, takes what it inherited out
of its own collector's sight, so that its collections leave the pages it shares with its
parent alone (copy-on-write); the parent's collector is not touched.

What each buys against the collector left alone: docs/development.md, "Hand-made machinery:
what it buys" (``benchmarks/bench_machinery.py``, variant ``no-gc``).

Main names: `fewer_gc_pauses`, `episode_finished`, `tune_for_serving`, `freeze_inherited`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "FIRST_FULL_COLLECTION",
    "YOUNG_THRESHOLD",
    "episode_finished",
    "fewer_gc_pauses",
    "freeze_inherited",
    "tune_for_serving",
]

YOUNG_THRESHOLD = 20_000
FIRST_FULL_COLLECTION = 10_000  # episodes; then every time twice as many have finished

_depth = 0  # runs in progress in this process (they may overlap in one event loop)
_saved: tuple[int, ...] = ()  # the thresholds the process had when the first run began
_finished = 0  # episodes frozen since the last full collection
_next_full = FIRST_FULL_COLLECTION


@contextmanager
def fewer_gc_pauses() -> Iterator[None]:
    """Freeze the objects that exist now and collect the young generation less often, until
    the outermost such block ends (then the thresholds the process had are restored, and what
    was frozen is collected as usual again)."""
    global _depth, _finished, _next_full, _saved
    _depth += 1
    if _depth == 1:
        _finished, _next_full, _saved = 0, FIRST_FULL_COLLECTION, gc.get_threshold()
        gc.freeze()
        if _saved[0] and _saved[0] < YOUNG_THRESHOLD:  # 0: the process turned collection off
            gc.set_threshold(YOUNG_THRESHOLD, *_saved[1:])
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:  # the last to end, which need not be the first to begin
            gc.set_threshold(*_saved)
            gc.unfreeze()


def episode_finished() -> None:
    """Freeze what exists now, after an episode has finished (inside `fewer_gc_pauses` only;
    elsewhere nothing happens); every so often collect everything first (module docstring)."""
    global _finished, _next_full
    if _depth == 0 or not gc.isenabled():
        return
    _finished += 1
    if _finished >= _next_full:
        _finished, _next_full = 0, 2 * _next_full
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def tune_for_serving() -> None:
    """For a server process, once start-up is done: collect, freeze what exists, and collect
    the youngest generation every ``YOUNG_THRESHOLD`` allocations (module docstring)."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young and young < YOUNG_THRESHOLD:  # 0: the process turned collection off
        gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def freeze_inherited() -> None:
    """In a forked worker, first thing: what it inherited is frozen out of its collector."""
    gc.freeze()
