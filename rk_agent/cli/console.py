"""The command line's consoles: every text is printed as written, never parsed as markup.

Most of what rk-agent prints did not come from its own literals: rewards' reasons, samples,
model output, tool results, paths, job states from a server. Rich would read ``[/INST]`` in a
Llama transcript as a closing tag (and crash with ``MarkupError``) and ``[bold]x[/bold]`` in a
judge's reason as a style (and drop the brackets). So the consoles made here have markup and
highlighting off; where rk-agent styles its own words it builds ``rich.text.Text`` with a
``style``, which never reads brackets.

Main names: `make_console`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["make_console"]


def make_console(**options: Any) -> Console:
    """A ``rich`` console that prints strings as written (``markup=False``, no highlighting);
    ``options`` go to ``Console`` (``soft_wrap``, ``stderr``, ...)."""
    from rich.console import Console

    return Console(markup=False, highlight=False, **options)
