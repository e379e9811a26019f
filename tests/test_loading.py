"""Loading user code named as `module:attr` or `file.py::attr`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError, EnvLoadError, LoadError, RewardLoadError
from rk_agent.loading import load_object


def test_module_attr() -> None:
    assert load_object("os.path:join") is os.path.join


def test_file_attr_and_neighbour_imports(tmp_path: Path) -> None:
    (tmp_path / "helper_mod_for_rk.py").write_text("VALUE = 41\n")
    (tmp_path / "rewards.py").write_text(
        "from helper_mod_for_rk import VALUE\n\ndef reward():\n    return VALUE + 1\n"
    )
    fn = load_object(f"{tmp_path / 'rewards.py'}::reward")
    assert fn() == 42
    # Loading again gives the same module, not a second copy.
    assert load_object(f"{tmp_path / 'rewards.py'}::reward") is fn


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RewardLoadError, match=re.escape("file 'nope.py' does not exist")):
        load_object("nope.py::fn", kind="reward")


def test_missing_attribute_suggests(tmp_path: Path) -> None:
    path = tmp_path / "r.py"
    path.write_text("def evaluate():\n    return 1\n")
    with pytest.raises(
        RewardLoadError, match=re.escape("has no attribute 'evalute'. Did you mean 'evaluate'?")
    ):
        load_object(f"{path}::evalute", kind="reward")


def test_file_that_raises_on_import(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('bad import')\n")
    with pytest.raises(RewardLoadError, match=re.escape("failed with RuntimeError: bad import")):
        load_object(f"{path}::fn", kind="reward")


def test_missing_module() -> None:
    with pytest.raises(RewardLoadError, match=re.escape("importing 'no_such_pkg_xyz' failed")):
        load_object("no_such_pkg_xyz:fn", kind="reward")


@pytest.mark.parametrize(
    ("kind", "error"),
    [("reward", RewardLoadError), ("environment", EnvLoadError), ("deploy target", LoadError)],
)
def test_the_error_names_what_was_being_loaded(kind: str, error: type[LoadError]) -> None:
    with pytest.raises(error, match=re.escape(f"cannot load {kind} 'no_such_module_x:f'")) as info:
        load_object("no_such_module_x:f", kind=kind)
    assert type(info.value) is error
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ImportError)
