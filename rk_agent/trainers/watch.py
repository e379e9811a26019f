"""Watching a GRPO run: the watch's signals and alarms at every step, in both loops.

`WatchRecorder` wraps the trainer's reward functions (same names, same results) and keeps what
each generation batch produced: every function's scores, by name, and the episodes'
`Trajectory`s. The trainer opens each batch before its reward functions run
(`WatchRecorder.begin`, a batch hook of `rk_agent.trainers.hooked_trainer.HookedGRPOTrainer`,
with the batch's trajectories: the rk loop's ``trajectory`` column, or those TRL's loop read
from its environments), so nothing depends on the order TRL calls the reward functions in.
`WatchCallback` turns what was kept into one `WatchSignals` per optimizer step
(`rk_agent.runs.watch`; groups are TRL's, ``num_generations`` consecutive rows), feeds the
alarms (`rk_agent.runs.alarms`), and writes:

- ``<output_dir>/watch.jsonl`` (`rk_agent.runs.watch_log`): one line per step, its
  signals and the alarms it raised;
- ``watch/...`` figures in every TRL log (and so in wandb and the console), with
  ``watch/alarms``, the number raised so far;
- each alarm once, as a one-line warning on the ``rk_agent.trainers.watch`` logger, and to
  ``on_alarm`` (``rk-agent train`` keeps them in the run record);
- with a `rk_agent.trainers.drift_rate.DriftMeter`, the token drift the step would have had
  (``tokens/drift_episodes``, ``tokens/drift_turns``) in the log and in the step's line;
- with dynamic sampling or task retirement (`rk_agent.trainers.group_sampling`), what they did
  in the step (`rk_agent.runs.group_sampling.StepSampling`) in its line, and in the
  zero-spread alarm's message. The signals are those of every group the step played, the
  dropped ones too: the alarm says how many of them the step did not train on.

With ``stop_on_alarm`` the first alarm ends training after its step (`stopped_by`); it is
refused (`ConfigError`) when training runs in several processes, which would not agree.

The reward of a row is TRL's: the weighted sum of the functions' scores, ``None`` ones left out
(``None`` when every score is). A row with an episode has one only when the episode's return
does (`rk_agent.runs.trajectory.Trajectory.episode_return`, the rule every reader of episodes
uses), and it is NaN when a score of the episode came out NaN or infinite. Single-turn runs
have no trajectories: then each function with a weight is a component, lengths are counted
from ``completion_ids`` (truncated: as long as ``max_completion_length``) and the answer is the
completion's text.

Main names: `WatchRecorder`, `WatchCallback`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from transformers import TrainerCallback

from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import Alarm, AlarmOptions, AlarmWatch
from rk_agent.runs.group_sampling import StepSampling
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.watch import EpisodeOutcome, WatchSignals, outcome_of, watch_signals
from rk_agent.runs.watch_log import append_watch_line
from rk_agent.trainers.drift_rate import DriftCount, DriftMeter
from rk_agent.trainers.rewards import RewardFunc, weighted_rewards
from rk_agent.trainers.scored_batch import ScoredBatch

__all__ = ["WatchCallback", "WatchRecorder"]

logger = logging.getLogger(__name__)


@dataclass
class _Batch:
    scores: dict[str, list[Any]] = field(default_factory=dict)
    trajectories: list[Trajectory] | None = None
    completion_ids: list[Any] | None = None
    completions: list[Any] | None = None


class WatchRecorder:
    """Keeps each generation batch's reward scores and trajectories (thread-safe).

    A batch opens when the trainer announces it (`begin`, a batch hook of
    `rk_agent.trainers.hooked_trainer.HookedGRPOTrainer`), before any reward function runs;
    each wrapped function then keeps its scores in it under its name, whatever order TRL calls
    them in. Without that hook (the functions called on their own), a function opens a new
    batch when none is open or when it has scored the open one already.
    """

    def __init__(self) -> None:
        self._batches: list[_Batch] = []
        self._lock = threading.Lock()

    def wrap(self, funcs: Sequence[RewardFunc]) -> list[RewardFunc]:
        """The same reward functions, also keeping what they return (async ones as they are)."""
        wrapped: list[RewardFunc] = []
        for fn in funcs:
            name = getattr(fn, "__name__", type(fn).__name__)
            # TRL awaits async reward functions itself; they are not watched.
            wrapped.append(fn if inspect.iscoroutinefunction(fn) else self._wrap(fn, name))  # type: ignore[arg-type]
        return wrapped

    def begin(self, batch: ScoredBatch) -> None:
        """Open a batch: the trainer is about to score ``batch`` (a batch hook)."""
        opened = _Batch(
            trajectories=list(batch.trajectories) if batch.trajectories is not None else None,
            completion_ids=list(batch.completion_ids),
            completions=list(batch.completions),
        )
        with self._lock:
            self._batches.append(opened)

    def _wrap(self, fn: RewardFunc, name: str) -> RewardFunc:
        @functools.wraps(fn)
        def watched(*args: Any, **kwargs: Any) -> list[float | None]:
            scores = fn(*args, **kwargs)
            with self._lock:
                if not self._batches or name in self._batches[-1].scores:  # not announced
                    self._batches.append(_unannounced(args, kwargs))
                self._batches[-1].scores[name] = list(scores)
            return scores

        return cast(RewardFunc, watched)

    def take(self) -> list[_Batch]:
        """Every batch kept since the last call."""
        with self._lock:
            taken, self._batches = self._batches, []
        return taken


def _unannounced(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Batch:
    """A batch opened by a reward function's call (no trainer hook announced it)."""
    trajectories = kwargs.get("trajectory")
    return _Batch(
        trajectories=list(trajectories) if isinstance(trajectories, list) else None,
        completion_ids=kwargs.get("completion_ids"),
        completions=kwargs.get("completions", args[1] if len(args) > 1 else None),
    )


