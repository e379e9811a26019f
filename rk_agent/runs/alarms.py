"""Alarms: the watch's signals turned into one-line warnings, once per condition.

`AlarmWatch` is fed one `WatchSignals` per GRPO step (`rk_agent.runs.watch`) and raises an
`Alarm` the first time each condition holds, naming the step and what to try; `batch_alarms`
reads one batch alone (a rollout run, its tasks as groups: the conditions that need no history,
each holding for that one batch):

- **zero spread** (`AlarmKind.ZERO_SPREAD`): at least ``zero_spread_share`` of the groups have
  zero reward spread for ``zero_spread_steps`` steps in a row: those groups teach nothing. With
  dynamic sampling the groups are every one the step played, and the message says how many it
  dropped (`rk_agent.runs.group_sampling.StepSampling.note`).
- **farming** (`AlarmKind.FARMING`): over the last ``farming_window`` steps the per-step reward
  (shaping) rose while success fell by at least ``farming_min_drop`` (least-squares trends):
  the policy earns the bonus instead of solving the task.
- **answer collapse** (`AlarmKind.ANSWER_COLLAPSE`): in at least ``collapse_share`` of the
  groups every episode gave the same final answer for ``collapse_steps`` steps in a row.
- **NaN reward** (`AlarmKind.NAN_REWARD`): any reward came out NaN or infinite.
- **dominant component** (`AlarmKind.DOMINANT_COMPONENT`): one component that is not the
  outcome makes up more than ``dominant_share`` of the reward.
- **truncation** (`AlarmKind.TRUNCATION`): more than ``truncated_share`` of the completions
  were cut by a token limit.

`AlarmOptions` holds the thresholds (``watch:`` in a train config, ``--alarm-*`` flags) and
``stop_on_alarm``. The advice names the flags of the command that raised the alarm
(`AlarmFlags`): ``rk-agent train`` 's (`TRAIN_FLAGS`, TRL's ``--max_completion_length``, ...)
for `AlarmWatch`, ``rk-agent rollout`` 's (`ROLLOUT_FLAGS`, ``--max-tokens``, ...) for
`batch_alarms`.

Main names: `AlarmOptions`, `AlarmKind`, `Alarm`, `AlarmWatch`, `batch_alarms`, `AlarmFlags`.

Example:
    >>> from rk_agent.runs.watch import EpisodeOutcome, watch_signals
    >>> watch = AlarmWatch(AlarmOptions())
    >>> nan = EpisodeOutcome(reward=None, nan=True)
    >>> [a.kind.value for a in watch.observe(1, watch_signals([[nan, nan]]))]
    ['nan_reward']
    >>> print(batch_alarms(watch_signals([[nan, nan]]))[0].message[:46])
    2 of 2 rewards were NaN or infinite; TRL leave
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.runs.group_sampling import StepSampling
from rk_agent.runs.watch import STEP_REWARDS, WatchSignals

__all__ = [
    "ROLLOUT_FLAGS",
    "TRAIN_FLAGS",
    "Alarm",
    "AlarmFlags",
    "AlarmKind",
    "AlarmOptions",
    "AlarmWatch",
    "batch_alarms",
]

_Check = Callable[[WatchSignals], "str | None"]


@dataclass(frozen=True)
class AlarmFlags:
    """The flags an alarm's advice names: those of the command that raised it.

    Attributes:
        max_tokens: the token limit that cuts completions.
        max_turns: the turns per episode.
        generations: the episodes per task (a GRPO group).
        temperature: the sampling temperature.
        learning_rate: the learning rate; ``None`` when the command does not train.
    """

    max_tokens: str
    max_turns: str
    generations: str
    temperature: str
    learning_rate: str | None


TRAIN_FLAGS = AlarmFlags(
    max_tokens="--max_completion_length", max_turns="--max-turns",
    generations="--num_generations", temperature="--temperature",
    learning_rate="--learning_rate",
)  # fmt: skip
"""``rk-agent train grpo``'s flags (TRL's own options are passed with underscores)."""
ROLLOUT_FLAGS = AlarmFlags(
    max_tokens="--max-tokens", max_turns="--max-turns", generations="--group-size",
    temperature="--temperature", learning_rate=None,
)  # fmt: skip
"""``rk-agent rollout``'s flags."""


class AlarmKind(str, Enum):
    """What an alarm is about."""

    ZERO_SPREAD = "zero_spread"
    """Most groups have no reward spread: GRPO has nothing to learn from them."""
    FARMING = "farming"
    """The per-step reward rises while success falls: a shaping bonus is being farmed."""
    ANSWER_COLLAPSE = "answer_collapse"
    """The samples of a group all give the same final answer: exploration has collapsed."""
    NAN_REWARD = "nan_reward"
    """A reward came out NaN or infinite."""
    DOMINANT_COMPONENT = "dominant_component"
    """One component that is not the outcome makes up most of the reward."""
    TRUNCATION = "truncation"
    """Many completions were cut by a token limit."""


