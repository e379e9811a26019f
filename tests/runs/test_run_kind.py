"""`rk_agent.runs.run_kind`: what a folder that is not a rollout run is."""

from __future__ import annotations

import doctest
from pathlib import Path

import rk_agent.runs.run_kind
from rk_agent.runs.run_kind import not_a_run, training_kind


def test_the_docstring_examples_run() -> None:
    failures, tried = doctest.testmod(rk_agent.runs.run_kind)
    assert (failures, tried > 0) == (0, True)


def test_a_training_runs_kind_comes_from_its_saved_config(tmp_path: Path) -> None:
    assert training_kind(tmp_path) is None
    (tmp_path / "rk_agent_config.yaml").write_text("# rk-agent train sft\nkind: sft\n")
    assert training_kind(tmp_path) == "sft"
    assert not_a_run(tmp_path, "config.yaml").startswith(
        f"{tmp_path} is a training run (`rk-agent train sft`), not a rollout."
    )
