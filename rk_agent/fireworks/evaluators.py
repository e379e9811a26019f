"""Fireworks evaluators: deploy a reward function as one, wait for its build, preview it.

Main names: `deploy_reward`, `deploy_metric_folders`, `deploy_package`, `Evaluator`,
`Deployment`, `preview_evaluator`, `PreviewResult`, `get_evaluator`, `create_evaluator`,
`upload_evaluator_code`, `wait_for_evaluator`, `build_logs`, `delete_evaluator`,
`evaluator_id_for`.

Deploying follows eval-protocol's current upload flow (documented contract, see the docs'
Fireworks page; not yet exercised against the live service):

1. ``POST /v1/accounts/{a}/evaluatorsV2`` with ``{"evaluatorId", "evaluator": {"displayName",
   "description", "entryPoint": "main.py::evaluate", "requirements", "commitHash"}}``;
2. ``POST …/evaluators/{id}:getUploadEndpoint`` with ``{"filenameToSize": {"<id>.tar.gz":
   "<bytes>"}}``, then ``PUT`` the archive to the signed URL it returns;
3. ``POST …/evaluators/{id}:validateUpload`` with ``{}``;
4. ``GET …/evaluators/{id}`` until ``state`` is ``ACTIVE``. On ``BUILD_FAILED`` the build log
   (``GET …:getBuildLogEndpoint`` gives a signed URL to it) goes into the error.

``commitHash`` carries the archive's SHA-256, so deploying an unchanged reward again reuses the
evaluator, and a changed one needs ``force=True`` (which deletes and recreates it).

Example:
    >>> from rk_agent.fireworks.client import FireworksClient
    >>> client = FireworksClient.dry(account_id="me")
    >>> deployment = deploy_reward("rk_agent.rewards.builtin.length:length_reward", client=client)
    >>> deployment.evaluator.name, deployment.action
    ('accounts/me/evaluators/length', 'created')
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from rk_agent.errors import ConfigError, FireworksError
from rk_agent.fireworks.auth import resolve_credentials
from rk_agent.fireworks.client import ApiModel, FireworksClient
from rk_agent.fireworks.datasets import ApiStatus
from rk_agent.fireworks.packaging import EvaluatorPackage, package_metric_folders, package_reward
from rk_agent.rewards.registry import RewardLike, get_reward_function

if TYPE_CHECKING:
    from rk_agent.rewards.compose import CombineMethod
    from rk_agent.rewards.metric_folders import MetricFolder

__all__ = [
    "Deployment",
    "Evaluator",
    "PreviewResult",
    "PreviewSample",
    "build_logs",
    "create_evaluator",
    "delete_evaluator",
    "deploy_metric_folders",
    "deploy_package",
    "deploy_reward",
    "evaluator_id_for",
    "get_evaluator",
    "preview_evaluator",
    "upload_evaluator_code",
    "validate_resource_id",
    "wait_for_evaluator",
]

_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_LOG_TAIL = 4000


class Evaluator(ApiModel):
    """An evaluator as the API returns it.

    Attributes:
        name: ``accounts/{account}/evaluators/{id}``.
        state: ``BUILDING``, ``ACTIVE``, ``BUILD_FAILED`` or ``STATE_UNSPECIFIED``.
        display_name, description, entry_point, requirements: as created.
        commit_hash: what rk-agent stored: the package's SHA-256.
        status: the API's status (the build error, when it failed).
    """

    name: str = ""
    state: str = "STATE_UNSPECIFIED"
    display_name: str | None = None
    description: str | None = None
    entry_point: str | None = None
    requirements: str | None = None
    commit_hash: str | None = None
    status: ApiStatus | None = None

    @property
    def id(self) -> str:
        """The last part of the name."""
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Deployment:
    """What `deploy_reward` did.

    Attributes:
        evaluator: the evaluator (``ACTIVE`` when waited for).
        package: what was (or would have been) uploaded.
        action: ``"created"``, ``"replaced"`` or ``"unchanged"`` (same code already deployed).
        replaced: the evaluator that ``force`` deleted (``action == "replaced"``).
    """

    evaluator: Evaluator
    package: EvaluatorPackage
    action: str
    replaced: Evaluator | None = None

    def __str__(self) -> str:
        """The evaluator id, as Reward Kit's ``.deploy()`` returns it (``print(f"ID: {d}")``)."""
        return self.evaluator.id


