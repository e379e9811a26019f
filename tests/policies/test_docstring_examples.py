"""The examples in the policies' docstrings run and print what they say.

The served policies' examples run in their own tests (``test_openai_policy.py``, ...).
"""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["rk_agent.policies.policy", "rk_agent.policies.function_policy"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(name))
    assert tried > 0 and failures == 0
