"""The combined rewards of environments: each environment's step and episode rewards, weighted.

An environment scores its steps and its episode with one combined reward each
(`rk_agent.rewards.compose.combine`); `weighted_reward` builds it, and shares one per set of
decorated rewards and weights between the live environments built with them (held weakly: a
reward made for one environment, such as an imported environment's, which reads that
environment's episode, goes with it).

Main names: `weighted_reward`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.rewards.compose import combine
from rk_agent.rewards.decorator import RewardFn, is_reward_function
from rk_agent.rewards.registry import RewardLike, get_reward_function

__all__ = ["weighted_reward"]

_combined: dict[tuple[Any, ...], weakref.ref[Any]] = {}
_COMBINED_KEPT = 256


def weighted_reward(
    rewards: Mapping[str, RewardLike], weights: Mapping[str, float] | None, kind: str
) -> RewardFn | None:
    """The combined reward of one kind; one per set of decorated rewards and weights, shared
    by the environments built with them (a rollout builds one per concurrent episode, and
    combining took nine tenths of building one): a combined reward keeps no state of its own,
    and its parts are the very objects given. Rewards named by a string are resolved (and so
    made) anew for each environment, as a registry entry may make a fresh object each time."""
    if not rewards:
        return None
    parts = tuple(rewards.values())
    shared = all(is_reward_function(r) for r in parts)
    key = (kind, tuple(rewards), tuple(map(id, parts)), tuple((weights or {}).items()))
    if shared:
        held = _combined.get(key)
        found = held() if held is not None else None
        # Alive, it holds its parts, so their ids are still theirs.
        if found is not None:
            return found
    combined = _combine(rewards, weights, kind)
    if shared:
        if len(_combined) >= _COMBINED_KEPT:
            for stale in [k for k, ref in _combined.items() if ref() is None]:
                del _combined[stale]
        if len(_combined) < _COMBINED_KEPT:
            _combined[key] = weakref.ref(combined)
    return combined


def _combine(
    rewards: Mapping[str, RewardLike], weights: Mapping[str, float] | None, kind: str
) -> RewardFn:
    resolved = {name: get_reward_function(r) for name, r in rewards.items()}
    if any(fn.reward_spec.is_async for fn in resolved.values()):
        raise ConfigError(
            f"{kind} rewards of an environment must be synchronous (environments step in a "
            f"worker thread); async: {[n for n, f in resolved.items() if f.reward_spec.is_async]}"
        )
    combined = combine(resolved, weights=dict(weights) if weights else None, name=f"{kind}_reward")
    return combined  # type: ignore[return-value]  # sync: no component is async