class AlarmOptions(BaseModel):
    """Thresholds of the training alarms, and what an alarm does (module docstring).

    Attributes:
        enabled: watch the run (signals in ``watch.jsonl`` and the logs, alarms).
        stop_on_alarm: end the run at the first alarm, keeping the checkpoints written so far
            (no final model is saved).
        zero_spread_share: the share of zero-spread groups that counts.
        zero_spread_steps: for how many steps in a row.
        farming_window: the steps over which shaping and success trends are measured.
        farming_min_drop: the fall in success over the window that counts.
        collapse_share: the share of single-answer groups that counts.
        collapse_steps: for how many steps in a row.
        dominant_share: the share of the reward one non-outcome component may reach.
        truncated_share: the share of truncated completions that may be reached.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    stop_on_alarm: bool = False
    zero_spread_share: float = Field(default=0.5, gt=0, le=1)
    zero_spread_steps: int = Field(default=3, ge=1)
    farming_window: int = Field(default=5, ge=2)
    farming_min_drop: float = Field(default=0.1, ge=0, le=1)
    collapse_share: float = Field(default=0.5, gt=0, le=1)
    collapse_steps: int = Field(default=3, ge=1)
    dominant_share: float = Field(default=0.8, gt=0, le=1)
    truncated_share: float = Field(default=0.3, ge=0, lt=1)


class Alarm(BaseModel):
    """One alarm a run raised.

    Attributes:
        kind: what it is about.
        step: the optimizer step whose rollouts raised it (1-based, as TRL logs steps);
            ``None`` for a rollout run's alarms (`batch_alarms`).
        message: one line: the step (if any), what was seen, and what to try.
    """

    kind: AlarmKind
    step: int | None = None
    message: str


class AlarmWatch:
    """Raises each alarm once, the first step its condition holds (module docstring).

    Args:
        options: the thresholds.
        flags: the flags its advice names (default: ``rk-agent train``'s).

    Attributes:
        raised: every alarm raised so far, in order.
    """

    def __init__(
        self, options: AlarmOptions | None = None, flags: AlarmFlags = TRAIN_FLAGS
    ) -> None:
        self.options = options or AlarmOptions()
        self.flags = flags
        self.raised: list[Alarm] = []
        keep = max(self.options.farming_window, self.options.zero_spread_steps,
                   self.options.collapse_steps)  # fmt: skip
        self._history: deque[WatchSignals] = deque(maxlen=keep)

    def observe(
        self, step: int, signals: WatchSignals, sampling: StepSampling | None = None
    ) -> list[Alarm]:
        """Take one step's signals (and what dynamic sampling did in it, which the zero-spread
        alarm reports); return the alarms raised for the first time."""
        self._history.append(signals)
        fired = {alarm.kind for alarm in self.raised}
        new = []
        for kind, check in self._checks():
            if kind in fired:
                continue
            message = check(signals)
            if message is not None:
                note = sampling.note() if sampling is not None else None
                if kind is AlarmKind.ZERO_SPREAD and note:
                    message = f"{message} This step {note}"
                new.append(Alarm(kind=kind, step=step, message=f"step {step}: {message}"))
        self.raised.extend(new)
        return new

    def _checks(self) -> list[tuple[AlarmKind, _Check]]:
        o, f = self.options, self.flags
        return [
            (AlarmKind.NAN_REWARD, _nan),
            (AlarmKind.ZERO_SPREAD, self._held(o.zero_spread_steps, _zero_spread(o, f))),
            (AlarmKind.FARMING, self._farming),
            (AlarmKind.ANSWER_COLLAPSE, self._held(o.collapse_steps, _collapse(o, f))),
            (AlarmKind.DOMINANT_COMPONENT, _dominant(o)),
            (AlarmKind.TRUNCATION, _truncation(o, f)),
        ]

    def _held(self, steps: int, check: _Check) -> _Check:
        """``check``, raised only when it has held for the last ``steps`` steps in a row."""

        def held(s: WatchSignals) -> str | None:
            recent = list(self._history)[-steps:]
            if len(recent) < steps or any(check(r) is None for r in recent):
                return None
            message = check(s)
            return message and message.replace(_EVERY_STEP, f" for {steps} steps", 1)

        return held

    def _farming(self, s: WatchSignals) -> str | None:
        o = self.options
        recent = list(self._history)[-o.farming_window :]
        if len(recent) < o.farming_window:
            return None
        shaping = [r.step_reward_mean for r in recent]
        success = [r.success_mean for r in recent]
        if any(v is None for v in [*shaping, *success]):
            return None
        rise = _trend([float(v) for v in shaping if v is not None])
        fall = -_trend([float(v) for v in success if v is not None])
        if rise <= 1e-9 or fall < max(o.farming_min_drop, 1e-9):
            return None
        return (
            f"the per-step reward rose from {shaping[0]:.3f} to {shaping[-1]:.3f} while success "
            f"fell from {success[0]:.0%} to {success[-1]:.0%} over {o.farming_window} steps: "
            "the policy may be farming the step bonus. Try: pay per-step rewards only for the "
            "steps a task needs, lower their weight, or train on the outcome alone."
        )


def batch_alarms(
    signals: WatchSignals,
    options: AlarmOptions | None = None,
    *,
    grouped: bool = True,
    flags: AlarmFlags = ROLLOUT_FLAGS,
) -> list[Alarm]:
    """The alarms one batch raises on its own: a rollout run's, its tasks as the groups.

    Each condition that needs no history is checked once, as if it had held for its steps:
    NaN rewards, zero spread and answer collapse (only when ``grouped``: with one episode per
    task every group trivially has one answer and no spread), a dominant component, truncation.
    Farming needs a trend over steps and is not checked.

    Args:
        signals: the batch's signals (`rk_agent.runs.watch.watch_signals`).
        options: the thresholds; default: the defaults.
        grouped: the batch has several episodes per task.
        flags: the flags its advice names (default: ``rk-agent rollout``'s).
    """
    o, f = options or AlarmOptions(), flags
    checks: list[tuple[AlarmKind, _Check]] = [(AlarmKind.NAN_REWARD, _nan)]
    if grouped:
        checks += [(AlarmKind.ZERO_SPREAD, _zero_spread(o, f)),
                   (AlarmKind.ANSWER_COLLAPSE, _collapse(o, f))]  # fmt: skip
    checks += [(AlarmKind.DOMINANT_COMPONENT, _dominant(o)),
               (AlarmKind.TRUNCATION, _truncation(o, f))]  # fmt: skip
    alarms = []
    for kind, check in checks:
        message = check(signals)
        if message is not None:
            alarms.append(Alarm(kind=kind, message=message.replace(_EVERY_STEP, "", 1)))
    return alarms


_EVERY_STEP = "{steps}"
"""Where a condition that must hold for several steps says for how many."""


def _nan(s: WatchSignals) -> str | None:
    if not s.nan_rewards:
        return None
    return (
        f"{s.nan_rewards} of {s.episodes} rewards were NaN or infinite; TRL leaves them out "
        "of the advantages. Try: make the reward return a finite score, or an invalid "
        "result (EvaluateResult(error=...)) when it cannot score."
    )


def _zero_spread(o: AlarmOptions, f: AlarmFlags) -> _Check:
    def check(s: WatchSignals) -> str | None:
        if (s.zero_spread or 0.0) < o.zero_spread_share:
            return None
        return (
            f"{s.zero_spread:.0%} of groups had zero reward spread{_EVERY_STEP} "
            f"({s.zero_spread_all_fail:.0%} all fail, {s.zero_spread_all_pass:.0%} all "
            f"pass): those groups teach nothing. Try: easier tasks, more generations "
            f"({f.generations}) or partial credit when they all fail; harder tasks when they "
            "all pass."
        )

    return check


def _collapse(o: AlarmOptions, f: AlarmFlags) -> _Check:
    def check(s: WatchSignals) -> str | None:
        if s.single_answer_groups is None or s.single_answer_groups < o.collapse_share:
            return None
        lower = f", a lower learning rate ({f.learning_rate})" if f.learning_rate else ""
        return (
            f"in {s.single_answer_groups:.0%} of groups every episode gave the same final "
            f"answer{_EVERY_STEP}: the samples no longer explore. Try: a higher temperature "
            f"({f.temperature}), more generations ({f.generations}){lower}."
        )

    return check


def _dominant(o: AlarmOptions) -> _Check:
    def check(s: WatchSignals) -> str | None:
        shares = {
            name: share
            for name, share in s.component_shares.items()
            if name not in s.outcome_components and share > o.dominant_share
        }
        if not shares:
            return None
        name, share = max(shares.items(), key=lambda kv: kv[1])
        outcome = ", ".join(s.outcome_components) or "none"
        what = "the per-step rewards" if name == STEP_REWARDS else f"the component {name!r}"
        return (
            f"{what} made up {share:.0%} of the reward, more than the outcome ({outcome}): "
            "the policy learns that, not the task. Try: lower its weight or cap it."
        )

    return check


def _truncation(o: AlarmOptions, f: AlarmFlags) -> _Check:
    def check(s: WatchSignals) -> str | None:
        if s.truncated is None or s.truncated <= o.truncated_share:
            return None
        return (
            f"{s.truncated:.0%} of completions were cut by a token limit: the reward scores "
            f"unfinished work. Try: a larger {f.max_tokens}, or fewer turns ({f.max_turns})."
        )

    return check


def _trend(values: Sequence[float]) -> float:
    """The least-squares change from the first value to the last (slope x (n - 1))."""
    n = len(values)
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    num = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    den = sum((x - mean_x) ** 2 for x in range(n))
    return num / den * (n - 1) if den else 0.0
