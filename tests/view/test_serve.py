"""Where the viewer may listen (the rule of rk-agent serve), and the command line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from rk_agent.errors import ConfigError
from rk_agent.view.serve import check_address
from tests.view.conftest import free_port


def test_off_loopback_a_token_is_required() -> None:
    with pytest.raises(ConfigError, match=re.escape("refusing to serve the viewer on 0.0.0.0")):
        check_address("0.0.0.0", free_port(), token=None, allow_public=False)
    check_address("0.0.0.0", free_port(), token="t", allow_public=False)
    check_address("0.0.0.0", free_port(), token=None, allow_public=True)
    check_address("127.0.0.1", free_port(), token=None, allow_public=False)


def test_the_command_refuses_a_public_bind_and_a_missing_folder(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "rk_agent", "view"]
    public = subprocess.run(
        [*command, str(tmp_path), "--host", "0.0.0.0"], capture_output=True, text=True
    )
    assert public.returncode == 2
    assert "no run found in" in public.stderr  # the folder is checked first
    missing = subprocess.run([*command, str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_the_command_prints_its_url_and_serves_loopback_names_and_allowed_ones(
    runs_root: Path,
) -> None:
    port = free_port()
    command = [sys.executable, "-m", "rk_agent", "view", str(runs_root), "--port", str(port),
               "--allow-host", "runs.example"]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith(f"rk-agent view: http://127.0.0.1:{port}/")
            page = httpx.get(f"http://127.0.0.1:{port}/run/solver", timeout=30)
            named = httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": "runs.example"})
            other = httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": "attacker.test"})
            page_of_other = httpx.get(
                f"http://127.0.0.1:{port}/", headers={"Origin": "http://attacker.test"}
            )
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert page.status_code == 200 and "8 of 8 episodes" in page.text
    assert (named.status_code, other.status_code, page_of_other.status_code) == (200, 421, 403)


def test_the_command_refuses_a_public_bind_without_a_token(runs_root: Path) -> None:
    command = [sys.executable, "-m", "rk_agent", "view", str(runs_root), "--host", "0.0.0.0"]
    refused = subprocess.run(command, capture_output=True, text=True)
    assert refused.returncode == 2
    assert "refusing to serve the viewer on 0.0.0.0 without a token" in refused.stderr
