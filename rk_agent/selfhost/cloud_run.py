"""``--target gcp-cloud-run``: the Docker build context, deployed with ``gcloud run deploy``.

Cloud Run builds the folder's ``Dockerfile`` (`rk_agent.selfhost.docker`) with Cloud Build and
runs it with ``$PORT`` set; ``gcloud`` uploads the folder less what its ``.gcloudignore`` names
(credential-like files), so the command is::

    gcloud run deploy SERVICE --source DIR --region REGION [--project PROJECT] --port 8080
        --allow-unauthenticated --quiet
        --set-secrets=RK_AGENT_SERVER_API_KEY=SECRET:latest   (a Secret Manager secret), or
        --set-env-vars=RK_AGENT_SERVER_API_KEY=KEY            (a key you hold; shown as ***)

``--allow-unauthenticated`` lets an RL service reach the URL without Google credentials; the
reward server itself demands the bearer key, and refuses to start without one. The flags follow
the documented ``gcloud run deploy`` reference; they are tested against a recording stand-in
for ``gcloud``, not against Google Cloud (contract only).

Main names: `deploy_cloud_run`, `cloud_run_commands`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent.errors import ConfigError
from rk_agent.rewards.registry import RewardLike
from rk_agent.rewards.remote import API_KEY_ENV
from rk_agent.selfhost.context import (
    Command,
    SelfHostDeployment,
    ignore_file,
    reject_unknown,
    reward_name,
    run_commands,
    write_or_show,
)
from rk_agent.selfhost.docker import DEFAULT_PORT, docker_context, image_tag

if TYPE_CHECKING:
    from rk_agent.fireworks.packaging import EvaluatorPackage

__all__ = ["DEFAULT_REGION", "cloud_run_commands", "deploy_cloud_run"]

DEFAULT_REGION = "us-central1"
"""The region when none is given."""

_INSTALL = "Install the Google Cloud CLI and run `gcloud auth login`. "


def cloud_run_commands(
    directory: Path,
    service: str,
    *,
    region: str = DEFAULT_REGION,
    project: str | None = None,
    api_key: str | None = None,
    api_key_secret: str | None = None,
) -> list[Command]:
    """The ``gcloud run deploy`` command for a build context in ``directory``.

    Raises:
        ConfigError: neither or both of ``api_key`` and ``api_key_secret``.

    Example:
        >>> commands = cloud_run_commands(Path("ctx"), "rk-exact", api_key_secret="reward-key")
        >>> [c.shown() for c in commands]  # doctest: +NORMALIZE_WHITESPACE
        ['gcloud run deploy rk-exact --source ctx --region us-central1 --port 8080
          --allow-unauthenticated --quiet --set-secrets=RK_AGENT_SERVER_API_KEY=reward-key:latest']
    """
    if (api_key is None) == (api_key_secret is None):
        raise ConfigError(
            "expected the server's API key as a Secret Manager secret (--api-key-secret NAME, "
            f"preferred) or a value (--api-key or ${API_KEY_ENV}), got "
            f"{'both' if api_key else 'neither'}. The container refuses to serve without one."
        )
    argv = ["gcloud", "run", "deploy", service, "--source", str(directory), "--region", region]
    if project:
        argv += ["--project", project]
    argv += ["--port", str(DEFAULT_PORT), "--allow-unauthenticated", "--quiet"]
    if api_key_secret:
        secret = api_key_secret if ":" in api_key_secret else f"{api_key_secret}:latest"
        argv.append(f"--set-secrets={API_KEY_ENV}={secret}")
        return [Command(tuple(argv))]
    argv.append(f"--set-env-vars={API_KEY_ENV}={api_key}")
    return [Command(tuple(argv), secrets=(str(api_key),))]


def deploy_cloud_run(
    reward: RewardLike | EvaluatorPackage,
    *,
    evaluator_id: str | None = None,
    description: str | None = None,
    force: bool = False,
    output: str | Path | None = None,
    service: str | None = None,
    region: str = DEFAULT_REGION,
    project: str | None = None,
    api_key: str | None = None,
    api_key_secret: str | None = None,
    dry_run: bool = False,
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
    rk_agent: str | None = None,
    echo: Callable[[str], None] = print,
    **unknown: Any,
) -> SelfHostDeployment:
    """Write the build context and run ``gcloud run deploy`` on it (the ``"gcp-cloud-run"`` target).

    Args:
        reward: a decorated function, a registered name, ``file.py::fn`` or ``module:fn``, or
            a package of metric folders (`rk_agent.fireworks.packaging.package_metric_folders`).
        evaluator_id: the service name unless ``service`` is given (default: ``rk-reward-<name>``).
        description, force: as for `rk_agent.selfhost.docker.deploy_docker`.
        output: the folder (default ``./rk-deploy/<service>``).
        service: the Cloud Run service name.
        region: the Cloud Run region.
        project: the Google Cloud project (default: gcloud's configured one).
        api_key: the server's key, set as an environment variable (shown as ``***``).
        api_key_secret: a Secret Manager secret holding the key, ``NAME`` or ``NAME:VERSION``.
        dry_run: list the files (names, sizes, hashes) and the command; write and run nothing.
        requirements, include, rk_agent: as in `rk_agent.selfhost.context.render_context`.
        echo: where to print.

    Raises:
        ConfigError: an unknown option, no key (or two), ``output`` holds other files, or
            ``gcloud`` is not installed.
        EndpointError: ``gcloud`` failed.
    """
    reject_unknown(
        unknown,
        "gcp-cloud-run",
        ("output", "service", "region", "project", "api_key", "api_key_secret", "dry_run"),
    )
    service = service or image_tag(evaluator_id or reward_name(reward))
    directory = Path(output) if output else Path("rk-deploy", service)
    commands = cloud_run_commands(
        directory,
        service,
        region=region,
        project=project,
        api_key=api_key,
        api_key_secret=api_key_secret,
    )
    context = docker_context(
        reward, requirements=requirements, include=include, rk_agent=rk_agent, tag=service
    )
    context = context.with_files({".gcloudignore": ignore_file(context, docker=False)})
    write_or_show(context, directory, dry_run=dry_run, echo=echo)
    run_commands(commands, dry_run=dry_run, echo=echo, install_hint=_INSTALL)
    return SelfHostDeployment(
        "gcp-cloud-run",
        directory,
        context.names,
        commands=tuple(c.shown() for c in commands),
        ran=not dry_run,
    )
