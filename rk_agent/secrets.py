"""Secrets: which names hold one, where they are, and taking them out of what we write or show.

Everything rk-agent writes or shows (error messages, logs, saved configs, dry-run listings,
W&B configs) goes through `redact` first. A value is a secret when its *name* says so
(`is_secret_name`: ``*_API_KEY``, ``*_TOKEN``, anything with ``SECRET``, ``PASSWORD``,
``Authorization``, ...), when it is a credential *shape* in text (``Bearer <token>``,
``Authorization: Basic <...>``, ``api_key=<...>`` in a URL or command line, ``"token": "<...>"``
in echoed JSON), or when it is a *known value*: a key the caller holds, or what
`secret_values` finds in the environment.

A known value shorter than `MIN_SECRET_LENGTH` characters is never searched for in text: it is
a placeholder (``"EMPTY"``, what local servers accept), not a secret, and replacing it would
garble ordinary words.

Main names: `redact`, `redact_argv`, `secret_values`, `is_secret_name`, `hold_secrets`,
`argv_secrets`, `REDACTED`, `MIN_SECRET_LENGTH`.

Example:
    >>> redact({"apiKey": "abc", "url": "https://x/?token=t0ps3cret&page=2"})
    {'apiKey': '***', 'url': 'https://x/?token=***&page=2'}
    >>> redact("upstream said: bad key sk-0123456789", ["sk-0123456789"])
    'upstream said: bad key ***'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, overload

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "argv_secrets",
    "hold_secrets",
    "is_secret_name",
    "redact",
    "redact_argv",
    "secret_values",
]

REDACTED = "***"
"""What a secret is replaced by."""

MIN_SECRET_LENGTH = 8
"""Known values shorter than this are not searched for in text (placeholders, not keys)."""

# Matched against the name in snake case: ``apiKey`` -> ``api_key``, ``X-Api-Key`` -> ``x_api_key``.
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|apikey|token|password|passwd|passphrase|authorization|credentials?|cookie)$"
    r"|_key$|secret"
)
# Tokenizer settings that end in `_token` but hold a special token, not a credential.
_NOT_SECRET = frozenset(
    {"eos_token", "pad_token", "bos_token", "unk_token", "sep_token", "cls_token", "mask_token"}
)
_TOKEN_CHARS = r"[A-Za-z0-9\-._~+/]"
_BEARER = re.compile(rf"(\bbearer\s+){_TOKEN_CHARS}{{{MIN_SECRET_LENGTH},}}=*", re.IGNORECASE)
_AUTHORIZATION = re.compile(
    rf"(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:basic\s+)?)"
    rf"(?!bearer\b){_TOKEN_CHARS}{{{MIN_SECRET_LENGTH},}}=*",
    re.IGNORECASE,
)
_ASSIGNMENT = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)=([^\s&#\"',;)]+)")
_JSON_FIELD = re.compile(r"([\"'])([A-Za-z][\w.-]*)\1(\s*:\s*)([\"'])((?:(?!\4)[^\\]|\\.)+)\4")


def is_secret_name(name: str) -> bool:
    """Whether a setting, field, header or environment variable named ``name`` holds a secret.

    Secret: ``api_key``, ``apiKey``, ``FIREWORKS_API_KEY``, ``X-Api-Key``, ``hub_token``,
    ``HF_TOKEN``, ``aws_secret``, ``password``, ``Authorization``, ``Cookie``, anything ending in
    ``_key``. Not secret: tokenizer tokens (``eos_token``, ``pad_token``, ...), ``max_tokens``,
    ``keyword``.

    Example:
        >>> is_secret_name("WANDB_API_KEY"), is_secret_name("eos_token")
        (True, False)
    """
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)  # apiKey -> api_key
    snake = re.sub(r"[-.\s]+", "_", snake).lower()
    return snake not in _NOT_SECRET and bool(_SECRET_NAME.search(snake))


_held: set[str] = set()


def hold_secrets(values: Iterable[str | None]) -> None:
    """Remember keys this program was given other than through the environment (a
    ``--api-key`` on the command line), so that `secret_values` finds them as it finds the
    environment's: redacted from what is shown, and left out of what a deploy packs."""
    _held.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)


