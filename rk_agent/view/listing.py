"""The run page's episode list: one page of the episodes a filter lets through.

Paging is done by the server: `Listing.page` selects the filter's episodes from the run's index
(`rk_agent.view.filters`) and returns the rows of one page, read from the index alone. The
selection of the last few filters is kept per run, for as long as the index has not grown, so
turning pages does not filter again.

Main names: `Listing`, `Page`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from rk_agent.runs.alarms import Alarm
from rk_agent.view.filters import EpisodeFilter
from rk_agent.view.index import EpisodeIndex, EpisodeRow

__all__ = ["PAGE_SIZE", "Listing", "Page"]

PAGE_SIZE = 50
"""Episodes per page of the list."""
_KEPT = 16  # selections kept per run


@dataclass(frozen=True)
class Page:
    """One page of the episode list.

    Attributes:
        rows: its episodes.
        number: which page (1-based); pages: how many there are (at least 1).
        matched: the episodes the filter let through; total: all the run's episodes.
    """

    rows: list[EpisodeRow]
    number: int
    pages: int
    matched: int
    total: int


class Listing:
    """The episode lists of one run's index, with its recent selections kept."""

    def __init__(self, index: EpisodeIndex) -> None:
        self.index = index
        self._kept: OrderedDict[tuple[EpisodeFilter, int], list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def select(self, flt: EpisodeFilter, alarms: Sequence[Alarm] = ()) -> list[int]:
        """The positions the filter lets through (kept while the index stays the same size;
        an alarm, once raised, stays as it is)."""
        key = (flt, len(self.index))
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        found = flt.select(self.index, alarms)
        with self._lock:
            self._kept[key] = found
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        return found

    def page(
        self,
        flt: EpisodeFilter,
        number: int,
        size: int = PAGE_SIZE,
        alarms: Sequence[Alarm] = (),
    ) -> Page:
        """Page ``number`` (1-based, clamped to the pages there are) of the filter's episodes
        (``alarms``: the run's, for the alarm filter)."""
        selected = self.select(flt, alarms)
        pages = max(1, -(-len(selected) // size))
        number = min(max(1, number), pages)
        start = (number - 1) * size
        rows = self.index.rows(selected[start : start + size])
        return Page(rows, number, pages, len(selected), len(self.index))
