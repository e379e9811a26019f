"""Tests for `rk_agent.gc_tuning`: tuned by entry points, left alone by library calls."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from rk_agent import gc_tuning
from rk_agent.gc_tuning import (
    YOUNG_THRESHOLD,
    episode_finished,
    fewer_gc_pauses,
    freeze_inherited,
    tune_for_serving,
)
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig
from rk_agent.testing import ScriptedPolicy


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)
    gc.unfreeze()


def test_inside_the_young_generation_is_collected_less_often_and_old_objects_are_frozen() -> None:
    gc.set_threshold(700, 10, 10)
    before = gc.get_freeze_count()
    with fewer_gc_pauses():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > before
        assert gc.isenabled()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == before


def test_the_outermost_block_restores_the_settings() -> None:
    gc.set_threshold(1000, 5, 5)
    with fewer_gc_pauses():
        with fewer_gc_pauses():
            pass
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 5, 5)  # still inside the outer one
    assert gc.get_threshold() == (1000, 5, 5)


def test_overlapping_blocks_restore_the_settings_the_first_found() -> None:
    """Two runs in one event loop, the first ending before the second (not nested)."""
    gc.set_threshold(700, 10, 10)
    first, second = fewer_gc_pauses(), fewer_gc_pauses()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)  # the second still plays
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_settings_come_back_when_the_run_fails() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_gc_pauses():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_process_that_set_its_own_larger_threshold_or_none_keeps_it() -> None:
    for threshold in ((0, 10, 10), (50_000, 10, 10)):
        gc.set_threshold(*threshold)
        with fewer_gc_pauses():
            assert gc.get_threshold() == threshold
        assert gc.get_threshold() == threshold


def test_cycles_made_during_the_run_are_still_collected() -> None:
    class Node:
        pass

    with fewer_gc_pauses():
        node = Node()
        node.me = node  # type: ignore[attr-defined]
        del node
        assert gc.collect() >= 1


class _Node:
    def __init__(self, tag: str, freed: list[str]) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it
        self.tag, self.freed = tag, freed

    def __del__(self) -> None:
        self.freed.append(self.tag)


def test_run_rollouts_leaves_its_callers_collector_as_it_found_it() -> None:
    """A library call does not tune its caller's collector: not while it plays, not after."""
    gc.set_threshold(700, 10, 10)
    state = (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count())
    seen: list[tuple[tuple[int, int, int], bool, int]] = []

    def on_episode(_trajectory: object) -> None:
        seen.append((gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()))

    _play(3, on_episode)
    assert seen == [state] * 3
    assert (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()) == state


def test_run_rollouts_leaves_what_its_caller_froze_frozen() -> None:
    freed: list[str] = []
    _Node("the caller's", freed)  # a garbage cycle, frozen before it could be collected
    gc.freeze()
    _play(2, lambda _trajectory: None)
    gc.collect()
    assert freed == []  # still frozen: the run unfroze nothing


def _play(episodes: int, on_episode: Any) -> None:
    config = RolloutConfig(env="tools", n=episodes, concurrency=1, max_turns=1)
    result = asyncio.run(
        run_rollouts(
            config, policy=ScriptedPolicy(["Answer: 42"]), make_env=config.env.factory(),
            on_episode=on_episode,
        )
    )  # fmt: skip
    assert len(result.trajectories) == episodes


def test_inside_an_entry_points_block_run_rollouts_plays_with_fewer_pauses() -> None:
    """What ``rk-agent rollout`` does: the block around the run tunes, each finished episode
    is frozen, and the block's end gives everything back."""
    gc.set_threshold(700, 10, 10)
    seen: list[tuple[int, int]] = []

    def on_episode(_trajectory: object) -> None:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))

    with fewer_gc_pauses():
        _play(3, on_episode)
    assert [threshold for threshold, _ in seen] == [YOUNG_THRESHOLD] * 3
    assert seen[1][1] > seen[0][1]  # the episode before was frozen when it finished
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_server_process_is_tuned_once_started() -> None:
    gc.set_threshold(700, 10, 10)
    tune_for_serving()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() > 0


def test_a_forked_worker_freezes_what_it_inherited() -> None:
    before = gc.get_freeze_count()
    freeze_inherited()
    assert gc.get_freeze_count() > before


def test_what_exists_when_an_episode_finishes_is_frozen_until_the_run_ends() -> None:
    freed: list[str] = []
    with fewer_gc_pauses():
        frozen = gc.get_freeze_count()
        node = _Node("frozen", freed)
        episode_finished()
        assert gc.get_freeze_count() > frozen
        del node
        gc.collect()
        assert freed == []  # frozen: the collector skips it while the run plays
    gc.collect()
    assert freed == ["frozen"]  # the run's end gives it back


def test_a_full_collection_frees_frozen_cycles_after_a_doubling_number_of_episodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gc_tuning, "FIRST_FULL_COLLECTION", 3)
    freed: list[str] = []
    with fewer_gc_pauses():
        for episode in range(9):
            node = _Node(f"episode {episode}", freed)
            episode_finished()
            del node
        # Full collections after the 3rd episode and the 6 after it (9th): each frees what
        # was frozen before it; the 9th's own cycle is frozen after that collection.
        assert freed == [f"episode {e}" for e in range(8)]
    gc.collect()
    assert freed == [f"episode {e}" for e in range(9)]


def test_outside_a_run_finishing_an_episode_freezes_nothing() -> None:
    before = gc.get_freeze_count()
    episode_finished()
    assert gc.get_freeze_count() == before