def argv_secrets(argv: Iterable[str]) -> list[str]:
    """The values of a command line's options named like secrets (``--api-key KEY``,
    ``--hub-token=KEY``).

    Example:
        >>> argv_secrets(["deploy", "--api-key", "sk-0123456789", "--n", "4", "--token=abc"])
        ['sk-0123456789', 'abc']
    """
    values: list[str] = []
    take_next = False
    for word in argv:
        option, equals, value = word.partition("=")
        if take_next:
            values.append(word)
            take_next = False
        elif word.startswith("--") and is_secret_name(option[2:]):
            if equals:
                values.append(value)
            else:
                take_next = True
    return values


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of environment variables named like secrets (`is_secret_name`), longest first.

    Pass them to `redact` so a key pasted into another setting or echoed by a server is caught
    too. Values shorter than `MIN_SECRET_LENGTH` are left out.

    Args:
        environ: the environment to read (default ``os.environ``).

    Example:
        >>> secret_values({"OPENAI_API_KEY": "sk-0123456789", "HOME": "/home/me", "HF_TOKEN": "x"})
        ['sk-0123456789']
    """
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LENGTH}
    if environ is None:
        found |= _held  # and the keys the program was given (`hold_secrets`)
    return sorted(found, key=lambda v: (-len(v), v))


@overload
def redact(value: str, secrets: Iterable[str | None] = ()) -> str: ...
@overload
def redact(value: Any, secrets: Iterable[str | None] = ()) -> Any: ...
def redact(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """A copy of ``value`` with every secret replaced by ``***``, at any depth.

    * Strings: each known value in ``secrets`` (`MIN_SECRET_LENGTH` characters or more), then
      ``Bearer <token>``, ``Authorization: [Basic] <token>``, ``name=<value>`` and
      ``"name": "<value>"`` where the name is a secret's (`is_secret_name`).
    * Mappings (headers, environments, configs, JSON bodies): a non-empty string under a
      secret's name is replaced whole; other values are redacted in turn. The result is a
      ``dict``.
    * Lists and tuples: each item (the result is a ``list``). Anything else is returned as is.

    Args:
        value: what to redact.
        secrets: values known to be secret (an API key the caller holds, `secret_values`);
            ``None`` and short ones are skipped.

    Raises:
        TypeError: ``secrets`` is a single string (wrap it in a list).

    Example:
        >>> redact({"hub_token": "hf_abc", "eos_token": "</s>", "note": "key sk-12345678"},
        ...        ["sk-12345678"])
        {'hub_token': '***', 'eos_token': '</s>', 'note': 'key ***'}
        >>> redact("Authorization: Bearer abcdefgh12345 sent")
        'Authorization: Bearer *** sent'
    """
    if isinstance(secrets, str):  # a str is an iterable of 1-character "secrets"
        raise TypeError(f"redact: pass the secrets as a list, e.g. [key], not a {type(secrets)}")
    known = sorted(
        {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH},
        key=lambda s: (-len(s), s),  # a key that contains another is replaced whole
    )
    return _redact(value, known)


def _redact(value: Any, known: list[str]) -> Any:
    if isinstance(value, str):
        return _redact_text(value, known)
    if isinstance(value, Mapping):
        return {
            k: REDACTED
            if is_secret_name(str(k)) and isinstance(v, (str, bytes)) and v
            else _redact(v, known)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_redact(v, known) for v in value]
    return value


def _redact_text(text: str, known: list[str]) -> str:
    for secret in known:
        text = text.replace(secret, REDACTED)
    text = _BEARER.sub(rf"\1{REDACTED}", text)
    text = _AUTHORIZATION.sub(rf"\1{REDACTED}", text)
    text = _ASSIGNMENT.sub(_assignment, text)
    return _JSON_FIELD.sub(_json_field, text)


def _assignment(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    if not is_secret_name(name) or value == REDACTED:
        return match.group(0)
    return f"{name}={REDACTED}"


def _json_field(match: re.Match[str]) -> str:
    quote, name, colon, value_quote = match.group(1, 2, 3, 4)
    if not is_secret_name(name):
        return match.group(0)
    return f"{quote}{name}{quote}{colon}{value_quote}{REDACTED}{value_quote}"


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with its secrets taken out: the value of every option named like a secret
    (``--api-key KEY``, ``--api-key=KEY``, ``--hub-token ...``) and every known secret value.

    Example:
        >>> redact_argv(["rollout", "--api-key", "sk-0123456789", "--n", "4", "--token=abc"])
        ['rollout', '--api-key', '***', '--n', '4', '--token=***']
    """
    known = secret_values()
    words: list[str] = []
    hide_next = False
    for word in argv:
        option, equals, _ = word.partition("=")
        if hide_next:
            word, hide_next = REDACTED, False
        elif word.startswith("--") and is_secret_name(option[2:]):
            if equals:
                word = f"{option}={REDACTED}"
            else:
                hide_next = True
        words.append(redact(word, known))
    return words