def validate_resource_id(value: str, kind: str) -> str:
    """Check a Fireworks resource id: lowercase letters, digits and hyphens, 1 to 63 long.

    Raises:
        ConfigError: it is not.
    """
    if not _ID.match(value):
        raise ConfigError(
            f"{kind} id {value!r} is not valid: use 1 to 63 lowercase letters, digits and "
            f"hyphens, starting and ending with a letter or digit (e.g. "
            f"{(_slug(value) or 'my-' + kind)!r})."
        )
    return value


_GENERIC_NAMES = frozenset({"evaluate", "reward", "rewards", "main", "score", "reward_fn"})


def evaluator_id_for(reward_name: str, source_file: str | None = None) -> str:
    """The default evaluator id for a reward: its name, made a valid id.

    Reward Kit's rewards are all called ``evaluate``: for a generic name the id comes from the
    file that defines it instead, and for a generic file name (``main.py``, as in a metric
    folder) from its folder, so two deployments do not collide.

    Example:
        >>> evaluator_id_for("exact_match")
        'exact-match'
        >>> evaluator_id_for("evaluate", "metrics/relevance/main.py")
        'relevance'
        >>> evaluator_id_for("evaluate", "my_checks.py")
        'my-checks'
    """
    name = reward_name
    if source_file and reward_name.lower() in _GENERIC_NAMES:
        path = Path(source_file).resolve()
        name = path.stem
        if name.lower() in _GENERIC_NAMES and path.parent.name:
            name = path.parent.name
    return _slug(name) or "reward"


def _source_file(fn: Any) -> str | None:
    """The file that defines a reward, when there is one."""
    import inspect

    try:
        return inspect.getsourcefile(inspect.unwrap(fn))
    except TypeError:
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:63].strip("-")


def get_evaluator(client: FireworksClient, evaluator_id: str) -> Evaluator | None:
    """The evaluator, or ``None`` when there is none of that id."""
    body = client.request("GET", client.account_path(f"evaluators/{evaluator_id}"), allow_404=True)
    return None if body is None else Evaluator.model_validate(body)


def create_evaluator(
    client: FireworksClient,
    evaluator_id: str,
    package: EvaluatorPackage,
    *,
    display_name: str | None = None,
    description: str | None = None,
) -> Evaluator:
    """Create the evaluator record (``POST …/evaluatorsV2``); its code is uploaded next."""
    body = {
        "evaluatorId": evaluator_id,
        "evaluator": _evaluator_object(package, display_name or evaluator_id, description),
    }
    answer = client.request("POST", client.account_path("evaluatorsV2"), json=body)
    return Evaluator.model_validate(answer or {})


def _evaluator_object(
    package: EvaluatorPackage, display_name: str, description: str | None
) -> dict[str, Any]:
    return {
        "displayName": display_name,
        "description": description or f"rk-agent reward {package.reward_name!r}",
        "entryPoint": package.entry_point,
        "requirements": package.requirements_text,
        "commitHash": package.digest,
    }


def delete_evaluator(client: FireworksClient, evaluator_id: str) -> None:
    """Delete the evaluator (nothing happens when it does not exist)."""
    client.request("DELETE", client.account_path(f"evaluators/{evaluator_id}"), allow_404=True)


