"""Composing rewards: several rewards become one, with every component still visible.

Main names: `combine`, `CombineMethod`.

Example:
    >>> from rk_agent import combine
    >>> reward = combine({"answer": "math", "format": "format"}, weights={"answer": 1.0,
    ...                  "format": 0.2}, gate="format", gate_threshold=1.0)
    >>> result = reward(messages=[{"role": "user", "content": "2+2?"},
    ...                           {"role": "assistant", "content": "4"}], ground_truth="4")
    >>> result.score   # the format gate fails, so the whole reward is 0
    0.0
    >>> result.metrics["answer"].score
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from rk_agent.errors import ConfigError
from rk_agent.rewards.decorator import AnyRewardFn, reward_function
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.types import EvaluateResult, MetricResult, ScoreFault

__all__ = ["CombineMethod", "combine"]

CombineMethod = Literal["weighted_sum", "mean", "min", "product"]
_METHODS = ("weighted_sum", "mean", "min", "product")


def combine(
    rewards: Mapping[str, RewardLike] | Sequence[RewardLike],
    *,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    method: CombineMethod = "weighted_sum",
    gate: RewardLike | None = None,
    gate_threshold: float = 1.0,
    name: str = "combined",
) -> AnyRewardFn:
    """Combine several rewards into one decorated reward.

    Every component is called with the same arguments. The result's metrics hold each
    component's score under its name and the component's own metrics namespaced under it
    (``safety.safety_penalty``); ``weights`` records the weights used. If a component that
    counts has an invalid score, the combined score is invalid too, with every such error
    listed. A component of weight 0 under ``weighted_sum`` or ``mean`` does not count (it is a
    metric): its invalid score is kept in the metrics and the reason, and the total stays valid.

    Args:
        rewards: ``{name: reward}``, or a list of rewards named after themselves. A reward is a
            registered name, ``module:fn``, ``file.py::fn`` or a callable.
        weights: one weight per component (mapping by name, or a list in order); default 1.0.
        method: ``"weighted_sum"`` (sum of weight x score), ``"mean"`` (weighted mean),
            ``"min"`` (the worst component) or ``"product"`` (product of scores). ``min`` and
            ``product`` ignore the weights.
        gate: a reward that must pass: when its score is below ``gate_threshold`` the combined
            score is 0.0 (use it for "the format is a hard requirement"). Its metrics are kept
            under ``gate.<name>``.
        gate_threshold: the score the gate must reach.
        name: the combined reward's name.

    Raises:
        ConfigError: no rewards, duplicate names, unknown method, or weights that do not match.
    """
    components = _components(rewards)
    weight_map = _weights(components, weights)
    if method not in _METHODS:
        raise ConfigError(f"unknown combine method {method!r}; expected one of {_METHODS}.")
    if method == "mean" and sum(weight_map.values()) == 0:
        raise ConfigError("method='mean' needs weights that do not sum to zero.")
    gate_fn = get_reward_function(gate) if gate is not None else None
    all_fns = [*components.values(), *([gate_fn] if gate_fn else [])]
    is_async = any(fn.reward_spec.is_async for fn in all_fns)
    merge = _Merge(weight_map, method, gate_fn is not None, gate_threshold)
    description = f"{method} of {', '.join(components)}" + (" (gated)" if gate_fn else "")

    if is_async:

        async def combined_async(messages: Any = None, **kwargs: Any) -> EvaluateResult:
            import asyncio

            if messages is not None:
                kwargs["messages"] = messages
            names = list(components)
            calls = [_acall(components[n], kwargs) for n in names]
            if gate_fn is not None:
                calls.append(_acall(gate_fn, kwargs))
            results = await asyncio.gather(*calls)
            gate_result = results[len(names)] if gate_fn is not None else None
            return merge(dict(zip(names, results[: len(names)], strict=True)), gate_result)

        return reward_function(name=name, description=description)(combined_async)

    def combined(messages: Any = None, **kwargs: Any) -> EvaluateResult:
        if messages is not None:
            kwargs["messages"] = messages
        results = {n: fn(**kwargs) for n, fn in components.items()}
        gate_result = gate_fn(**kwargs) if gate_fn is not None else None
        return merge(results, gate_result)  # type: ignore[arg-type]

    return reward_function(name=name, description=description)(combined)


async def _acall(fn: AnyRewardFn, kwargs: dict[str, Any]) -> EvaluateResult:
    if fn.reward_spec.is_async:
        return await fn(**kwargs)  # type: ignore[misc]
    return fn(**kwargs)  # type: ignore[return-value]


def _components(rewards: Mapping[str, RewardLike] | Sequence[RewardLike]) -> dict[str, AnyRewardFn]:
    if isinstance(rewards, (str, bytes)) or callable(rewards):
        raise ConfigError("combine() takes several rewards: a {name: reward} dict or a list.")
    if isinstance(rewards, Mapping):
        components = {str(k): get_reward_function(v) for k, v in rewards.items()}
    else:
        components = {}
        for item in rewards:
            fn = get_reward_function(item)
            if fn.reward_spec.name in components:
                raise ConfigError(
                    f"two components are named {fn.reward_spec.name!r}; pass a dict "
                    "{name: reward} to name them apart."
                )
            components[fn.reward_spec.name] = fn
    if not components:
        raise ConfigError("combine() needs at least one reward.")
    return components


def _weights(
    components: Mapping[str, AnyRewardFn], weights: Mapping[str, float] | Sequence[float] | None
) -> dict[str, float]:
    if weights is None:
        return dict.fromkeys(components, 1.0)
    if isinstance(weights, Mapping):
        unknown = set(weights) - set(components)
        if unknown:
            raise ConfigError(
                f"weights name {sorted(unknown)}, which are not components; the components are "
                f"{list(components)}."
            )
        return {n: float(weights.get(n, 1.0)) for n in components}
    if len(weights) != len(components):
        raise ConfigError(
            f"got {len(weights)} weights for {len(components)} rewards ({list(components)}); "
            "give one weight per reward."
        )
    return {n: float(w) for n, w in zip(components, weights, strict=True)}


class _Merge:
    """Turns component results into the combined `EvaluateResult`."""

    def __init__(
        self, weights: dict[str, float], method: str, gated: bool, gate_threshold: float
    ) -> None:
        self.weights = weights
        self.method = method
        self.gated = gated
        self.gate_threshold = gate_threshold

    def __call__(
        self, results: dict[str, EvaluateResult], gate: EvaluateResult | None
    ) -> EvaluateResult:
        metrics: dict[str, MetricResult] = {}
        errors: list[str] = []
        parts: list[str] = []
        fault: ScoreFault | None = None  # NON_FINITE when a component's score was NaN or inf
        for name, result in results.items():  # one pass: this runs for every step
            _add_component(metrics, name, result)
            if result.is_score_valid:
                parts.append(f"{name}={result.score:.3g}")
            elif self.counts(name):
                errors.append(f"{name}: {result.error}")
                fault = fault or _non_finite(result)
            else:  # a zero-weight component is a metric: its failure cannot void the total
                parts.append(f"{name}=invalid (weight 0: {result.error})")
        if gate is not None:
            _add_component(metrics, "gate", gate)
            if not gate.is_score_valid:
                errors.append(f"gate: {gate.error}")
                fault = fault or _non_finite(gate)
        if errors:
            return EvaluateResult(
                score=0.0,
                is_score_valid=False,
                error="; ".join(errors),
                reason="a component's score is invalid: " + "; ".join(errors),
                metrics=metrics,
                weights=self.weights,
                fault=fault,
            )
        score = self._aggregate(results)
        listed = ", ".join(parts)
        reason = f"{self.method}: {listed}"
        if gate is not None and gate.score < self.gate_threshold:
            score = 0.0
            reason = f"gate failed ({gate.score:.3g} < {self.gate_threshold:g}), score 0; {listed}"
        return EvaluateResult(score=score, reason=reason, metrics=metrics, weights=self.weights)

    def counts(self, name: str) -> bool:
        """Whether the component's score enters the total: every one does under ``min`` and
        ``product``, which ignore the weights; under the weighted methods, a non-zero weight."""
        return self.method not in ("weighted_sum", "mean") or self.weights[name] != 0

    def _aggregate(self, results: dict[str, EvaluateResult]) -> float:
        if self.method in ("weighted_sum", "mean"):
            weights = self.weights
            total = sum(weights[n] * r.score for n, r in results.items() if weights[n] != 0)
            return total if self.method == "weighted_sum" else total / sum(weights.values())
        if self.method == "min":
            return min(r.score for r in results.values())
        return math.prod(r.score for r in results.values())


def _non_finite(result: EvaluateResult) -> ScoreFault | None:
    return ScoreFault.NON_FINITE if result.fault is ScoreFault.NON_FINITE else None


def _add_component(metrics: dict[str, MetricResult], name: str, result: EvaluateResult) -> None:
    metrics[name] = MetricResult(
        score=result.score, reason=result.reason, is_score_valid=result.is_score_valid
    )
    for key, metric in result.metrics.items():
        metrics[f"{name}.{key}"] = metric
