"""``--target gcp-cloud-run``: the exact ``gcloud`` command, run against a recording stand-in.

Google Cloud cannot be reached here, so ``gcloud`` is the recording stand-in of the conftest
(contract only): the argv below is what the documented ``gcloud run deploy`` reference takes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from rk_agent import __version__
from tests.selfhost.conftest import StandIns

KEY = "cloud-run-key-0123456789"
RK_AGENT = [sys.executable, "-m", "rk_agent"]


def deploy(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RK_AGENT, "deploy", *args, "--target", "gcp-cloud-run"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_deploys_the_build_context_with_the_key_from_secret_manager(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("gcloud")
    out = tmp_path / "ctx"
    done = deploy(f"{rewards_file}::exact", "-o", str(out), "--project", "my-proj",
                  "--region", "europe-west1", "--api-key-secret", "reward-key",
                  env=stand_ins.env())  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stand_ins.calls() == [{
        "argv": ["gcloud", "run", "deploy", "rk-reward-exact", "--source", str(out),
                 "--region", "europe-west1", "--project", "my-proj", "--port", "8080",
                 "--allow-unauthenticated", "--quiet",
                 "--set-secrets=RK_AGENT_SERVER_API_KEY=reward-key:latest"],
        "cwd": str(Path.cwd()),
    }]  # fmt: skip
    assert (out / "Dockerfile").is_file() and (out / "start.sh").is_file()
    ignored = (out / ".gcloudignore").read_text().splitlines()  # gcloud uploads none of these
    assert {".env", ".env.*", "*.pem", "id_rsa*", "token.*", ".aws"} <= set(ignored)
    assert done.stdout.splitlines()[-1] == f"Done: gcp-cloud-run deployment from {out}/."


def test_a_key_from_the_environment_is_passed_but_never_shown(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("gcloud")
    env = stand_ins.env(RK_AGENT_SERVER_API_KEY=KEY)
    done = deploy(f"{rewards_file}::exact", "-o", str(tmp_path / "ctx"), "--service", "s1",
                  env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [call] = stand_ins.calls()
    assert call["argv"][-1] == f"--set-env-vars=RK_AGENT_SERVER_API_KEY={KEY}"
    assert "$ gcloud run deploy s1 " in done.stdout
    assert "--set-env-vars=RK_AGENT_SERVER_API_KEY=***" in done.stdout
    assert KEY not in done.stdout + done.stderr


def test_dry_run_prints_every_file_and_the_command_and_runs_nothing(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("gcloud")
    out = tmp_path / "ctx"
    done = deploy(f"{rewards_file}::exact", "-o", str(out), "--dry-run", "--api-key", KEY,
                  env=stand_ins.env())  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stand_ins.calls() == [] and not out.exists()
    listed = re.findall(r"^  (\S+)  [\d,]+ bytes  sha256:[0-9a-f]{16}$", done.stdout, re.MULTILINE)
    assert listed == [
        ".dockerignore", ".gcloudignore", "Dockerfile", "main.py", "my_rewards.py",
        "overrides.txt", "requirements.txt", "start.sh",
        f"wheels/rk_agent-{__version__}-py3-none-any.whl",
    ]  # fmt: skip
    assert "FROM python:3.11-slim" not in done.stdout  # never the files' contents
    assert done.stdout.splitlines()[-2:] == [
        f"$ gcloud run deploy rk-reward-exact --source {out} --region us-central1 --port 8080 "
        "--allow-unauthenticated --quiet --set-env-vars=RK_AGENT_SERVER_API_KEY=***",
        f"Dry run: nothing was written to {out}/ and nothing was run (keys show as ***).",
    ]
    assert KEY not in done.stdout + done.stderr


def test_without_a_key_or_without_gcloud_it_says_what_to_do(
    rewards_file: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    env.pop("RK_AGENT_SERVER_API_KEY", None)
    no_key = deploy(f"{rewards_file}::exact", "-o", str(tmp_path / "a"), env=env)
    assert no_key.stderr.strip() == (
        "error: expected the server's API key as a Secret Manager secret (--api-key-secret "
        "NAME, preferred) or a value (--api-key or $RK_AGENT_SERVER_API_KEY), got neither. The "
        "container refuses to serve without one."
    )
    no_gcloud = deploy(f"{rewards_file}::exact", "-o", str(tmp_path / "b"),
                       "--api-key-secret", "k", env=env)  # fmt: skip
    assert no_gcloud.returncode == 2
    assert no_gcloud.stderr.strip().startswith("error: expected `gcloud` on PATH to run `gcloud")
    assert no_gcloud.stderr.strip().endswith(
        "but it is not installed. Install the Google Cloud CLI and run `gcloud auth login`. Or "
        "pass --dry-run to print the commands and files without running them."
    )


def test_a_failing_gcloud_fails_the_deploy_with_its_status(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("gcloud")
    done = deploy(f"{rewards_file}::exact", "-o", str(tmp_path / "ctx"), "--api-key-secret",
                  "k", env=stand_ins.env(STAND_IN_EXIT="3"))  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "exited with status 3; its output above says why. Fix that and deploy again (the "
        "generated files are kept)."
    )


def test_an_option_of_another_target_is_refused(rewards_file: Path, tmp_path: Path) -> None:
    done = deploy(f"{rewards_file}::exact", "--build", "--api-key-secret", "k",
                  env=dict(os.environ))  # fmt: skip
    assert done.stderr.strip() == (
        "error: --target gcp-cloud-run takes --output, --region, --project, --service, "
        "--api-key, --api-key-secret (and --id, --requirement, --include, --dry-run), not "
        "--build. Drop --build."
    )


def test_a_file_holding_the_key_given_on_the_command_line_is_not_packed(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("gcloud")
    rewards_file.write_text(rewards_file.read_text() + f"\n# the key, pasted: {KEY}\n")
    out = tmp_path / "ctx"
    done = deploy(f"{rewards_file}::exact", "-o", str(out), "--dry-run", "--api-key", KEY,
                  env=stand_ins.env())  # fmt: skip
    assert done.returncode == 2 and stand_ins.calls() == [] and not out.exists()
    assert f"expected {rewards_file} to hold no credentials" in done.stderr
    assert "a key given on the command line" in done.stderr
    assert KEY not in done.stdout + done.stderr
