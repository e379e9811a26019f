"""Credential-like files: the name rules, the key formats, and the secrets rk-agent knows.

The keys below are made up, and built by concatenation so that no scanner mistakes this file
for a leak.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rk_agent.fireworks.secret_files import (
    IGNORE_PATTERNS,
    LeftOut,
    known_secrets,
    reason_by_content,
    reason_by_name,
)

AWS_ID = "AKIA" + "Z7QX4KD2MPL9RTVA"
KEYS = {
    "an AWS access key id": f"aws_key = '{AWS_ID}'",
    "an AWS secret access key": "aws_secret_access_key = " + "Ab1/" * 10,
    "a private key block": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3Blbn...\n",
    "a GitHub token": "token: gh" + "p_" + "a1B2c3D4" * 5,
    "a Slack token": "SLACK=xo" + "xb-1234567890-abcdefghij",
    "an OpenAI-style key": "client = OpenAI(api_key='s" + "k-proj-" + "Zx9" * 10 + "')",
    "a Fireworks key": "FW = 'f" + "w_" + "3ZkQ9x" * 5 + "'",
    "a Hugging Face token": "h" + "f_" + "AbCdEfGhIj" * 4,
}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (".env", "an .env file"),
        ("config/.env.production", "an .env file"),
        (".git-credentials", "Git credentials"),
        (".npmrc", "npm or Yarn credentials"),
        (".pypirc", "PyPI credentials"),
        (".netrc", "a netrc file"),
        ("id_rsa", "an SSH private key"),
        ("keys/id_ecdsa", "an SSH private key"),
        ("id_ed25519.pub", "an SSH private key"),  # a public key is harmless, but never needed
        ("server.pem", "a key or certificate store"),
        ("deploy.KEY", "a key or certificate store"),
        ("secrets.yaml", "a secrets file"),
        ("token.txt", "a token file"),
        ("hub_token", "a token file"),
        ("service-account.json", "a service-account key"),
        ("client_secret_1234.json", "a service-account key"),
        ("credentials", "a credentials file"),
        ("auth.ini", "a credentials file"),
        (".aws/config", "in a credentials folder (.aws/)"),
        (".pgpass", "PostgreSQL passwords"),
        (".mylogin.cnf", "MySQL login paths"),
        ("prod.kubeconfig", "a kubeconfig"),
        ("huggingface/stored_tokens", "a token file"),
        ("home/.ssh/known_hosts", "in a credentials folder (.ssh/)"),
    ],
)
def test_credential_files_by_name(name: str, reason: str) -> None:
    assert reason_by_name(name) == reason


@pytest.mark.parametrize(
    "name",
    ["tokenizer.json", "special_tokens_map.json", "added_tokens.json", "main.py", "keys.py",
     "lexicon.txt", "config.yaml", "environment.md", "secretary.txt"],
)  # fmt: skip
def test_ordinary_files_keep_their_names(name: str) -> None:
    assert reason_by_name(name) is None


@pytest.mark.parametrize(("kind", "text"), KEYS.items())
def test_key_formats_in_text_are_found_with_their_line(kind: str, text: str) -> None:
    assert reason_by_content(f"# notes\n{text}\n", {}) == f"holds {kind} (line 2)"


def test_an_aws_cli_file_is_found_by_its_sections() -> None:
    config = "[default]\nregion = eu-west-1\n\n[profile ci]\noutput = json\n"
    assert reason_by_content(config, {}) == "an AWS CLI config or credentials file"
    assert reason_by_content("[tool.ruff]\nline-length = 100\n", {}) is None


def test_ordinary_text_holds_nothing() -> None:
    code = "def score(tokens):\n    return len(tokens) / 10  # sk-learn style, task-sk-1\n"
    assert reason_by_content(code, {}) is None


def test_the_secrets_rk_agent_knows_are_named_by_where_they_come_from(tmp_path: Path) -> None:
    auth = tmp_path / "auth.ini"
    auth.write_text("api_key = fireworks-value-0123\n")
    env = {"MY_SERVICE_TOKEN": "token-value-0123", "HOME": "/home/me", "SHORT_KEY": "abc",
           "FIREWORKS_AUTH_FILE": str(auth)}  # fmt: skip
    known = known_secrets(env)
    assert known == {
        "token-value-0123": "$MY_SERVICE_TOKEN",
        "fireworks-value-0123": f"the Fireworks key in {auth}",
    }
    text = "URL = 'https://x'\nHEADERS = {'X-Token': 'token-value-0123'}\n"
    assert reason_by_content(text, known) == "holds the value of $MY_SERVICE_TOKEN (line 2)"


def test_left_out_reads_as_path_and_reason() -> None:
    assert str(LeftOut("data/.env", "an .env file")) == "data/.env (an .env file)"
    assert ".env" in IGNORE_PATTERNS and ".aws/" in IGNORE_PATTERNS


def test_the_docstring_examples_run() -> None:
    import doctest

    import rk_agent.fireworks.secret_files as module

    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [("my.cnf", "[client]\npassword=hunter2\n", "holds a password setting, password (line 2)"),
     ("k.yaml", "users:\n- user:\n    token: abcdef0123456789\n",
      "holds a key or token setting, token (line 3)"),
     ("k.yaml", "users:\n- user:\n    client-key-data: LS0tLS1CRUdJTg==\n",
      "holds a kubeconfig client key (line 3)"),
     ("a.json", '{"a": 1, "apiKey": "abcdef0123456789"}',
      "holds a key or token setting, apiKey (line 1)"),
     ("settings", "[default]\napi_key = abcdef0123456789\n",
      "holds a key or token setting, api_key (line 2)"),
     ("app.toml", '[db]\n"password" = "pa55word"\n',
      "holds a password setting, password (line 2)")],
)  # fmt: skip
def test_a_settings_file_with_a_secret_written_out_is_found(
    name: str, text: str, reason: str
) -> None:
    assert reason_by_content(text, {}, name) == reason


@pytest.mark.parametrize(
    ("name", "text"),
    [("my.cnf", "[client]\npassword=${DB_PASSWORD}\n"), ("a.yaml", "token: null\napi_key: ''\n"),
     ("a.json", '{"api_key": "<your key here>", "token": "Paris-is-a-capital"}'),
     ("tokenizer_config.json", '{"eos_token": "</s>", "image_token": "<image>"}'),
     ("tasks.json", '{"secret_word": "apple"}'), ("c.yaml", "api_key_env: JUDGE_API_KEY\n"),
     ("reward.py", 'password = "hunter22"\n'), ("notes.md", "password = hunter22\n")],
)  # fmt: skip
def test_settings_that_only_name_a_secret_and_files_that_are_not_settings_hold_none(
    name: str, text: str
) -> None:
    assert reason_by_content(text, {}, name) is None
