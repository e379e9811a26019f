"""`EpisodeNames`: a training run's episode ids, once in the run."""

from __future__ import annotations

import doctest

from rk_agent.trainers import episode_names
from rk_agent.trainers.episode_names import EpisodeName, EpisodeNames


def test_a_step_names_each_task_by_its_row_and_each_sample_in_its_group() -> None:
    names = EpisodeNames(["a", "b", "c"])
    assert names.name(3, ["c", "c", "a", "a"]) == [
        EpisodeName("s3-2-0", 2, 0), EpisodeName("s3-2-1", 2, 1),
        EpisodeName("s3-0-0", 0, 0), EpisodeName("s3-0-1", 0, 1),
    ]  # fmt: skip


def test_no_id_repeats_over_steps_batches_of_one_step_and_new_tasks() -> None:
    names = EpisodeNames(["a", "b"])
    ids = [n.id for n in names.name(1, ["a", "a", "b", "b"])]
    ids += [n.id for n in names.name(1, ["a", "a", "fresh", "fresh"])]  # a 2nd batch of step 1
    ids += [n.id for n in names.name(2, ["a", "a", "b", "b"])]
    assert len(set(ids)) == len(ids) == 12
    assert ids[4:8] == ["s1-0-2", "s1-0-3", "s1-2-0", "s1-2-1"]  # the fresh task numbered on


def test_processes_number_their_shares_of_a_group_apart() -> None:
    first = EpisodeNames(["a"], process_index=0, processes=2)
    second = EpisodeNames(["a"], process_index=1, processes=2)
    ids = [n.id for n in first.name(1, ["a", "a"])] + [n.id for n in second.name(1, ["a", "a"])]
    assert ids == ["s1-0-0", "s1-0-2", "s1-0-1", "s1-0-3"]


def test_docstring_examples() -> None:
    assert doctest.testmod(episode_names).failed == 0