def upload_evaluator_code(
    client: FireworksClient, evaluator_id: str, package: EvaluatorPackage
) -> None:
    """Upload the package through a signed URL and ask the service to build it."""
    base = client.account_path(f"evaluators/{evaluator_id}")
    name = package.archive_name
    answer = client.request(
        "POST",
        f"{base}:getUploadEndpoint",
        json={"filenameToSize": {name: str(len(package.archive))}},
    )
    url = ((answer or {}).get("filenameToSignedUrls") or {}).get(name)
    if not url:
        raise FireworksError(
            f"Fireworks API POST {base}:getUploadEndpoint returned no upload URL for {name!r}."
        )
    client.put_signed(url, package.archive, filename=name)
    client.request("POST", f"{base}:validateUpload", json={})


def build_logs(client: FireworksClient, evaluator_id: str) -> str | None:
    """The tail of the evaluator's build log, or ``None`` when the API offers none."""
    try:
        answer = client.request(
            "GET", client.account_path(f"evaluators/{evaluator_id}:getBuildLogEndpoint")
        )
        url = (answer or {}).get("buildLogSignedUri")
        if not url:
            return None
        text = client.get_signed(str(url))
    except FireworksError:
        return None  # the logs are a courtesy: never hide the build failure behind this one
    return text[-_LOG_TAIL:] if len(text) > _LOG_TAIL else text


def wait_for_evaluator(
    client: FireworksClient,
    evaluator_id: str,
    *,
    poll_s: float = 10.0,
    timeout_s: float = 900.0,
    on_update: Callable[[Evaluator], None] | None = None,
) -> Evaluator:
    """Poll until the evaluator is ``ACTIVE`` (builds take minutes).

    Raises:
        FireworksError: the build failed (the message and ``logs`` hold the build log's tail),
            or it did not finish within ``timeout_s``.
    """
    path = client.account_path(f"evaluators/{evaluator_id}")
    deadline = time.monotonic() + timeout_s
    while True:
        body = client.request("GET", path, note="repeated until state is ACTIVE")
        evaluator = Evaluator.model_validate(body or {})
        if on_update is not None:
            on_update(evaluator)
        if evaluator.state == "ACTIVE" or client.dry_run:
            return evaluator
        if evaluator.state == "BUILD_FAILED":
            logs = build_logs(client, evaluator_id)
            status = evaluator.status.message if evaluator.status else None
            message = f"evaluator {evaluator_id!r} failed to build"
            message += f": {status}" if status else "."
            message += f"\n--- build log (tail) ---\n{logs.rstrip()}" if logs else " (no build log)"
            raise FireworksError(message, url=f"{client.api_base}{path}", api_message=status,
                                 logs=logs)  # fmt: skip
        if time.monotonic() >= deadline:
            raise FireworksError(
                f"evaluator {evaluator_id!r} is still {evaluator.state} after {timeout_s:g}s. "
                "Builds usually take a few minutes; wait longer (timeout_s) or check it in the "
                "Fireworks console.",
                url=f"{client.api_base}{path}",
            )
        time.sleep(poll_s)


