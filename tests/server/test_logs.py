"""The reward server's logs: one line per cause per interval, counted; answers summarised."""

from __future__ import annotations

import logging
import time

import pytest

from rk_agent.server._logs import AnswerLog, RateLimited, client_text


def record(msg: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("uvicorn.error", logging.WARNING, "", 0, msg, args, info)


def test_one_line_per_cause_per_interval_and_the_next_one_counts_the_rest() -> None:
    limit = RateLimited(interval_s=0.2)
    first = [limit.filter(record("closed %s", i)) for i in range(100)]
    other = limit.filter(record("Invalid HTTP request received."))
    emfile = [limit.filter(record("accept failed", exc=OSError(24, "Too many open files")))] * 2
    time.sleep(0.25)
    later = record("closed %s", "x")
    assert first == [True] + [False] * 99
    assert other and emfile[0]
    assert limit.filter(later)
    assert later.getMessage().startswith("closed x (99 more like this in the last 0 s)")


def test_answers_are_counted_and_only_failures_get_a_line(caplog: pytest.LogCaptureFixture) -> None:
    answers = AnswerLog(interval_s=3600)
    with caplog.at_level(logging.INFO, logger="rk_agent.server"):
        for _ in range(1000):
            answers.answered("/evaluate", 200)
        answers.answered("/evaluate", 401, b'{"detail": "no key"}')
        answers.interval_s = 0
        answers.answered("/batch", 200)
    assert [r.getMessage() for r in caplog.records] == [
        '/evaluate answered 401: {"detail": "no key"}',
        caplog.records[1].getMessage(),
    ]
    assert caplog.records[1].getMessage().startswith("answered 1002 requests in the last ")
    assert caplog.records[1].getMessage().endswith(" s: 200 x 1001, 401 x 1")


def test_a_clients_text_is_capped_and_its_controls_escaped() -> None:
    assert client_text("/ok") == "/ok"
    assert client_text("/a\nWARNING forged\x1b]52;c;QUJD\x07\x9b2J") == (
        "/a\\nWARNING forged\\x1b]52;c;QUJD\\x07\\x9b2J"
    )
    assert client_text("/%s" * 100, limit=10) == "/%s/%s/%s/..."
