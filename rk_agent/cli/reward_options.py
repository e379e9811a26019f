"""A reward's options typed on the command line (``--kwargs``), checked against its signature.

A reward drops the keyword arguments it does not take (dataset rows carry many columns), so an
option with a typo (``{"partial_credt": true}``) would be dropped silently. `check_reward_options`
refuses a name the reward does not take when it has no ``**kwargs``, and one that is close to a
name it takes in any case (a ``**kwargs`` reward passes the rest on: those are let through).

Main names: `check_reward_options`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from rk_agent.errors import ConfigError, did_you_mean

__all__ = ["check_reward_options"]

_INPUTS = frozenset({"messages", "original_messages", "response", "completion", "prompt"})
"""What every call passes: never an option."""


def check_reward_options(reward: str, options: Mapping[str, object]) -> None:
    """Raise when ``--kwargs`` names an option ``reward`` does not take (a typo, most likely).

    Raises:
        ConfigError: one line naming the option, the closest name the reward takes ("did you
            mean") and every option it takes.
    """
    if not options:
        return
    from rk_agent.rewards.registry import get_reward_function

    function = inspect.unwrap(get_reward_function(reward))
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a callable whose signature cannot be read: let it be
        return
    taken = sorted(
        name
        for name, p in parameters.items()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name not in _INPUTS
    )
    passes_on = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    for name in options:
        if name in taken:
            continue
        hint = did_you_mean(name, taken)
        if hint or not passes_on:
            raise ConfigError(
                f"--kwargs names {name!r}, which the reward {reward!r} does not take.{hint} "
                f"It takes: {', '.join(taken) or 'no options'}."
            )
