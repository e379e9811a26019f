"""The examples in the envs package's docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rk_agent.envs",
    "rk_agent.envs._template",
    "rk_agent.envs.check",
    "rk_agent.envs.code_env",
    "rk_agent.envs.guess_env",
    "rk_agent.envs.math_env",
    "rk_agent.envs.registry",
    "rk_agent.envs.tool_rewards",
    "rk_agent.envs.toolbox",
    "rk_agent.envs.tools_env",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(name))
    assert tried > 0 and failures == 0
