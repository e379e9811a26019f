"""One call from a run directory and a reward to a running RFT job, against the fake API."""

from __future__ import annotations

from pathlib import Path

from rk_agent.fireworks.auth import Credentials
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.dry_run import PlannedRequest
from rk_agent.fireworks.launch import launch_rft
from rk_agent.fireworks.rft import RFTJobConfig, TrainingConfig, WandbConfig
from rk_agent.testing.fake_fireworks import FakeFireworks
from tests.fireworks.conftest import SECRET
from tests.fireworks.test_rft_data import make_run

CONFIG = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b", epochs=1))


def test_launch_from_a_run_directory(
    fake: FakeFireworks, client: FireworksClient, reward_file: Path, tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run", tasks=3, group_size=4)
    steps: list[str] = []
    launch = launch_rft(run.path, f"{reward_file}::exact", config=CONFIG, client=client,
                        job_id="job-1", poll_s=0.01, on_step=steps.append)  # fmt: skip
    dataset_id = launch.dataset.id
    assert dataset_id.startswith("exact-rft-") and len(launch.rows.rows) == 3
    assert launch.job.name == "accounts/acme/reinforcementFineTuningJobs/job-1"
    assert launch.deployment.evaluator.state == "ACTIVE"
    assert fake.calls() == [
        "GET /v1/accounts/acme/evaluators/exact",
        "POST /v1/accounts/acme/evaluatorsV2",
        "POST /v1/accounts/acme/evaluators/exact:getUploadEndpoint",
        "PUT /_signed/…",
        "POST /v1/accounts/acme/evaluators/exact:validateUpload",
        f"GET /v1/accounts/acme/datasets/{dataset_id}",
        "POST /v1/accounts/acme/datasets",
        f"POST /v1/accounts/acme/datasets/{dataset_id}:upload",
        f"GET /v1/accounts/acme/datasets/{dataset_id}",
        f"GET /v1/accounts/acme/datasets/{dataset_id}",
        "GET /v1/accounts/acme/evaluators/exact",
        "GET /v1/accounts/acme/evaluators/exact",
        "POST /v1/accounts/acme/reinforcementFineTuningJobs",
    ]
    uploaded = fake.files[f"datasets/{dataset_id}"].decode().splitlines()
    assert len(uploaded) == 3 and '"tools":[{"type":"function"' in uploaded[0]
    assert fake.jobs["job-1"]["dataset"] == f"accounts/acme/datasets/{dataset_id}"
    assert steps == [
        "deploying reward 'exact' as evaluator 'exact'",
        f"uploading 3 rows as dataset {dataset_id!r}",
        "waiting for evaluator 'exact' to build (usually a few minutes)",
        "creating RFT job 'job-1'",
    ]

    # Again: the dataset and evaluator are reused; only a new job is made.
    before = len(fake.requests)
    again = launch_rft(run.path, f"{reward_file}::exact", config=CONFIG, client=client,
                       poll_s=0.01)  # fmt: skip
    assert again.dataset.id == dataset_id and again.deployment.action == "unchanged"
    assert [c.split(" ")[0] + " " + c.rsplit("/", 1)[-1] for c in fake.calls()[before:]] == [
        "GET exact", f"GET {dataset_id}", "POST reinforcementFineTuningJobs",
    ]  # fmt: skip
    assert again.job.id.startswith("exact-rft-") and len(fake.jobs) == 2


def test_a_dry_run_sends_nothing_and_shows_no_secret(
    fake: FakeFireworks, reward_file: Path, tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run", tasks=2)
    shown: list[PlannedRequest] = []
    creds = Credentials(SECRET, "acme", fake.url, "FIREWORKS_API_KEY")
    config = CONFIG.model_copy(update={"wandb": WandbConfig(api_key="wandb-SECRET-2")})
    with FireworksClient(creds, dry_run=True, on_request=shown.append) as client:
        launch = launch_rft(run.path, f"{reward_file}::exact", config=config, client=client,
                            job_id="j")  # fmt: skip
    assert fake.requests == []
    assert launch.job.name == "accounts/acme/reinforcementFineTuningJobs/j"
    assert [f"{p.method} {p.url.rsplit('/', 1)[-1]}" for p in shown] == [
        "GET exact", "POST evaluatorsV2", "POST exact:getUploadEndpoint",
        "PUT <signed URL returned by :getUploadEndpoint>", "POST exact:validateUpload",
        f"GET {launch.dataset.id}", "POST datasets", f"POST {launch.dataset.id}:upload",
        f"GET {launch.dataset.id}", "GET exact",
        "POST reinforcementFineTuningJobs?reinforcementFineTuningJobId=j",
    ]  # fmt: skip
    text = "\n".join(p.describe() for p in shown)
    assert SECRET not in text and "wandb-SECRET-2" not in text
    assert shown[-1].json["wandbConfig"] == {"enabled": True, "apiKey": "***"}
