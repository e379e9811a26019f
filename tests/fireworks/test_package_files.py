"""What a deploy packs from your folders: credentials left out with why, symlinks resolved.

The folder of the attack probe (issue 25, item 6): ``.git-credentials``, ``.npmrc``,
``id_ecdsa``, ``secrets.yaml``, ``token.txt``, ``service-account.json``, an AWS ``config``, a
Python file holding a key's value, and a symlink to the project's ``.env``. Packed through the
public `package_reward` and `package_metric_folders`, as every deploy target packs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.fireworks.packaging import package_metric_folders, package_reward

REWARD = (
    "from rk_agent import reward_function\n\n\n@reward_function\n"
    "def exact(response: str, ground_truth: str) -> float:\n"
    "    return float(response.strip() == ground_truth)\n"
)
KEY_VALUE = "sk-live-9f8e7d6c5b4a3210"  # made up; the environment holds it as a secret


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project: the reward file, a .env, and a data folder holding every kind of credential."""
    monkeypatch.setenv("MY_SERVICE_API_KEY", KEY_VALUE)
    root = tmp_path / "project"
    data = root / "data"
    data.mkdir(parents=True)
    (root / "my_rewards.py").write_text(REWARD)
    (root / ".env").write_text(f"MY_SERVICE_API_KEY={KEY_VALUE}\n")
    (data / "lexicon.txt").write_text("alpha\nbeta\n")
    (data / ".git-credentials").write_text("https://me:pw@github.com\n")
    (data / ".npmrc").write_text("//registry.npmjs.org/:_authToken=abc\n")
    (data / "id_ecdsa").write_text("key\n")
    (data / "secrets.yaml").write_text("db: hunter2\n")
    (data / "token.txt").write_text("abc\n")
    (data / "service-account.json").write_text('{"type": "service_account"}\n')
    (data / "config").write_text("[default]\nregion = us-east-1\n")
    (data / "client.py").write_text(f"HEADERS = {{'X-Key': '{KEY_VALUE}'}}\n")
    (data / "notes.txt").symlink_to("../.env")
    (data / "words.txt").symlink_to("lexicon.txt")
    return root


def test_every_credential_is_left_out_and_listed_with_why(project: Path) -> None:
    data = project / "data"
    package = package_reward(f"{project / 'my_rewards.py'}::exact", include=[data])
    assert sorted(package.user_files()) == [
        "data/lexicon.txt", "data/words.txt", "main.py", "my_rewards.py", "requirements.txt",
    ]  # fmt: skip
    assert package.files["data/words.txt"] == "alpha\nbeta\n"  # a link packed under its name
    assert not any(KEY_VALUE in text for text in package.files.values())
    assert [str(left) for left in package.left_out] == [
        f"{data / '.git-credentials'} (Git credentials)",
        f"{data / '.npmrc'} (npm or Yarn credentials)",
        f"{data / 'client.py'} (holds the value of $MY_SERVICE_API_KEY (line 1))",
        f"{data / 'config'} (an AWS CLI config or credentials file)",
        f"{data / 'id_ecdsa'} (an SSH private key)",
        f"{data / 'notes.txt'} (a link to .env, an .env file)",
        f"{data / 'secrets.yaml'} (a secrets file)",
        f"{data / 'service-account.json'} (a service-account key)",
        f"{data / 'token.txt'} (a token file)",
    ]


def test_a_symlink_out_of_the_project_is_refused_in_one_line(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.env"
    outside.write_text("X=1\n")
    link = project / "data" / "shared.txt"
    link.symlink_to(outside)
    message = (
        f"expected every file of {project / 'data'} inside the project ({project.resolve()}), "
        f"but {link} is a symlink to {outside.resolve()}, outside it. Copy the file into the "
        "project, or remove the link."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        package_reward(f"{project / 'my_rewards.py'}::exact", include=[project / "data"])


def test_a_broken_symlink_is_one_line(project: Path) -> None:
    link = project / "data" / "gone.txt"
    link.symlink_to("nowhere.txt")
    message = (
        f"expected {link} to lead to a file, but it is a symlink to "
        f"{(project / 'data' / 'nowhere.txt').resolve()}, which does not exist. Remove the link "
        "or point it at a file."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        package_reward(f"{project / 'my_rewards.py'}::exact", include=[project / "data"])


def test_a_file_you_name_is_packed_unless_it_holds_a_key(project: Path) -> None:
    reward = f"{project / 'my_rewards.py'}::exact"
    named = package_reward(reward, include=[project / "data" / "token.txt"])
    assert named.files["data/token.txt"] == "abc\n" and named.left_out == ()
    both = package_reward(reward, include=[project / "data", project / "data" / "token.txt"])
    assert "data/token.txt" in both.files  # named on purpose: packed, so not listed as left out
    assert not any(left.path.endswith("token.txt") for left in both.left_out)
    message = (
        f"expected {project / 'data' / 'client.py'} to hold no credentials, but it holds the "
        "value of $MY_SERVICE_API_KEY (line 1): a deploy would ship it. Read the key from an "
        "environment variable where the reward runs instead."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        package_reward(reward, include=[project / "data" / "client.py"])


def test_a_reward_file_holding_a_key_is_refused(project: Path) -> None:
    path = project / "my_rewards.py"
    path.write_text(REWARD + f"\nAPI_KEY = '{KEY_VALUE}'\n")
    with pytest.raises(ConfigError, match=re.escape("holds the value of $MY_SERVICE_API_KEY")):
        package_reward(f"{path}::exact")


def test_metric_folders_leave_credentials_out_too(project: Path) -> None:
    folder = project / "metrics" / "relevance"
    folder.mkdir(parents=True)
    (folder / "main.py").write_text("def evaluate(messages, **kwargs):\n    return 1.0\n")
    (folder / ".env").write_text("X=1\n")
    (folder / "id_rsa").write_text("key\n")
    package = package_metric_folders([f"relevance={folder}"])
    assert "relevance/main.py" in package.files
    assert [str(left) for left in package.left_out] == [
        f"{folder / '.env'} (an .env file)", f"{folder / 'id_rsa'} (an SSH private key)",
    ]  # fmt: skip
