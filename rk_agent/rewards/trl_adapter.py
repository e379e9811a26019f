"""Plug rk-agent rewards into TRL: the ``(prompts, completions, **columns)`` reward signature.

TRL's ``GRPOTrainer`` calls each reward function as
``f(prompts=[...], completions=[...], completion_ids=[...], **dataset_columns)`` with one entry per
sample and expects a list of floats back; ``None`` means "no score for this sample" and TRL
leaves it out. This module turns any rk-agent reward into that shape.

Main names: `to_trl_reward`, `SampleScorer`.

Example:
    >>> from rk_agent import RewardFunction
    >>> trl_reward = RewardFunction("math").get_trl_adapter()
    >>> trl_reward(prompts=["2+2?"], completions=["#### 4"], ground_truth=["4"])
    [1.0]
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from rk_agent.errors import ConfigError, EndpointError, RewardInputError
from rk_agent.rewards.decorator import AnyRewardFn
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.types import EvaluateResult

__all__ = ["SampleScorer", "to_trl_reward"]

logger = logging.getLogger("rk_agent.rewards")

# Keyword arguments TRL adds for its own purposes; they are not sample fields.
_TRL_CONTROL = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})


@runtime_checkable
class SampleScorer(Protocol):
    """What the adapter calls: a named reward with a sync and an async way to score a sample.

    A `RewardFunction` is one (local or remote); any other reward is wrapped into one.
    """

    name: str
    mode: str
    """``"local"`` (runs in this process) or where it runs (``"remote"``, ...)."""

    @property
    def is_async(self) -> bool:
        """Whether scoring needs an event loop (the adapter then awaits `acall`)."""
        ...

    def __call__(self, **kwargs: Any) -> EvaluateResult:
        """Score one sample."""
        ...

    async def acall(self, **kwargs: Any) -> EvaluateResult:
        """Score one sample from async code."""
        ...


class _Decorated:
    """A decorated reward as a `SampleScorer`."""

    def __init__(self, fn: AnyRewardFn) -> None:
        self._fn = fn
        self.name = fn.reward_spec.name
        self.mode = "local"

    @property
    def is_async(self) -> bool:
        return self._fn.reward_spec.is_async

    def __call__(self, **kwargs: Any) -> EvaluateResult:
        return self._fn(**kwargs)  # type: ignore[return-value]  # sync: is_async is false

    async def acall(self, **kwargs: Any) -> EvaluateResult:
        return await self._fn(**kwargs)  # type: ignore[misc]  # awaited only when is_async


def to_trl_reward(
    reward: SampleScorer | RewardLike,
    *,
    name: str | None = None,
    metric: str | None = None,
    log_components: bool = True,
    max_failed_fraction: float = 0.5,
) -> Callable[..., Any]:
    """Wrap a reward as a TRL reward function.

    Works for plain-text datasets (prompts and completions are strings) and conversational ones
    (lists of messages; tool calls in completions are kept). Every other dataset column arrives
    as the sample's own value, so ``ground_truth`` or ``answer`` columns reach the reward.

    Rewards that change with training progress get it: when TRL passes its ``trainer_state``,
    every call also gets ``step`` (the trainer's ``global_step``, 0 at the start), and a local
    reward gets ``trainer_state`` itself (a remote one gets only ``step``, which travels as
    JSON). A reward that names neither parameter (and takes no ``**kwargs``) gets neither::

        @reward_function
        def curriculum_reward(response: str, step: int, **kwargs) -> float:
            ...

    Args:
        reward: a `RewardFunction`, or anything `get_reward_function` accepts.
        name: the name TRL logs it under (``rewards/<name>/mean``); defaults to the reward's.
        metric: return this component metric's score instead of the total (one TRL reward per
            component makes TRL log and weight each separately).
        log_components: when TRL passes ``log_metric``, also log every component's batch mean
            as ``<name>/<metric>`` and the share of invalid scores as ``<name>/invalid_fraction``.
        max_failed_fraction: a remote reward whose endpoint still fails after the client's
            retries gives ``None`` for that sample (a warning counts them per batch); when more
            than this share of a batch failed so, the training step stops with an
            `EndpointError` that says so (the endpoint is down, not one sample bad).

    Returns:
        A function returning one ``float | None`` per sample: ``None`` where the score is
        invalid (or the component is missing), so TRL skips it instead of training on a fake 0.
        It is ``async`` when the reward is, so TRL runs it alongside the others.
    """
    if not 0.0 <= max_failed_fraction <= 1.0:
        raise ConfigError(
            f"max_failed_fraction must be between 0 and 1, got {max_failed_fraction!r}."
        )
    rf = reward if isinstance(reward, SampleScorer) else _Decorated(get_reward_function(reward))
    label = name or (f"{rf.name}.{metric}" if metric else rf.name)

    def rows(prompts: Sequence[Any], completions: Sequence[Any], kwargs: dict[str, Any]) -> list:
        if len(prompts) != len(completions):
            raise RewardInputError(
                f"TRL reward {label!r} got {len(prompts)} prompts but {len(completions)} "
                "completions; they must pair up one to one."
            )
        pairs = enumerate(zip(prompts, completions, strict=True))
        progress = _progress(kwargs.get("trainer_state"), local=rf.mode == "local")
        return [{**_row_kwargs(i, p, c, kwargs), **progress} for i, (p, c) in pairs]

    def finish(results: list[EvaluateResult], kwargs: dict[str, Any]) -> list[float | None]:
        _check_unreached(label, results, max_failed_fraction)
        log_metric = kwargs.get("log_metric")
        if log_components and callable(log_metric) and results:
            _log_components(label, results, log_metric)
        return [_score(result, metric) for result in results]

    if rf.is_async:

        async def async_adapter(
            prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
        ) -> list[float | None]:
            calls = rows(prompts, completions, kwargs)
            results = await asyncio.gather(*(_unreached_as_invalid(rf.acall(**c)) for c in calls))
            return finish(list(results), kwargs)

        adapter: Any = async_adapter
    else:

        def adapter(
            prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
        ) -> list[float | None]:
            calls = rows(prompts, completions, kwargs)
            return finish([_scored_or_unreached(rf, call) for call in calls], kwargs)

    adapter.__name__ = label
    adapter.__qualname__ = label
    adapter.__doc__ = f"TRL reward function for rk-agent reward {label!r}."
    return adapter


_UNREACHED = "EndpointError: "


def _scored_or_unreached(rf: SampleScorer, call: dict[str, Any]) -> EvaluateResult:
    try:
        return rf(**call)
    except EndpointError as exc:  # the client already retried what may pass next time
        return EvaluateResult.invalid(f"{_UNREACHED}{exc}")


async def _unreached_as_invalid(scoring: Awaitable[EvaluateResult]) -> EvaluateResult:
    try:
        return await scoring
    except EndpointError as exc:
        return EvaluateResult.invalid(f"{_UNREACHED}{exc}")


def _check_unreached(label: str, results: list[EvaluateResult], max_fraction: float) -> None:
    """Count the samples an endpoint could not score; stop past ``max_fraction`` of a batch."""
    failed = [r.error for r in results if r.error and r.error.startswith(_UNREACHED)]
    if not failed:
        return
    share = len(failed) / len(results)
    if share > max_fraction:
        raise EndpointError(
            f"TRL reward {label!r}: {len(failed)} of {len(results)} samples of this batch could "
            f"not be scored, more than max_failed_fraction={max_fraction:g}; last error: "
            f"{failed[-1].removeprefix(_UNREACHED)}. Is the reward endpoint up?"
        )
    logger.warning(
        "TRL reward %r: %d of %d samples could not be scored (no score, left out of training): "
        "%s", label, len(failed), len(results), failed[-1].removeprefix(_UNREACHED),
    )  # fmt: skip


def _progress(trainer_state: Any, *, local: bool) -> dict[str, Any]:
    """``step`` (and, for a local reward, ``trainer_state``) from TRL's trainer state."""
    step = getattr(trainer_state, "global_step", None)  # TRL's TrainerState; None: not given
    if step is None:
        return {}
    progress: dict[str, Any] = {"step": int(step)}
    if local:
        progress["trainer_state"] = trainer_state
    return progress