class WatchCallback(TrainerCallback):
    """Signals and alarms at every optimizer step (module docstring).

    Args:
        recorder: where the wrapped reward functions keep their batches.
        names: the reward functions' names, in order.
        weights: their weights (``reward_weights``).
        options: the alarms' thresholds and ``stop_on_alarm``.
        output_dir: where ``watch.jsonl`` goes.
        on_alarm: also called with each new alarm.
        drift: measures each step's token drift (`DriftMeter`); ``None``: not measured.
        sampling: gives what dynamic sampling and retirement did since it was last asked
            (`rk_agent.trainers.group_sampling.GroupSampler.take_pending`); ``None``: off.

    Attributes:
        alarms: the `AlarmWatch` (``alarms.raised``: every alarm so far).
        last: the latest step's signals.
        last_drift: the latest step's token drift, when measured.
        stopped_by: the alarm that stopped the run (``stop_on_alarm``), if any.
    """

    def __init__(
        self,
        recorder: WatchRecorder,
        names: Sequence[str],
        weights: Sequence[float],
        options: AlarmOptions | None = None,
        output_dir: str | Path | None = None,
        on_alarm: Callable[[Alarm], None] | None = None,
        drift: DriftMeter | None = None,
        sampling: Callable[[], list[StepSampling]] | None = None,
    ) -> None:
        self.recorder = recorder
        self.names = list(names)
        self.weights = [float(w) for w in weights]
        self.options = options or AlarmOptions()
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.on_alarm = on_alarm
        self.alarms = AlarmWatch(self.options)
        self.last: WatchSignals | None = None
        self.drift = drift
        self.last_drift: DriftCount | None = None
        self.stopped_by: Alarm | None = None
        self.sampling = sampling

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        processes = int(getattr(args, "world_size", 1) or 1)
        if self.options.stop_on_alarm and processes > 1:
            raise ConfigError(
                f"stop_on_alarm (--stop-on-alarm) works in one training process, but this run "
                f"has {processes}: each watches its own share of the batch, and one stopping "
                "alone would leave the others waiting. Train without it (the alarms are still "
                "raised and kept), or in one process."
            )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        batches = self.recorder.take()
        if not batches:
            return  # this step reused an earlier generation (steps_per_generation > 1)
        group = max(1, int(getattr(args, "num_generations", 1) or 1))
        budget = getattr(args, "max_completion_length", None)
        outcomes = [o for batch in batches for o in self.outcomes(batch, budget)]
        groups = [outcomes[i : i + group] for i in range(0, len(outcomes), group)]
        signals = watch_signals(groups)
        step = int(state.global_step)
        sampled = self.sampling() if self.sampling is not None else []
        sampling = sampled[-1] if sampled else None
        new = self.alarms.observe(step, signals, sampling)
        self.last = signals
        if self.drift is not None:
            self.last_drift = sum(
                (self.drift.measure(b.trajectories, b.completion_ids) for b in batches
                 if b.trajectories is not None),
                DriftCount(),
            )  # fmt: skip
        if getattr(state, "is_world_process_zero", True):
            self._write(step, signals, new, sampling)
            for alarm in new:
                logger.warning("%s", alarm.message)
                if self.on_alarm is not None:
                    self.on_alarm(alarm)
        if new and self.options.stop_on_alarm and self.stopped_by is None:
            self.stopped_by = new[0]
            control.should_training_stop = True

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if logs is None or self.last is None:
            return
        figures: dict[str, float] = {**self.last.flat(), "watch/alarms": len(self.alarms.raised)}
        if self.last_drift is not None:
            figures.update(self.last_drift.figures())
        logs.update(figures)
        history = state.log_history  # the Trainer copied `logs` into it before calling us
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(figures)

    def outcomes(self, batch: _Batch, budget: int | None) -> list[EpisodeOutcome]:
        """One `EpisodeOutcome` per row of ``batch``."""
        rewards, nans = self._rewards(batch)
        if batch.trajectories is not None and len(batch.trajectories) == len(rewards):
            weight = dict(zip(self.names, self.weights, strict=False))
            out = []
            for t, reward, nan in zip(batch.trajectories, rewards, nans, strict=True):
                base = outcome_of(
                    t,
                    episode_weight=weight.get("episode", 1.0),
                    step_weight=weight.get("step_rewards", 1.0),
                )
                # The return's rule says whether the row has a reward (rk-agent's reward
                # functions all give None then, and TRL trains on nothing); TRL's sum, how much.
                kept = reward if t.episode_return.valid else None
                out.append(dataclasses.replace(base, reward=kept, nan=nan or base.nan))
            return out
        return [
            self._single_turn(batch, i, reward, nan, budget)
            for i, (reward, nan) in enumerate(zip(rewards, nans, strict=True))
        ]

    def _rewards(self, batch: _Batch) -> tuple[list[float | None], list[bool]]:
        return weighted_rewards(batch.scores, self.names, self.weights)

    def _single_turn(
        self, batch: _Batch, i: int, reward: float | None, nan: bool, budget: int | None
    ) -> EpisodeOutcome:
        components = {}
        for name, weight in zip(self.names, self.weights, strict=False):
            score = _number(batch.scores.get(name, [])[i : i + 1])
            if weight and score is not None and math.isfinite(score):
                components[name] = weight * score
        top = max((abs(w) for w in self.weights), default=0.0)
        outcome = frozenset(
            n for n, w in zip(self.names, self.weights, strict=False) if w and abs(w) == top
        )
        ids = (
            batch.completion_ids[i]
            if batch.completion_ids and i < len(batch.completion_ids)
            else []
        )
        tokens = len(ids) if isinstance(ids, (list, tuple)) else 0
        text = _completion_text(
            batch.completions[i] if batch.completions and i < len(batch.completions) else None
        )
        return EpisodeOutcome(
            reward=reward,
            nan=nan,
            components=components,
            outcome=outcome,
            answer=" ".join(text.split()).lower() or None if text is not None else None,
            completion_tokens=tokens,
            truncated=budget is not None and tokens >= int(budget),
        )

    def _write(
        self, step: int, signals: WatchSignals, new: list[Alarm], sampling: StepSampling | None
    ) -> None:
        if self.output_dir is not None:
            drift = self.last_drift.figures() if self.last_drift is not None else {}
            append_watch_line(self.output_dir, step, signals, new, drift, sampling)


def _number(values: Sequence[Any]) -> float | None:
    if not values:
        return None
    value = values[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _completion_text(completion: Any) -> str | None:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content")
        return content if isinstance(content, str) else None
    return None
