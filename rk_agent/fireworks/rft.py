"""Fireworks reinforcement fine-tuning (RFT) jobs: create, get, list, wait, cancel.

Main names: `RFTJobConfig`, `TrainingConfig`, `InferenceParameters`, `LossConfig`,
`WandbConfig`, `RFTJob`, `create_rft_job`, `get_rft_job`, `list_rft_jobs`, `cancel_rft_job`,
`wait_for_rft_job`, `TERMINAL_STATES`, `qualify_model`.

A job is ``POST /v1/accounts/{a}/reinforcementFineTuningJobs?reinforcementFineTuningJobId=<id>``
with the dataset and evaluator names, ``trainingConfig`` (base model, output model, epochs,
learning rate, LoRA rank, ...), ``inferenceParameters`` (the rollouts' sampling), ``lossConfig``
(GRPO, DAPO, GSPO_TOKEN, ...) and ``wandbConfig``. The configuration classes take snake_case
names in Python and write the API's camelCase; unset fields are left out, so the service's
documented defaults apply (1 epoch, learning rate 1e-4, LoRA rank 8, 4 responses per prompt).

Job states carry the ``JOB_STATE_`` prefix; ``COMPLETED``, ``FAILED``, ``CANCELLED``,
``EXPIRED``, ``EARLY_STOPPED`` and ``DELETED`` end a job, and states not known here count as
still running.

Example:
    >>> config = RFTJobConfig(
    ...     training=TrainingConfig(base_model="qwen3-0p6b", epochs=2, learning_rate=1e-4),
    ...     inference=InferenceParameters(temperature=0.7, response_candidates_count=4),
    ...     loss=LossConfig(method="GRPO"),
    ... )
    >>> body = config.job_body("accounts/me/datasets/d", "accounts/me/evaluators/e")
    >>> body["trainingConfig"]
    {'baseModel': 'accounts/fireworks/models/qwen3-0p6b', 'epochs': 2, 'learningRate': 0.0001}
    >>> body["inferenceParameters"], body["lossConfig"]
    ({'temperature': 0.7, 'responseCandidatesCount': 4}, {'method': 'GRPO'})
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator

from rk_agent.errors import ConfigError, FireworksError
from rk_agent.fireworks.client import ApiModel, FireworksClient
from rk_agent.fireworks.datasets import ApiStatus

__all__ = [
    "SUCCESS_STATE",
    "TERMINAL_STATES",
    "InferenceParameters",
    "JobProgress",
    "LossConfig",
    "RFTJob",
    "RFTJobConfig",
    "TrainingConfig",
    "WandbConfig",
    "cancel_rft_job",
    "create_rft_job",
    "get_rft_job",
    "list_rft_jobs",
    "new_job_id",
    "qualify_model",
    "wait_for_rft_job",
]

SUCCESS_STATE = "JOB_STATE_COMPLETED"
TERMINAL_STATES = frozenset(
    {
        "JOB_STATE_COMPLETED",
        "JOB_STATE_FAILED",
        "JOB_STATE_CANCELLED",
        "JOB_STATE_EXPIRED",
        "JOB_STATE_EARLY_STOPPED",
        "JOB_STATE_DELETED",
    }
)
"""States that end a job. Any other state, known or not, means it is still going."""

LossMethod = Literal["METHOD_UNSPECIFIED", "GRPO", "DAPO", "DPO", "ORPO", "GSPO_TOKEN"]


def qualify_model(model: str, account: str = "fireworks") -> str:
    """A model's full name: ``qwen3-0p6b`` -> ``accounts/fireworks/models/qwen3-0p6b``.

    Example:
        >>> qualify_model("my-rft-model", account="me")
        'accounts/me/models/my-rft-model'
    """
    return model if model.startswith("accounts/") else f"accounts/{account}/models/{model}"


class TrainingConfig(ApiModel):
    """``trainingConfig``: what is trained, and how.

    Give ``base_model`` or ``warm_start_from`` (a LoRA to continue), not both. Bare model names
    are qualified: ``qwen3-0p6b`` -> ``accounts/fireworks/models/qwen3-0p6b``.

    Attributes:
        base_model: the model to fine-tune.
        warm_start_from: a previous fine-tune to start from.
        output_model: the name of the model the job produces (qualified with your account by
            `create_rft_job`).
        epochs, learning_rate, lora_rank, max_context_length: the usual.
        batch_size: tokens per packed batch.
        batch_size_samples: samples per batch.
        gradient_accumulation_steps, learning_rate_warmup_steps: the usual.
        optimizer_weight_decay, jinja_template, region: passed through as given.
    """

    base_model: str | None = None
    warm_start_from: str | None = None
    output_model: str | None = None
    epochs: int | None = Field(default=None, ge=1)
    learning_rate: float | None = Field(default=None, gt=0)
    lora_rank: int | None = Field(default=None, ge=1)
    max_context_length: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)
    batch_size_samples: int | None = Field(default=None, ge=1)
    gradient_accumulation_steps: int | None = Field(default=None, ge=1)
    learning_rate_warmup_steps: int | None = Field(default=None, ge=0)
    optimizer_weight_decay: float | None = None
    jinja_template: str | None = None
    region: str | None = None

    @field_validator("base_model", "warm_start_from")
    @classmethod
    def _qualify(cls, value: str | None) -> str | None:
        return None if value is None else qualify_model(value)


class InferenceParameters(ApiModel):
    """``inferenceParameters``: how the rollouts sample (current field names).

    Attributes:
        max_output_tokens: tokens per response.
        temperature, top_p, top_k: sampling.
        response_candidates_count: responses per prompt (the GRPO group; at least 2).
        extra_body: extra request fields, as a JSON string.
    """

    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    response_candidates_count: int | None = Field(default=None, ge=2)
    extra_body: str | None = None


class LossConfig(ApiModel):
    """``lossConfig``: the policy-gradient method and its KL penalty."""

    method: LossMethod | None = None
    kl_beta: float | None = Field(default=None, ge=0)


class WandbConfig(ApiModel):
    """``wandbConfig``: log the job to Weights & Biases.

    The key is sent to Fireworks (it logs for you) but never shown: dry runs print ``***``.
    """

    enabled: bool | None = True
    api_key: str | None = Field(default=None, repr=False)
    project: str | None = None
    entity: str | None = None
    run_id: str | None = None


class RFTJobConfig(ApiModel):
    """Everything about an RFT job except its dataset and evaluator.

    Attributes:
        training: ``trainingConfig``.
        inference: ``inferenceParameters``.
        loss: ``lossConfig``.
        wandb: ``wandbConfig``.
        display_name: shown in the console.
        evaluation_dataset: a dataset name for evaluation.
        eval_auto_carveout: carve an evaluation split out of the dataset.
        chunk_size: rows per rollout chunk (1 to 10,000).
        max_concurrent_rollouts, max_concurrent_evaluations: concurrency limits.
        max_inference_replica_count, node_count, mcp_server: passed through as given.
        extra: more top-level fields, sent as they are (camelCase), for what is not modelled.
    """

    training: TrainingConfig = Field(default_factory=TrainingConfig)
    inference: InferenceParameters | None = None
    loss: LossConfig | None = None
    wandb: WandbConfig | None = None
    display_name: str | None = None
    evaluation_dataset: str | None = None
    eval_auto_carveout: bool | None = None
    chunk_size: int | None = Field(default=None, ge=1, le=10_000)
    max_concurrent_rollouts: int | None = Field(default=None, ge=1)
    max_concurrent_evaluations: int | None = Field(default=None, ge=1)
    max_inference_replica_count: int | None = Field(default=None, ge=1)
    node_count: int | None = Field(default=None, ge=1)
    mcp_server: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    def job_body(self, dataset: str, evaluator: str) -> dict[str, Any]:
        """The request body, camelCase, unset fields left out.

        Raises:
            ConfigError: neither or both of ``base_model`` and ``warm_start_from`` are set.
        """
        training = self.training
        if (training.base_model is None) == (training.warm_start_from is None):
            got = "neither" if training.base_model is None else "both"
            raise ConfigError(
                "an RFT job needs exactly one of --base-model (base_model, e.g. qwen3-0p6b) and "
                f"--warm-start-from (warm_start_from, a fine-tune to continue); got {got}."
            )
        top = self.model_dump(
            mode="json", by_alias=True, exclude_none=True,
            exclude={"training", "inference", "loss", "wandb", "extra"},
        )  # fmt: skip
        body: dict[str, Any] = {"dataset": dataset, "evaluator": evaluator, **top}
        body["trainingConfig"] = training.to_api()
        for key, part in (
            ("inferenceParameters", self.inference),
            ("lossConfig", self.loss),
            ("wandbConfig", self.wandb),
        ):
            if part is not None and part.to_api():
                body[key] = part.to_api()
        body.update(self.extra)
        return body


class JobProgress(ApiModel):
    """``jobProgress``: how far the job is."""

    percent: float | None = None
    epoch: int | None = None


class RFTJob(ApiModel):
    """An RFT job as the API returns it.

    Attributes:
        name: ``accounts/{account}/reinforcementFineTuningJobs/{id}``.
        state: ``JOB_STATE_...``.
        status: the API's status (why it failed).
        job_progress: percent and epoch, while it runs.
        dataset, evaluator: the names it uses.
        training_config: as the service holds it (``outputModel`` names the result).
        create_time, completed_time: timestamps.
    """

    name: str = ""
    state: str = "JOB_STATE_UNSPECIFIED"
    status: ApiStatus | None = None
    job_progress: JobProgress | None = None
    dataset: str | None = None
    evaluator: str | None = None
    display_name: str | None = None
    training_config: dict[str, Any] | None = None
    create_time: str | None = None
    completed_time: str | None = None

    @property
    def id(self) -> str:
        """The last part of the name."""
        return self.name.rsplit("/", 1)[-1]

    @property
    def done(self) -> bool:
        """Whether the job has ended (in any terminal state)."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        """Whether it ended ``JOB_STATE_COMPLETED``."""
        return self.state == SUCCESS_STATE

    @property
    def output_model(self) -> str | None:
        """The model the job produces."""
        return (self.training_config or {}).get("outputModel")

    @property
    def percent(self) -> float | None:
        """Progress in percent, when the service reports it."""
        return self.job_progress.percent if self.job_progress else None

    @property
    def short_state(self) -> str:
        """The state without its prefix: ``RUNNING``."""
        return self.state.removeprefix("JOB_STATE_")


def new_job_id(prefix: str = "rk-rft") -> str:
    """A fresh job id (chosen here, so a retried create cannot start a second job).

    Example:
        >>> new_job_id("math").startswith("math-")
        True
    """
    return f"{prefix[:50].strip('-')}-{secrets.token_hex(4)}"


def create_rft_job(
    client: FireworksClient,
    *,
    dataset: str,
    evaluator: str,
    config: RFTJobConfig,
    job_id: str | None = None,
) -> RFTJob:
    """Create (start) an RFT job.

    Args:
        client: the API client.
        dataset: a dataset id or name (``accounts/.../datasets/...``).
        evaluator: an evaluator id or name.
        config: the job's configuration. A bare ``output_model`` gets your account's prefix.
        job_id: the job's id (default: `new_job_id`).

    Raises:
        ConfigError: the configuration is incomplete.
        FireworksError: the API refused (the message says why: a dataset not READY, an
            evaluator not ACTIVE, a model that does not exist, ...).
    """
    training = config.training
    if training.output_model is not None:
        qualified = qualify_model(training.output_model, client.account_id)
        config = config.model_copy(
            update={"training": training.model_copy(update={"output_model": qualified})}
        )
    body = config.job_body(
        client.resource_name("datasets", dataset), client.resource_name("evaluators", evaluator)
    )
    job_id = job_id or new_job_id()
    path = client.account_path("reinforcementFineTuningJobs")
    try:
        answer = client.request(
            "POST", path, json=body, params={"reinforcementFineTuningJobId": job_id}
        )
    except FireworksError as exc:
        # A create that timed out may have succeeded before it was retried: the same job
        # (same dataset and evaluator) under our id is that one.
        if exc.status == 409:
            job = get_rft_job(client, job_id)
            if job.dataset == body["dataset"] and job.evaluator == body["evaluator"]:
                return job
        raise
    return RFTJob.model_validate(answer or {})


def get_rft_job(client: FireworksClient, job_id: str) -> RFTJob:
    """The job.

    Raises:
        FireworksError: there is no such job (404), or the API failed.
    """
    body = client.request("GET", client.account_path(f"reinforcementFineTuningJobs/{_id(job_id)}"))
    return RFTJob.model_validate(body or {})


def list_rft_jobs(
    client: FireworksClient, *, page_size: int = 50, filter: str | None = None, limit: int = 200
) -> list[RFTJob]:
    """The account's RFT jobs (following pages up to ``limit`` jobs)."""
    jobs: list[RFTJob] = []
    token: str | None = None
    while len(jobs) < limit:
        body = client.request(
            "GET", client.account_path("reinforcementFineTuningJobs"),
            params={"pageSize": page_size, "pageToken": token, "filter": filter},
        ) or {}  # fmt: skip
        jobs += [RFTJob.model_validate(j) for j in body.get("reinforcementFineTuningJobs", [])]
        token = body.get("nextPageToken") or None
        if token is None:
            break
    return jobs[:limit]


