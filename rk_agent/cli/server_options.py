"""What the commands that serve read alike: ``--allow-host`` (``serve``, ``view``) and an
environment named with ``--env-kwargs`` and a ``--token-env`` (``mcp serve``, ``openenv
serve``), defined once.

Main names: `AllowHost`, `served_env`.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Annotated

import typer

from rk_agent.errors import ConfigError

if TYPE_CHECKING:
    from rk_agent.envs.env_setup import EnvSetup

__all__ = ["AllowHost", "served_env"]

AllowHost = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        help="On loopback, also answer requests for this host name (repeatable): the name "
        "a local proxy forwards under. Others get 421; pages of other sites 403.",
        show_default=False,
    ),
]


def served_env(
    env: str, env_kwargs: str | None, token_env: str | None
) -> tuple[EnvSetup, str | None]:
    """The environment to serve (``--env``, ``--env-kwargs`` as a JSON object) and the token
    read from the variable ``--token-env`` names (``None`` without it).

    Raises:
        ConfigError: ``--env-kwargs`` is not a JSON object; the variable is not set.
    """
    from rk_agent.envs.env_setup import EnvSetup

    try:
        kwargs = json.loads(env_kwargs) if env_kwargs else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--env-kwargs is not valid JSON ({exc.msg}): {env_kwargs!r}.") from None
    if not isinstance(kwargs, dict):
        raise ConfigError(f"--env-kwargs must be a JSON object, got {env_kwargs!r}.")
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise ConfigError(f"--token-env {token_env}: that environment variable is not set.")
    return EnvSetup(name=env, kwargs=kwargs), token
