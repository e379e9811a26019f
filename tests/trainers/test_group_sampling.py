"""The sampler's choices, draw by draw: groups kept, dropped, filled, replaced, and its refusals.

TRL's scoring is stood in for by a function that calls the (real, wrapped) reward functions on
the rows as TRL would and returns the rows it scored; the real runs are in
``test_hooked_trainer.py``.
"""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace
from typing import Any

import pytest

from rk_agent.envs.guess_env import GuessEnv
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError
from rk_agent.trainers.group_sampling import GroupSampler, SamplingOptions, check_sampling
from rk_agent.trainers.task_draws import TaskDraws, TaskSource, task_source
from rk_agent.trainers.tasks import task_columns, task_rows
from rk_agent.trainers.watch import WatchRecorder
from rk_agent.types import Message

GROUP = 2


class Scorer:
    """TRL's scoring, as the sampler sees it: the reward functions called once on the rows."""

    def __init__(self, flat: set[str] | None = None, everything_flat: bool = False) -> None:
        self.flat = flat or set()
        self.everything_flat = everything_flat
        self.calls: list[list[str]] = []

    def reward(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        ids = kwargs["task_id"]
        return [
            1.0 if self.everything_flat or task in self.flat else float(i % GROUP)
            for i, task in enumerate(ids)
        ]


def _sampler(
    scorer: Scorer, options: SamplingOptions, draws: TaskDraws
) -> tuple[GroupSampler, Any]:
    recorder = WatchRecorder()
    [fn] = recorder.wrap([scorer.reward])

    def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
        scorer.calls.append([r["task_id"] for r in rows[::GROUP]])
        fn(prompts=[r["prompt"] for r in rows], completions=["x"] * len(rows),
           task_id=[r["task_id"] for r in rows])  # fmt: skip
        return {"rows": rows}

    sampler = GroupSampler(options, draws, recorder, ["reward"], [1.0], GROUP)
    return sampler, score


def _joined(parts: list[tuple[Any, list[int]]]) -> dict[str, Any]:
    rows = [batch["rows"][g * GROUP + i] for batch, groups in parts for g in groups
            for i in range(GROUP)]  # fmt: skip
    return {"rows": rows, "parts": len(parts)}


def _generated(n: int = 4) -> TaskDraws:
    env = GuessEnv(high=1000)
    rows = task_rows(env, n, seed=0)
    return TaskDraws(task_source(env, rows, task_columns, lambda: GuessEnv(high=1000)))


def _inputs(draws: TaskDraws, indexes: list[int]) -> list[dict[str, Any]]:
    rows = list(draws.source.rows)
    return [task_columns(rows[i]) for i in indexes for _ in range(GROUP)]


def _tasks(batch: dict[str, Any]) -> list[str]:
    return [r["task_id"] for r in batch["rows"][::GROUP]]


def test_when_every_group_has_spread_the_step_is_trls_own_batch() -> None:
    draws = _generated()
    sampler, score = _sampler(Scorer(), SamplingOptions(dynamic=True), draws)
    inputs = _inputs(draws, [0, 1])
    batch = sampler.generate(inputs, score, _joined, step=1)
    assert batch["rows"] is inputs or batch["rows"] == inputs
    assert "parts" not in batch  # not joined: the very batch TRL scored
    assert sampler.last is not None and sampler.last.model_dump() == {
        "dynamic": True, "draws": 1, "drawn": 2, "kept": 2, "dropped": 0, "filled": 0,
        "bound_hit": False, "replaced": 0, "retired": [],
    }  # fmt: skip


def test_groups_without_spread_are_replaced_by_fresh_tasks_until_the_step_is_full() -> None:
    draws = _generated()
    first, second = (r.task.id for r in list(draws.source.rows)[:2])
    scorer = Scorer(flat={first})
    sampler, score = _sampler(scorer, SamplingOptions(dynamic=True), draws)
    batch = sampler.generate(_inputs(draws, [0, 1]), score, _joined, step=1)
    assert len(scorer.calls) == 2 and scorer.calls[0] == [first, second]
    (fresh,) = scorer.calls[1]
    assert fresh not in (first, second)
    assert _tasks(batch) == [second, fresh] and batch["parts"] == 2
    counts = sampler.take_pending()[0]
    assert (counts.draws, counts.drawn, counts.kept, counts.dropped, counts.filled) == (
        2, 3, 2, 1, 0,
    )  # fmt: skip
    assert sampler.take_pending() == []
    assert sampler.record.extra_draws == 1 and sampler.record.dropped == 1


def test_at_the_bound_the_step_fills_with_dropped_groups_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    draws = _generated()
    scorer = Scorer(everything_flat=True)
    sampler, score = _sampler(scorer, SamplingOptions(dynamic=True, max_extra_draws=2), draws)
    inputs = _inputs(draws, [0, 1])
    with caplog.at_level("WARNING", logger="rk_agent.trainers.group_sampling"):
        batch = sampler.generate(inputs, score, _joined, step=3)
    assert [len(c) for c in scorer.calls] == [2, 2, 2]  # TRL's draw, then 2 extra draws
    assert batch["rows"] == inputs  # the first draw's groups fill it, in their order
    counts = sampler.take_pending()[0]
    assert (counts.draws, counts.drawn, counts.kept, counts.dropped, counts.filled) == (
        3, 6, 0, 4, 2,
    )  # fmt: skip
    assert counts.bound_hit and sampler.record.bound_hit_steps == [3]
    assert caplog.messages == [
        "step 3: dynamic sampling dropped 4 of the 6 groups drawn (3 draws) and trained on 0 "
        "with spread; it hit its bound, so 2 zero-spread groups filled the batch. Raise "
        "--max-extra-draws, or make the tasks' rewards vary within a group (partial credit, "
        "easier or harder tasks)."
    ]


def test_a_dataset_out_of_fresh_rows_stops_drawing() -> None:
    tasks = [Task(id=f"t{i}", messages=[Message(role="user", content="?")], ground_truth=i)
             for i in range(3)]  # fmt: skip
    rows = task_rows(GuessEnv(tasks=tasks))
    draws = TaskDraws(TaskSource(rows, task_columns))
    scorer = Scorer(everything_flat=True)
    sampler, score = _sampler(scorer, SamplingOptions(dynamic=True, max_extra_draws=5), draws)
    sampler.generate(_inputs(draws, [0, 1]), score, _joined, step=1)
    assert scorer.calls == [["t0", "t1"], ["t2"]]  # the one row left, then none
    assert sampler.last is not None and sampler.last.bound_hit


def test_without_dynamic_sampling_every_group_trains_and_retired_tasks_are_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    draws = _generated()
    draws.retire_after = 2
    first, second = (r.task.id for r in list(draws.source.rows)[:2])
    scorer = Scorer(flat={first})
    sampler, score = _sampler(scorer, SamplingOptions(retire_after=2), draws)
    with caplog.at_level("WARNING", logger="rk_agent.trainers.group_sampling"):
        for step in (1, 2, 3):
            batch = sampler.generate(_inputs(draws, [0, 1]), score, _joined, step=step)
            assert len(scorer.calls) == step  # one draw a step, whatever the spread
    assert caplog.messages == [
        f"step 2: task {first} retired: its last 2 groups were without reward spread; it is no "
        "longer played"
    ]
    steps = [c.model_dump(include={"kept", "filled", "dropped", "replaced", "retired"})
             for c in sampler.take_pending()]  # fmt: skip
    assert steps == [
        {"kept": 1, "filled": 1, "dropped": 0, "replaced": 0, "retired": []},
        {"kept": 1, "filled": 1, "dropped": 0, "replaced": 0, "retired": [first]},
        {"kept": 2, "filled": 0, "dropped": 0, "replaced": 1, "retired": []},
    ]
    assert _tasks(batch)[1] == second and _tasks(batch)[0] not in (first, second)
    assert [r.task_id for r in sampler.record.retired] == [first]
    assert sampler.last is not None and sampler.last.note() is None


def test_a_sampler_restored_from_its_state_goes_on_with_its_totals() -> None:
    draws = _generated()
    sampler, score = _sampler(Scorer(everything_flat=True), SamplingOptions(dynamic=True), draws)
    sampler.generate(_inputs(draws, [0, 1]), score, _joined, step=1)
    again, _ = _sampler(Scorer(), SamplingOptions(dynamic=True), _generated())
    again.load(sampler.state())
    assert again.record == sampler.record and again.draws.next_seed == draws.next_seed


def test_options_are_off_by_default_and_checked() -> None:
    assert not SamplingOptions().enabled
    assert SamplingOptions(dynamic=True).enabled and SamplingOptions(retire_after=3).enabled
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        SamplingOptions(max_extra_draws=-1)
    with pytest.raises(ValueError, match="less than 1"):
        SamplingOptions(retire_keep=1.0)


def test_what_dynamic_sampling_cannot_do_is_refused() -> None:
    on = SamplingOptions(dynamic=True)
    check_sampling(SamplingOptions(), {"multi_objective_aggregation": "normalize_then_sum"})
    with pytest.raises(ConfigError, match=re.escape(
        "dynamic sampling drops the groups whose rewards have no spread, which GRPO gives no "
        "advantage; with multi_objective_aggregation='normalize_then_sum' TRL normalises over "
        "the whole batch and gives them one. Use the default 'sum_then_normalize', or train "
        "without dynamic sampling."
    )):  # fmt: skip
        check_sampling(on, {"multi_objective_aggregation": "normalize_then_sum"})
    check_sampling(SamplingOptions(retire_after=2), {"multi_objective_aggregation":
                                                     "normalize_then_sum"})  # fmt: skip
    with pytest.raises(ConfigError, match=re.escape(
        "dynamic sampling and task retirement work in one training process, but this run has "
        "2: each holds only its share of a group. Train in one process, or without them."
    )):  # fmt: skip
        check_sampling(on, SimpleNamespace(world_size=2, multi_objective_aggregation=None))

    async def judged(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        return [0.0] * len(prompts)

    with pytest.raises(ConfigError, match=re.escape(
        "dynamic sampling and task retirement read each row's reward from the reward functions, "
        "but 'judged' is async, and TRL awaits it out of their sight."
    )):  # fmt: skip
        check_sampling(on, {}, [judged])


def test_a_loop_without_tasks_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    from rk_agent.trainers.grpo_builder import GRPOLoop, _check_sampling

    loop = GRPOLoop(name="my_loop", train_dataset=None, reward_funcs=[], reward_weights=[])  # type: ignore[arg-type]
    _check_sampling(loop, SimpleNamespace(world_size=1), SamplingOptions())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(
        "my_loop was given dynamic sampling or task retirement, but its loop names no training "
        "tasks to draw fresh ones from (GRPOLoop.task_source)."
    )):  # fmt: skip
        _check_sampling(loop, SimpleNamespace(world_size=1), SamplingOptions(dynamic=True))  # type: ignore[arg-type]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
