"""The examples in the fireworks package's docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["auth", "client", "dry_run", "datasets", "evaluators", "packaging", "rft", "rft_data",
           "launch"]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(f"rk_agent.fireworks.{name}"))
    assert tried > 0 and failures == 0
