"""Call a reward deployed to Fireworks by its id: ``RewardFunction(name=..., mode="remote")``.

Fireworks documents no URL that runs a deployed evaluator on one sample. What it documents, and
what this module uses (contract only: exercised against the project's fake API, not the live
service):

1. ``GET /v1/accounts/{a}/evaluators/{id}``: does the evaluator exist, and is its ``state``
   ``ACTIVE``? Not found -> a `FireworksError` (404) that says how to deploy it, with "did you
   mean ...?" over one page of the account's evaluator ids (``GET …/evaluators``, only when the
   id is not found); ``BUILDING`` -> wait or check the build; ``BUILD_FAILED`` -> redeploy.
2. ``POST …/evaluators:previewEvaluator`` for each sample, with the evaluator object as the
   service returned it (its ``name``, ``entryPoint``, ``commitHash``, ``criteria``, ...; the
   output-only fields ``state``, ``status``, ``createTime`` left out) and the sample as one
   JSON string in ``sampleData``. The first result becomes the `EvaluateResult`: ``success``
   -> ``is_score_valid``, ``perMetricEvals`` -> ``metrics``.

Not verified: that the live service previews an uploaded-code evaluator named by its object
(the API notes list this as uncertain), and how fast previews are. A preview is a debugging
call: use this to check a deployed reward against what you run locally, not as the reward of
a training loop at volume (serve the reward yourself for that, `rk-agent serve`).

Main names: `hosted_reward`, `HostedReward`, `resolve_evaluator`, `sample_for_preview`.

Example:
    >>> from rk_agent.testing.fake_fireworks import FakeFireworks
    >>> from rk_agent.fireworks.auth import Credentials
    >>> from rk_agent.fireworks.client import FireworksClient
    >>> with FakeFireworks(api_key="k", account_id="me") as fake:
    ...     client = FireworksClient(Credentials(api_key="k", account_id="me", api_base=fake.url))
    ...     try:
    ...         resolve_evaluator(client, "combined-reward-prod")
    ...     except Exception as exc:
    ...         print(type(exc).__name__, exc.status)
    FireworksError 404
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rk_agent.errors import FireworksError, did_you_mean
from rk_agent.fireworks.auth import Credentials, resolve_credentials
from rk_agent.fireworks.client import FireworksClient
from rk_agent.types import EvaluateResult, Message

__all__ = ["EVALUATOR_FIELDS", "HostedReward", "hosted_reward", "resolve_evaluator",
           "sample_for_preview"]  # fmt: skip

EVALUATOR_FIELDS = (
    "name", "displayName", "description", "entryPoint", "requirements", "commitHash",
    "criteria", "source", "defaultDataset", "multiMetrics", "rollupSettings",
)  # fmt: skip
"""The evaluator's fields sent back with a preview (the output-only ones are left out)."""

_LIST_PAGE = 200


def resolve_evaluator(client: FireworksClient, name: str) -> dict[str, Any]:
    """The deployed evaluator ``name`` (an id or ``accounts/{a}/evaluators/{id}``), checked.

    Returns:
        The evaluator as the API returned it.

    Raises:
        FireworksError: it does not exist (status 404; how to deploy it, and the closest id
            of the account), or it is not ``ACTIVE`` (still building, or its build failed).
    """
    evaluator_id = name.rsplit("/", 1)[-1]
    path = client.account_path(f"evaluators/{evaluator_id}")
    body = client.request("GET", path, allow_404=True)
    url = f"{client.api_base}{path}"
    if body is None:
        hint = did_you_mean(evaluator_id, _evaluator_ids(client))
        raise FireworksError(
            f"no evaluator {evaluator_id!r} in Fireworks account {client.account_id!r}.{hint} "
            f"Deploy the reward first: `rk-agent deploy my_rewards.py::my_reward --id "
            f"{evaluator_id}`, or `my_reward.deploy(name={evaluator_id!r})` in Python.",
            status=404,
            url=url,
        )
    state = str(body.get("state") or "STATE_UNSPECIFIED")
    if state == "ACTIVE":
        return body
    status = (body.get("status") or {}).get("message") or ""
    if state == "BUILD_FAILED":
        detail = f": {status}" if status else ""
        message = (
            f"evaluator {evaluator_id!r} failed to build{detail}. Fix the reward and deploy it "
            f"again with force=True (`rk-agent deploy ... --id {evaluator_id} --force`); the "
            "build log is in the Fireworks console."
        )
    else:
        message = (
            f"evaluator {evaluator_id!r} is {state}, not ACTIVE: its code is still being "
            "built (usually a few minutes). Try again when the build has finished, or wait "
            "for it with rk_agent.fireworks.evaluators.wait_for_evaluator."
        )
    raise FireworksError(message, url=url, api_message=status or None)


