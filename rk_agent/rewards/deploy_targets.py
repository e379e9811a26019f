"""Where ``reward.deploy(...)`` sends a reward: deploy targets by name, loaded when used.

The core reward types know no deploy target. ``reward.deploy(target="fireworks")`` (the default)
looks the target up here and calls it. Targets come from the ``rk_agent.deploy_targets``
entry-point group, loaded only when used (so the Fireworks client and httpx load only for a
deploy), or at run time from `register_deploy_target`. rk-agent's own are entry points of its
package metadata too: ``fireworks`` (`rk_agent.fireworks`), and the self-hosting targets
``docker``, ``gcp-cloud-run`` and ``aws-lambda`` (`rk_agent.selfhost`); so the reward API
names no package above it, and those packages plug in as any other would.

A target is a callable ``target(reward, *, evaluator_id, description, force, **options)``.

The way back, calling a deployed reward by its name (``RewardFunction(name="my-eval",
mode="remote")``), goes through a second small registry of *hosted reward sources*: a source is
a callable ``source(name, *, api_key, timeout) -> scorer`` that finds the deployed reward and
returns ``scorer(call_kwargs) -> EvaluateResult``. Sources come from the
``rk_agent.hosted_rewards`` entry-point group (rk-agent's own: ``fireworks``,
`rk_agent.fireworks.hosted`) or `register_hosted_source`.

Main names: `get_deploy_target`, `register_deploy_target`, `deploy_target_names`,
`get_hosted_source`, `register_hosted_source`, `hosted_source_names`.

Example:
    >>> from rk_agent.rewards.deploy_targets import deploy_target_names
    >>> "fireworks" in deploy_target_names()
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.registry import NameRegistry

__all__ = [
    "DeployTarget",
    "HostedSource",
    "deploy_target_names",
    "get_deploy_target",
    "get_hosted_source",
    "hosted_source_names",
    "register_deploy_target",
    "register_hosted_source",
]

DeployTarget = Callable[..., Any]
"""``target(reward, *, evaluator_id, description, force, **options) -> what it deployed``."""

_TARGETS = NameRegistry[DeployTarget]("deploy target", "rk_agent.deploy_targets", {})


HostedSource = Callable[..., Any]
"""``source(name, *, api_key, timeout) -> scorer``, where ``scorer(call_kwargs)`` returns an
`EvaluateResult` for one sample."""

_HOSTED = NameRegistry[HostedSource]("hosted reward source", "rk_agent.hosted_rewards", {})


def register_deploy_target(
    name: str, target: DeployTarget | str, *, overwrite: bool = False
) -> None:
    """Add a deploy target: a callable, or a ``"module:attr"`` string loaded when first used.

    Raises:
        ConfigError: ``name`` is taken and ``overwrite`` is false.
    """
    _TARGETS.add(name, target, overwrite=overwrite)


def get_deploy_target(name: str) -> DeployTarget:
    """The deploy target called ``name`` (loaded now if it is a ``"module:attr"`` string).

    Raises:
        UnknownNameError: no such target (with the closest name suggested).
        ConfigError: what the name points at is not callable.
    """
    return _callable(
        _TARGETS, name, "Pass target=... with one of these names.",
        "target(reward, *, evaluator_id, description, force, **options)",
    )  # fmt: skip


def deploy_target_names() -> list[str]:
    """The names of every known deploy target, sorted."""
    return sorted(_TARGETS.names())


def register_hosted_source(
    name: str, source: HostedSource | str, *, overwrite: bool = False
) -> None:
    """Add a hosted reward source: a callable, or a ``"module:attr"`` string loaded when used.

    Raises:
        ConfigError: ``name`` is taken and ``overwrite`` is false.
    """
    _HOSTED.add(name, source, overwrite=overwrite)


def get_hosted_source(name: str) -> HostedSource:
    """The hosted reward source called ``name`` (loaded now if it is a ``"module:attr"`` string).

    Raises:
        UnknownNameError: no such source (with the closest name suggested).
        ConfigError: what the name points at is not callable.
    """
    return _callable(
        _HOSTED, name, "Register it with register_hosted_source(name, source).",
        "source(name, *, api_key, timeout) -> scorer",
    )  # fmt: skip


def _callable(registry: NameRegistry[Any], name: str, hint: str, signature: str) -> Any:
    entry = registry.load(name, hint=hint)
    if not callable(entry):
        raise ConfigError(
            f"{registry.kind} {name!r} is a {type(entry).__name__}, not a callable; register a "
            f"function {signature}."
        )
    return entry


def hosted_source_names() -> list[str]:
    """The names of every known hosted reward source, sorted."""
    return sorted(_HOSTED.names())
