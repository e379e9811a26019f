"""``rk-agent deploy --target NAME`` for every target but Fireworks: options in, a summary out.

`deploy_elsewhere` checks which of the command's options the target takes (an option meant for
another target is an error, not silently dropped), packs Reward Kit's metric folders as the
fireworks target does (``--metrics-folders`` with ``--combine`` / ``--weight``), calls the target
from `rk_agent.rewards.deploy_targets`, and prints what was written and what to run next.

Main names: `deploy_elsewhere`, `TARGET_OPTIONS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rk_agent.errors import ConfigError
from rk_agent.rewards.deploy_targets import get_deploy_target
from rk_agent.selfhost.context import SelfHostDeployment
from rk_agent.terminal_text import terminal_text

if TYPE_CHECKING:
    from rk_agent.rewards.compose import CombineMethod

__all__ = ["TARGET_OPTIONS", "deploy_elsewhere"]

TARGET_OPTIONS: dict[str, tuple[str, ...]] = {
    "docker": ("output", "build", "tag"),
    "gcp-cloud-run": ("output", "region", "project", "service", "api_key", "api_key_secret"),
    "aws-lambda": ("output", "region", "function", "api_key", "api_key_secret"),
}
"""The target-specific options each built-in self-hosting target takes."""

_FLAGS = {
    "output": "--output", "build": "--build", "tag": "--tag", "region": "--region",
    "project": "--project", "service": "--service", "function": "--function",
    "api_key": "--api-key", "api_key_secret": "--api-key-secret",
}  # fmt: skip


def deploy_elsewhere(
    target: str,
    reward: str | None,
    *,
    metrics_folders: Sequence[str] | None,
    evaluator_id: str | None,
    method: CombineMethod = "mean",
    weights: Mapping[str, float] | None = None,
    description: str | None,
    force: bool,
    requirements: Sequence[str],
    include: Iterable[str | Path],
    dry_run: bool,
    rk_agent: str | None,
    **options: Any,
) -> Any:
    """Deploy ``reward`` (or ``metrics_folders``) to ``target`` (not ``fireworks``).

    Metric folders are packed into one reward (their ``evaluate`` functions combined by
    ``method`` and ``weights``), as for Fireworks, and handed to the target as a package.

    Raises:
        UnknownNameError: no such target (with the closest name).
        ConfigError: a bad metric folder, or an option the target does not take (``--build``
            with ``gcp-cloud-run``).
    """
    deploy = get_deploy_target(target)  # an unknown name fails here, with a suggestion
    what: Any = reward
    if metrics_folders:
        from rk_agent.fireworks.packaging import package_metric_folders

        what = package_metric_folders(metrics_folders, method=method, weights=weights)
    known = TARGET_OPTIONS.get(target)
    given = {k: v for k, v in options.items() if v not in (None, False)}
    if known is not None and "api_key" not in known:
        # --api-key also comes from $RK_AGENT_SERVER_API_KEY, set for `serve` as much as for
        # deploys: a target that takes the key at run time (docker run -e) just ignores it.
        given.pop("api_key", None)
    if known is not None:
        wrong = [k for k in given if k not in known]
        if wrong:
            flags = ", ".join(_FLAGS.get(k, k) for k in wrong)
            takes = ", ".join(_FLAGS.get(k, k) for k in known)
            raise ConfigError(
                f"--target {target} takes {takes} (and --id, --requirement, --include, "
                f"--dry-run), not {flags}. Drop {flags}."
            )
    if dry_run:
        given["dry_run"] = True
    if rk_agent:
        given["rk_agent"] = rk_agent
    if known is not None:  # a built-in self-hosting target prints through typer
        given["echo"] = _echo
    result = deploy(
        what, evaluator_id=evaluator_id, description=description, force=force,
        requirements=tuple(requirements), include=tuple(include), **given,
    )  # fmt: skip
    if isinstance(result, SelfHostDeployment):
        _summary(result, dry_run)
    return result


def _echo(text: str) -> None:
    """Print a line of the deploy (paths, commands, the files it writes), escaped."""
    typer.echo(terminal_text(text))


def _summary(result: SelfHostDeployment, dry_run: bool) -> None:
    if dry_run:
        _echo(
            f"Dry run: nothing was written to {result.directory}/ and nothing was run (keys "
            "show as ***)."
        )
        return
    if result.ran:
        _echo(f"Done: {result.target} deployment from {result.directory}/.")
    for step in result.next_steps:
        _echo(f"Next: {step}")
