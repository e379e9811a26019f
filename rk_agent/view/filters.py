"""The run page's filters: which episodes of an `EpisodeIndex` the episode list shows.

A filter is read from the page's query string (`EpisodeFilter.from_query`) and applied to the
index's columns (`EpisodeFilter.select`), never to the episodes themselves:

- ``outcome``: ``success`` (the environment judged it solved) or ``failure`` (judged not
  solved, or the episode failed before it was judged); anything else shows every episode;
- ``min_reward``, ``max_reward``: the valid episode reward within the range (an episode without
  one is left out once either is set);
- ``text``: the start of the task's question contains it (case ignored);
- ``stop``: the stop reason; ``failure``: the failure kind.

Main names: `EpisodeFilter`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from rk_agent.errors import ConfigError
from rk_agent.view.index import EpisodeIndex

__all__ = ["EpisodeFilter"]

_OUTCOMES = ("success", "failure")


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

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> EpisodeFilter:
        """Read a filter from a query string's fields; empty fields filter nothing.

        Raises:
            ConfigError: a reward bound that is not a number.
        """
        outcome = query.get("outcome", "")
        return cls(
            outcome=outcome if outcome in _OUTCOMES else "",
            min_reward=_number(query, "min_reward"),
            max_reward=_number(query, "max_reward"),
            text=query.get("text", "").strip(),
            stop=query.get("stop", "").strip(),
            failure=query.get("failure", "").strip(),
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
        }
        return {k: v for k, v in fields.items() if v}

    def select(self, index: EpisodeIndex) -> list[int]:
        """The positions of the index's episodes that pass, in file order.

        Each test narrows the list the one before left (the cheap ones first).
        """
        chosen: list[int] = list(range(len(index)))
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
