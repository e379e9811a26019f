"""``rk-agent deploy --target``: names, options that belong to another target, dry runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rk_agent import __version__
from rk_agent.errors import ConfigError
from rk_agent.selfhost.context import Command, render_context
from rk_agent.selfhost.docker import docker_context

RK_AGENT = [sys.executable, "-m", "rk_agent"]


def rk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RK_AGENT, *args], capture_output=True, text=True, timeout=120)


def test_an_unknown_target_gets_the_closest_name(rewards_file: Path) -> None:
    done = rk("deploy", f"{rewards_file}::exact", "--target", "dokcer")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: unknown deploy target 'dokcer'. Did you mean 'docker'? Known deploy targets: "
        "aws-lambda, docker, fireworks, gcp-cloud-run. Pass target=... with one of these names."
    )


def test_metric_folders_are_for_fireworks_only(tmp_path: Path) -> None:
    folder = tmp_path / "relevance"
    folder.mkdir()
    (folder / "main.py").write_text("def evaluate(messages, **kwargs):\n    return 1.0\n")
    done = rk("deploy", "--metrics-folders", f"relevance={folder}", "--target", "docker")
    assert done.stderr.strip() == (
        "error: expected a reward for --target docker, got --metrics-folders, which only the "
        "fireworks target takes. Wrap the folders in one reward file, or deploy to Fireworks."
    )


def test_docker_dry_run_prints_the_files_and_writes_nothing(
    rewards_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ctx"
    done = rk("deploy", f"{rewards_file}::exact", "--target", "docker", "-o", str(out),
              "--dry-run", "--build")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not out.exists()
    assert f"--- {out / 'Dockerfile'}\n# Serves reward 'exact' with `rk-agent serve`" in done.stdout
    assert f"--- {out / 'requirements.txt'}\nrk-agent=={__version__}\n" in done.stdout
    assert done.stdout.splitlines()[-2:] == [
        f"$ docker build -t rk-reward-exact {out}",
        f"Dry run: nothing was written to {out}/ and nothing was run (keys show as ***).",
    ]


def test_the_rewards_requirements_follow_the_pinned_rk_agent(tmp_path: Path) -> None:
    path = tmp_path / "needs.py"
    path.write_text(
        "from rk_agent import reward_function\n\n\n"
        "@reward_function(requirements=['sympy>=1.12'])\n"
        "def symbolic(response: str) -> float:\n    return 1.0\n"
    )
    context = render_context(f"{path}::symbolic", requirements=["numpy"], rk_agent="rk-agent @ ./w")
    assert context.files["requirements.txt"] == "rk-agent @ ./w\nsympy>=1.12\nnumpy\n"


def test_a_command_never_shows_its_secrets_or_the_environments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command = Command(("tool", "--key=abcdefgh123456", "--other", "zzzzzzzz99"),
                      secrets=("abcdefgh123456",), cwd="some dir")  # fmt: skip
    assert command.shown() == "cd 'some dir' && tool --key=*** --other zzzzzzzz99"
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "zzzzzzzz99")  # a secret by its name
    assert command.shown() == "cd 'some dir' && tool --key=*** --other ***"


def test_a_reward_file_named_like_a_generated_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "start.sh").write_text("echo mine\n")
    path = tmp_path / "exact.py"
    path.write_text("def exact(response: str) -> float:\n    return 1.0\n")
    with pytest.raises(ConfigError) as caught:
        docker_context(f"{path}::exact", include=[tmp_path / "start.sh"])
    assert str(caught.value) == (
        "expected the reward's files to leave start.sh to the build context, but reward "
        "'exact' brings a file of that name. Rename it (or move it into a folder)."
    )
