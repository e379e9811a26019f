"""Credentials: the key, account and base URL from arguments, variables and auth files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.fireworks.auth import (
    DEFAULT_API_BASE,
    Credentials,
    auth_file_path,
    read_auth_file,
    resolve_credentials,
)

KEY = "fw-auth-SECRET-abcdef"


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def write_auth(tmp_path: Path, text: str, *parts: str) -> Path:
    path = home(tmp_path).joinpath(".fireworks", *parts, "auth.ini")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_nothing_configured_gives_the_default_base_and_no_key(tmp_path: Path) -> None:
    creds = resolve_credentials()
    assert creds == Credentials(None, None, DEFAULT_API_BASE, "none")
    message = (
        "no Fireworks API key: set FIREWORKS_API_KEY, or put `api_key = ...` in "
        "~/.fireworks/auth.ini (FIREWORKS_AUTH_FILE names another file)."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        creds.require_key()


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "team")
    monkeypatch.setenv("FIREWORKS_API_BASE", "http://127.0.0.1:9/")
    creds = resolve_credentials()
    assert (creds.api_key, creds.account_id, creds.api_base, creds.key_source) == (
        KEY, "team", "http://127.0.0.1:9", "FIREWORKS_API_KEY",
    )  # fmt: skip


def test_arguments_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-from-env-000000")
    creds = resolve_credentials(api_key=KEY, account_id="a", api_base="http://x")
    assert (creds.api_key, creds.account_id, creds.api_base, creds.key_source) == (
        KEY, "a", "http://x", "argument",
    )  # fmt: skip


def test_plain_auth_file(tmp_path: Path) -> None:
    path = write_auth(tmp_path, f"# my key\napi_key = {KEY}\naccount_id='team-1'\n")
    creds = resolve_credentials()
    assert (creds.api_key, creds.account_id, creds.key_source) == (KEY, "team-1", str(path))


def test_sectioned_auth_file(tmp_path: Path) -> None:
    write_auth(tmp_path, f"[other]\napi_key = wrong\n[fireworks]\napi_key = {KEY}\n")
    assert resolve_credentials().api_key == KEY


def test_environment_wins_over_the_default_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_auth(tmp_path, "api_key = fw-file-key-000000\n")
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    assert resolve_credentials().key_source == "FIREWORKS_API_KEY"


def test_a_profile_file_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_auth(tmp_path, f"api_key = {KEY}\naccount_id = prof\n", "profiles", "work")
    monkeypatch.setenv("FIREWORKS_PROFILE", "work")
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-env-key-0000000")
    creds = resolve_credentials()
    assert (creds.api_key, creds.account_id, creds.key_source) == (KEY, "prof", str(path))
    assert auth_file_path() == path


def test_auth_file_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "elsewhere.ini"
    path.write_text(f"api_key={KEY}\napi_base=http://127.0.0.1:1\n")
    monkeypatch.setenv("FIREWORKS_AUTH_FILE", str(path))
    creds = resolve_credentials()
    assert (creds.api_key, creds.api_base) == (KEY, "http://127.0.0.1:1")


def test_a_broken_auth_file_is_named_without_its_content(tmp_path: Path) -> None:
    path = write_auth(tmp_path, f"[fireworks\napi_key = {KEY}\n")
    with pytest.raises(ConfigError) as caught:
        read_auth_file(path)
    assert str(caught.value).startswith(f"cannot parse the Fireworks auth file {path}")
    assert KEY not in str(caught.value)


def test_repr_never_shows_the_key() -> None:
    creds = resolve_credentials(api_key=KEY, env={})
    assert KEY not in repr(creds) and KEY not in str(creds)
    assert "api_key='***'" in repr(creds)
