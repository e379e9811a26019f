"""The command line's output: every text printed as written, never as markup or terminal codes.

Most of what rk-agent prints did not come from its own literals: rewards' reasons, samples,
model output, tool results, paths, job states from a server, a run folder someone shared. Rich
would read ``[/INST]`` in a Llama transcript as a closing tag (and crash with ``MarkupError``)
and ``[bold]x[/bold]`` in a judge's reason as a style (and drop the brackets). So the consoles
made here have markup and highlighting off; where rk-agent styles its own words it builds
``rich.text.Text`` with a ``style``, which never reads brackets.

And a terminal would obey the control characters in such text: a model's reply could write the
clipboard (OSC 52), hide a link (OSC 8), clear the screen or move the cursor. So everything a
console made here prints is escaped (`rk_agent.terminal_text`): strings before they are laid
out, and, as a last net, the text of every segment it writes (a ``Text`` built from a model's
reply included); rich's own styles and cursor moves are not text and stay codes. Plain lines go
through `echo`, JSON through `echo_json`, and the command's log lines through the handler
`escape_logs` puts in place.

Rich drops some control characters (BEL, backspace, carriage return, form feeds) from a
``Text`` rather than showing them; a ``Text`` made with `shown_text` shows them escaped.

Main names: `make_console`, `shown_text`, `echo`, `echo_json`, `escape_logs`.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import typer

from rk_agent.terminal_text import EscapingFormatter, terminal_json, terminal_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType
    from rich.measure import Measurement
    from rich.segment import Segment
    from rich.style import Style
    from rich.text import Text

__all__ = ["echo", "echo_json", "escape_logs", "make_console", "shown_text"]


def make_console(**options: Any) -> Console:
    """A ``rich`` console that prints strings as written (``markup=False``, no highlighting) and
    escapes their control characters (module docstring); ``options`` go to ``Console``
    (``soft_wrap``, ``stderr``, ``file``, ...)."""
    console = _console_type()(markup=False, highlight=False, **options)
    console.push_render_hook(_escape_hook())
    return console


def shown_text(value: str, style: str | Style = "") -> Text:
    """A ``rich.text.Text`` of ``value`` with its control characters escaped (module
    docstring), in ``style``."""
    from rich.text import Text

    return Text(terminal_text(value), style=style)


def echo(text: str, *, err: bool = False) -> None:
    """Print a line (or lines) of text from elsewhere, its control characters escaped."""
    typer.echo(terminal_text(text), err=err)


def echo_json(text: str, *, err: bool = False) -> None:
    """Print JSON text, DEL and the C1 controls in it as ``\\u`` escapes (`terminal_json`)."""
    typer.echo(terminal_json(text), err=err)


def escape_logs() -> None:
    """Make the log lines a command shows without a logging set-up of its own escaped: the
    handler of last resort (``logging.lastResort``, which prints ``WARNING`` and above to
    stderr) becomes one whose lines are `terminal_text`."""
    if isinstance(logging.lastResort, _EscapingStderr):
        return
    handler = _EscapingStderr(logging.WARNING)
    handler.setFormatter(EscapingFormatter())
    logging.lastResort = handler


class _EscapingStderr(logging.StreamHandler):
    """``logging.lastResort``'s kind of handler: writes to ``sys.stderr`` as it is when it
    writes (a test's capture, a redirected stream)."""

    def __init__(self, level: int) -> None:
        logging.Handler.__init__(self, level)

    @property
    def stream(self) -> Any:
        return sys.stderr


@functools.cache
def _console_type() -> type[Console]:
    from rich.console import Console

    class EscapingConsole(Console):
        """A console that escapes the control characters of the strings it lays out."""

        def render_str(self, text: str, **kwargs: Any) -> Text:
            return super().render_str(terminal_text(text), **kwargs)

    return EscapingConsole


@functools.cache
def _escape_hook() -> Any:
    from rich.console import RenderHook

    class EscapeSegments(RenderHook):
        """Wraps what a console prints in `_Escaped`."""

        def process_renderables(
            self, renderables: list[ConsoleRenderable]
        ) -> list[ConsoleRenderable]:
            return [_Escaped(renderable) for renderable in renderables]

    return EscapeSegments()


class _Escaped:
    """A renderable whose segments' text is escaped (the net under ``render_str``: a ``Text``
    made from a model's reply never passes there). A control segment is rich's own cursor
    work, not text, and passes as it is."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        from rich.segment import Segment

        segments: Iterable[Segment] = console.render(self.renderable, options)
        for segment in segments:
            if segment.control:
                yield segment
                continue
            shown = terminal_text(segment.text)
            yield segment if shown == segment.text else Segment(shown, segment.style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.renderable)
