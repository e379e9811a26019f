"""`rk_agent.secrets`: which names are secrets, finding them in the environment, and redacting
every shape a secret takes (known values, mapping entries, bearer and basic credentials, URL
and command-line assignments, echoed JSON)."""

from __future__ import annotations

import doctest
import re

import httpx
import pytest

import rk_agent.secrets
from rk_agent.secrets import (
    MIN_SECRET_LENGTH,
    REDACTED,
    argv_secrets,
    hold_secrets,
    is_secret_name,
    redact,
    redact_argv,
    secret_values,
)

SECRET = "sk-live-0123456789abcdef"


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(rk_agent.secrets)
    assert tried > 0 and failures == 0


@pytest.mark.parametrize(
    "name",
    [
        "api_key", "apiKey", "apikey", "FIREWORKS_API_KEY", "OPENAI_API_KEY", "X-Api-Key",
        "hub_token", "HF_TOKEN", "token", "accessToken", "GITHUB_TOKEN", "password",
        "DB_PASSWORD", "passwd", "aws_secret", "AWS_SECRET_ACCESS_KEY", "client_secret",
        "secret_key", "private_key", "Authorization", "Proxy-Authorization", "Cookie",
        "credentials", "wandb.api_key",
    ],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "eos_token", "pad_token", "bos_token", "max_tokens", "maxTokens", "tokenizer",
        "average_tokens_across_devices", "include_num_input_tokens_seen", "PATH", "keyword",
        "monkey", "key", "WANDB_IDENTITY_TOKEN_FILE", "model", "base_url",
    ],
)  # fmt: skip
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_secret_values_come_from_secret_names_longest_first() -> None:
    env = {
        "FIREWORKS_API_KEY": SECRET,
        "HF_TOKEN": "hf_0123456789",
        "SHORT_TOKEN": "a" * (MIN_SECRET_LENGTH - 1),
        "HOME": "/home/someone-with-a-long-name",
        "WANDB_API_KEY": SECRET,  # the same value twice is listed once
    }
    assert secret_values(env) == [SECRET, "hf_0123456789"]


def test_secret_values_read_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_TEST_SERVICE_API_KEY", SECRET)
    assert SECRET in secret_values()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"the key {SECRET} was refused", "the key *** was refused"),
        (f"Authorization: Bearer {SECRET}", "Authorization: Bearer ***"),
        ("authorization: bearer abcdefgh.ijkl-mnop_qr==", "authorization: bearer ***"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic ***"),
        ('{"Authorization": "ghp_abcdefgh12345678"}', '{"Authorization": "***"}'),
        ("GET https://x.io/v1?api_key=abc&page=2", "GET https://x.io/v1?api_key=***&page=2"),
        ("https://x.io/?access_token=t0k3n#top", "https://x.io/?access_token=***#top"),
        ("OPENAI_API_KEY=sk-abc python run.py", "OPENAI_API_KEY=*** python run.py"),
        ("""{"apiKey": "abc", "maxTokens": "5"}""", """{"apiKey": "***", "maxTokens": "5"}"""),
        ("{'password': 'hunter2', 'user': 'me'}", "{'password': '***', 'user': 'me'}"),
        (r'{"token": "a\"b", "n": 1}', '{"token": "***", "n": 1}'),
    ],
)
def test_every_secret_shape_in_text(text: str, expected: str) -> None:
    assert redact(text, [SECRET]) == expected


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=512 temperature=0.7 eos_token=</s>",
        "Authorization: Bearer EMPTY",  # the placeholder local servers accept
        "basic arithmetic; the bearer of news",
        "key=value and keyword=x",
        "***",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text, ["EMPTY", "short", None]) == text


def test_a_short_known_value_is_not_searched_for() -> None:
    short = "x" * (MIN_SECRET_LENGTH - 1)
    assert redact(f"say {short}", [short]) == f"say {short}"
    assert redact(f"say {short}x", [short + "x"]) == f"say {REDACTED}"


def test_a_secret_containing_another_is_replaced_whole() -> None:
    inner = SECRET[:10]
    assert redact(f"[{SECRET}] [{inner}]", [inner, SECRET]) == "[***] [***]"


def test_mappings_at_any_depth() -> None:
    config = {
        "env_kwargs": {"api_key": SECRET, "note": f"uses {SECRET}", "n": 3},
        "trl": {"hub_token": "hf_abc", "eos_token": "<|im_end|>", "hub_model_id": None},
        "rewards": [f"x?key={SECRET}", 1, ("a", f"{SECRET}")],
        "empty_key": "",
        "use_auth_token": True,  # a flag, not a credential: kept, so the config still loads
        "credentials": {"user": "me", "password": "hunter2"},
        3: "a non-string key",
    }
    assert redact(config, [SECRET]) == {
        "env_kwargs": {"api_key": "***", "note": "uses ***", "n": 3},
        "trl": {"hub_token": "***", "eos_token": "<|im_end|>", "hub_model_id": None},
        "rewards": ["x?key=***", 1, ["a", "***"]],
        "empty_key": "",
        "use_auth_token": True,
        "credentials": {"user": "me", "password": "***"},
        3: "a non-string key",
    }
    assert config["env_kwargs"]["api_key"] == SECRET  # type: ignore[index]  # a copy


def test_headers() -> None:
    headers = httpx.Headers(
        {"Authorization": f"Bearer {SECRET}", "X-Api-Key": "k", "Accept": "application/json"}
    )
    assert redact(headers) == {
        "authorization": "***",
        "x-api-key": "***",
        "accept": "application/json",
    }


def test_other_values_are_returned_as_they_are() -> None:
    marker = object()
    assert redact(marker, [SECRET]) is marker
    assert redact(3.5) == 3.5 and redact(None) is None


def test_a_single_string_of_secrets_is_refused() -> None:
    with pytest.raises(TypeError, match=re.escape("pass the secrets as a list, e.g. [key]")):
        redact("text", SECRET)


def test_a_command_line_loses_the_values_of_secret_options_and_known_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789")
    argv = ["rollout", "--api-key", "k1-abcdefgh", "--hub-token=hf_abcdefgh", "--n", "4",
            "--base-url", "http://h/?key=sk-live-0123456789", "--max-tokens", "64"]  # fmt: skip
    assert redact_argv(argv) == [
        "rollout", "--api-key", "***", "--hub-token=***", "--n", "4",
        "--base-url", "http://h/?key=***", "--max-tokens", "64",
    ]  # fmt: skip


def test_keys_given_on_a_command_line_are_held_as_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    import rk_agent.secrets as secrets

    monkeypatch.setattr(secrets, "_held", set())
    argv = ["deploy", "--api-key", "k1-abcdefgh", "--hub-token=hf_abcdefgh", "--n", "4"]
    assert argv_secrets(argv) == ["k1-abcdefgh", "hf_abcdefgh"]
    hold_secrets([*argv_secrets(argv), "short", None])
    assert {"k1-abcdefgh", "hf_abcdefgh"} <= set(secret_values())
    assert "short" not in secret_values()  # a placeholder, not a key
    assert redact("echoed: k1-abcdefgh", secret_values()) == "echoed: ***"
    assert "k1-abcdefgh" not in secret_values({"HOME": "/h"})  # an explicit environment only
