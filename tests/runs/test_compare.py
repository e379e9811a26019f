"""`compare_runs` on real runs whose every outcome is known (the math env, answered on purpose).

Tasks t0..t11; run A solves t0-t5, run B solves t0-t3 and t6-t11. Pairs: both succeed on
t0-t3 (4), A only on t4-t5 (c = 2), B only on t6-t11 (b = 6): McNemar z = 4 / sqrt(8); success
6/12 against 10/12, pooled 2/3: the two-proportion z is sqrt(3).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.runs.compare import Change, compare_runs, mcnemar_z, two_proportion_z
from tests.rollouts.runs import answering, arithmetic_tasks, play_run

A_SOLVES = {0, 1, 2, 3, 4, 5}
B_SOLVES = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11}


def _runs(tmp_path: Path, group_size: int = 1) -> tuple[Path, Path]:
    tasks = str(arithmetic_tasks(tmp_path / "tasks.jsonl", range(12)))
    common = {"env": "math", "tasks": tasks, "n": 12, "group_size": group_size}
    return (
        play_run(tmp_path / "a", answering(A_SOLVES), **common),
        play_run(tmp_path / "b", answering(B_SOLVES), **common),
    )


def test_the_figures_of_two_runs_with_known_outcomes(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    report = compare_runs(a, b)
    assert (report.shared_tasks, report.only_a, report.only_b) == (12, 0, 0)
    assert report.scope == "compared on 12 shared tasks"
    assert (report.pairs, report.both_succeeded, report.both_failed) == (12, 4, 0)
    assert (report.a_failed_b_succeeded, report.a_succeeded_b_failed) == (6, 2)
    assert report.mcnemar_z == pytest.approx(4 / math.sqrt(8))
    assert report.two_proportion_z == pytest.approx(math.sqrt(3))
    assert report.success == Change(a=0.5, b=10 / 12)
    assert report.reward.delta == pytest.approx(4 / 12)
    assert report.gained == [f"t{i}" for i in range(6, 12)]
    assert report.lost == ["t4", "t5"]
    assert (report.a.judged, report.a.succeeded, report.b.succeeded) == (12, 6, 10)
    assert report.components["correct"] == Change(a=0.5, b=10 / 12)
    assert report.components["correct.format"] == Change(a=1.0, b=1.0)
    # kinds: even tasks t0 t2 t4 t6 t8 t10: A 3/6, B 5/6; odd: A 3/6, B 5/6
    assert set(report.kinds) == {"even", "odd"}
    assert report.kinds["even"].tasks == 6
    assert report.kinds["even"].success == Change(a=0.5, b=5 / 6)
    assert report.prompts_differ == 0
    dumped = report.model_dump(mode="json")
    assert dumped["success"]["delta"] == pytest.approx(1 / 3)
    assert dumped["scope"] == "compared on 12 shared tasks"


def test_groups_pair_their_samples_in_order(tmp_path: Path) -> None:
    a, b = _runs(tmp_path, group_size=2)
    report = compare_runs(a, b)
    assert (report.pairs, report.a_failed_b_succeeded, report.a_succeeded_b_failed) == (24, 12, 4)
    assert report.mcnemar_z == pytest.approx(2.0)
    assert (report.a.shared_episodes, report.b.shared_episodes) == (24, 24)


def test_a_run_against_itself_has_no_paired_z(tmp_path: Path) -> None:
    a, _ = _runs(tmp_path)
    report = compare_runs(a, a / "trajectories.jsonl")
    assert (report.a_failed_b_succeeded, report.a_succeeded_b_failed) == (0, 0)
    assert report.mcnemar_z is None
    assert report.two_proportion_z == pytest.approx(0.0)
    assert report.gained == report.lost == []


def test_runs_over_different_tasks_compare_on_what_they_share(tmp_path: Path) -> None:
    tasks_a = str(arithmetic_tasks(tmp_path / "a.jsonl", range(12)))
    tasks_b = str(arithmetic_tasks(tmp_path / "b.jsonl", range(4, 16)))
    a = play_run(tmp_path / "a", answering(A_SOLVES), env="math", tasks=tasks_a, n=12)
    b = play_run(tmp_path / "b", answering(B_SOLVES), env="math", tasks=tasks_b, n=12)
    report = compare_runs(a, b)
    assert report.scope == "compared on 8 shared tasks; 4 only in A, 4 only in B"
    assert report.only_a_examples == ["t0", "t1", "t2", "t3"]
    assert report.only_b_examples == ["t12", "t13", "t14", "t15"]
    # shared t4..t11: A solves t4 t5; B solves t6..t11
    assert (report.a_failed_b_succeeded, report.a_succeeded_b_failed) == (6, 2)
    assert (report.a.shared_episodes, report.a.episodes) == (8, 12)
    assert report.success == Change(a=2 / 8, b=6 / 8)


def test_bad_inputs_say_what_came(tmp_path: Path) -> None:
    a, _ = _runs(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(
        f"no run at {tmp_path / 'nope'}: expected a run directory made by `rk-agent rollout`, "
        "a training run's folder or a trajectories JSONL file."
    )):  # fmt: skip
        compare_runs(a, tmp_path / "nope")
    other = play_run(
        tmp_path / "other", answering(set()), env="math",
        tasks=str(arithmetic_tasks(tmp_path / "o.jsonl", range(20, 22))), n=2,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=re.escape(
        f"{a} (12 tasks, e.g. t0, t1, t2) and {other} (2 tasks, e.g. t20, t21) share no task: "
        "compare runs of the same tasks (the same --env, --seed and --n, or the same --tasks "
        "file)."
    )):  # fmt: skip
        compare_runs(a, other)


def test_the_z_scores_by_hand() -> None:
    assert mcnemar_z(6, 2) == pytest.approx(4 / math.sqrt(8))
    assert mcnemar_z(0, 0) is None
    assert two_proportion_z(0, 5, 0, 5) is None
    assert two_proportion_z(1, 0, 1, 2) is None
