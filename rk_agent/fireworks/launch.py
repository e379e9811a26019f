"""One call from trajectories (or tasks) and a reward to a running Fireworks RFT job.

Main names: `launch_rft`, `Launch`, `dataset_id_for`.

`launch_rft` does, in order: build the dataset rows (`rows_from_source`); deploy the reward as
an evaluator without waiting for its build (`deploy_reward`); upload the dataset and wait until
it is READY; wait until the evaluator is ACTIVE (the build runs meanwhile); create the job.
Following the job is the caller's choice (`wait_for_rft_job`). With ``reward_endpoint=URL``
instead of a reward, the evaluator is a thin one that forwards each sample to your self-hosted
reward server (`rk_agent.fireworks.forwarding`; the job API has no field for a reward URL).
Every step is idempotent: the
dataset id is made from a hash of its rows and the evaluator's ``commitHash`` from its code, so
running the same command again reuses both and only creates a new job.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from rk_agent.fireworks.client import FireworksClient
    >>> tasks = Path(tempfile.mkdtemp()) / "tasks.jsonl"
    >>> _ = tasks.write_text(json.dumps({"prompt": "2+2?", "ground_truth": "4"}) + "\\n")
    >>> client = FireworksClient.dry(account_id="me")
    >>> launch = launch_rft(tasks, "rk_agent.rewards.builtin.length:length_reward",
    ...                     config=RFTJobConfig(training=TrainingConfig(base_model="qwen3-0p6b")),
    ...                     client=client, job_id="my-job")
    >>> launch.job.name, len(launch.rows.rows)
    ('accounts/me/reinforcementFineTuningJobs/my-job', 1)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rk_agent.errors import ConfigError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.datasets import Dataset, dataset_jsonl, upload_dataset
from rk_agent.fireworks.evaluators import (
    Deployment,
    deploy_package,
    deploy_reward,
    evaluator_id_for,
    validate_resource_id,
    wait_for_evaluator,
)
from rk_agent.fireworks.forwarding import check_endpoint, forwarder_id, package_forwarder
from rk_agent.fireworks.rft import (
    RFTJob,
    RFTJobConfig,
    TrainingConfig,
    create_rft_job,
    new_job_id,
)
from rk_agent.fireworks.rft_data import RFTRows, rows_from_source
from rk_agent.rewards.registry import RewardLike, get_reward_function

__all__ = ["Launch", "RFTJobConfig", "TrainingConfig", "dataset_id_for", "launch_rft"]


@dataclass(frozen=True)
class Launch:
    """What `launch_rft` set up.

    Attributes:
        rows: the dataset rows and where they came from.
        dataset: the uploaded dataset.
        deployment: the evaluator and what happened to it.
        job: the job as created.
    """

    rows: RFTRows
    dataset: Dataset
    deployment: Deployment
    job: RFTJob


def dataset_id_for(data: bytes, prefix: str = "rk") -> str:
    """A dataset id from the content: same rows, same id (so uploads are not repeated).

    Example:
        >>> dataset_id_for(b'{"messages": []}\\n', prefix="math")
        'math-rft-19fc5b26092a'
    """
    digest = hashlib.sha256(data).hexdigest()[:12]
    return f"{prefix[:40].strip('-')}-rft-{digest}"


def launch_rft(
    source: str | Path,
    reward: RewardLike | None = None,
    *,
    config: RFTJobConfig,
    client: FireworksClient,
    env: str | None = None,
    tools: bool = True,
    evaluator_id: str | None = None,
    dataset_id: str | None = None,
    job_id: str | None = None,
    force: bool = False,
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
    poll_s: float = 10.0,
    timeout_s: float = 900.0,
    on_step: Callable[[str], None] | None = None,
    reward_endpoint: str | None = None,
    trust_run: bool = False,
) -> Launch:
    """Build the dataset, deploy the evaluator, upload, and create the RFT job.

    Args:
        source: a run directory, a ``trajectories.jsonl`` or a tasks JSONL file.
        reward: the reward the job trains on (name, ``file.py::fn``, ``module:fn`` or function);
            or give ``reward_endpoint``.
        config: the job's configuration (``training.base_model`` at least).
        client: the API client (a dry-run client plans every request and sends none).
        env: the environment whose tools the rows carry (default: the run's).
        tools: put the environment's tools into the rows.
        evaluator_id: default: the reward's name as an id.
        dataset_id: default: made from a hash of the rows.
        job_id: default: a fresh one.
        force: replace an evaluator of that id whose code differs.
        requirements: pip requirements for the evaluator beyond the reward's own.
        include: more files the reward's file imports.
        poll_s: seconds between polls of the dataset and evaluator.
        timeout_s: how long to wait for each of them.
        on_step: called with a line saying what happens next.
        reward_endpoint: a self-hosted reward server's ``/evaluate`` URL instead of
            ``reward``: the evaluator forwards each sample there (its key from the
            ``RK_AGENT_SERVER_API_KEY`` secret where it runs; see
            `rk_agent.fireworks.forwarding`). The evaluator id defaults to one made from the
            URL.
        trust_run: read the tools of a run's environment that names code even when the run
            is not one rk-agent wrote here (`rk_agent.fireworks.rft_data.rows_from_source`).

    Raises:
        ConfigError, DataError: bad input, found before anything is sent (`UntrustedRunError`:
            a run from elsewhere whose environment names code, without ``trust_run``).
        FireworksError: a step failed on the service (the message says which).
    """

    def step(text: str) -> None:
        if on_step is not None:
            on_step(text)

    if (reward is None) == (reward_endpoint is None):
        raise ConfigError(
            "launch_rft needs a reward or a reward_endpoint (a self-hosted reward server's URL), "
            f"exactly one; got {'both' if reward is not None else 'neither'}."
        )
    if reward_endpoint is not None:
        default_id = forwarder_id(check_endpoint(reward_endpoint))
        what = f"reward endpoint {reward_endpoint}"
    else:
        fn = get_reward_function(reward)  # type: ignore[arg-type]
        default_id = evaluator_id_for(fn.reward_spec.name)
        what = f"reward {fn.reward_spec.name!r}"
    rows = rows_from_source(source, env=env, tools=tools, trust_run=trust_run)
    data = dataset_jsonl(rows.rows)
    evaluator_id = validate_resource_id(evaluator_id or default_id, "evaluator")
    dataset_id = validate_resource_id(dataset_id or dataset_id_for(data, evaluator_id), "dataset")
    job_id = validate_resource_id(job_id or new_job_id(f"{evaluator_id}-rft"), "job")
    config.job_body("dataset", "evaluator")  # checks the config before anything is sent

    step(f"deploying {what} as evaluator {evaluator_id!r}")
    if reward_endpoint is not None:
        deployment = deploy_package(
            package_forwarder(reward_endpoint, directory=evaluator_id), evaluator_id,
            description=f"rk-agent: forwards each sample to {reward_endpoint}", force=force,
            client=client, wait=False,
        )  # fmt: skip
    else:
        deployment = deploy_reward(
            fn, evaluator_id=evaluator_id, force=force, requirements=requirements,
            include=include, client=client, wait=False,
        )  # fmt: skip
    step(f"uploading {len(rows.rows)} rows as dataset {dataset_id!r}")
    dataset = upload_dataset(client, dataset_id, data, poll_s=min(poll_s, 2.0),
                             timeout_s=timeout_s)  # fmt: skip
    if deployment.evaluator.state != "ACTIVE":
        step(f"waiting for evaluator {evaluator_id!r} to build (usually a few minutes)")
        evaluator = wait_for_evaluator(client, evaluator_id, poll_s=poll_s, timeout_s=timeout_s)
        deployment = Deployment(evaluator, deployment.package, deployment.action)
    step(f"creating RFT job {job_id!r}")
    job = create_rft_job(
        client, dataset=dataset_id, evaluator=evaluator_id, config=config, job_id=job_id
    )
    return Launch(rows=rows, dataset=dataset, deployment=deployment, job=job)
