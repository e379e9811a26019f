"""The episode index: one pass over the file, growth, torn and bad lines, repeated ids; and the
filters and pages read from it."""

from __future__ import annotations

import json
import math
import re
import tracemalloc
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.runs.run_dir import TRAJECTORIES_FILE
from rk_agent.view.filters import EpisodeFilter
from rk_agent.view.index import COMPONENT_NAMES, EpisodeIndex
from rk_agent.view.listing import Listing


def episode(task: int, sample: int = 0, **fields: object) -> dict[str, object]:
    record: dict[str, object] = {
        "id": f"{task}-{sample}",
        "task_index": task,
        "sample": sample,
        "task": {
            "id": f"task-{task}",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"Question number {task}?"},
            ],
        },
        "env": "tools",
        "model": "m",
        "turns": [{"index": 0, "assistant": {"role": "assistant", "content": "Answer: 1"}}],
        "episode": {"score": task / 10},
        "success": task % 2 == 0,
        "stop_reason": "answered",
    }
    record.update(fields)
    return record


def write(file: Path, *records: object, tail: str = "") -> None:
    with file.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
        handle.write(tail)


def test_the_index_keeps_offsets_and_reads_one_episode_back(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(file, *(episode(i) for i in range(5)))
    index = EpisodeIndex(file)
    index.refresh()
    assert len(index) == 5 and (index.env, index.model) == ("tools", "m")
    row = index.row(index.position("3-0") or 0)
    assert (row.task_id, row.success, row.reward, row.text) == (
        "task-3",
        False,
        0.3,
        "Question number 3?",
    )
    assert index.read(3).id == "3-0"
    assert index.position("9-9") is None


def test_the_index_grows_with_the_file_and_waits_for_a_torn_line(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(file, episode(0), tail='{"id": "1-0", "task_')
    index = EpisodeIndex(file)
    index.refresh()
    assert len(index) == 1
    with file.open("r+b") as handle:  # the writer finishes its line
        handle.truncate(index.end)
    write(file, episode(1), episode(2))
    index.refresh()
    assert [r.id for r in index.rows(range(len(index)))] == ["0-0", "1-0", "2-0"]
    assert index.read(2).id == "2-0"


def test_a_replaced_file_is_indexed_again(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(file, *(episode(i) for i in range(3)))
    index = EpisodeIndex(file)
    index.refresh()
    file.unlink()
    write(file, episode(7))
    index.refresh()
    assert [r.id for r in index.rows(range(len(index)))] == ["7-0"]


def test_bad_lines_are_counted_and_repeated_ids_kept_once(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(file, episode(0), [1, 2], {"no": "id"}, episode(0, stop_reason="max_turns"))
    with file.open("a") as handle:
        handle.write("not json\n")
    index = EpisodeIndex(file)
    index.refresh()
    assert (len(index), index.unreadable) == (1, 3)
    assert index.row(0).stop_reason == "answered"  # the first of the repeated id
    loose = EpisodeIndex(file, unique=False)
    loose.refresh()
    assert len(loose) == 2


def test_failures_invalid_rewards_and_groups(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    failure = {"kind": "tool_error", "message": "boom", "where": "environment"}
    write(
        file,
        episode(0, 0),
        episode(0, 1, success=None, episode=None, failure=failure, stop_reason="error"),
        episode(1, 0, episode={"score": 0.0, "is_score_valid": False}),
    )
    index = EpisodeIndex(file)
    index.refresh()
    failed = index.row(1)
    assert (failed.success, failed.reward, failed.failure_kind) == (None, None, "env_error")
    assert index.row(2).reward is None
    assert index.group_of(1) == [0, 1] and index.of_task("task-1") == [2]


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ({}, ["0-0", "1-0", "2-0", "3-0", "4-0"]),
        ({"outcome": "success"}, ["0-0", "2-0", "4-0"]),
        ({"outcome": "failure"}, ["1-0", "3-0"]),
        ({"min_reward": "0.2", "max_reward": "0.3"}, ["2-0", "3-0"]),
        ({"text": "NUMBER 4"}, ["4-0"]),
        ({"stop": "max_turns"}, ["1-0"]),
        ({"stop": "never"}, []),
        ({"outcome": "nonsense"}, ["0-0", "1-0", "2-0", "3-0", "4-0"]),
    ],
)
def test_filters(tmp_path: Path, query: dict[str, str], ids: list[str]) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(file, *(episode(i, stop_reason="max_turns" if i == 1 else "answered") for i in range(5)))
    index = EpisodeIndex(file)
    index.refresh()
    selected = EpisodeFilter.from_query(query).select(index)
    assert [index.row(p).id for p in selected] == ids


def test_a_reward_bound_must_be_a_number() -> None:
    with pytest.raises(ConfigError, match=re.escape("max_reward must be a number, got 'nan'.")):
        EpisodeFilter.from_query({"max_reward": "nan"})


def test_pages_are_cut_on_the_server_and_clamped(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(file, *(episode(i) for i in range(7)))
    index = EpisodeIndex(file)
    index.refresh()
    listing = Listing(index)
    everything = EpisodeFilter()
    second = listing.page(everything, 2, size=3)
    assert [r.id for r in second.rows] == ["3-0", "4-0", "5-0"]
    assert (second.number, second.pages, second.matched, second.total) == (2, 3, 7, 7)
    assert listing.page(everything, 99, size=3).number == 3
    assert listing.page(everything, -1, size=3).number == 1
    write(file, episode(7))
    index.refresh()
    assert listing.page(everything, 3, size=3).matched == 8  # a grown index is filtered again


# --------------------------------------------------------------------------------------------
# Reward components: sparse, and a bounded number of names (issue 38)


def scored(task: int, metrics: dict[str, float | None]) -> dict[str, object]:
    return episode(
        task, episode={"score": 0.5, "metrics": {n: {"score": v} for n, v in metrics.items()}}
    )


def _peak_while_indexing(file: Path) -> int:
    tracemalloc.start()
    try:
        EpisodeIndex(file).refresh()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_grows_with_the_file_not_with_names_times_episodes(tmp_path: Path) -> None:
    """A new name per episode (a file a reward, or a hand, made) costs what its score costs:
    it was a column as long as the episodes so far (2,000 names: 16 MB more here)."""
    many, few = tmp_path / "many.jsonl", tmp_path / "few.jsonl"
    write(many, *(scored(i, {"answer": 1.0, f"n{i:06}": 0.5}) for i in range(2000)))
    write(few, *(scored(i, {"answer": 1.0, f"n{i % 2:06}": 0.5}) for i in range(2000)))
    assert abs(many.stat().st_size - few.stat().st_size) < 100
    assert _peak_while_indexing(many) < _peak_while_indexing(few) + (1 << 20)


def test_the_names_kept_are_capped_and_the_rest_counted(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    extra = 10
    names = [f"c{i:03}" for i in range(COMPONENT_NAMES + extra)]
    write(file, *(scored(i, {name: 1.0, "answer": i / 10}) for i, name in enumerate(names)))
    index = EpisodeIndex(file)
    index.refresh()
    assert len(index.components) == COMPONENT_NAMES
    assert list(index.components)[:3] == ["c000", "answer", "c001"]  # the first met
    assert (index.other_components, index.other_scores) == (extra + 1, extra + 1)
    assert list(index.components["answer"].dense(len(index)))[:3] == [0.0, 0.1, 0.2]


def test_a_component_column_reads_as_one_score_per_episode(tmp_path: Path) -> None:
    file = tmp_path / TRAJECTORIES_FILE
    write(
        file,
        scored(0, {"a": 1.0}),
        scored(1, {"b": 0.5}),
        scored(2, {"a": None, "b": 0.25}),  # no score: none kept
        episode(3, episode={"score": 1.0, "is_score_valid": False, "metrics": {"a": {"score": 1}}}),
        scored(4, {"a": 0.0}),
    )
    index = EpisodeIndex(file)
    index.refresh()
    a = index.components["a"]
    assert (list(a.positions), list(a.scores)) == ([0, 4], [1.0, 0.0])
    dense = list(a.dense(6))
    assert dense[0] == 1.0 and dense[4] == 0.0 and len(dense) == 6
    assert sum(math.isnan(v) for v in dense) == 4
    assert list(index.components["b"].dense(3))[1:] == [0.5, 0.25]
    assert isinstance(index.components["b"].positions, range)  # consecutive: not stored
