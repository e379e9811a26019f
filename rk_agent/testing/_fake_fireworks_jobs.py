"""The RFT-job endpoints of the fake Fireworks API (a mixin of `FakeFireworks`).

Private to `rk_agent.testing.fake_fireworks`.
"""

from __future__ import annotations

import secrets
from typing import Any

from rk_agent.testing import _fake_fireworks_http as http, _fake_fireworks_rules as rules
from rk_agent.testing._fake_fireworks_http import FakeRequest


class JobsMixin:
    """Create, read, list and cancel RFT jobs; each read moves a job one state on."""

    account_id: str
    job_states: tuple[str, ...]
    datasets: dict[str, dict[str, Any]]
    evaluators: dict[str, dict[str, Any]]
    jobs: dict[str, dict[str, Any]]
    _hidden: dict[str, dict[str, Any]]

    def _create_job(self, request: FakeRequest) -> dict[str, Any]:
        body = rules.json_object(request, rules.JOB, "ReinforcementFineTuningJob")
        rules.check_job_parts(body)
        job_id = request.query.get("reinforcementFineTuningJobId") or f"job-{secrets.token_hex(4)}"
        if job_id in self.jobs:
            raise rules.FakeApiError(
                409, f"reinforcement fine-tuning job {job_id!r} already exists"
            )
        dataset_id = self._own(body, "dataset", "datasets")
        evaluator_id = self._own(body, "evaluator", "evaluators")
        hidden = self._hidden[f"datasets/{dataset_id}"]
        if not hidden["uploaded"]:
            raise rules.FakeApiError(
                400, f"failed precondition: dataset {dataset_id!r} is not READY"
            )
        state = self.evaluators[evaluator_id]["state"]
        if state != "ACTIVE":
            raise rules.FakeApiError(
                400,
                f"failed precondition: evaluator {evaluator_id!r} is not ACTIVE (state {state})",
            )
        training = dict(body["trainingConfig"])
        training.setdefault("outputModel", self._name("models", job_id))
        job = {
            **{k: v for k, v in body.items() if k != "wandbConfig"},
            "name": self._name("reinforcementFineTuningJobs", job_id),
            "trainingConfig": training,
            "state": self.job_states[0],
            "createTime": http.now(),
            "jobProgress": {"percent": 0},
        }
        if "wandbConfig" in body:  # the key is write-only
            job["wandbConfig"] = {k: v for k, v in body["wandbConfig"].items() if k != "apiKey"}
        self.jobs[job_id] = job
        self._hidden[f"jobs/{job_id}"] = {"step": 0, "cancel": 0}
        return job

    def _own(self, body: dict[str, Any], key: str, collection: str) -> str:
        value = body.get(key)
        prefix = f"accounts/{self.account_id}/{collection}/"
        if not isinstance(value, str) or not value.startswith(prefix):
            raise rules.FakeApiError(400, f"invalid {key}: expected '{prefix}<id>', got {value!r}")
        rid = value.removeprefix(prefix)
        if rid not in (self.datasets if collection == "datasets" else self.evaluators):
            raise rules.FakeApiError(404, f"{key} {value!r} not found")
        return rid

    def _get_job(self, request: FakeRequest, job_id: str) -> dict[str, Any]:
        job = self._job(job_id)
        hidden = self._hidden[f"jobs/{job_id}"]
        if hidden["cancel"]:
            job["state"] = (
                "JOB_STATE_CANCELLING" if hidden["cancel"] == 1 else "JOB_STATE_CANCELLED"
            )
            hidden["cancel"] += 1
        elif job["state"] not in rules.TERMINAL:
            hidden["step"] = min(hidden["step"] + 1, len(self.job_states) - 1)
            job["state"] = self.job_states[hidden["step"]]
            last = max(len(self.job_states) - 1, 1)
            job["jobProgress"] = {"percent": round(100 * hidden["step"] / last, 1), "epoch": 0}
        if job["state"] in rules.TERMINAL:
            job.setdefault("completedTime", http.now())
        return job

    def _list_jobs(self, request: FakeRequest) -> dict[str, Any]:
        size = int(request.query.get("pageSize", "50"))
        start = int(request.query.get("pageToken") or 0)
        jobs = list(self.jobs.values())
        page = jobs[start : start + size]
        answer: dict[str, Any] = {"reinforcementFineTuningJobs": page, "totalSize": len(jobs)}
        if start + size < len(jobs):
            answer["nextPageToken"] = str(start + size)
        return answer

    def _cancel_job(self, request: FakeRequest, job_id: str) -> dict[str, Any]:
        rules.json_object(request, set(), "CancelRequest")
        job = self._job(job_id)
        if job["state"] in rules.TERMINAL:
            raise rules.FakeApiError(
                400, f"failed precondition: job {job_id!r} already ended ({job['state']})"
            )
        self._hidden[f"jobs/{job_id}"]["cancel"] = 1
        return {}

    def _job(self, job_id: str) -> dict[str, Any]:
        if job_id not in self.jobs:
            raise rules.FakeApiError(404, f"reinforcement fine-tuning job {job_id!r} not found")
        return self.jobs[job_id]

    def _name(self, collection: str, rid: str) -> str:
        return f"accounts/{self.account_id}/{collection}/{rid}"
