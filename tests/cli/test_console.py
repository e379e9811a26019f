"""The command line's consoles: text from elsewhere is escaped, rich's own styling is not."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rk_agent.cli.console import make_console, shown_text

CODES = "\x1b]52;c;ZXZpbA==\x07 \x1b[2J \x9b31m \x1b]8;;https://e.x/\x1b\\x\x1b]8;;\x1b\\ a\rb"


def _printed(*renderables: object) -> str:
    out = io.StringIO()
    console = make_console(file=out, force_terminal=True, color_system="truecolor", width=300)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def test_strings_texts_tables_and_panels_are_escaped_and_styles_kept() -> None:
    table = Table(title=CODES)
    table.add_column(CODES)
    table.add_row(CODES)
    table.add_row(Text(CODES, style="bold"))  # a Text made as rich makes it: the net escapes
    printed = _printed(CODES, Text(CODES), shown_text(CODES, "green"), table, Panel(CODES))
    assert "\x1b]" not in printed and "\x1b[2J" not in printed and "\x9b" not in printed
    assert printed.count("\\x1b]52;c;ZXZpbA==") == 8
    assert "\\x1b]52;c;ZXZpbA==\\x07" in printed  # shown_text and strings keep the BEL shown
    assert "a\\rb" in printed
    assert "\x1b[1m" in printed and "\x1b[32m" in printed  # bold and green: rich's own codes


def test_a_command_without_a_logging_set_up_shows_log_lines_escaped() -> None:
    code = (
        "import logging, sys\n"
        "from rk_agent.cli.console import escape_logs\n"
        "escape_logs()\n"
        f"logging.getLogger('rk_agent.x').warning('quoted: %s', {CODES!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        done.stderr
        == "quoted: "
        + CODES.replace("\x1b", "\\x1b")
        .replace("\x07", "\\x07")
        .replace("\x9b", "\\x9b")
        .replace("\r", "\\r")
        + "\n"
    )
    assert logging.lastResort is not None
