"""`rk_agent.terminal_text`: control characters escaped, never obeyed; JSON kept JSON; log lines
escaped by a real logging handler."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest

from rk_agent.terminal_text import CONTROLS, EscapingFormatter, terminal_json, terminal_text


def test_every_control_but_tab_and_newline_is_escaped() -> None:
    every = "".join(chr(c) for c in sorted(CONTROLS))
    shown = terminal_text(every)
    assert [c for c in shown if ord(c) in CONTROLS] == ["\t", "\n"]
    assert shown.startswith("\\x00\\x01") and "\\x1b" in shown and shown.endswith("\\x9f")
    assert "\\x7f" in shown and "\\r" in shown
    assert len(CONTROLS) == 32 + 1 + 32


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, é, 中文, emoji 👍🏽\n", "plain text, é, 中文, emoji 👍🏽\n"),
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # the clipboard
        (
            "\x1b]8;;https://e.x/\x1b\\here\x1b]8;;\x1b\\",
            "\\x1b]8;;https://e.x/\\x1b\\here\\x1b]8;;\\x1b\\",
        ),
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),
        ("\x9b31m\x85", "\\x9b31m\\x85"),
        ("a\r\nb\rc", "a\nb\\rc"),  # a Windows line end is a line end
        ("\u2028 stays", "\u2028 stays"),  # printable enough for a terminal; not a control
    ],
)
def test_terminal_text(text: str, shown: str) -> None:
    assert terminal_text(text) == shown
    assert terminal_text(shown) == shown  # what it shows is left alone


def test_one_line_text_escapes_newlines_and_every_unprintable() -> None:
    assert terminal_text("a\tb\nc\r\n", keep="") == "a\\tb\\nc\\r\\n"
    assert terminal_text("a\u2028b\u202ec\xa0", keep="", unprintable=True) == (
        "a\\u2028b\\u202ec\\xa0"
    )


def test_json_keeps_its_meaning() -> None:
    value = {"reply": "x\x1b[2J\x9b31m\x7f\x85 é"}
    for written in (json.dumps(value, ensure_ascii=False), json.dumps(value, indent=2)):
        shown = terminal_json(written)
        assert not [c for c in shown if ord(c) in CONTROLS and c != "\n"]
        assert json.loads(shown) == value


def test_log_lines_are_escaped_tracebacks_included() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(EscapingFormatter(logging.Formatter("%(levelname)s %(message)s")))
    logger = logging.getLogger("tests.terminal_text")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("reply: %s", "\x1b]52;c;ZXZpbA==\x07")
        try:
            raise ValueError("bad \x1b[2J value")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "WARNING reply: \\x1b]52;c;ZXZpbA==\\x07\n" in written
    assert "ValueError: bad \\x1b[2J value" in written
    assert not [c for c in written if ord(c) in CONTROLS and c != "\n"]


UVICORN = r"""
import logging, logging.config
import uvicorn.config
from rk_agent.terminal_text import escaped_log_config
logging.config.dictConfig(escaped_log_config(uvicorn.config.LOGGING_CONFIG))
logging.getLogger("uvicorn.error").warning("reward failed: %s", ValueError("\x1b]52;c;eA==\x07"))
access = '%s - "%s %s HTTP/%s" %d'
logging.getLogger("uvicorn.access").info(access, "127.0.0.1:9", "GET", "/\x1b[2J", "1.1", 404)
try:
    raise ValueError("boom \x9b2J")
except ValueError:
    logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
"""


def test_uvicorns_lines_are_escaped_with_its_own_formatters() -> None:
    """What the servers rk-agent starts give uvicorn (`escaped_log_config`), in a process of
    its own: an error with a model's text, an access line with a client's path, a traceback."""
    done = subprocess.run([sys.executable, "-c", UVICORN], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "WARNING:  reward failed: \\x1b]52;c;eA==\\x07\n" in done.stderr
    assert 'INFO:     127.0.0.1:9 - "GET /\\x1b[2J HTTP/1.1" 404 Not Found\n' in done.stdout
    assert "ValueError: boom \\x9b2J" in done.stderr
    written = done.stdout + done.stderr
    assert not [c for c in written if ord(c) in CONTROLS and c != "\n"]
