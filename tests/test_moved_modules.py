"""Modules that moved keep working at their old paths, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = [
    ("rk_agent.rewards.sandbox", "rk_agent.sandbox", "run_python"),
    ("rk_agent.rewards.server", "rk_agent.server", "serving"),
    ("rk_agent.rollouts.openai_errors", "rk_agent.openai_errors", "translate_error"),
]


@pytest.mark.parametrize(("old", "new", "name"), MOVED)
def test_the_old_path_warns_and_gives_the_same_objects(old: str, new: str, name: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}; import from {new}"):
        old_module = importlib.import_module(old)
    new_module = importlib.import_module(new)
    assert getattr(old_module, name) is getattr(new_module, name)
    assert sorted(old_module.__all__) == sorted(new_module.__all__)
