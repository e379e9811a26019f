"""Fireworks credentials: the API key, the account and the base URL, from where users keep them.

Main names: `Credentials`, `resolve_credentials`, `read_auth_file`, `auth_file_path`.

Where each value comes from, first match wins (the same places reward-kit, eval-protocol and
``firectl`` read):

* **API key**: the ``api_key`` argument; ``FIREWORKS_API_KEY``; ``api_key`` in the auth file.
* **Account id**: the ``account_id`` argument; ``FIREWORKS_ACCOUNT_ID``; ``account_id`` in the
  auth file; otherwise `rk_agent.fireworks.client.FireworksClient` asks the API which account the
  key belongs to (``GET /verifyApiKey``, header ``x-fireworks-account-id``).
* **Base URL**: the ``api_base`` argument; ``FIREWORKS_API_BASE``; ``api_base`` in the auth file;
  ``https://api.fireworks.ai``.

The auth file is ``~/.fireworks/auth.ini``, or ``~/.fireworks/profiles/<name>/auth.ini`` when
``FIREWORKS_PROFILE=<name>`` is set (then the file wins over the environment variables), or
whatever ``FIREWORKS_AUTH_FILE`` names. It holds plain ``key = value`` lines or a
``[fireworks]`` section.

The key is never printed, logged or written: `Credentials` hides it from ``repr``, and messages
name where it came from instead.

Example:
    >>> creds = resolve_credentials(api_key="fw-secret", account_id="my-team", env={})
    >>> repr(creds)[:50]
    "Credentials(api_key='***', account_id='my-team', a"
    >>> "fw-secret" in repr(creds)
    False
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rk_agent.errors import ConfigError

__all__ = [
    "DEFAULT_API_BASE",
    "Credentials",
    "auth_file_path",
    "read_auth_file",
    "resolve_credentials",
]

DEFAULT_API_BASE = "https://api.fireworks.ai"
"""The Fireworks control-plane API."""

_SECTION = "fireworks"


@dataclass(frozen=True)
class Credentials:
    """What a Fireworks client needs to authenticate. ``repr`` never shows the key.

    Attributes:
        api_key: the key (``None`` when none was found; only a dry run works without one).
        account_id: the account, or ``None`` to look it up from the key.
        api_base: the API's base URL, without a trailing slash.
        key_source: where the key came from (``"FIREWORKS_API_KEY"``, ``"argument"``, the auth
            file's path, or ``"none"``), for error messages.
    """

    api_key: str | None = field(repr=False)
    account_id: str | None = None
    api_base: str = DEFAULT_API_BASE
    key_source: str = "none"

    def __repr__(self) -> str:
        key = "'***'" if self.api_key else "None"
        return (
            f"Credentials(api_key={key}, account_id={self.account_id!r}, "
            f"api_base={self.api_base!r}, key_source={self.key_source!r})"
        )

    def require_key(self) -> str:
        """The API key, or a `ConfigError` saying where to put one."""
        if not self.api_key:
            raise ConfigError(
                "no Fireworks API key: set FIREWORKS_API_KEY, or put `api_key = ...` in "
                "~/.fireworks/auth.ini (FIREWORKS_AUTH_FILE names another file)."
            )
        return self.api_key


def auth_file_path(env: Mapping[str, str] | None = None) -> Path:
    """The auth file to read: ``FIREWORKS_AUTH_FILE``, the active profile's, or the default."""
    env = os.environ if env is None else env
    if env.get("FIREWORKS_AUTH_FILE"):
        return Path(env["FIREWORKS_AUTH_FILE"]).expanduser()
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    profile = env.get("FIREWORKS_PROFILE")
    if profile:
        return home / ".fireworks" / "profiles" / profile / "auth.ini"
    return home / ".fireworks" / "auth.ini"


def read_auth_file(path: str | Path) -> dict[str, str]:
    """The settings in an auth file (``{}`` when it does not exist).

    Accepts plain ``key = value`` lines (``#`` and ``;`` start comments) or an INI file, whose
    ``[fireworks]`` section is read (or its first section when there is no such one).

    Raises:
        ConfigError: the file exists but cannot be read or parsed.
    """
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the Fireworks auth file {path}: {exc}") from exc
    lines = [line.strip() for line in text.splitlines()]
    if not any(line.startswith("[") for line in lines):
        return _plain_lines(lines)
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        # The message quotes offending lines, which may hold the key: say only where.
        raise ConfigError(
            f"cannot parse the Fireworks auth file {path}: expected `key = value` lines or a "
            f"[{_SECTION}] section ({type(exc).__name__})."
        ) from None
    sections = parser.sections()
    section = _SECTION if _SECTION in sections else (sections[0] if sections else None)
    if section is None:
        return {k: _unquote(v) for k, v in parser.defaults().items()}
    return {k: _unquote(v) for k, v in parser.items(section)}


def _plain_lines(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip().lower()] = _unquote(value.strip())
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def resolve_credentials(
    api_key: str | None = None,
    account_id: str | None = None,
    api_base: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Credentials:
    """Find the API key, account and base URL (see the module docstring for the order).

    Missing values stay ``None``; `Credentials.require_key` raises when the key is needed.

    Args:
        api_key: a key given directly (wins over everything).
        account_id: an account given directly.
        api_base: a base URL given directly.
        env: the environment to read (default: ``os.environ``).

    Raises:
        ConfigError: the auth file exists but cannot be parsed.
    """
    env = os.environ if env is None else env
    path = auth_file_path(env)
    stored = read_auth_file(path)
    profile_wins = bool(env.get("FIREWORKS_PROFILE"))

    def pick(name: str, variable: str) -> tuple[str | None, str]:
        from_env, from_file = env.get(variable) or None, stored.get(name) or None
        if profile_wins and from_file:
            return from_file, str(path)
        if from_env:
            return from_env, variable
        if from_file:
            return from_file, str(path)
        return None, "none"

    key, key_source = (api_key, "argument") if api_key else pick("api_key", "FIREWORKS_API_KEY")
    account = account_id or pick("account_id", "FIREWORKS_ACCOUNT_ID")[0]
    base = api_base or pick("api_base", "FIREWORKS_API_BASE")[0] or DEFAULT_API_BASE
    return Credentials(
        api_key=key, account_id=account, api_base=base.rstrip("/"), key_source=key_source
    )