def deploy_reward(
    reward: RewardLike,
    *,
    evaluator_id: str | None = None,
    display_name: str | None = None,
    description: str | None = None,
    force: bool = False,
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
    client: FireworksClient | None = None,
    wait: bool = True,
    poll_s: float = 10.0,
    timeout_s: float = 900.0,
    on_update: Callable[[Evaluator], None] | None = None,
    account_id: str | None = None,
    auth_token: str | None = None,
    providers: Sequence[Mapping[str, Any]] | None = None,
) -> Deployment:
    """Create or update the Fireworks evaluator that runs ``reward``.

    Packages the reward (`package_reward`), then: no evaluator of that id -> create it; one
    with the same code (``commitHash``) -> reuse it; one with other code -> replace it when
    ``force``, else raise. Waits until it is ``ACTIVE`` unless ``wait=False``.

    Args:
        reward: a decorated function, a registered name, ``file.py::fn`` or ``module:fn``.
        evaluator_id: the id (default: the reward's name, e.g. ``exact_match`` ->
            ``exact-match``).
        display_name: shown in the console (default: the id).
        description: one line (default: the reward's description).
        force: replace an evaluator of this id whose code differs.
        requirements: pip requirements beyond the reward's own.
        include: more files the reward's file imports.
        client: the API client (default: one from the environment's credentials).
        wait: wait for the build to finish.
        poll_s: seconds between polls.
        timeout_s: how long to wait for the build.
        on_update: called with the evaluator at each poll.
        account_id: the Fireworks account (Reward Kit's ``.deploy`` argument; default: the
            environment's, as for every call here).
        auth_token: the API key (Reward Kit's name for it; default: ``FIREWORKS_API_KEY``).
        providers: Reward Kit's ``[{"providerType": ..., "modelId": ...}]``. Accepted and
            ignored with a `UserWarning`: an evaluator has no field for it in the Fireworks
            API (Reward Kit's own ``deploy`` reads it and sends nothing either); the model a job
            trains is chosen on the RFT job (``rk-agent fireworks rft --base-model``).

    Raises:
        ConfigError: the id is not valid, the reward cannot be packaged, no API key is set, or
            ``account_id``/``auth_token`` come together with ``client``.
        FireworksError: the API refused, the evaluator exists with other code and ``force`` is
            off, or the build failed (with its log).
    """
    _ignore_providers(providers)
    if account_id is not None or auth_token is not None:
        if client is not None:
            raise ConfigError(
                "deploy got account_id/auth_token and client=...: the client already has its "
                "credentials. Pass one or the other."
            )
        client = FireworksClient(resolve_credentials(api_key=auth_token, account_id=account_id))
        try:
            return deploy_reward(
                reward, evaluator_id=evaluator_id, display_name=display_name,
                description=description, force=force, requirements=requirements,
                include=include, client=client, wait=wait, poll_s=poll_s, timeout_s=timeout_s,
                on_update=on_update,
            )  # fmt: skip
        finally:
            client.close()
    fn = get_reward_function(reward)
    evaluator_id = validate_resource_id(
        evaluator_id or evaluator_id_for(fn.reward_spec.name, _source_file(fn)), "evaluator"
    )
    package = package_reward(fn, directory=evaluator_id, requirements=requirements, include=include)
    return deploy_package(
        package, evaluator_id, display_name=display_name,
        description=description or fn.reward_spec.description or None, force=force,
        client=client, wait=wait, poll_s=poll_s, timeout_s=timeout_s, on_update=on_update,
    )  # fmt: skip


def _ignore_providers(providers: Sequence[Mapping[str, Any]] | None) -> None:
    """Check Reward Kit's ``providers`` and say, once per call, that it changes nothing."""
    if providers is None:
        return
    if isinstance(providers, (str, bytes)) or not all(isinstance(p, Mapping) for p in providers):
        raise ConfigError(
            f"providers must be a list of {{'providerType': ..., 'modelId': ...}} dicts, as in "
            f"Reward Kit; got {providers!r}."
        )
    models = ", ".join(str(p.get("modelId", "?")) for p in providers) or "none"
    warnings.warn(
        f"deploy(providers=...) is ignored (models: {models}): a Fireworks evaluator has no "
        "providers field, so nothing would be sent (Reward Kit's deploy drops it too). Choose "
        "the model to train on the RFT job instead (rk-agent fireworks rft --base-model).",
        UserWarning,
        stacklevel=3,
    )


