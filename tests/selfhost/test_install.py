"""How a build context installs rk-agent, checked by building it: a fresh venv, no checkout.

No image is built here (no Docker engine runs on these machines), so the build check is the
Dockerfile's own install step, run in the written context's folder against a fresh virtual
environment (``python -m venv``): ``uv pip install -r requirements.txt --overrides
overrides.txt``, as the image runs it, with uv's cache standing in for PyPI's downloads
(``--no-cache`` and ``--system`` are the image's, dropped here). The checkout is not on the
path: rk-agent comes from the wheel in the context. Then the packaged reward is imported from
the context's ``main.py`` and scores samples.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

import rk_agent
from rk_agent import __version__
from rk_agent.fireworks.packaging import package_metric_folders
from rk_agent.selfhost.docker import docker_context
from rk_agent.selfhost.install import rk_agent_install
from tests.selfhost.conftest import REWARDS

CHECKOUT = Path(rk_agent.__file__).resolve().parents[1]
WHEEL = f"wheels/rk_agent-{__version__}-py3-none-any.whl"
SCORE = """
import json, sys, main, rk_agent
chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
print(json.dumps({
    "rk_agent": rk_agent.__file__,
    "path": sys.path,
    "scores": [main.REWARD(messages=chat, ground_truth=t).score for t in ("4", "5")],
}))
"""
WRITE = """
from rk_agent.selfhost.docker import docker_context
docker_context({reward!r}).write({out!r})
print("{{}}")
"""
WHERE_FROM = """
import hashlib, json
from rk_agent.errors import ConfigError
from rk_agent.selfhost.install import rk_agent_install
try:
    found = rk_agent_install()
except ConfigError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"requirement": found.requirement, "how": found.how,
                      "sha256": hashlib.sha256(found.wheel).hexdigest()}))
"""


def test_this_checkout_is_installed_as_a_wheel_built_from_it() -> None:
    found = rk_agent_install()
    assert found.requirement == f"./{WHEEL}" and found.wheel_name == WHEEL
    assert found.how == (
        f"rk-agent: a wheel built from {CHECKOUT}, where it is installed from, at {WHEEL} "
        f"(rk-agent {__version__} here does not come from a package index, so the image "
        "installs this wheel, not a pin)."
    )
    with zipfile.ZipFile(BytesIO(found.wheel)) as wheel:
        assert "rk_agent/selfhost/install.py" in wheel.namelist()
    assert rk_agent_install("lambda").requirement == f"./{WHEEL}[lambda]"
    assert rk_agent_install().wheel == found.wheel  # unchanged code: the cached wheel


def test_without_uv_or_pip_the_wheel_is_packed_from_the_installed_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("rk_agent.selfhost.install._build_tool", lambda: None)
    found = rk_agent_install()
    assert found.how.startswith(
        f"rk-agent: a wheel packed from the installed files in {CHECKOUT} (there is no uv or "
        f"pip here to build one), at {WHEEL} "
    )
    with zipfile.ZipFile(BytesIO(found.wheel)) as wheel:
        names = wheel.namelist()
        record = wheel.read(f"rk_agent-{__version__}.dist-info/RECORD").decode()
        metadata = wheel.read(f"rk_agent-{__version__}.dist-info/METADATA").decode()
    assert "rk_agent/selfhost/install.py" in names and not any(".pyc" in n for n in names)
    assert "rk_agent/selfhost/install.py,sha256=" in record
    assert f"Name: rk-agent\nVersion: {__version__}\n" in metadata
    assert found.wheel == rk_agent_install().wheel  # reproducible


def test_a_read_only_cache_folder_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # no cache folder can be made under a file
    uv_cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True)
    monkeypatch.setenv("UV_CACHE_DIR", uv_cache.stdout.strip())  # uv's own cache stays usable
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert rk_agent_install().wheel_name == WHEEL


def test_a_requirement_you_give_is_used_as_is(tmp_path: Path) -> None:
    given = "rk-agent @ https://example.com/rk_agent-0.1.0-py3-none-any.whl"
    assert rk_agent_install(given=given).requirement == given
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "deploy", "rk_agent.rewards.length:length_reward",
         "--target", "docker", "-o", str(tmp_path / "ctx"), "--rk-agent-requirement", given],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"rk-agent: installed as you asked ({given}).\n" in done.stdout
    assert (tmp_path / "ctx" / "requirements.txt").read_text() == f"{given}\n"
    assert not (tmp_path / "ctx" / "wheels").exists()


def test_deploy_says_how_the_image_installs_rk_agent(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "deploy", "rk_agent.rewards.length:length_reward",
         "--target", "docker", "-o", str(tmp_path / "ctx")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"rk-agent: a wheel built from {CHECKOUT}, where it is installed from" in done.stdout
    assert (tmp_path / "ctx" / WHEEL).read_bytes() == rk_agent_install().wheel


# ------------------------------------------------------------------ the context, built


def _install(context_dir: Path, python: Path) -> None:
    """The Dockerfile's install step, run in ``context_dir`` against ``python``'s venv."""
    dockerfile = (context_dir / "Dockerfile").read_text()
    run = re.search(r"^RUN pip install --no-cache-dir uv && (uv pip install .*)$", dockerfile,
                    re.MULTILINE)  # fmt: skip
    assert run, dockerfile
    argv = [a for a in shlex.split(run.group(1)) if a not in ("--system", "--no-cache")]
    subprocess.run([*argv, "--quiet", "--python", str(python)], cwd=context_dir, check=True,
                   timeout=600, env={**os.environ, "VIRTUAL_ENV": ""})  # fmt: skip


def _run(python: Path, code: str, cwd: Path) -> dict[str, object]:
    """``code`` in the fresh venv, in ``cwd``, with no path of the checkout's environment."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    done = subprocess.run([str(python), "-s", "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A docker context written to a folder and installed into a fresh venv: (folder, python)."""
    root = tmp_path_factory.mktemp("built")
    (root / "project").mkdir()
    (root / "project" / "my_rewards.py").write_text(REWARDS)
    folder = docker_context(f"{root / 'project' / 'my_rewards.py'}::exact").write(root / "ctx")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
                   check=True, timeout=120)  # fmt: skip
    python = root / "venv" / "bin" / "python"
    _install(folder, python)
    return folder, python


