"""Which files a deploy must not pack: credentials found by name and by content.

A deploy (to Fireworks or a self-hosted target) packs the folders you give it. Files in them
that hold credentials stay home, each with the reason (`LeftOut`):

- **by name** (`reason_by_name`): ``.env`` files, ``.git-credentials``, ``.npmrc``,
  ``.pypirc``, ``.netrc``, ``.pgpass``, ``.mylogin.cnf``, SSH keys (``id_rsa``, ``id_ecdsa``,
  ``id_ed25519``, ...), key and certificate stores (``*.pem``, ``*.key``, ``*.p12``, ...),
  ``secrets.*``, token files (``token.txt``, ``api_token``, Hugging Face's ``stored_tokens``,
  not ``tokenizer.json``), kubeconfigs (``kubeconfig``, ``*.kubeconfig``), service-account and
  client-secret JSON, ``credentials*``, ``auth.ini``, and anything in ``.aws/``, ``.ssh/``,
  ``.docker/``, ``.kube/`` or ``.gnupg/``;
- **by content** (`reason_by_content`): known key formats (AWS access key ids and secret keys,
  private key blocks, GitHub, Slack, OpenAI-style ``sk-``, Fireworks ``fw_``, Hugging Face,
  Google and Stripe keys), AWS CLI ``config``/``credentials`` files, and the *values* of the
  secrets rk-agent knows (`known_secrets`: every environment variable named like a secret and
  every key given on the command line, `rk_agent.secrets.secret_values`, and the key in the
  Fireworks auth file); and in a settings file (JSON, YAML, INI, ``.cnf``, ``.conf``, TOML, or
  a name without a suffix, such as wandb's ``settings``), a password, key or token written out:
  ``password=`` in a ``my.cnf``, a kubeconfig's ``token:`` or ``client-key-data:``,
  ``"api_key": "..."`` in JSON, ``api_key = ...`` in an INI file (`setting_holding_secret`).
  A value that only names one (``${DB_PASSWORD}``, ``<your key>``, ``null``) holds none.

`IGNORE_PATTERNS` are the name rules as ``.dockerignore`` / ``.gcloudignore`` lines, so an image
never takes a ``.env`` that lands in the build folder later.

Main names: `LeftOut`, `reason_by_name`, `reason_by_content`, `setting_holding_secret`,
`known_secrets`, `IGNORE_PATTERNS`.

Example:
    >>> reason_by_name("config/.env.local"), reason_by_name("tokenizer.json")
    ('an .env file', None)
    >>> reason_by_content("key = 'AKIA" + "Q" * 16 + "'", {})
    'holds an AWS access key id (line 1)'
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from rk_agent.errors import ConfigError
from rk_agent.fireworks.auth import auth_file_path, read_auth_file
from rk_agent.secrets import MIN_SECRET_LENGTH, is_secret_name, secret_values

__all__ = [
    "IGNORE_PATTERNS",
    "LeftOut",
    "known_secrets",
    "reason_by_content",
    "reason_by_name",
    "setting_holding_secret",
]


@dataclass(frozen=True)
class LeftOut:
    """A file a deploy did not pack, and why.

    Attributes:
        path: the file, as found.
        reason: why, e.g. ``"an .env file"`` or ``"holds an AWS access key id (line 3)"``.
    """

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.reason})"


_BY_NAME: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("an .env file", (".env", ".env.*", "*.env")),
    ("Git credentials", (".git-credentials",)),
    ("npm or Yarn credentials", (".npmrc", ".yarnrc", ".yarnrc.yml")),
    ("PyPI credentials", (".pypirc",)),
    ("a netrc file", (".netrc", "_netrc")),
    ("PostgreSQL passwords", (".pgpass", "pgpass.conf")),
    ("MySQL login paths", (".mylogin.cnf",)),
    ("a kubeconfig", ("kubeconfig", "kubeconfig.*", "*.kubeconfig")),
    ("an SSH private key", ("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*")),
    ("a key or certificate store",
     ("*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk")),
    ("a secrets file", ("secret", "secrets", "secret.*", "secrets.*", "*.secret", "*.secrets")),
    ("a token file", ("token", "tokens", "token.*", "tokens.*", "*.token", "*_token", "*_token.*",
                      "*-token", "*-token.*", "stored_tokens")),
    ("a service-account key", ("service-account*.json", "service_account*.json",
                               "*-service-account*.json", "client_secret*.json")),
    ("a credentials file", ("credentials", "credentials.*", "*credentials*.json", "auth.ini",
                            ".htpasswd", ".dockercfg")),
)  # fmt: skip
_CREDENTIAL_DIRS = (".aws", ".ssh", ".docker", ".kube", ".gnupg")

IGNORE_PATTERNS: tuple[str, ...] = (
    *(pattern for _, patterns in _BY_NAME for pattern in patterns),
    *(f"{folder}/" for folder in _CREDENTIAL_DIRS),
)
"""The name rules as ignore-file patterns (basenames, matched in any folder)."""

_KEY_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("an AWS secret access key",
     re.compile(r"(?i)aws_secret_access_key\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}")),
    ("a private key block", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("a GitHub token",
     re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Slack webhook", re.compile(r"hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/")),
    ("an OpenAI-style key", re.compile(r"\bsk-(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}")),
    ("a Fireworks key", re.compile(r"\bfw_[A-Za-z0-9]{20,}")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Stripe key", re.compile(r"\b[rs]k_live_[0-9A-Za-z]{20,}")),
)  # fmt: skip
_AWS_PROFILE = re.compile(r"(?m)^\s*\[(?:default|profile\s+[^\]]+)\]\s*$")
_AWS_SETTING = re.compile(r"(?m)^\s*(?:region|output|aws_[a-z_]+)\s*=")


def reason_by_name(path: str) -> str | None:
    """Why a file named ``path`` (relative, ``/``-separated) is a credential; None if it is not.

    Example:
        >>> reason_by_name("keys/id_ed25519"), reason_by_name("data/lexicon.txt")
        ('an SSH private key', None)
    """
    parts = PurePosixPath(path).parts
    folder = next((p for p in parts[:-1] if p.lower() in _CREDENTIAL_DIRS), None)
    if folder is not None:
        return f"in a credentials folder ({folder}/)"
    name = parts[-1].lower() if parts else ""
    for reason, patterns in _BY_NAME:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            return reason
    return None


def reason_by_content(text: str, known: Mapping[str, str], name: str | None = None) -> str | None:
    """Why ``text`` holds a credential (its kind and first line); None if nothing was found.

    Args:
        text: the file's text.
        known: ``{secret value: where it comes from}`` (`known_secrets`).
        name: the file's name; a settings file's settings are read too
            (`setting_holding_secret`).
    """
    for value, origin in known.items():
        at = text.find(value)
        if at >= 0:
            return f"holds the value of {origin} (line {_line(text, at)})"
    for kind, pattern in _KEY_FORMATS:
        found = pattern.search(text)
        if found:
            return f"holds {kind} (line {_line(text, found.start())})"
    if _AWS_PROFILE.search(text) and _AWS_SETTING.search(text):
        return "an AWS CLI config or credentials file"
    if name is not None:
        return setting_holding_secret(text, name)
    return None


_SETTINGS_SUFFIXES = frozenset(
    {"", ".json", ".yaml", ".yml", ".ini", ".cfg", ".cnf", ".conf", ".toml", ".properties",
     ".config", ".settings", ".env"}
)  # fmt: skip
# A setting as a settings file writes it, one a line: `name = value`, `name: value`,
# `"name": "value"`, `- name: value`, in quotes or not.
_SETTING = re.compile(
    r"""(?m)^[ \t]*(?:-[ \t]+)?(["']?)([A-Za-z_][\w.-]*)\1[ \t]*[=:][ \t]*(.*?)[ \t,]*$"""
)
# JSON's `"name": "value"`, anywhere on a line (several on one line, or minified).
_JSON_SETTING = re.compile(r'"([A-Za-z_][\w.-]*)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_PASSWORD = re.compile(r"(^|_)(password|passwd|passphrase|pwd)$")
_KEY = re.compile(
    r"(^|_)(api_?key|apikey|secret|secret_key|client_secret|access_key|private_key"
    r"|(access|auth|bearer|refresh|session|hf|hub|api)_token|credentials?)$"
)
_TOKEN = re.compile(r"(^|_)token$")  # a setting's, not in JSON, where {"token": ...} is data
_PLACEHOLDERS = frozenset(
    {"null", "none", "nil", "true", "false", "yes", "no", "changeme", "change-me", "required",
     "optional", "secret", "password", "redacted", "your-key", "your_key", "your-token"}
)  # fmt: skip


def setting_holding_secret(text: str, name: str) -> str | None:
    """Why the settings file ``name`` holds a credential: a setting named like a password
    (``password``, ``passwd``, ...), a key or a token (``api_key``, ``secret``,
    ``client_secret``, ``hf_token``; ``token`` outside JSON) with a value written out, or a
    kubeconfig's ``client-key-data``; None if none does, or if ``name`` is not a settings
    file (its suffix: JSON, YAML, INI, ``.cnf``, ``.conf``, TOML, ..., or none).

    Example:
        >>> setting_holding_secret("[client]\\nuser = me\\npassword = hunter22\\n", "my.cnf")
        'holds a password setting, password (line 3)'
        >>> setting_holding_secret('{"api_key": "${SERVICE_API_KEY}"}', "service.json") is None
        True
    """
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in _SETTINGS_SUFFIXES:
        return None
    found = [(m.start(), m.group(2), m.group(3)) for m in _SETTING.finditer(text)]
    if suffix == ".json":
        found = [(m.start(), m.group(1), m.group(2)) for m in _JSON_SETTING.finditer(text)]
    for at, key, value in sorted(found):
        snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key)
        snake = re.sub(r"[-.\s]+", "_", snake).lower()
        if snake == "client_key_data" and len(value.strip("\"' ")) >= MIN_SECRET_LENGTH:
            return f"holds a kubeconfig client key (line {_line(text, at)})"
        if _PASSWORD.search(snake):
            kind, shortest = "a password setting", 4
        elif _KEY.search(snake) or (suffix != ".json" and _TOKEN.search(snake)):
            kind, shortest = "a key or token setting", MIN_SECRET_LENGTH
        else:
            continue
        if snake in _NOT_SECRET_SETTINGS or not _written_out(value, shortest):
            continue
        return f"holds {kind}, {key} (line {_line(text, at)})"
    return None


_NOT_SECRET_SETTINGS = frozenset(
    {"eos_token", "pad_token", "bos_token", "unk_token", "sep_token", "cls_token", "mask_token"}
)


def _written_out(value: str, shortest: int) -> bool:
    """Whether a setting's value is a credential written out, not a reference to one or a
    placeholder: an environment variable (``$X``, ``${X}``, ``%(x)s``, ``{{ x }}``), a
    special token or a hole (``<...>``, ``[...]``), a YAML block or anchor, a word such as
    ``null``, stars or x's."""
    value = value.strip()
    if value[:1] in ("'", '"') and value[-1:] == value[:1]:
        value = value[1:-1].strip()
    if len(value) < shortest or value.lower() in _PLACEHOLDERS:
        return False
    if value[0] in "$%{<[|>&*!" or value.startswith("env:"):
        return False
    return bool(value.strip("*xX.-_ "))


def known_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The secret values rk-agent knows: ``{value: "$NAME" or the file it is in}``.

    Every environment variable named like a secret (`rk_agent.secrets.is_secret_name`,
    `rk_agent.secrets.MIN_SECRET_LENGTH` characters or more) and the ``api_key`` of the
    Fireworks auth file (``~/.fireworks/auth.ini``). Never shown: only their origins are.
    """
    env = os.environ if environ is None else environ
    found = {
        value: f"${name}"
        for name, value in sorted(env.items())
        if is_secret_name(name) and len(value) >= MIN_SECRET_LENGTH
    }
    if environ is None:
        for value in secret_values():  # and keys given on the command line (`hold_secrets`)
            found.setdefault(value, "a key given on the command line")
    path = auth_file_path(env)
    try:
        key = read_auth_file(path).get("api_key", "")
    except ConfigError:
        key = ""
    if len(key) >= MIN_SECRET_LENGTH:
        found.setdefault(key, f"the Fireworks key in {path}")
    return found


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1
