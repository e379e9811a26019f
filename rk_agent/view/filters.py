"""The run page's filters: which episodes of an `EpisodeIndex` the episode list shows.

A filter is read from the page's query string (`EpisodeFilter.from_query`) and applied to the
index's columns (`EpisodeFilter.select`), never to the episodes themselves:

- ``outcome``: ``success`` (the environment judged it solved) or ``failure`` (judged not
  solved, or the episode failed before it was judged); anything else shows every episode;
- ``min_reward``, ``max_reward``: the valid episode reward within the range (an episode without
  one is left out once either is set);
- ``text``: the start of the task's question contains it (case ignored);
- ``stop``: the stop reason; ``failure``: the failure kind;
- ``step``: a training run's episodes of one step (`rk_agent.view.index`);
- ``alarm``: the episodes behind one of the run's alarms (`rk_agent.runs.alarms`; a run
  raises each kind once, so its kind names it): those of the step that raised it (a training
  run's alarm; a rollout run's alarms are about the whole run), and of them the ones the alarm
  is about, where the index can tell: the groups with zero reward spread (``zero_spread``), the
  groups whose episodes all gave one final answer (``answer_collapse``), the episodes without a
  valid reward (``nan_reward``), the truncated ones (``truncation``); for ``farming`` and
  ``dominant_component`` every episode of the step. Groups are read as the watch reads them
  (`rk_agent.runs.watch`): the watch's reward, weights 1; two or more answers.

Main names: `EpisodeFilter`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import Alarm, AlarmKind
from rk_agent.view.index import EpisodeIndex

__all__ = ["EpisodeFilter"]

_OUTCOMES = ("success", "failure")
_EQUAL = 1e-9  # the watch's: rewards this close are one reward


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes to list (module docstring for each field).

    Example:
        >>> EpisodeFilter.from_query({"outcome": "failure", "min_reward": "0.5"}).query()
        {'outcome': 'failure', 'min_reward': '0.5'}
    """

    outcome: str = ""
    min_reward: float | None = None
    max_reward: float | None = None
    text: str = ""
    stop: str = ""
    failure: str = ""
    step: int | None = None
    alarm: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> EpisodeFilter:
        """Read a filter from a query string's fields; empty fields filter nothing.

        Raises:
            ConfigError: a reward bound or a step that is not a number.
        """
        outcome = query.get("outcome", "")
        step = _number(query, "step")
        if step is not None and not step.is_integer():
            raise ConfigError(f"step must be a whole number, got {query.get('step')!r}.")
        return cls(
            outcome=outcome if outcome in _OUTCOMES else "",
            min_reward=_number(query, "min_reward"),
            max_reward=_number(query, "max_reward"),
            text=query.get("text", "").strip(),
            stop=query.get("stop", "").strip(),
            failure=query.get("failure", "").strip(),
            step=None if step is None else int(step),
            alarm=query.get("alarm", "").strip(),
        )

    @property
    def active(self) -> bool:
        """Whether the filter leaves anything out."""
        return self != EpisodeFilter()

    def query(self) -> dict[str, str]:
        """The filter as query-string fields (the empty ones left out)."""
        fields = {
            "outcome": self.outcome,
            "min_reward": "" if self.min_reward is None else repr(self.min_reward),
            "max_reward": "" if self.max_reward is None else repr(self.max_reward),
            "text": self.text,
            "stop": self.stop,
            "failure": self.failure,
            "step": "" if self.step is None else str(self.step),
            "alarm": self.alarm,
        }
        return {k: v for k, v in fields.items() if v}

    def select(self, index: EpisodeIndex, alarms: Sequence[Alarm] = ()) -> list[int]:
        """The positions of the index's episodes that pass, in file order.

        Each test narrows the list the one before left (the cheap ones first).

        Args:
            index: the run's index.
            alarms: the run's alarms (``alarm`` names one by its kind; an alarm the run did not
                raise lets nothing through).
        """
        chosen: list[int] = list(range(len(index)))
        if self.step is not None:
            steps = index.steps
            chosen = [p for p in chosen if steps[p] == self.step]
        if self.alarm:
            alarm = next((a for a in alarms if a.kind.value == self.alarm), None)
            chosen = [] if alarm is None else _behind(alarm, index, chosen)
        if self.outcome == "success":
            successes = index.successes
            chosen = [p for p in chosen if successes[p] == 1]
        elif self.outcome == "failure":
            successes, failures = index.successes, index.failure_codes
            chosen = [p for p in chosen if successes[p] == 0 or failures[p] != 0]
        if self.stop:
            stops = index.stop_codes
            code = _code(index.stops.words, self.stop)
            chosen = [p for p in chosen if stops[p] == code]
        if self.failure:
            kinds = index.failure_codes
            code = _code(index.failures.words, self.failure)
            chosen = [p for p in chosen if kinds[p] == code]
        if self.min_reward is not None or self.max_reward is not None:
            low = -math.inf if self.min_reward is None else self.min_reward
            high = math.inf if self.max_reward is None else self.max_reward
            rewards = index.rewards
            chosen = [p for p in chosen if low <= rewards[p] <= high]  # NaN fails both
        if self.text:
            needle, texts = self.text.casefold(), index.folded_texts
            chosen = [p for p in chosen if needle in texts[p]]
        return chosen


def _behind(alarm: Alarm, index: EpisodeIndex, chosen: list[int]) -> list[int]:
    """The episodes of ``chosen`` behind ``alarm`` (module docstring)."""
    if alarm.step is not None:
        steps = index.steps
        chosen = [p for p in chosen if steps[p] == alarm.step]
    if alarm.kind is AlarmKind.NAN_REWARD:
        returns = index.returns
        return [p for p in chosen if math.isnan(returns[p])]
    if alarm.kind is AlarmKind.TRUNCATION:
        truncations = index.truncations
        return [p for p in chosen if truncations[p]]
    if alarm.kind not in (AlarmKind.ZERO_SPREAD, AlarmKind.ANSWER_COLLAPSE):
        return chosen
    codes = index.groups
    members: dict[int, list[int]] = defaultdict(list)
    for p in chosen:
        members[codes[p]].append(p)
    if alarm.kind is AlarmKind.ZERO_SPREAD:
        returns = index.returns
        kept = {c for c, ps in members.items() if _no_spread([returns[p] for p in ps])}
    else:
        answers = index.answers
        kept = {c for c, ps in members.items() if _one_answer([answers[p] for p in ps])}
    return [p for p in chosen if codes[p] in kept]


def _no_spread(rewards: list[float]) -> bool:
    valid = [r for r in rewards if not math.isnan(r)]
    return len(valid) < 2 or max(valid) - min(valid) <= _EQUAL


def _one_answer(answers: list[int]) -> bool:
    given = [a for a in answers if a != 0]
    return len(given) >= 2 and len(set(given)) == 1


def _code(words: list[str], word: str) -> int:
    return words.index(word) if word in words else -1


def _number(query: Mapping[str, str], name: str) -> float | None:
    raw = query.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}.") from None
    if math.isnan(value):
        raise ConfigError(f"{name} must be a number, got {raw!r}.")
    return value
