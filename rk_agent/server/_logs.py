"""What the reward server logs, and how often: never a flood.

A client can make the server log (a malformed request, a slow connection cut, a refused one),
so every such line goes through `RateLimited`: one line per cause per interval, and the next
line of that cause says how many were left out. Answers are counted, not logged one by one
(`AnswerLog`): every answer that is not a 2xx gets its line (rate-limited like the rest), and
a summary of all answers comes once per interval while requests arrive. uvicorn's own
per-request access log stays available (``--access-log``) but costs about a third of the
throughput of a trivial reward (``benchmarks/bench_reward_server.py``).

Main names:
    RateLimited: the logging filter.
    client_text: a client's text (a path, a detail) as a line shows it: capped, escaped.
    limit_server_logs: put it on the loggers a client can reach (uvicorn, asyncio, ours).
    AnswerLog: the counts of answers, and their lines.
"""

from __future__ import annotations

import collections
import logging
import time

from rk_agent.terminal_text import EscapingFormatter, terminal_text

__all__ = [
    "LOG_INTERVAL_S",
    "SHOWN_CHARS",
    "AnswerLog",
    "RateLimited",
    "client_text",
    "limit_server_logs",
]

logger = logging.getLogger("rk_agent.server")

LOG_INTERVAL_S = 10.0
"""Seconds between two lines of one cause, and between two summaries of answers."""

SHOWN_CHARS = 200
"""At most this many characters of a client's text (a path, an error's detail) go in a line."""

_LOGGERS = ("uvicorn.error", "asyncio", "rk_agent.server", "rk_agent.rewards")
_MAX_CAUSES = 1024


class RateLimited(logging.Filter):
    """Lets one record per cause through per ``interval_s``; counts the rest.

    A cause is the logger, the message template (before ``%`` arguments) and the exception
    type. The first record of a cause after its interval carries ``(N more like this in the
    last S s)``. Tracebacks go out with the lines that pass only.

    Example:
        >>> limit = RateLimited(interval_s=60)
        >>> record = logging.LogRecord("x", logging.WARNING, "", 0, "boom %s", ("a",), None)
        >>> [limit.filter(record), limit.filter(record)]
        [True, False]
    """

    def __init__(self, interval_s: float = LOG_INTERVAL_S) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._seen: collections.OrderedDict[tuple[str, str, str], list[float]] = (
            collections.OrderedDict()
        )

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, str(record.msg), error)
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.interval_s:
            seen[1] += 1
            return False
        left_out = int(seen[1]) if seen is not None else 0
        self._seen[key] = [now, 0]
        self._seen.move_to_end(key)
        if len(self._seen) > _MAX_CAUSES:
            self._seen.popitem(last=False)
        if left_out and seen is not None:
            note = f" ({left_out} more like this in the last {now - seen[0]:.0f} s)"
            if isinstance(record.args, tuple) and record.args:
                record.msg, record.args = f"{record.msg}%s", (*record.args, note)
            else:
                record.msg = f"{record.msg}{note}"
        return True


def limit_server_logs(interval_s: float = LOG_INTERVAL_S) -> RateLimited:
    """Put one `RateLimited` filter on the loggers a client can make write (once per process),
    and give ``rk_agent.server`` a stderr handler in uvicorn's style when nothing handles it.

    Returns the filter in place (an earlier one, if any).
    """
    ours = logging.getLogger("rk_agent.server")
    if not ours.hasHandlers():
        handler = logging.StreamHandler()
        # A reward's error can quote a model's text: a line reaches the terminal escaped.
        handler.setFormatter(EscapingFormatter(fmt="%(levelname)-9s %(message)s"))
        ours.addHandler(handler)
        ours.setLevel(logging.INFO)
    for name in _LOGGERS:
        for existing in logging.getLogger(name).filters:
            if isinstance(existing, RateLimited):
                return existing
    limit = RateLimited(interval_s)
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(limit)
    return limit


class AnswerLog:
    """Counts the server's answers; logs each non-2xx one (rate-limited) and a summary.

    The summary (``answered 51234 requests in the last 10 s: 200 x 51200, 422 x 34``) comes
    with the first answer after each interval, so an idle server logs nothing.
    """

    def __init__(self, interval_s: float = LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.counts: collections.Counter[int] = collections.Counter()
        self.invalid = 0
        self._since = time.monotonic()

    def answered(self, path: str, status: int, detail: bytes = b"") -> None:
        self.counts[status] += 1
        if status >= 300:
            # The path is the client's: an argument, never the template (``%s`` in it would be
            # formatted, ``%1000000000s`` a gigabyte), and not the cause either (unique paths
            # would each pass the rate limit). The cause is the status, an int of ours.
            text = client_text(detail.decode("utf-8", "replace"))
            logger.warning(f"%s answered {int(status)}: %s", client_text(path), text)
        if (now := time.monotonic()) - self._since >= self.interval_s:
            self._summary(now)

    def _summary(self, now: float) -> None:
        total = sum(self.counts.values())
        parts = ", ".join(f"{status} x {n}" for status, n in sorted(self.counts.items()))
        invalid = f"; {self.invalid} invalid results" if self.invalid else ""
        logger.info(
            "answered %d requests in the last %.0f s: %s%s", total, now - self._since, parts,
            invalid,
        )  # fmt: skip
        self.counts.clear()
        self.invalid = 0
        self._since = now


def client_text(text: str, limit: int = SHOWN_CHARS) -> str:
    """A client's text as a log line shows it: at most ``limit`` characters, with control
    characters (and every other unprintable one) escaped, so that it cannot forge lines or
    drive the terminal.

    Example:
        >>> client_text("/%s" + "x" * 300, limit=6)
        '/%sxxx...'
    """
    shown = terminal_text(text[:limit], keep="", unprintable=True)
    return shown + ("..." if len(text) > limit else "")
