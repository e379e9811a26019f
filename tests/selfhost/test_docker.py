"""``--target docker``: the build context's files, ``--build``, and the context actually serving.

No OCI build runs here: the machine has a ``docker`` client but no daemon, and no registry but
PyPI, Debian and npm is reachable, so ``FROM python:3.11-slim`` cannot be pulled (buildah from
Debian fails the same way). The context is tested by the fallback the issue names: its
requirements installed into a fresh virtual environment by the Dockerfile's own install command
(rk-agent's core install, a wheel of this checkout: no torch) and the Dockerfile's own ``CMD``
run with ``PORT`` and the key set, then called over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rk_agent import RewardFunction, __version__
from rk_agent.errors import ConfigError
from rk_agent.rewards.registry import get_reward_function
from rk_agent.selfhost.context import BuildContext
from rk_agent.selfhost.docker import docker_context
from tests.selfhost.conftest import REWARDS, StandIns

KEY = "docker-test-key-0123456789"
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
RK_AGENT = [sys.executable, "-m", "rk_agent"]


def test_the_context_holds_the_reward_rk_agent_and_an_entry_command(rewards_file: Path) -> None:
    context = docker_context(f"{rewards_file}::exact")
    wheel = f"wheels/rk_agent-{__version__}-py3-none-any.whl"
    assert context.names == (
        ".dockerignore", "Dockerfile", "main.py", "my_rewards.py", "overrides.txt",
        "requirements.txt", "start.sh", wheel,
    )  # fmt: skip
    assert context.files["requirements.txt"] == f"./{wheel}\n"
    assert context.files["overrides.txt"] == (
        "llama-cpp-python; sys_platform == 'never'\nllm; sys_platform == 'never'\n"
    )
    dockerfile = context.files["Dockerfile"]
    assert "FROM python:3.11-slim\n" in dockerfile
    assert (
        "COPY requirements.txt overrides.txt ./\nCOPY wheels/ ./wheels/\nRUN pip install "
        "--no-cache-dir uv && uv pip install --system --no-cache -r requirements.txt "
        "--overrides overrides.txt\nCOPY . .\n"
    ) in dockerfile
    assert dockerfile.endswith('CMD ["sh", "start.sh"]\n')
    assert context.files["start.sh"].splitlines()[-1] == (
        'exec rk-agent serve main.py::REWARD --host 0.0.0.0 --port "${PORT:-8080}" '
        '--workers "${WORKERS:-1}"'
    )
    assert not any(name.startswith("rk_agent/") for name in context.names)  # installed instead


def test_reward_deploy_with_target_docker_writes_the_folder(rewards_file: Path, tmp_path: Path):
    reward = get_reward_function(f"{rewards_file}::exact")
    printed: list[str] = []
    done = reward.deploy(target="docker", output=tmp_path / "out", echo=printed.append)
    assert done.target == "docker" and done.ran is False
    assert (tmp_path / "out" / "start.sh").stat().st_mode & 0o111
    assert done.next_steps == (
        f"docker build -t rk-reward-exact {tmp_path / 'out'}",
        "docker run -p 8080:8080 -e RK_AGENT_SERVER_API_KEY rk-reward-exact",
    )
    expected = (
        "the 'docker' deploy target takes no option 'outptu'; it takes output, build, tag, "
        "dry_run, requirements, include and rk_agent. Did you mean 'output'?"
    )
    with pytest.raises(ConfigError, match=re.escape(expected)):
        reward.deploy(target="docker", outptu=tmp_path)


def test_a_reward_that_cannot_be_imported_from_its_package_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "helpers.py").write_text("def same(a, b):\n    return float(a == b)\n")
    (project / "graded.py").write_text(
        "from helpers import same\nfrom rk_agent import reward_function\n\n\n"
        "@reward_function\ndef graded(response: str, ground_truth: str) -> float:\n"
        "    return same(response, ground_truth)\n"
    )
    expected = "cannot be imported: ModuleNotFoundError: No module named 'helpers'"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        docker_context(f"{project / 'graded.py'}::graded")
    context = docker_context(f"{project / 'graded.py'}::graded", include=[project / "helpers.py"])
    assert "helpers.py" in context.names


def test_a_folder_with_other_files_is_refused(rewards_file: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=re.escape("holds other files (notes.txt)")):
        docker_context(f"{rewards_file}::exact").write(tmp_path / "out")


def test_build_runs_docker_build_on_the_folder(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("docker")
    out = tmp_path / "ctx"
    done = subprocess.run(
        [*RK_AGENT, "deploy", f"{rewards_file}::exact", "--target", "docker", "-o", str(out),
         "--build", "--tag", "my/reward:1"],
        capture_output=True, text=True, timeout=120,
        env=stand_ins.env(RK_AGENT_SERVER_API_KEY=KEY),  # the key is for `docker run`: ignored
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stand_ins.calls() == [
        {"argv": ["docker", "build", "-t", "my/reward:1", str(out)], "cwd": str(Path.cwd())}
    ]
    assert f"$ docker build -t my/reward:1 {out}\n" in done.stdout


def test_build_without_a_container_tool_says_how_to_go_on(
    rewards_file: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    done = subprocess.run(
        [*RK_AGENT, "deploy", f"{rewards_file}::exact", "--target", "docker",
         "-o", str(tmp_path / "ctx"), "--build"],
        capture_output=True, text=True, env={**os.environ, "PATH": str(empty)}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: expected `docker` on PATH to run `docker build -t rk-reward-exact "
        f"{tmp_path / 'ctx'}`, but it is not installed. Install Docker (or Podman), or build the "
        "folder elsewhere. Or pass --dry-run to print the commands and files without running them."
    )
    assert (tmp_path / "ctx" / "Dockerfile").is_file()  # the context is written all the same


# ------------------------------------------------------------------ the context, running


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def image_like_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding what the image installs: the context's own
    ``requirements.txt`` (a wheel of this checkout: the core install, no torch) with its
    ``overrides.txt``, by the Dockerfile's ``uv pip install`` (from uv's cache when it can)."""
    base = tmp_path_factory.mktemp("image")
    (base / "project").mkdir()
    (base / "project" / "my_rewards.py").write_text(REWARDS)
    folder = docker_context(f"{base / 'project' / 'my_rewards.py'}::exact").write(base / "ctx")
    venv = base / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    install = ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
               "-r", "requirements.txt", "--overrides", "overrides.txt"]  # fmt: skip
    if subprocess.run([*install, "--offline"], cwd=folder, capture_output=True).returncode:
        subprocess.run(install, cwd=folder, check=True, timeout=600)  # not all in uv's cache
    return venv


