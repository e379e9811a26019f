"""Loading user code named as `module:attr` or `file.py::attr`."""

from __future__ import annotations

import os
import re
import sys
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


def test_files_beside_their_own_helpers_each_import_their_own(tmp_path: Path) -> None:
    for folder, body in (
        ("a", "def norm(t):\n    return t\n"),
        ("b", "def clean(t):\n    return 2\n"),
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rk_helpers_alike.py").write_text(body)
    (tmp_path / "a" / "r.py").write_text("from rk_helpers_alike import norm\nf = norm\n")
    (tmp_path / "b" / "r.py").write_text("from rk_helpers_alike import clean\nf = clean\n")
    try:
        assert load_object(f"{tmp_path / 'a' / 'r.py'}::f")(1) == 1
        # The first file's helpers stay in sys.modules; the second is given its own.
        assert load_object(f"{tmp_path / 'b' / 'r.py'}::f")(1) == 2
        assert load_object(f"{tmp_path / 'a' / 'r.py'}::f")(1) == 1  # loaded once, still its own
    finally:
        sys.modules.pop("rk_helpers_alike", None)


def test_a_folder_holding_a_standard_module_name_leaves_the_library_alone(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("SHADOW = True\n")
    (tmp_path / "r.py").write_text("def f():\n    return 1\n")
    import json

    load_object(f"{tmp_path / 'r.py'}::f")
    assert sys.modules["json"] is json


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RewardLoadError, match=re.escape("file 'nope.py' does not exist")):
        load_object("nope.py::fn", kind="reward")


def test_a_missing_name_names_the_file_as_given_and_what_it_defines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("my_rewards.py").write_text(
        "import os\n"
        "from pathlib import Path\n"
        "from rk_agent import RewardFunction, reward_function\n\n"
        "@reward_function\n"
        "def exact(messages, ground_truth=None, **kwargs):\n    return 1.0\n\n"
        "def evaluate(messages, **kwargs):\n    return 1.0\n\n"
        "strict = RewardFunction('math')\n\n"
        "def _private():\n    pass\n\n"
        "class Shop:\n    pass\n"
    )
    message = (
        "cannot load reward 'my_rewards.py::evalute': 'my_rewards.py' has no 'evalute'. Did you "
        "mean 'evaluate'? It defines these functions: evaluate, exact, strict."
    )
    with pytest.raises(RewardLoadError, match=f"^{re.escape(message)}$"):
        load_object("my_rewards.py::evalute", kind="reward")
    message = (
        "cannot load environment 'my_rewards.py::ShopEnv': 'my_rewards.py' has no 'ShopEnv'. Did "
        "you mean 'Shop'? It defines these classes: Shop."
    )
    with pytest.raises(EnvLoadError, match=f"^{re.escape(message)}$"):
        load_object("my_rewards.py::ShopEnv", kind="environment")


def test_a_missing_attribute_of_a_name_says_whose(tmp_path: Path) -> None:
    path = tmp_path / "r.py"
    path.write_text("class Box:\n    size = 1\n")
    message = f"cannot load object '{path}::Box.sise': 'Box' has no attribute 'sise'. Did you mean"
    with pytest.raises(LoadError, match=f"^{re.escape(message)} 'size'\\?$"):
        load_object(f"{path}::Box.sise")


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