def _evaluator_ids(client: FireworksClient) -> list[str]:
    """One page of the account's evaluator ids, for suggestions; none when listing fails."""
    try:
        body = client.request(
            "GET", client.account_path("evaluators"), params={"pageSize": _LIST_PAGE}
        )
    except FireworksError:
        return []  # suggestions are a courtesy: the not-found error is the one to show
    found = (body or {}).get("evaluators") or []
    return [str(item.get("name", "")).rsplit("/", 1)[-1] for item in found if item.get("name")]


def sample_for_preview(call_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """One preview sample from a reward call's keyword arguments.

    Messages become OpenAI chat dicts; every other argument stays at the top level, as
    Reward Kit's sample files have them (``evaluate(messages, ground_truth, **kwargs)``).

    Example:
        >>> sample_for_preview({"messages": [{"role": "user", "content": "hi"}],
        ...                     "ground_truth": "4"})
        {'messages': [{'role': 'user', 'content': 'hi'}], 'ground_truth': '4'}
    """
    sample: dict[str, Any] = {}
    for key, value in call_kwargs.items():
        if key in ("messages", "original_messages") and value is not None:
            sample[key] = [Message.coerce(m).to_openai() for m in value]
        else:
            sample[key] = value
    return sample


class HostedReward:
    """Scores samples with a deployed Fireworks evaluator, one preview call per sample.

    Each call opens its own API client (previews take seconds; a connection kept open in a
    reward object would outlive it unclosed).

    Args:
        evaluator: the evaluator as `resolve_evaluator` returned it.
        credentials: the API key, account and base URL to call with.
        timeout: seconds per API request.
    """

    def __init__(
        self, evaluator: Mapping[str, Any], credentials: Credentials, *, timeout: float = 30.0
    ) -> None:
        self.evaluator = {k: evaluator[k] for k in EVALUATOR_FIELDS if k in evaluator}
        self.credentials = credentials
        self.timeout = timeout

    @property
    def name(self) -> str:
        """The evaluator's full name, ``accounts/{a}/evaluators/{id}``."""
        return str(self.evaluator.get("name", ""))

    def __repr__(self) -> str:
        return f"HostedReward({self.name!r})"

    def __call__(self, call_kwargs: Mapping[str, Any]) -> EvaluateResult:
        """Score one sample on the service.

        Raises:
            FireworksError: the preview call failed, or the service returned no result.
            TypeError: a keyword argument is not JSON-serialisable.
        """
        body = {
            "evaluator": self.evaluator,
            "sampleData": [json.dumps(sample_for_preview(call_kwargs), ensure_ascii=False)],
            "maxSamples": 1,
        }
        with FireworksClient(self.credentials, timeout_s=self.timeout) as client:
            path = client.account_path("evaluators:previewEvaluator")
            answer = client.request("POST", path, json=body) or {}
        results = answer.get("results") or []
        if not results:
            raise FireworksError(
                f"Fireworks API POST {path} returned no result for the sample (expected one "
                f"in 'results'; got {sorted(answer)}).",
                url=f"{self.credentials.api_base}{path}",
            )
        return _result(results[0])


def _result(item: Mapping[str, Any]) -> EvaluateResult:
    """A preview result as an `EvaluateResult` (``success: false`` -> an invalid score)."""
    reason = item.get("reason")
    metrics = {key: _metric(value) for key, value in (item.get("perMetricEvals") or {}).items()}
    if not item.get("success", False):
        error = str(reason or "the evaluator reported success=false")
        return EvaluateResult(
            score=0.0, is_score_valid=False, error=error, reason=error, metrics=metrics
        )
    return EvaluateResult(score=float(item.get("score") or 0.0), reason=reason, metrics=metrics)


def _metric(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    valid = value.get("is_score_valid", value.get("isScoreValid", True))
    return {"score": float(value.get("score") or 0.0), "reason": value.get("reason"),
            "is_score_valid": bool(valid)}  # fmt: skip


def hosted_reward(name: str, *, api_key: str | None = None, timeout: float = 30.0) -> HostedReward:
    """Find the deployed evaluator ``name`` and return a scorer for it.

    The hosted reward source ``fireworks`` of `rk_agent.rewards.deploy_targets`: what
    ``RewardFunction(name=..., mode="remote")`` calls. Credentials come from the environment
    (``FIREWORKS_API_KEY``, ``FIREWORKS_ACCOUNT_ID``, ``FIREWORKS_API_BASE`` or
    ``~/.fireworks/auth.ini``); ``api_key`` wins over them.

    Raises:
        ConfigError: no API key is set.
        FireworksError: as for `resolve_evaluator`.
    """
    credentials = resolve_credentials(api_key=api_key)
    with FireworksClient(credentials, timeout_s=timeout) as client:
        evaluator = resolve_evaluator(client, name)
        account = client.account_id  # looked up once (``/verifyApiKey``) when not configured
    return HostedReward(evaluator, replace(credentials, account_id=account), timeout=timeout)