def _row_kwargs(i: int, prompt: Any, completion: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    prompt_messages = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    completion_messages = (
        [{"role": "assistant", "content": completion}]
        if isinstance(completion, str)
        else list(completion)
    )
    call: dict[str, Any] = {
        "messages": prompt_messages + completion_messages,
        "original_messages": prompt_messages,
    }
    for key, value in kwargs.items():
        if key in _TRL_CONTROL:
            continue
        call[key] = value[i] if isinstance(value, list) else value
    return call


def _score(result: EvaluateResult, metric: str | None) -> float | None:
    if not result.is_score_valid:
        return None
    if metric is None:
        return result.score
    component = result.metrics.get(metric)
    if component is None or not component.is_score_valid:
        return None
    return component.score


def _log_components(
    label: str, results: list[EvaluateResult], log_metric: Callable[[str, float], Any]
) -> None:
    valid = [r for r in results if r.is_score_valid]
    log_metric(f"{label}/invalid_fraction", 1.0 - len(valid) / len(results))
    sums: dict[str, list[float]] = {}
    for result in valid:
        for key, component in result.metrics.items():
            if component.is_score_valid and math.isfinite(component.score):
                sums.setdefault(key, []).append(component.score)
    for key, values in sums.items():
        log_metric(f"{label}/{key}", sum(values) / len(values))
