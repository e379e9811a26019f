"""`WholeSentenceGroup`: a command group whose list of commands never cuts a sentence.

Click lists each command of a group by its help's first paragraph cut to the width left on the
line, ending in ``...`` ("Play episodes of an environment with a model and write..."). This
group lists the first sentence whole instead, wrapped like any other help text.

Main names: `WholeSentenceGroup`, `first_sentence`.
"""

from __future__ import annotations

import re
from typing import Any

from typer.core import TyperGroup

__all__ = ["WholeSentenceGroup", "first_sentence"]


def first_sentence(help_text: str) -> str:
    """The first sentence of a help text's first paragraph, on one line.

    Example:
        >>> first_sentence("Serve a reward over HTTP.\\n\\nAny RL service can call it.")
        'Serve a reward over HTTP.'
        >>> first_sentence("Play episodes of an environment\\nwith a model. Then write them.")
        'Play episodes of an environment with a model.'
    """
    paragraph = " ".join(help_text.split("\f")[0].strip().split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0]


class WholeSentenceGroup(TyperGroup):
    """A Typer group that lists its commands by their help's first sentence, whole.

    Give it to ``typer.Typer(cls=WholeSentenceGroup)``; a command's own ``short_help`` is kept.
    """

    # Typer's own click types (typer._click) are private: Any keeps the override honest.
    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and not command.short_help and command.help:
            command.short_help = first_sentence(command.help)
        return command
