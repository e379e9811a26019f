"""What dynamic sampling and retirement report: settled groups, a step's counts, a run's totals."""

from __future__ import annotations

import doctest

import pytest

from rk_agent.runs import group_sampling
from rk_agent.runs.group_sampling import (
    RetiredTask,
    SamplingRecord,
    Settled,
    StepSampling,
    settled_group,
)
from rk_agent.runs.run_record import RunKind, RunRecord, read_run_record, write_run_record
from rk_agent.runs.watch import has_spread


@pytest.mark.parametrize(
    ("rewards", "verdicts", "expected"),
    [
        ([1.0, 1.0, 1.0], [True, True, True], Settled.ALL_PASS),
        ([0.0, 0.0], [False, False], Settled.ALL_FAIL),
        ([0.0, 0.0], [False, None], Settled.ALL_FAIL),  # as the watch counts all-fail
        ([0.5, 0.5], None, Settled.NO_SPREAD),
        ([0.5, 0.5], [True, False], Settled.NO_SPREAD),  # verdicts that disagree
        ([0.5, None], [True, True], Settled.ALL_PASS),  # one valid reward: no spread
        ([1.0, 0.9], [True, True], None),  # all solved, but the reward still teaches
        ([0.2, 0.0], [False, False], None),
    ],
)
def test_a_group_is_settled_only_without_spread(
    rewards: list[float | None], verdicts: list[bool | None] | None, expected: Settled | None
) -> None:
    assert settled_group(rewards, verdicts) is expected
    assert (expected is None) == has_spread(rewards)


def test_a_steps_counts_and_its_note() -> None:
    step = StepSampling(draws=3, drawn=7, kept=3, dropped=3, filled=1, bound_hit=True)
    assert step.note() == (
        "dynamic sampling dropped 3 of the 7 groups drawn (3 draws) and trained on 3 with "
        "spread; it hit its bound, so 1 zero-spread group filled the batch."
    )
    assert step.flat() == {
        "sampling/draws": 3.0, "sampling/groups_drawn": 7.0, "sampling/groups_kept": 3.0,
        "sampling/groups_dropped": 3.0, "sampling/groups_filled": 1.0,
        "sampling/bound_hit": 1.0, "sampling/groups_replaced": 0.0,
        "sampling/tasks_retired": 0.0,
    }  # fmt: skip
    assert StepSampling(dynamic=False, drawn=2, kept=1, filled=1).note() is None


def test_a_runs_totals_and_its_retired_tasks_round_trip_through_run_json(tmp_path: object) -> None:
    record = SamplingRecord()
    record.add(1, StepSampling(draws=1, drawn=4, kept=4))
    record.add(2, StepSampling(draws=3, drawn=9, kept=2, dropped=5, filled=2, bound_hit=True))
    record.retired.append(RetiredTask(task_id="t7", step=2, settled=Settled.ALL_PASS, groups=3))
    assert (record.steps, record.drawn, record.kept, record.dropped, record.filled) == (
        2, 13, 6, 5, 2,
    )  # fmt: skip
    assert record.extra_draws == 2 and record.bound_hit_steps == [2]
    assert record.summary() == (
        "dynamic sampling over 2 steps: 13 groups drawn, 6 kept, 5 dropped, 2 filled; 2 extra "
        "draws; the bound was hit on 1 step."
    )
    assert record.retired_summary() == "1 task retired: t7 (step 2, all_pass)."
    assert SamplingRecord().retired_summary() is None

    run = RunRecord.start(RunKind.TRAINING, global_step=2, sampling=record)
    write_run_record(str(tmp_path), run)
    back = read_run_record(str(tmp_path))
    assert back is not None and back.sampling == record
    assert RunRecord.model_validate_json(run.model_dump_json()).sampling == record
    plain = RunRecord.start(RunKind.TRAINING, global_step=0)
    assert "sampling" not in plain.model_dump_json(exclude_defaults=True)


def test_docstring_examples() -> None:
    assert doctest.testmod(group_sampling, raise_on_error=True).failed == 0