@pytest.fixture
def written(rewards_file: Path, tmp_path: Path) -> tuple[BuildContext, Path]:
    context = docker_context(f"{rewards_file}::exact")
    return context, context.write(tmp_path / "ctx")


def _entry_command(context: BuildContext) -> list[str]:
    """The Dockerfile's ``CMD`` (exec form), as the container would run it."""
    match = re.search(r"^CMD (\[.*\])$", context.files["Dockerfile"], re.MULTILINE)
    assert match, context.files["Dockerfile"]
    return list(json.loads(match.group(1)))


@pytest.mark.slow
@pytest.mark.parametrize("key_from", ["environment", "secret file"])
def test_the_context_serves_the_reward_with_the_dockerfiles_own_command(
    image_like_venv: Path, written: tuple[BuildContext, Path], tmp_path: Path, key_from: str
) -> None:
    context, folder = written
    port = _free_port()
    env = {"PATH": f"{image_like_venv / 'bin'}{os.pathsep}/usr/bin:/bin", "PORT": str(port),
           "HOME": str(tmp_path)}  # fmt: skip
    if key_from == "environment":
        env["RK_AGENT_SERVER_API_KEY"] = KEY
    else:  # where Docker and Kubernetes mount a secret; here a file named by the variable
        (tmp_path / "secret").write_text(KEY)
        env["RK_AGENT_SERVER_API_KEY_FILE"] = str(tmp_path / "secret")
    process = subprocess.Popen(
        _entry_command(context), cwd=folder, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process)
        remote = RewardFunction(mode="remote", endpoint=f"{url}/evaluate", api_key=KEY)
        assert remote(messages=CHAT, ground_truth="4").score == 1.0
        assert remote(messages=CHAT, ground_truth="5").score == 0.0
        unkeyed = httpx.post(f"{url}/evaluate", json={"messages": CHAT, "ground_truth": "4"})
        assert unkeyed.status_code == 401
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert output.startswith(f"Serving reward 'exact' at http://0.0.0.0:{port}/evaluate")
    assert "auth on (bearer key)" in output and KEY not in output


def test_without_a_key_the_container_refuses_to_start(
    written: tuple[BuildContext, Path], tmp_path: Path
) -> None:
    context, folder = written
    bin_dir = Path(sys.executable).parent  # rk-agent of this environment, same entry command
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "PORT": str(_free_port()),
        "HOME": str(tmp_path), "RK_AGENT_SERVER_API_KEY_FILE": str(tmp_path / "none"),
    }  # fmt: skip
    done = subprocess.run(
        _entry_command(context), cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: refusing to serve on 0.0.0.0 without an API key")


def _wait_until_up(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/health", timeout=1)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output = process.communicate()[0]
                raise AssertionError(f"the server did not start:\n{output}") from None
            time.sleep(0.1)
