"""`rk_agent.config_files`: pydantic errors named by the option, or by the flag typed."""

from __future__ import annotations

import doctest

import pytest
from pydantic import BaseModel, Field, ValidationError, model_validator

import rk_agent.config_files
from rk_agent.config_files import flag_problems, validation_problems


class Sampling(BaseModel):
    temperature: float = Field(default=1.0, ge=0)


class Run(BaseModel):
    n_tasks: int = Field(default=1, ge=1)
    sampling: Sampling = Field(default_factory=Sampling)
    source: str | None = None

    @model_validator(mode="after")
    def _needs_source(self) -> Run:
        if self.source == "":
            raise ValueError("source must not be empty")
        return self


def _error(**data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Run.model_validate(data)
    return caught.value


def test_the_docstring_examples_run() -> None:
    failures, tried = doctest.testmod(rk_agent.config_files)
    assert tried and not failures


def test_every_problem_given_as_a_flag_is_named_by_the_flag_typed() -> None:
    exc = _error(n_tasks=0, sampling={"temperature": -1})
    given = {"n_tasks": 0, "sampling.temperature": -1}
    assert flag_problems(exc, given, {"sampling.temperature": "--temperature"}) == (
        "--n-tasks 0: Input should be greater than or equal to 1; --temperature -1: Input "
        "should be greater than or equal to 0."
    )


def test_a_problem_of_an_option_not_given_as_a_flag_leaves_the_options_named() -> None:
    exc = _error(n_tasks=0, sampling={"temperature": -1})
    assert flag_problems(exc, {"n_tasks": 0}, {}) is None
    assert validation_problems(exc) == (
        "n_tasks: Input should be greater than or equal to 1; sampling.temperature: Input "
        "should be greater than or equal to 0"
    )


def test_a_problem_of_the_whole_config_is_its_message_alone() -> None:
    assert validation_problems(_error(source="")) == "Value error, source must not be empty"
