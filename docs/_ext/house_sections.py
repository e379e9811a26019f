"""A griffe extension for the API reference: render rk-agent's docstring conventions well.

The house style writes ``Example:`` (singular), which griffe's Google parser reads as a plain
admonition, so the ``>>>`` lines would render as nested quotes instead of Python code; it is read
as an ``Examples:`` section here. The ``Main names:`` block of a module docstring (one
``names: what they are`` item per line) is rendered as a bullet list instead of one run-on
paragraph. Only the copy of the docstring that the docs see changes; the source is untouched.
Loaded from ``mkdocs.yml`` (``extensions: [docs/_ext/house_sections.py:HouseSections]``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(?P<indent>[ \t]*)Example:[ \t]*$")
_MAIN_NAMES = re.compile(r"^(?P<indent>[ \t]*)Main names:[ \t]*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def rewrite(text: str) -> str:
    """Return ``text`` with ``Example:`` headers renamed and ``Main names:`` items bulleted."""
    lines = text.split("\n")
    out: list[str] = []
    item_indent: int | None = None  # indentation of the items of the current Main names block
    header_indent = 0
    for line in lines:
        if item_indent is not None:
            if line.strip() and _indent(line) <= header_indent:
                item_indent = None  # the block ended
            elif line.strip() and (item_indent == -1 or _indent(line) == item_indent):
                item_indent = _indent(line)
                out.append(f"{line[:item_indent]}- {line[item_indent:]}")
                continue
        if match := _EXAMPLE.match(line):
            out.append(f"{match['indent']}Examples:")
            continue
        if match := _MAIN_NAMES.match(line):
            header_indent = len(match["indent"])
            item_indent = -1  # set by the first item
        out.append(line)
    return "\n".join(out)


class HouseSections(griffe.Extension):
    """Rewrite every loaded docstring with `rewrite` before it is parsed."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the object's docstring (the tree is complete; nothing is parsed yet)."""
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
