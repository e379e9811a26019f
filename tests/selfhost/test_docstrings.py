"""The examples in the self-hosting modules' docstrings run and show what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["context", "docker", "cloud_run", "aws_lambda", "tunnel", "command", "install"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"rk_agent.selfhost.{name}")
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failed == 0
