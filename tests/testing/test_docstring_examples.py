"""The examples in the test doubles' docstrings run and print what they say.

The stub server's and the fake Fireworks API's run in their own tests.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["rk_agent.testing", "rk_agent.testing.scripted_policy"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(name))
    assert tried > 0 and failures == 0
