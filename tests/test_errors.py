"""The error tree: builtin bases, messages, pickling."""

from __future__ import annotations

import pickle
import re
import tomllib
from pathlib import Path

import pytest

from rk_agent.errors import (
    EXTRA_MODULES,
    ConfigError,
    DataError,
    EndpointError,
    NotAvailableError,
    RewardInputError,
    RewardLoadError,
    RkAgentError,
    UnknownNameError,
    UntrustedRunError,
    did_you_mean,
    kind_of,
    require_extra,
    sentence,
)


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (ConfigError("x"), ValueError),
        (UnknownNameError("reward", "mth", ["math"]), KeyError),
        (RewardLoadError("x"), ImportError),
        (RewardInputError("x"), TypeError),
        (EndpointError("x", status=503, retryable=True), ConnectionError),
    ],
)
def test_categories_inherit_the_builtin_they_replace(error: Exception, builtin: type) -> None:
    assert isinstance(error, RkAgentError)
    assert isinstance(error, builtin)


def test_unknown_name_suggests_the_closest() -> None:
    error = UnknownNameError("reward", "mth", ["math", "format"], hint="Register it first.")
    assert str(error) == (
        "unknown reward 'mth'. Did you mean 'math'? Known rewards: format, math. Register it first."
    )


def test_did_you_mean_is_empty_when_nothing_is_close() -> None:
    assert did_you_mean("zzzz", ["math"]) == ""


def test_data_error_names_file_and_line() -> None:
    assert str(DataError("bad", path="s.jsonl", line=3)) == "s.jsonl:3: bad"


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("plain"),
        UnknownNameError("env", "tols", ["tools"]),
        DataError("bad", path="f", line=2),
        EndpointError("down", status=502, retryable=True, url="http://x"),
        UntrustedRunError("run x would import y.py", path="x", wants=["import y.py"]),
    ],
)
def test_errors_pickle_with_their_attributes(error: RkAgentError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.__dict__ == error.__dict__


@pytest.mark.parametrize(
    ("text", "ended"),
    [("no such key", "no such key."), ("Did you mean 'x'?", "Did you mean 'x'?"),
     ("done.", "done."), ("stop!  ", "stop!")],
)  # fmt: skip
def test_sentence_adds_a_stop_only_where_there_is_none(text: str, ended: str) -> None:
    assert sentence(text) == ended


@pytest.mark.parametrize(
    ("value", "shown"),
    [([], "an empty list"), ((), "an empty list"), ({}, "an empty object"), ("", "an empty string"),
     (None, "null"), ([1], "list"), (0, "int"), (False, "bool")],
)  # fmt: skip
def test_kind_of_says_empty_where_a_type_name_would_mislead(value: object, shown: str) -> None:
    assert kind_of(value) == shown


def test_a_missing_extra_is_one_line_naming_the_install_command() -> None:
    expected = (
        "rk-agent train grpo needs no_such_a and no_such_b, which are not installed: pip install "
        "'rk-agent[train]' (uv add 'rk-agent[train]'; in a checkout of rk-agent: uv sync "
        "--extra train). Or do something else."
    )
    with pytest.raises(NotAvailableError, match=re.escape(expected)):
        require_extra(
            "train", "rk-agent train grpo", modules=["no_such_a", "json", "no_such_b"],
            otherwise="Or do something else.",
        )  # fmt: skip


def test_an_installed_extra_passes() -> None:
    require_extra("local", "x", modules=["json"])


def test_every_extra_checked_is_one_the_package_declares() -> None:
    pyproject = tomllib.loads(
        (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    )
    assert set(EXTRA_MODULES) <= set(pyproject["project"]["optional-dependencies"])
