"""The committed snapshot of TRL's config classes: up to date, and checking like the real ones."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.trainers import trl_schema
from rk_agent.trainers.trl_args import _class_defaults, _describe, _field_type, trl_fields
from rk_agent.trainers.trl_schema import (
    REGENERATE,
    SNAPSHOT_FILE,
    schema_class,
    snapshot_config_class,
    write_snapshot,
)


@pytest.fixture(scope="module", params=["grpo", "sft"])
def pair(request: pytest.FixtureRequest) -> tuple[type, type]:
    """(TRL's class, its snapshot stand-in) for GRPO, then SFT."""
    from rk_agent.trainers.trl_args import trl_config_class

    return trl_config_class(request.param), snapshot_config_class(request.param)


def test_the_snapshot_is_made_from_the_installed_trl(tmp_path: Path) -> None:
    fresh = write_snapshot(tmp_path / "trl_schema.json").read_text(encoding="utf-8")
    committed = SNAPSHOT_FILE.read_text(encoding="utf-8")
    assert fresh == committed, (
        f"{SNAPSHOT_FILE.name} differs from the installed TRL/transformers; regenerate it with "
        f"`{REGENERATE}` and commit it."
    )


def test_the_stand_in_has_the_real_fields_types_choices_and_defaults(
    pair: tuple[type, type],
) -> None:
    real, stand_in = pair
    assert stand_in.__name__ == real.__name__
    real_fields, fields = trl_fields(real), trl_fields(stand_in)
    assert list(fields) == list(real_fields)
    for name, field in fields.items():
        real_field = real_fields[name]
        described = _describe(_field_type(stand_in, field))
        assert described == _describe(_field_type(real, real_field)), name
        assert field.metadata.get("choices") == (
            None if real_field.metadata.get("choices") is None
            else list(real_field.metadata["choices"])
        ), name  # fmt: skip
        assert field.metadata.get("const") == real_field.metadata.get("const"), name
    real_defaults = {k: getattr(v, "value", v) for k, v in _class_defaults(real).items()}
    assert _class_defaults(stand_in) == real_defaults


def test_the_stand_in_is_only_used_for_the_versions_it_was_made_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert trl_schema.snapshot_matches_installed()
    assert schema_class("grpo") is snapshot_config_class("grpo")
    assert schema_class("sft").__module__ == "rk_agent.trainers.trl_schema"
    older = {**trl_schema._load(), "versions": {"trl": "0.1.0", "transformers": "4.0.0"}}
    monkeypatch.setattr(trl_schema, "_load", lambda: older)
    from trl import GRPOConfig

    assert not trl_schema.snapshot_matches_installed()
    assert schema_class("grpo") is GRPOConfig


def test_unknown_kind() -> None:
    with pytest.raises(
        ConfigError, match=re.escape("unknown training kind 'ppo'; expected 'grpo' or 'sft'.")
    ):
        snapshot_config_class("ppo")


def test_the_command_wants_write(capsys: pytest.CaptureFixture[str]) -> None:
    assert trl_schema.main([]) == 2
    assert capsys.readouterr().err == f"usage: {REGENERATE}\n"


def test_the_stand_in_is_not_a_training_config() -> None:
    stand_in: Any = snapshot_config_class("grpo")
    assert stand_in.__doc__ == "Stand-in for trl.GRPOConfig from the snapshot in trl_schema.json."
    assert stand_in().num_generations == 8  # TRL's defaults, frozen
