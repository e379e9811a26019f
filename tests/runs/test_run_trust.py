"""The proof that a run is this user's own: a per-user key, and signed configs."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError, UntrustedRunError
from rk_agent.runs.run_trust import (
    is_signed,
    key_file,
    remove_signature,
    require_trust,
    sign_config,
    signature_file,
    signed_training_env,
)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own: its key is made here."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("RK_AGENT_CACHE", str(folder))
    return folder


def _config(folder: Path, text: str = "env: tools\nn: 2\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(text)
    return config


def test_the_key_is_made_once_readable_by_its_owner_only(cache: Path, tmp_path: Path) -> None:
    assert not key_file().exists()
    assert sign_config(_config(tmp_path / "run"))
    assert key_file() == cache / "run-key"
    mode = stat.S_IMODE(key_file().stat().st_mode)
    assert mode == 0o600
    key = key_file().read_bytes()
    assert len(key) == 32
    assert sign_config(_config(tmp_path / "other"))
    assert key_file().read_bytes() == key  # kept, not made again
    assert [p.name for p in cache.iterdir()] == ["run-key"]  # no temporary file left


def test_a_signed_config_verifies_where_it_was_written(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    assert not is_signed(config)
    sign_config(config)
    assert signature_file(config) == tmp_path / "run" / "config.yaml.hmac"
    assert re.fullmatch(r"hmac-sha256-v1 [0-9a-f]{64}\n", signature_file(config).read_text())
    assert is_signed(config)
    remove_signature(config)
    assert not is_signed(config)


def test_an_edited_config_does_not_verify(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    sign_config(config)
    config.write_text(config.read_text() + "# one more line\n")
    assert not is_signed(config)


def test_a_copied_or_moved_run_does_not_verify(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    sign_config(config)
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    assert not is_signed(tmp_path / "copy" / "config.yaml")
    (tmp_path / "run").rename(tmp_path / "moved")
    assert not is_signed(tmp_path / "moved" / "config.yaml")
    (tmp_path / "moved").rename(tmp_path / "run")
    assert is_signed(config)


def test_a_link_to_the_run_is_the_run(tmp_path: Path) -> None:
    sign_config(_config(tmp_path / "run"))
    (tmp_path / "link").symlink_to(tmp_path / "run")
    assert is_signed(tmp_path / "link" / "config.yaml")


def test_a_config_signed_for_its_final_folder_verifies_once_renamed(tmp_path: Path) -> None:
    config = _config(tmp_path / ".final.partial")
    sign_config(config, folder=tmp_path / "final")
    assert not is_signed(config)
    (tmp_path / ".final.partial").rename(tmp_path / "final")
    assert is_signed(tmp_path / "final" / "config.yaml")


def test_another_users_key_does_not_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path / "run")
    sign_config(config)
    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "elsewhere"))
    assert not is_signed(config)
    assert not key_file().exists()  # checking makes no key


def test_a_hand_made_signature_does_not_verify(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    sign_config(_config(tmp_path / "other"))  # the key exists
    signature_file(config).write_text("hmac-sha256-v1 " + "0" * 64 + "\n")
    assert not is_signed(config)
    signature_file(config).write_text("not a signature")
    assert not is_signed(config)


def test_a_key_others_can_read_vouches_for_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path / "run")
    sign_config(config)
    key_file().chmod(0o644)
    assert not is_signed(config)
    assert not sign_config(_config(tmp_path / "other"))
    assert not signature_file(tmp_path / "other" / "config.yaml").exists()
    assert "others may read it (mode 644)" in caplog.text
    assert key_file().read_bytes()  # left for the user to delete, never replaced


def test_a_link_in_place_of_the_key_vouches_for_nothing(cache: Path, tmp_path: Path) -> None:
    cache.mkdir()
    target = tmp_path / "planted"
    target.write_bytes(b"k" * 32)
    target.chmod(0o600)
    key_file().symlink_to(target)
    assert not sign_config(_config(tmp_path / "run"))
    assert target.read_bytes() == b"k" * 32


def test_processes_racing_to_make_the_key_share_one(cache: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from rk_agent.runs.run_trust import sign_config;"
        "p = Path(sys.argv[1]); p.mkdir(); (p / 'config.yaml').write_text('n: 1');"
        "sign_config(p / 'config.yaml')"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path / f"run{i}")]) for i in range(3)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert all(is_signed(tmp_path / f"run{i}" / "config.yaml") for i in range(3))
    assert sorted(p.name for p in cache.iterdir()) == ["run-key"]


def test_a_training_run_vouches_for_the_env_its_signed_config_names(tmp_path: Path) -> None:
    folder = tmp_path / "train"
    folder.mkdir()
    config = folder / "rk_agent_config.yaml"
    config.write_text("# rk-agent train grpo\nkind: grpo\nenv: my_env.py::MyEnv\n")
    assert not signed_training_env(folder, "my_env.py::MyEnv")
    sign_config(config)
    assert signed_training_env(folder, "my_env.py::MyEnv")
    assert not signed_training_env(folder, "evil.py::Env")


def test_require_trust_refuses_in_one_line_naming_what_it_wanted(tmp_path: Path) -> None:
    wants = ["import evil.py (environment evil.py::Env)", "connect to http://x (base_url)"]
    with pytest.raises(UntrustedRunError) as caught:
        require_trust(tmp_path, wants, trust_run=False, signed=False, doing="replaying it")
    assert isinstance(caught.value, ConfigError)
    assert str(caught.value) == (
        f"{tmp_path} is not a run rk-agent wrote on this machine (no valid signature of its "
        "config by this user's key: it was made elsewhere or by hand, moved, or edited), and "
        "replaying it would import evil.py (environment evil.py::Env); connect to http://x "
        "(base_url). If you trust this run, give --trust-run (trust_run=True in Python)."
    )
    assert "\n" not in str(caught.value)
    assert (caught.value.path, caught.value.wants) == (str(tmp_path), wants)


@pytest.mark.parametrize(
    ("wants", "trust_run", "signed"),
    [([], False, False), (["import x.py (environment x.py::E)"], True, False),
     (["import x.py (environment x.py::E)"], False, True)],
)  # fmt: skip
def test_require_trust_lets_through(wants: list[str], trust_run: bool, signed: bool) -> None:
    require_trust("run", wants, trust_run=trust_run, signed=signed, doing="replaying it")


def test_no_writable_cache_means_nothing_is_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RK_AGENT_CACHE", str(blocker / "cache"))  # under a file: cannot be made
    config = _config(tmp_path / "run")
    assert not sign_config(config)
    assert not is_signed(config)
    assert "cannot make the key that marks runs as this user's" in caplog.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_key_vouches_for_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    sign_config(config)
    key_file().chmod(0o000)
    assert not is_signed(config)