def cancel_rft_job(client: FireworksClient, job_id: str) -> RFTJob:
    """Cancel the job (``POST …:cancel``) and return it as it is now."""
    path = client.account_path(f"reinforcementFineTuningJobs/{_id(job_id)}")
    client.request("POST", f"{path}:cancel", json={})
    return get_rft_job(client, job_id)


def wait_for_rft_job(
    client: FireworksClient,
    job_id: str,
    *,
    poll_s: float = 30.0,
    timeout_s: float | None = None,
    on_update: Callable[[RFTJob], None] | None = None,
) -> RFTJob:
    """Poll until the job ends, calling ``on_update`` with each state; return the last one.

    Ending ``FAILED`` or ``CANCELLED`` is not an exception: check `RFTJob.succeeded`.

    Raises:
        FireworksError: the API failed, or the job did not end within ``timeout_s``.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        job = get_rft_job(client, job_id)
        if on_update is not None:
            on_update(job)
        if job.done or client.dry_run:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise FireworksError(
                f"RFT job {job_id!r} is still {job.short_state} after {timeout_s:g}s; it goes on "
                f"running. Check it with `rk-agent fireworks status {job_id}`."
            )
        time.sleep(poll_s)


def _id(job: str) -> str:
    """A job id from an id or a full name."""
    return job.rsplit("/", 1)[-1]
