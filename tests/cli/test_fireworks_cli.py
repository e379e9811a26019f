"""``rk-agent deploy`` and ``rk-agent fireworks ...`` end to end, FIREWORKS_API_BASE at the fake.

The commands run in-process through typer's runner on the real ``rk-agent`` app, with real HTTP
to the fake API on loopback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rk_agent.cli import fireworks
from rk_agent.cli.app import app
from rk_agent.errors import ConfigError, FireworksError
from rk_agent.testing.fake_fireworks import FakeFireworks
from tests.fireworks.conftest import REWARD_SOURCE
from tests.fireworks.test_rft_data import make_run

SECRET = "fw-CLI-SECRET-0123456789"
WANDB = "wandb-CLI-SECRET-42"


@pytest.fixture
def fake() -> Iterator[FakeFireworks]:
    with FakeFireworks(api_key=SECRET, account_id="acme") as server:
        yield server


@pytest.fixture
def env(fake: FakeFireworks, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return {
        "FIREWORKS_API_KEY": SECRET, "FIREWORKS_API_BASE": fake.url, "HOME": str(tmp_path / "home"),
        "FIREWORKS_ACCOUNT_ID": "", "FIREWORKS_PROFILE": "", "FIREWORKS_AUTH_FILE": "",
        "WANDB_API_KEY": WANDB, "COLUMNS": "200",
    }  # fmt: skip


@pytest.fixture
def reward(tmp_path: Path) -> str:
    (tmp_path / "my_rewards.py").write_text(REWARD_SOURCE)
    return f"{tmp_path / 'my_rewards.py'}::exact"


def rk(*args: str, env: dict[str, str]) -> Result:
    result = CliRunner().invoke(app, list(args), env=env)
    assert SECRET not in result.output and WANDB not in result.output
    if result.exception is not None:
        assert SECRET not in str(result.exception)
    return result


def test_rft_from_a_run_directory_to_a_completed_job(
    fake: FakeFireworks, env: dict[str, str], reward: str, tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run", tasks=3, group_size=2)
    out = rk(
        "fireworks", "rft", "--from", str(run.path), "--reward", reward,
        "--base-model", "qwen3-0p6b", "--output-model", "math-rft", "--epochs", "2",
        "--learning-rate", "5e-5", "--group-size", "6", "--temperature", "0.9", "--loss", "grpo",
        "--wandb-project", "rft", "--job-id", "job-7", "--poll", "0.01", env=env,
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "3 rows (one per task) from 6 trajectories in " in out.output
    assert "tools of env 'tools' (6)." in out.output
    assert "Started RFT job accounts/acme/reinforcementFineTuningJobs/job-7 (CREATING)." in (
        out.output
    )
    assert "Job job-7 completed. Trained model: accounts/acme/models/math-rft." in out.output
    assert fake.calls()[0] == "GET /verifyApiKey"
    body = next(r.json for r in fake.requests if r.path.endswith("reinforcementFineTuningJobs"))
    assert body["trainingConfig"] == {
        "baseModel": "accounts/fireworks/models/qwen3-0p6b",
        "outputModel": "accounts/acme/models/math-rft", "epochs": 2, "learningRate": 5e-5,
    }  # fmt: skip
    assert body["inferenceParameters"] == {"temperature": 0.9, "responseCandidatesCount": 6}
    assert body["lossConfig"] == {"method": "GRPO"}
    assert body["wandbConfig"] == {"enabled": True, "apiKey": WANDB, "project": "rft"}


def test_dry_run_never_breaks_a_url_in_a_narrow_terminal(
    fake: FakeFireworks, env: dict[str, str], reward: str, tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run", tasks=2)
    out = rk(
        "fireworks", "rft", "--from", str(run.path), "--reward", reward,
        "--base-model", "qwen3-0p6b", "--job-id", "j", "--dry-run",
        env={**env, "FIREWORKS_API_KEY": "", "COLUMNS": "60"},
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    urls = re.findall(r"^(?:GET|POST|PUT|DELETE) (\S+)", out.output, re.MULTILINE)
    long = [u for u in urls if len(u) > 60]
    assert long and all(u.startswith(fake.url) for u in long)
    assert f"{fake.url}/v1/accounts/ACCOUNT_ID/evaluators/exact:getUploadEndpoint" in urls


def test_rft_dry_run_prints_every_request_and_sends_none(
    fake: FakeFireworks, env: dict[str, str], reward: str, tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run", tasks=2)
    out = rk(
        "fireworks", "rft", "--from", str(run.path), "--reward", reward,
        "--base-model", "qwen3-0p6b", "--wandb-project", "rft", "--job-id", "j", "--dry-run",
        env={**env, "FIREWORKS_API_KEY": ""},  # no key needed to look
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert fake.requests == []
    assert out.output.startswith("Dry run: nothing is sent.")
    requests = re.findall(r"^(GET|POST|PUT|DELETE) (\S+)", out.output, re.MULTILINE)
    base = f"{fake.url}/v1/accounts/ACCOUNT_ID"
    dataset = next(u for m, u in requests if m == "POST" and u.endswith(":upload"))
    dataset = dataset.removeprefix(f"{base}/datasets/").removesuffix(":upload")
    assert requests == [
        ("GET", f"{fake.url}/verifyApiKey"),
        ("GET", f"{base}/evaluators/exact"),
        ("POST", f"{base}/evaluatorsV2"),
        ("POST", f"{base}/evaluators/exact:getUploadEndpoint"),
        ("PUT", "<signed"),
        ("POST", f"{base}/evaluators/exact:validateUpload"),
        ("GET", f"{base}/datasets/{dataset}"),
        ("POST", f"{base}/datasets"),
        ("POST", f"{base}/datasets/{dataset}:upload"),
        ("GET", f"{base}/datasets/{dataset}"),
        ("GET", f"{base}/evaluators/exact"),
        ("POST", f"{base}/reinforcementFineTuningJobs?reinforcementFineTuningJobId=j"),
    ]
    assert out.output.count("Authorization: Bearer ***") == 11
    assert '"apiKey": "***"' in out.output and '"exampleCount": "2"' in out.output
    assert "first row: {" in out.output


def test_a_failed_job_exits_1(env: dict[str, str], reward: str, tmp_path: Path) -> None:
    states = ("JOB_STATE_CREATING", "JOB_STATE_RUNNING", "JOB_STATE_FAILED")
    with FakeFireworks(api_key=SECRET, account_id="acme", job_states=states) as failing:
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text(json.dumps({"prompt": "2+2?", "ground_truth": "4"}) + "\n")
        out = rk(
            "fireworks", "rft", "--from", str(tasks), "--reward", reward,
            "--base-model", "qwen3-0p6b", "--poll", "0.01",
            env={**env, "FIREWORKS_API_BASE": failing.url},
        )  # fmt: skip
    assert out.exit_code == fireworks.EXIT_JOB_FAILED
    assert re.search(r"Job exact-rft-\w+ ended FAILED\.", out.output)


def test_deploy_then_status_of_its_build(
    fake: FakeFireworks, env: dict[str, str], reward: str
) -> None:
    out = rk("deploy", "--id", "my-eval", reward, "--poll", "0.01", env=env)
    assert out.exit_code == 0, out.output
    assert out.output.strip() == (
        "Evaluator accounts/acme/evaluators/my-eval created (ACTIVE); entry point "
        "main.py::evaluate, requirements: pydantic>=2.7, regex>=2024.1."
    )
    again = rk("deploy", "--id", "my-eval", reward, env=env)
    assert "my-eval unchanged (ACTIVE)" in again.output
    fake.fail_build("ERROR: No matching distribution found for regex>=2024.1")
    failed = rk("deploy", "--id", "other", reward, "--poll", "0.01", env=env)
    assert isinstance(failed.exception, FireworksError)
    assert str(failed.exception).endswith(
        "--- build log (tail) ---\nERROR: No matching distribution found for regex>=2024.1"
    )


def test_deploy_dry_run(fake: FakeFireworks, env: dict[str, str], reward: str) -> None:
    out = rk("deploy", reward, "--dry-run", env=env)
    assert out.exit_code == 0 and fake.requests == []
    assert "Would upload exact.tar.gz (" in out.output
    assert "main.py, my_rewards.py, requirements.txt and the rk-agent reward modules" in (
        out.output
    )


def test_deploy_says_what_it_left_out_and_what_force_replaced(
    fake: FakeFireworks, env: dict[str, str], reward: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "words.txt").write_text("a\n")
    (data / ".env").write_text("FIREWORKS_API_KEY=fw-live-key\n")
    dry = rk("deploy", reward, "--include", str(data), "--dry-run", env=env)
    assert dry.exit_code == 0, dry.output
    assert f"Left out: {data / '.env'} (an .env file)\n(Name a file with --include" in dry.output
    assert "data/words.txt" in dry.output and fake.requests == []
    assert rk("deploy", "--id", "ev", reward, "--poll", "0.01", env=env).exit_code == 0
    source = Path(reward.split("::")[0])
    source.write_text(source.read_text().replace("1.0 when", "One when"))
    forced = rk("deploy", "--id", "ev", reward, "--force", "--poll", "0.01", env=env)
    assert forced.exit_code == 0, forced.output
    assert "Replaced evaluator accounts/acme/evaluators/ev (display name 'ev', state ACTIVE, " in (
        " ".join(forced.output.split())
    )
    assert "evaluators/ev replaced (ACTIVE)" in forced.output


def test_status_cancel_and_list(
    fake: FakeFireworks, env: dict[str, str], reward: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "2+2?", "ground_truth": "4"}) + "\n")
    started = rk(
        "fireworks", "rft", "--from", str(tasks), "--reward", reward, "--base-model",
        "qwen3-0p6b", "--job-id", "j1", "--no-follow", "--poll", "0.01", env=env,
    )  # fmt: skip
    assert "Follow it with `rk-agent fireworks status j1`." in started.output
    status = rk("fireworks", "status", "j1", env=env)
    assert status.exit_code == 0
    assert re.search(r"state\s+│ PENDING", status.output)
    assert "accounts/fireworks/models/qwen3-0p6b" in status.output
    as_json = json.loads(rk("fireworks", "status", "j1", "--json", env=env).output)
    assert as_json["name"] == "accounts/acme/reinforcementFineTuningJobs/j1"
    cancelled = rk("fireworks", "cancel", "j1", env=env)
    assert cancelled.output.strip() == "Cancelling job j1: now CANCELLING."
    listed = rk("fireworks", "list", env=env)
    assert re.search(r"│ j1 +│ CANCELLING", listed.output)


def test_preview_on_the_service(env: dict[str, str], reward: str, tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    samples.write_text(json.dumps({"messages": chat, "ground_truth": "4"}) + "\n")
    out = rk("fireworks", "preview", "--reward", reward, "--samples", str(samples), env=env)
    assert out.exit_code == 0, out.output
    assert re.search(r"│ 0 │ 1\.000 │ yes │", out.output)


def test_a_wrong_key_shows_the_api_message(env: dict[str, str]) -> None:
    out = rk("fireworks", "status", "j1", env={**env, "FIREWORKS_API_KEY": "fw-wrong-0000000"})
    assert isinstance(out.exception, FireworksError)
    assert str(out.exception) == (
        "could not look up the account of the API key: Fireworks API GET /verifyApiKey: HTTP "
        "401: unauthenticated: invalid API key (check the API key; it came from "
        "FIREWORKS_API_KEY, and the account (looked up from the key))"
    )


def test_bad_options_are_reported_before_anything_is_sent(
    fake: FakeFireworks, env: dict[str, str], reward: str, tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run", tasks=1)
    out = rk("fireworks", "rft", "--from", str(run.path), "--reward", reward, "--loss", "ppo",
             "--base-model", "m", env=env)  # fmt: skip
    assert isinstance(out.exception, ConfigError)
    assert str(out.exception).startswith("--loss ppo: Input should be 'METHOD_")
    typo = rk("fireworks", "rft", "--from", str(run.path), "--reward", reward, "--loss", "grpp",
              "--base-model", "m", env=env)  # fmt: skip
    assert str(typo.exception).endswith("or 'GSPO_TOKEN'. Did you mean 'GRPO'?")
    epochs = rk("fireworks", "rft", "--from", str(run.path), "--reward", reward, "--epochs", "0",
                "--base-model", "m", env=env)  # fmt: skip
    assert str(epochs.exception) == "--epochs 0: Input should be greater than or equal to 1."
    missing = rk("fireworks", "rft", "--from", str(run.path), "--reward", reward, env=env)
    assert "needs exactly one of --base-model (base_model, e.g. qwen3-0p6b) and " in str(
        missing.exception
    )
    assert fake.requests == []


@pytest.mark.slow  # deploys and serves a reward, then runs a job on the fake API: ~30 s
def test_rft_with_a_self_hosted_reward_endpoint(
    fake: FakeFireworks, env: dict[str, str], tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "2+2?", "ground_truth": "4"}) + "\n")
    url = "https://rewards.example.com/evaluate"
    out = rk(
        "fireworks", "rft", "--from", str(tasks), "--reward-endpoint", url,
        "--base-model", "qwen3-0p6b", "--job-id", "job-e", "--no-follow", env=env,
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    evaluator = next(iter(fake.evaluators))
    assert evaluator.startswith("endpoint-rewards-example-com-")
    assert f"· deploying reward endpoint {url} as evaluator {evaluator!r}" in out.output
    assert "Started RFT job accounts/acme/reinforcementFineTuningJobs/job-e" in out.output
    assert fake.jobs["job-e"]["evaluator"] == f"accounts/acme/evaluators/{evaluator}"
    both = rk("fireworks", "rft", "--from", str(tasks), "--reward", "format",
              "--reward-endpoint", url, "--base-model", "m", env=env)  # fmt: skip
    assert isinstance(both.exception, ConfigError)
    assert "expected --reward or --reward-endpoint, exactly one; got both" in str(both.exception)
    neither = rk("fireworks", "rft", "--from", str(tasks), "--base-model", "m", env=env)
    assert "exactly one; got neither" in str(neither.exception)
