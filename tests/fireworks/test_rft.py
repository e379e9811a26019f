"""RFT jobs against the fake API: the exact body, states and progress, cancel, list."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from rk_agent.errors import ConfigError, FireworksError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.datasets import upload_dataset
from rk_agent.fireworks.evaluators import deploy_reward
from rk_agent.fireworks.rft import (
    InferenceParameters,
    LossConfig,
    RFTJob,
    RFTJobConfig,
    TrainingConfig,
    WandbConfig,
    cancel_rft_job,
    create_rft_job,
    get_rft_job,
    list_rft_jobs,
    wait_for_rft_job,
)
from rk_agent.testing.fake_fireworks import FakeFireworks

ROWS = [{"messages": [{"role": "user", "content": "2+2?"}], "ground_truth": "4"}]
FULL = RFTJobConfig(
    training=TrainingConfig(
        base_model="qwen3-0p6b", output_model="my-model", epochs=2, learning_rate=2e-5,
        lora_rank=16, max_context_length=4096, batch_size=32768,
    ),
    inference=InferenceParameters(
        max_output_tokens=512, temperature=0.8, top_p=0.95, top_k=40, response_candidates_count=8,
    ),
    loss=LossConfig(method="GSPO_TOKEN", kl_beta=0.01),
    wandb=WandbConfig(api_key="wandb-SECRET-1", project="rft", entity="team"),
    display_name="my run",
    eval_auto_carveout=True,
    chunk_size=100,
)  # fmt: skip


@pytest.fixture
def ready(client: FireworksClient) -> None:
    upload_dataset(client, "d", ROWS, poll_s=0.01)
    deploy_reward("repetition", evaluator_id="e", client=client, poll_s=0.01)


def test_create_sends_the_documented_body(
    fake: FakeFireworks, client: FireworksClient, ready: None
) -> None:
    job = create_rft_job(client, dataset="d", evaluator="e", config=FULL, job_id="job-1")
    assert (job.name, job.state) == ("accounts/acme/reinforcementFineTuningJobs/job-1",
                                     "JOB_STATE_CREATING")  # fmt: skip
    request = fake.requests[-1]
    assert (request.method, request.path, request.query) == (
        "POST", "/v1/accounts/acme/reinforcementFineTuningJobs",
        {"reinforcementFineTuningJobId": "job-1"},
    )  # fmt: skip
    assert request.json == {
        "dataset": "accounts/acme/datasets/d",
        "evaluator": "accounts/acme/evaluators/e",
        "displayName": "my run",
        "evalAutoCarveout": True,
        "chunkSize": 100,
        "trainingConfig": {
            "baseModel": "accounts/fireworks/models/qwen3-0p6b",
            "outputModel": "accounts/acme/models/my-model",
            "epochs": 2, "learningRate": 2e-5, "loraRank": 16, "maxContextLength": 4096,
            "batchSize": 32768,
        },
        "inferenceParameters": {
            "maxOutputTokens": 512, "temperature": 0.8, "topP": 0.95, "topK": 40,
            "responseCandidatesCount": 8,
        },
        "lossConfig": {"method": "GSPO_TOKEN", "klBeta": 0.01},
        "wandbConfig": {"enabled": True, "apiKey": "wandb-SECRET-1", "project": "rft",
                        "entity": "team"},
    }  # fmt: skip
    assert "wandb-SECRET-1" not in repr(FULL)


def test_the_job_moves_through_its_states(
    fake: FakeFireworks, client: FireworksClient, ready: None
) -> None:
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    create_rft_job(client, dataset="d", evaluator="e", config=config, job_id="j")
    seen: list[tuple[str, float | None]] = []
    job = wait_for_rft_job(client, "j", poll_s=0.01, on_update=lambda j: seen.append(
        (j.short_state, j.percent)))  # fmt: skip
    assert seen == [("PENDING", 25.0), ("RUNNING", 50.0), ("RUNNING", 75.0),
                    ("COMPLETED", 100.0)]  # fmt: skip
    assert job.done and job.succeeded and job.output_model == "accounts/acme/models/j"
    assert job.completed_time is not None


def test_cancel(fake: FakeFireworks, client: FireworksClient, ready: None) -> None:
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    create_rft_job(client, dataset="d", evaluator="e", config=config, job_id="j")
    assert cancel_rft_job(client, "j").state == "JOB_STATE_CANCELLING"
    cancel = next(r for r in fake.requests if r.path.endswith(":cancel"))
    assert cancel.path == "/v1/accounts/acme/reinforcementFineTuningJobs/j:cancel"
    assert cancel.json == {}
    final = wait_for_rft_job(client, "accounts/acme/reinforcementFineTuningJobs/j", poll_s=0.01)
    assert final.state == "JOB_STATE_CANCELLED" and final.done and not final.succeeded
    with pytest.raises(FireworksError, match=re.escape("already ended (JOB_STATE_CANCELLED)")):
        cancel_rft_job(client, "j")


def test_a_job_needs_an_active_evaluator(fake: FakeFireworks, client: FireworksClient) -> None:
    fake.build_polls = 100
    upload_dataset(client, "d", ROWS, poll_s=0.01)
    deploy_reward("repetition", evaluator_id="e", client=client, wait=False)
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    with pytest.raises(FireworksError) as caught:
        create_rft_job(client, dataset="d", evaluator="e", config=config, job_id="j")
    assert caught.value.status == 400 and caught.value.api_message == (
        "failed precondition: evaluator 'e' is not ACTIVE (state BUILDING)"
    )


def test_creating_the_same_job_again_returns_it(
    fake: FakeFireworks, client: FireworksClient, ready: None
) -> None:
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    first = create_rft_job(client, dataset="d", evaluator="e", config=config, job_id="j")
    again = create_rft_job(client, dataset="d", evaluator="e", config=config, job_id="j")
    assert again.name == first.name and len(fake.jobs) == 1


def test_list_follows_pages(fake: FakeFireworks, client: FireworksClient, ready: None) -> None:
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    for i in range(5):
        create_rft_job(client, dataset="d", evaluator="e", config=config, job_id=f"j{i}")
    jobs = list_rft_jobs(client, page_size=2)
    assert [j.id for j in jobs] == ["j0", "j1", "j2", "j3", "j4"]
    pages = [r.query for r in fake.requests if r.method == "GET" and r.path.endswith("Jobs")]
    assert pages == [{"pageSize": "2"}, {"pageSize": "2", "pageToken": "2"},
                     {"pageSize": "2", "pageToken": "4"}]  # fmt: skip


def test_an_unknown_job(client: FireworksClient) -> None:
    with pytest.raises(FireworksError) as caught:
        get_rft_job(client, "nope")
    assert caught.value.status == 404 and str(caught.value) == (
        "Fireworks API GET /v1/accounts/acme/reinforcementFineTuningJobs/nope: HTTP 404: "
        "reinforcement fine-tuning job 'nope' not found"
    )


def test_config_problems_are_found_before_sending() -> None:
    message = (
        "an RFT job needs exactly one of --base-model (base_model, e.g. qwen3-0p6b) and "
        "--warm-start-from (warm_start_from, a fine-tune to continue); got "
    )
    with pytest.raises(ConfigError, match=re.escape(message + "neither.")):
        RFTJobConfig().job_body("d", "e")
    both = TrainingConfig(base_model="a", warm_start_from="accounts/me/models/b")
    with pytest.raises(ConfigError, match=re.escape(message + "both.")):
        RFTJobConfig(training=both).job_body("d", "e")
    with pytest.raises(ValidationError, match="response_candidates_count"):
        InferenceParameters(response_candidates_count=1)
    with pytest.raises(ValidationError, match="method"):
        LossConfig(method="PPO")  # type: ignore[arg-type]


def test_unknown_states_count_as_running() -> None:
    assert not RFTJob(state="JOB_STATE_SOMETHING_NEW").done
    assert RFTJob(state="JOB_STATE_EARLY_STOPPED").done


def test_a_job_create_whose_reply_was_lost_starts_one_job(
    fake: FakeFireworks, client: FireworksClient, ready: None
) -> None:
    fake.fail_next(504, "reply lost", path="reinforcementFineTuningJobs", lost_reply=True)
    config = RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b"))
    job = create_rft_job(client, dataset="d", evaluator="e", config=config, job_id="j")
    assert job.name == "accounts/acme/reinforcementFineTuningJobs/j" and len(fake.jobs) == 1
    upload_dataset(client, "d2", ROWS, poll_s=0.01)
    with pytest.raises(FireworksError) as caught:  # the id is taken by another job
        create_rft_job(client, dataset="d2", evaluator="e", config=config, job_id="j")
    assert caught.value.status == 409
