"""Text from elsewhere as a terminal shows it: its control characters escaped, never obeyed.

Most of what rk-agent prints was not written by rk-agent: a model's replies, a tool's output,
a reward's reason, a task, a run folder someone shared. Printed as it is, such text drives the
terminal that shows it: ``ESC`` starts sequences that write the clipboard (OSC 52), hide a link
behind harmless words (OSC 8), clear the screen or move the cursor over what was printed
before; the C1 controls (U+0080 to U+009F, ``\\x9b`` is CSI) do the same in terminals that read
them; a carriage return or a backspace writes over a line. `terminal_text` shows every C0
control but tab and newline, ``DEL`` and every C1 control as Python writes it in a string
(``\\x1b``, ``\\r``, ``\\x9b``), so it is seen and does nothing. A carriage return just before a
newline (a Windows line end) does nothing a newline does not, and is dropped.

Every command of the command line prints through it: its consoles (`rk_agent.cli.console`),
its plain lines, its error line and the log lines it shows (`EscapingFormatter`); the reward
server's log lines too (`rk_agent.server._logs.client_text`, which also cuts a client's text and
escapes every other character that is not printable, the line separators among them).

JSON printed for a terminal (``--json``) is escaped by its writer for the C0 controls, not for
DEL and the C1 controls, which JSON allows raw in a string: `terminal_json` writes those as
``\\u`` escapes, the same JSON.

Main names: `terminal_text`, `terminal_json`, `EscapingFormatter`, `escaped_log_config`.

Example:
    >>> terminal_text("ok\\x1b]52;c;ZXZpbA==\\x07 done\\n")
    'ok\\\\x1b]52;c;ZXZpbA==\\\\x07 done\\n'
"""

from __future__ import annotations

import copy
import importlib
import logging
import re
from typing import Any

__all__ = [
    "CONTROLS",
    "EscapingFormatter",
    "escaped_log_config",
    "escaping_formatter",
    "terminal_json",
    "terminal_text",
]

CONTROLS = frozenset([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)])
"""The code points escaped: C0 (tab and newline too, unless kept), DEL and C1."""

_ANY = re.compile("[\x00-\x1f\x7f-\x9f]")
_TABLE = {code: repr(chr(code))[1:-1] for code in CONTROLS}
_KEEP_TAB_NEWLINE = {code: shown for code, shown in _TABLE.items() if chr(code) not in "\t\n"}
_JSON = {code: f"\\u{code:04x}" for code in CONTROLS if code >= 0x7F}


def terminal_text(text: str, *, keep: str = "\t\n", unprintable: bool = False) -> str:
    """``text`` with its control characters escaped (module docstring).

    Args:
        text: what is about to be printed.
        keep: control characters left as they are (tab and newline by default; ``""`` for
            text that must stay on one line, such as a log line's part).
        unprintable: escape every other character that is not printable too
            (`str.isprintable`: the line and paragraph separators, format characters such as
            the bidirectional overrides, unassigned code points), for one-line log text.

    Example:
        >>> terminal_text("a\\tb\\r\\nc\\x1b[2J\\x9b")
        'a\\tb\\nc\\\\x1b[2J\\\\x9b'
        >>> terminal_text("a\\nb\\u2028", keep="", unprintable=True)
        'a\\\\nb\\\\u2028'
    """
    if unprintable:
        return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)
    if _ANY.search(text) is None:
        return text
    if "\n" in keep:
        text = text.replace("\r\n", "\n")
    if keep == "\t\n":
        return text.translate(_KEEP_TAB_NEWLINE)
    return text.translate({k: v for k, v in _TABLE.items() if chr(k) not in keep})


def terminal_json(text: str) -> str:
    """JSON text with DEL and the C1 controls written as ``\\u`` escapes (module docstring);
    the C0 controls, which every JSON writer escapes, can only be JSON's own whitespace here.

    Example:
        >>> terminal_json('{"reply": "\\x9b2J"}')
        '{"reply": "\\\\u009b2J"}'
    """
    return text.translate(_JSON)


class EscapingFormatter(logging.Formatter):
    """A log formatter that escapes what a record carries from elsewhere before another
    formatter (or this one's own format) makes its line: the message's template and each of its
    arguments (`str` and `repr` of an argument come escaped; numbers pass as they are), the
    traceback and the stack. The formatter's own codes (uvicorn's coloured level names) stay.

    Args:
        inner: the formatter that makes the line (``None``: this one, with ``fmt``).
        fmt: the format when there is no ``inner`` (``%(message)s`` by default).

    Example:
        >>> record = logging.LogRecord("x", logging.WARNING, "", 0, "%s", ("\\x1b[2J",), None)
        >>> EscapingFormatter().format(record)
        '\\\\x1b[2J'
    """

    def __init__(self, inner: logging.Formatter | None = None, fmt: str | None = None) -> None:
        super().__init__(fmt)
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        shown = logging.makeLogRecord(record.__dict__)
        shown.msg = terminal_text(record.msg) if isinstance(record.msg, str) else _Shown(record.msg)
        if isinstance(record.args, tuple):
            shown.args = tuple(_shown(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            shown.args = {key: _shown(arg) for key, arg in record.args.items()}
        formatter: logging.Formatter = self.inner if self.inner is not None else self
        if record.exc_info and not record.exc_text:
            shown.exc_text = formatter.formatException(record.exc_info)
        if shown.exc_text:
            shown.exc_text = terminal_text(shown.exc_text)
        if record.stack_info:
            shown.stack_info = terminal_text(record.stack_info)
        return self.inner.format(shown) if self.inner is not None else super().format(shown)


class _Shown:
    """A log argument whose ``str`` and ``repr`` (and ``format``) come escaped."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return terminal_text(str(self.value))

    def __repr__(self) -> str:
        return terminal_text(repr(self.value))

    def __format__(self, spec: str) -> str:
        return terminal_text(format(self.value, spec))


def _shown(arg: object) -> object:
    return arg if arg is None or isinstance(arg, int | float) else _Shown(arg)


def escaping_formatter(inner: str | None = None, **options: Any) -> EscapingFormatter:
    """An `EscapingFormatter` around a formatter named by its import path (``inner``, made with
    ``options``): what a ``logging.config.dictConfig`` formatter's ``"()"`` names
    (`escaped_log_config`)."""
    if inner is None:
        return EscapingFormatter(logging.Formatter(**options))
    module, _, name = inner.rpartition(".")
    made = getattr(importlib.import_module(module), name)(**options)
    return EscapingFormatter(made)


def escaped_log_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a ``logging.config.dictConfig`` configuration (uvicorn's ``LOGGING_CONFIG``)
    whose every formatter is wrapped in an `EscapingFormatter` (`escaping_formatter`): a
    server's log lines, in each of its worker processes too, show a client's or a model's text
    escaped."""
    copied = copy.deepcopy(config)
    for name, settings in copied.get("formatters", {}).items():
        inner = settings.pop("()", None) or settings.pop("class", None)
        copied["formatters"][name] = {
            "()": "rk_agent.terminal_text.escaping_formatter",
            "inner": inner,
            **settings,
        }
    return copied