@pytest.mark.slow
def test_the_context_installs_in_a_fresh_venv_and_its_reward_scores(
    built: tuple[Path, Path],
) -> None:
    folder, python = built
    out = _run(python, SCORE, folder)
    assert out["scores"] == [1.0, 0.0]
    assert str(out["rk_agent"]).startswith(str(python.parents[1]))  # the wheel, installed
    assert not any(str(p).startswith(str(CHECKOUT)) for p in out["path"])  # type: ignore[attr-defined]


@pytest.mark.slow
def test_metric_folders_build_and_score_the_same_way(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    _, python = built
    metric = tmp_path / "metrics" / "relevance"
    metric.mkdir(parents=True)
    (metric / "main.py").write_text(
        "def evaluate(messages, ground_truth=None, **kwargs):\n"
        "    return {'score': float(messages[-1]['content'] == ground_truth), 'reason': 'eq'}\n"
    )
    package = package_metric_folders([f"relevance={metric}"])
    folder = docker_context(package).write(tmp_path / "ctx")
    _install(folder, python)
    assert _run(python, SCORE, folder)["scores"] == [1.0, 0.0]


@pytest.mark.slow
def test_where_rk_agent_came_from_decides_what_the_next_context_installs(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, python = built
    [dist_info] = python.parents[1].glob("lib/python*/site-packages/rk_agent-*.dist-info")
    # installed from the context's wheel (PEP 610 records the file): the wheel is copied
    out = _run(python, WHERE_FROM, folder)
    wheel = folder / WHEEL
    assert out["requirement"] == f"./{WHEEL}"
    copied = re.escape(WHEEL.split("/")[1])  # from this context's folder or a later one's
    assert re.fullmatch(
        rf"rk-agent: a copy of /\S+/{copied}, the wheel it was installed from, at "
        rf"{re.escape(WHEEL)} \(rk-agent .* not a pin\)\.",
        str(out["how"]),
    )
    assert out["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    # installed from a package index (no direct_url.json): the version is pinned
    direct_url = dist_info / "direct_url.json"
    recorded = direct_url.read_text()
    direct_url.unlink()
    try:
        out = _run(python, WHERE_FROM, folder)
        assert out["requirement"] == f"rk-agent=={__version__}"
        assert out["how"] == (
            f"rk-agent: pinned rk-agent=={__version__} (this rk-agent came from a package index)."
        )
        # installed from Git: a wheel packed from the installed files, which builds and scores
        url = "git+https://example.com/rk-agent.git"
        direct_url.write_text(json.dumps({"url": url, "vcs_info": {"vcs": "git"}}))
        site = dist_info.parent
        out = _run(python, WHERE_FROM, folder)
        assert out["how"] == (
            f"rk-agent: a wheel packed from the installed files in {site / 'rk_agent'}, at "
            f"{WHEEL} (rk-agent {__version__} here does not come from a package index, so the "
            "image installs this wheel, not a pin)."
        )
        again = tmp_path / "again"
        _run(
            python,
            WRITE.format(reward=f"{folder / 'my_rewards.py'}::exact", out=str(again)),
            folder,
        )
        _install(again, python)
        assert str(again / WHEEL) in direct_url.read_text()  # the packed wheel, installed
        assert _run(python, SCORE, again)["scores"] == [1.0, 0.0]
    finally:
        direct_url.write_text(recorded)