def deploy_metric_folders(
    folders: Iterable[str | MetricFolder] | Mapping[str, str | Path],
    *,
    evaluator_id: str | None = None,
    display_name: str | None = None,
    description: str | None = None,
    force: bool = False,
    method: CombineMethod = "mean",
    weights: Mapping[str, float] | None = None,
    requirements: Sequence[str] = (),
    client: FireworksClient | None = None,
    wait: bool = True,
    poll_s: float = 10.0,
    timeout_s: float = 900.0,
    on_update: Callable[[Evaluator], None] | None = None,
) -> Deployment:
    """Create or update the Fireworks evaluator made of Reward Kit metric folders.

    What ``rk-agent deploy --metrics-folders NAME=PATH ...`` runs: the folders are packaged
    (`package_metric_folders`; the score is the mean of the folders' scores unless ``method``
    or ``weights`` say otherwise) and deployed as `deploy_reward` deploys a reward.

    Args:
        folders: ``NAME=PATH`` pairs (or `MetricFolder` objects, or ``{name: path}``).
        evaluator_id: the id (default: the folders' names, e.g. ``relevance``).
        display_name: shown in the console (default: the id).
        description: one line (default: names the folders and how they are combined).
        force: replace an evaluator of this id whose code differs.
        method: ``"mean"``, ``"weighted_sum"``, ``"min"`` or ``"product"``.
        weights: ``{name: weight}`` for ``mean`` and ``weighted_sum``.
        requirements: pip requirements beyond the folders' own.
        client: the API client (default: one from the environment's credentials).
        wait: wait for the build to finish.
        poll_s: seconds between polls.
        timeout_s: how long to wait for the build.
        on_update: called with the evaluator at each poll.

    Raises:
        ConfigError: a folder is not a valid metric folder, the id is not valid, or no API key
            is set.
        FireworksError: as for `deploy_reward`.
    """
    from rk_agent.rewards.metric_folders import parse_metric_folders

    parsed = parse_metric_folders(folders)
    evaluator_id = validate_resource_id(
        evaluator_id or _slug("-".join(f.name for f in parsed)) or "metrics", "evaluator"
    )
    package = package_metric_folders(
        parsed, directory=evaluator_id, method=method, weights=weights, requirements=requirements
    )
    default = f"Reward Kit metric folders {', '.join(f.name for f in parsed)} ({method})"
    return deploy_package(
        package, evaluator_id, display_name=display_name, description=description or default,
        force=force, client=client, wait=wait, poll_s=poll_s, timeout_s=timeout_s,
        on_update=on_update,
    )  # fmt: skip


def deploy_package(
    package: EvaluatorPackage,
    evaluator_id: str,
    *,
    display_name: str | None = None,
    description: str | None = None,
    force: bool = False,
    client: FireworksClient | None = None,
    wait: bool = True,
    poll_s: float = 10.0,
    timeout_s: float = 900.0,
    on_update: Callable[[Evaluator], None] | None = None,
) -> Deployment:
    """Deploy a package made by `package_reward` or `package_metric_folders`.

    No evaluator of that id -> create it; one with the same code (``commitHash``) -> reuse it;
    one with other code -> replace it when ``force``, else raise. The package is imported in a
    fresh interpreter first, so one that cannot even be imported is never uploaded.

    Raises:
        ConfigError: the package cannot be imported, or no API key is set.
        FireworksError: as for `deploy_reward`.
    """
    package.check_imports()
    own_client = client is None
    client = client or FireworksClient()
    try:
        action, replaced = "created", None
        existing = get_evaluator(client, evaluator_id)
        if existing is not None:
            if existing.commit_hash == package.digest and existing.state != "BUILD_FAILED":
                evaluator = existing
                if wait and existing.state != "ACTIVE":
                    evaluator = wait_for_evaluator(
                        client, evaluator_id, poll_s=poll_s, timeout_s=timeout_s,
                        on_update=on_update,
                    )  # fmt: skip
                return Deployment(evaluator, package, "unchanged")
            if not force:
                raise FireworksError(
                    f"evaluator {evaluator_id!r} already exists with other code (state "
                    f"{existing.state}). Pass force=True (--force) to replace it, or choose "
                    "another id.",
                    status=409,
                    url=f"{client.api_base}{client.account_path(f'evaluators/{evaluator_id}')}",
                )
            delete_evaluator(client, evaluator_id)
            _wait_gone(client, evaluator_id, poll_s=min(poll_s, 2.0), timeout_s=timeout_s)
            action, replaced = "replaced", existing
        try:
            evaluator = create_evaluator(
                client, evaluator_id, package, display_name=display_name, description=description
            )
        except FireworksError as exc:
            # Absent a moment ago: a create whose reply was lost, then retried. Carry on.
            if exc.status != 409 or exc.attempts < 2:
                raise
            evaluator = get_evaluator(client, evaluator_id) or Evaluator()
        upload_evaluator_code(client, evaluator_id, package)
        if wait:
            evaluator = wait_for_evaluator(
                client, evaluator_id, poll_s=poll_s, timeout_s=timeout_s, on_update=on_update
            )
        return Deployment(evaluator, package, action, replaced)
    finally:
        if own_client:
            client.close()


