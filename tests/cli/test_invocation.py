"""`rk_agent.cli.invocation.command`: the hint's command works where the user ran rk-agent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rk_agent.cli.invocation import command


@pytest.fixture
def plain_shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No `uv run` around us, and a PATH without rk-agent."""
    for name in ("UV", "UV_RUN_RECURSION_DEPTH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def test_under_uv_run_it_is_uv_run(plain_shell: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_RUN_RECURSION_DEPTH", "1")
    assert command() == "uv run rk-agent"


def test_with_the_script_on_the_path_it_is_rk_agent(plain_shell: Path) -> None:
    script = plain_shell / "rk-agent"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert command() == "rk-agent"


def test_otherwise_it_is_this_interpreter(plain_shell: Path) -> None:
    assert command() == f"{sys.executable} -m rk_agent"
