"""What building a run from its config would do beyond rk-agent's own code.

A run folder may come from elsewhere, and its ``config.yaml`` names the environment, the
rewards, the MCP servers and the model server its episodes were played with. Building them
again (``rk-agent replay``, ``rescore``, ``rollout --fork``, ``rollout --resume``) would import
the files it names, start the commands it names, connect to the URLs it names and read the
environment variables it names. `env_wants` and `policy_wants` list each such thing as a phrase
for the refusal (`rk_agent.runs.run_trust.require_trust`); an empty list means the config
names only what is registered here (built-in and entry-point environments and rewards, which
this user installed) and nothing else that runs.

Main names: `env_wants`, `policy_wants`.

Example:
    >>> from rk_agent.envs.env_setup import EnvSetup
    >>> env_wants(EnvSetup(name="tools", rewards=["math"]))
    []
    >>> env_wants(EnvSetup(name="evil.py::Env"))
    ['import evil.py (environment evil.py::Env)']
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from rk_agent.envs.env_setup import EnvSetup
from rk_agent.runs.config import RolloutConfig

__all__ = ["env_wants", "policy_wants"]

_SHOWN = 120  # characters of a command shown
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_REWARD_KWARGS = ("episode_rewards", "step_rewards")  # ChatEnv's: reward specs it loads


def env_wants(setup: EnvSetup) -> list[str]:
    """What building ``setup`` would do that is not rk-agent's or a registered plug-in's:
    import a file or module (the environment, a reward, also one named in ``env_kwargs``), run
    model-written code without isolation (``sandbox: process``), start or connect to MCP
    servers and read the variables their configuration names."""
    wants = _code(setup.name, "environment")
    for spec in setup.rewards:
        wants += _code(spec, "reward")
    for key in _REWARD_KWARGS:
        for spec in _strings(setup.kwargs.get(key)):
            wants += _code(spec, "reward")
    if setup.kwargs.get("sandbox") == "process":
        wants.append("run model-written code without isolation (env_kwargs sandbox: process)")
    if setup.mcp is not None:
        wants += _mcp(setup.mcp)
    return wants


def policy_wants(config: RolloutConfig) -> list[str]:
    """What playing on with ``config``'s policy would do (``--resume``): connect to its model
    server, read the variable it names as the API key, load the model it names, join the Ray
    cluster it names."""
    wants = []
    if config.base_url:
        wants.append(f"connect to {config.base_url} (base_url)")
    elif config.provider in ("fireworks", "openai"):
        wants.append(f"call the {config.provider} API (provider {config.provider})")
    if config.api_key_env:
        wants.append(f"send ${{{config.api_key_env}}} as the API key (api_key_env)")
    if config.model is not None and not config.base_url and config.provider in (None, "local"):
        from rk_agent.policies.local_model import is_embedded

        if not is_embedded(config.model):
            wants.append(f"load the model {config.model} (model)")
    if config.workers and config.ray.address:
        wants.append(f"join the Ray cluster at {config.ray.address} (ray.address)")
    return wants


def _code(spec: str, kind: str) -> list[str]:
    """``import FILE (kind SPEC)`` for a ``file.py::name`` or ``module:name`` that no
    registered name stands for; nothing for a registered one. A plain name that is not
    registered is refused by the registry before anything is imported. An environment of an
    installed source (``reasoning-gym:chain_sum``) wants what its source says
    (`rk_agent.envs.sources.EnvSource.wants`: a URL it connects to, a module it imports)."""
    if _registered(spec, kind):
        return []
    if kind == "environment":
        from rk_agent.envs.sources import get_source, split_source_spec

        source = split_source_spec(spec)
        if source is not None:
            return [
                f"{want} (environment {spec})" for want in get_source(source[0]).wants(source[1])
            ]
    if "::" in spec:
        return [f"import {spec.partition('::')[0]} ({kind} {spec})"]
    if ":" in spec:
        return [f"import the module {spec.partition(':')[0]} ({kind} {spec})"]
    return []


def _registered(spec: str, kind: str) -> bool:
    """Whether ``spec`` is a registered name, a built-in's Gymnasium id, or the very
    ``module:attr`` a registered name stands for."""
    if kind == "environment":
        from rk_agent.envs.registry import GYMNASIUM_IDS, REGISTRY as ENVS

        registry: Any = ENVS
        if spec in GYMNASIUM_IDS.values():
            return True
    else:
        from rk_agent.rewards.registry import REGISTRY as REWARDS

        registry = REWARDS
    return spec in registry.names() or spec in registry.builtins.values()


def _strings(value: Any) -> list[str]:
    """The strings of a reward option: a spec, a list of them or a mapping name -> spec."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _mcp(mcp: str | dict[str, Any]) -> list[str]:
    """Each MCP server's command or URL, and the variables its configuration reads."""
    if isinstance(mcp, str) and not mcp.lstrip().startswith("{"):
        return [f"start or connect to the MCP servers listed in {mcp} (mcp)"]
    try:
        data = json.loads(mcp) if isinstance(mcp, str) else mcp
    except ValueError:
        data = None
    servers = data.get("mcpServers", data) if isinstance(data, Mapping) else None
    if not isinstance(servers, Mapping) or not servers:
        return ["start or connect to the MCP servers of its inline mcp configuration"]
    wants = []
    for name, server in servers.items():
        where = f"MCP server {name!r}"
        if not isinstance(server, Mapping):
            wants.append(f"start or connect to {where}")
            continue
        if server.get("command") is not None:
            words = [str(server["command"]), *map(str, server.get("args") or [])]
            wants.append(f"start {_short(shlex.join(words))} ({where})")
        if server.get("url") is not None:
            wants.append(f"connect to {_short(str(server['url']))} ({where})")
        if server.get("command") is None and server.get("url") is None:
            wants.append(f"start or connect to {where}")
        names = sorted(set(_VARIABLE.findall(json.dumps(server))))
        if names:
            shown = ", ".join(f"${{{n}}}" for n in names)
            wants.append(f"expand {shown} into its settings ({where})")
    return wants


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
