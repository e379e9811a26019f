"""Environments from elsewhere: ``SCHEME:REST`` names, sources as entry points, their extras."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.registry import get_env_class, make_env
from rk_agent.envs.sources import (
    SOURCES,
    EnvSource,
    get_source,
    list_sources,
    split_source_spec,
)
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, EnvLoadError, NotAvailableError
from rk_agent.runs.run_wants import env_wants
from rk_agent.types import Message


class CountEnv(ChatEnv):
    """Say a number."""

    limit = 0

    def generate_task(self, rng: np.random.Generator) -> Task:
        n = int(rng.integers(self.limit))
        return Task(id=str(n), messages=[Message(role="user", content=f"Say {n}.")])


class ToySource(EnvSource):
    """A third party's source: ``toy:N`` counts below N."""

    summary = "counting games"
    form = "toy:N"
    built: list[str] = []  # noqa: RUF012  # the test's record of what was built

    def build_class(self, rest: str) -> type[ChatEnv]:
        if not rest.isdigit():
            raise ConfigError(f"toy:{rest}: expected a number.")
        self.built.append(rest)
        return type("CountEnv", (CountEnv,), {"limit": int(rest)})

    def wants(self, rest: str) -> list[str]:
        return [f"count to {rest}"]


class MissingSource(EnvSource):
    summary = "needs a package nobody has"
    form = "missing:X"
    packages = ("rk_agent_no_such_package",)
    extra = "missing-extra"


@pytest.fixture
def toy() -> Iterator[ToySource]:
    source = ToySource()
    SOURCES.add("toy", source)
    SOURCES.add("missing", MissingSource())
    try:
        yield source
    finally:
        SOURCES.remove("toy")
        SOURCES.remove("missing")


def test_a_source_spec_is_a_registered_scheme_then_its_rest(toy: ToySource) -> None:
    assert split_source_spec("toy:3") == ("toy", "3")
    assert split_source_spec("toy:ws://127.0.0.1:8000") == ("toy", "ws://127.0.0.1:8000")
    # Code paths keep their meaning: a file spec holds '::', a module spec an unknown scheme.
    assert split_source_spec("toy.py::Env") is None
    assert split_source_spec("toy::Env") is None
    assert split_source_spec("tests.envs.test_sources:CountEnv") is None
    assert split_source_spec("nosuch:thing") is None
    assert get_env_class("tests.envs.test_sources:CountEnv") is CountEnv


def test_make_env_builds_a_source_class_once_per_name(toy: ToySource) -> None:
    env = make_env("toy:5", max_turns=2)
    assert isinstance(env, CountEnv) and env.limit == 5 and env.max_turns == 2
    assert get_env_class("toy:5") is type(env)
    assert toy.built == ["5"]
    with pytest.raises(ConfigError, match=re.escape("toy:x: expected a number.")):
        make_env("toy:x")
    message = "environment 'toy:5' does not take 'high'. It takes:"
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_env("toy:5", high=3)


def test_an_env_setup_names_a_source_env_as_written(toy: ToySource) -> None:
    factory = EnvSetup(name="toy:7", max_turns=1).factory()
    try:
        assert factory.name == "toy:7"
        assert factory().limit == 7  # type: ignore[attr-defined]
    finally:
        factory.close()


def test_a_source_says_what_a_run_from_elsewhere_would_do(toy: ToySource) -> None:
    assert env_wants(EnvSetup(name="toy:9")) == ["count to 9 (environment toy:9)"]
    assert env_wants(EnvSetup(name="reasoning-gym:chain_sum")) == []


def test_a_missing_package_fails_in_one_line_naming_the_install(toy: ToySource) -> None:
    message = (
        "environment source 'missing' needs rk_agent_no_such_package, which is not installed: "
        "pip install 'rk-agent[missing-extra]' (uv add 'rk-agent[missing-extra]'; in a "
        "checkout of rk-agent: uv sync --extra missing-extra)."
    )
    with pytest.raises(NotAvailableError, match=f"^{re.escape(message)}$"):
        make_env("missing:anything")


def test_list_sources_says_which_are_installed(toy: ToySource) -> None:
    found = {info.scheme: info for info in list_sources()}
    assert found["toy"].installed and found["toy"].form == "toy:N"
    assert not found["missing"].installed
    assert found["missing"].install.startswith("pip install 'rk-agent[missing-extra]'")
    assert found["reasoning-gym"].form == "reasoning-gym:NAME[,NAME...]"


def test_rk_agents_own_sources_are_entry_points() -> None:
    source = get_source("reasoning-gym")
    assert (source.scheme, source.extra, source.packages) == (
        "reasoning-gym", "reasoning-gym", ("reasoning_gym",),
    )  # fmt: skip


def test_an_entry_point_that_is_no_source_is_refused() -> None:
    SOURCES.add("odd", "tests.envs.test_sources:CountEnv")
    try:
        message = "environment source 'odd' is a type, not an EnvSource: the"
        with pytest.raises(ConfigError, match=re.escape(message)):
            get_env_class("odd:1")
    finally:
        SOURCES.remove("odd")


def test_an_unknown_scheme_is_read_as_a_module(toy: Any) -> None:
    with pytest.raises(EnvLoadError, match="nosuch"):
        get_env_class("nosuch:thing")
