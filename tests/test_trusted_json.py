"""Reading rk-agent's own JSON without the widening validators: the same models, fewer calls."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, model_validator

from rk_agent import trusted_json
from rk_agent.envs.registry import get_solver
from rk_agent.runs.run_dir import read_trajectories, trajectory_line
from rk_agent.runs.trajectory import Trajectory
from rk_agent.trusted_json import (
    is_widening,
    trusted_validator,
    validate_trusted_json,
    widening,
)
from tests.rollouts.runs import play_run

NOT_WIDENING = {"_an_error_is_not_a_score"}
"""Before-validators that change valid input (an error without ``is_score_valid``): kept."""


class Inner(BaseModel):
    calls: ClassVar[list[Any]] = []
    value: int

    @model_validator(mode="before")
    @classmethod
    @widening
    def _count(cls, data: Any) -> Any:
        cls.calls.append(data)
        return data


class Outer(BaseModel):
    inner: list[Inner]


def test_a_nested_model_is_read_without_its_widening_validators() -> None:
    # pydantic-core reuses a complete nested model's own validator: the trusted one must not.
    Inner.calls.clear()
    line = '{"inner": [{"value": 1}, {"value": 2}]}'
    trusted = trusted_validator(Outer).validate_json(line)
    assert Inner.calls == []
    assert Outer.model_validate_json(line) == trusted
    assert len(Inner.calls) == 2  # the models themselves still run them
    assert Inner.__pydantic_complete__ and Outer.__pydantic_complete__


def _before_validators(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        if schema.get("type") == "function-before":
            fn = schema["function"]["function"]
            found.add(f"{getattr(fn, '__qualname__', fn)}:{'widening' if is_widening(fn) else '-'}")
        for value in schema.values():
            found |= _before_validators(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _before_validators(value)
    return found


def test_every_before_validator_of_a_trajectory_is_classified() -> None:
    # A new before-validator must be marked `widening` or listed here as one that is not.
    found = _before_validators(Trajectory.__pydantic_core_schema__)
    unmarked = {name.split(":")[0].split(".")[-1] for name in found if name.endswith(":-")}
    assert unmarked == NOT_WIDENING
    assert any(name.endswith(":widening") for name in found)


def test_a_runs_lines_read_as_the_model_reads_them(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("tools"), env="tools", n=3)
    for line in (run / "trajectories.jsonl").read_bytes().splitlines():
        trusted = trusted_validator(Trajectory).validate_json(line)
        model = Trajectory.model_validate_json(line)
        assert trusted == model and trusted.model_fields_set == model.model_fields_set
        assert trajectory_line(trusted) == trajectory_line(model) == line.decode()


def test_older_and_hand_written_forms_fall_back_to_the_model(tmp_path: Path) -> None:
    run = play_run(tmp_path / "run", get_solver("tools"), env="tools", n=1)
    row = json.loads((run / "trajectories.jsonl").read_text())
    call = row["turns"][0]["assistant"]["tool_calls"][0]["function"]
    call["arguments"] = json.loads(call["arguments"])  # a dict, not a JSON string
    step = row["episode"]["step_outputs"][0]
    step["metrics"] = {"tool_use": 0.05}  # a bare number
    step["base_reward"] = step.pop("reward")  # the older name
    row["episode"]["error"] = "judge timed out"  # without is_score_valid: not a score
    del row["episode"]["is_score_valid"]
    line = json.dumps(row)
    (run / "trajectories.jsonl").write_text(line + "\n")
    (read,) = read_trajectories(run)
    assert read == validate_trusted_json(Trajectory, line) == Trajectory.model_validate_json(line)
    assert read.episode is not None and not read.episode.is_score_valid
    assert read.episode.step_outputs is not None
    assert read.episode.step_outputs[0].metrics["tool_use"].score == 0.05


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(trusted_json)
    assert tried > 0 and failures == 0