def _wait_gone(
    client: FireworksClient, evaluator_id: str, *, poll_s: float, timeout_s: float
) -> None:
    """Deletion may take a moment: wait until the id is free again."""
    if client.dry_run:
        return
    deadline = time.monotonic() + timeout_s
    while get_evaluator(client, evaluator_id) is not None:
        if time.monotonic() >= deadline:
            raise FireworksError(
                f"evaluator {evaluator_id!r} was deleted but still exists after {timeout_s:g}s."
            )
        time.sleep(poll_s)


# ---------------------------------------------------------------------------- preview


class PreviewSample(ApiModel):
    """The service's result for one sample."""

    success: bool = False
    score: float | None = None
    per_metric_evals: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None


class PreviewResult(ApiModel):
    """What ``:previewEvaluator`` returned.

    Attributes:
        results: one entry per sample scored.
        total_samples: how many were scored.
        total_runtime_ms: the service's time (an int64, sent as a string).
    """

    results: list[PreviewSample] = Field(default_factory=list)
    total_samples: int | None = None
    total_runtime_ms: int | None = None


def preview_evaluator(
    reward: RewardLike | EvaluatorPackage,
    samples: Iterable[Mapping[str, Any]],
    *,
    max_samples: int = 5,
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
    client: FireworksClient | None = None,
) -> PreviewResult:
    """Score samples on the service without deploying (``POST …/evaluators:previewEvaluator``).

    The body carries the evaluator object of a deploy plus its code inline (a ``CODE_SNIPPETS``
    criterion with every file of the package), and one JSON string per sample. Whether the
    service previews code given this way for uploaded-code evaluators is not documented; see the
    docs' Fireworks page.

    Args:
        reward: the reward (or a package made with `package_reward`).
        samples: ``{"messages": [...], "ground_truth": ...}`` dicts.
        max_samples: how many the service scores.
        requirements: pip requirements beyond the reward's own.
        include: more files the reward's file imports.
        client: the API client (default: one from the environment's credentials).

    Raises:
        FireworksError: the API refused the preview.
    """
    if isinstance(reward, EvaluatorPackage):
        package = reward
    else:
        package = package_reward(reward, requirements=requirements, include=include)
    evaluator = _evaluator_object(package, package.reward_name, None)
    evaluator["multiMetrics"] = True
    evaluator["criteria"] = [
        {
            "type": "CODE_SNIPPETS",
            "name": package.reward_name,
            "description": evaluator["description"],
            "codeSnippets": {
                "language": "python",
                "fileContents": package.files,
                "entryFile": "main.py",
                "entryFunc": "evaluate",
            },
        }
    ]
    body = {
        "evaluator": evaluator,
        "sampleData": [json.dumps(dict(s), ensure_ascii=False) for s in samples],
        "maxSamples": max_samples,
    }
    own_client = client is None
    client = client or FireworksClient()
    try:
        answer = client.request(
            "POST", client.account_path("evaluators:previewEvaluator"), json=body
        )
    finally:
        if own_client:
            client.close()
    return PreviewResult.model_validate(answer or {})
