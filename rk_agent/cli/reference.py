"""The reference of every command and option, as docs/cli.md lists it, made from the CLI itself.

`command_reference` walks the ``rk-agent`` command tree and writes, per command, a table of its
arguments and options with their ``--help`` text. docs/cli.md keeps it between two markers
(`BEGIN`, `END`); a test compares the two, so a command or option added without its line in the
docs fails. Regenerate after changing the CLI::

    uv run python -m rk_agent.cli.reference --write

Main names: `command_reference`, `commands`, `write_reference`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["BEGIN", "END", "command_reference", "commands", "write_reference"]

BEGIN = "<!-- BEGIN command reference: uv run python -m rk_agent.cli.reference --write -->"
END = "<!-- END command reference -->"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands() -> Iterator[tuple[str, Any]]:
    """Every command that runs (no group), as ``("rk-agent train grpo", command)``, in the
    order ``--help`` lists them."""
    import typer

    from rk_agent.cli.app import app

    root = typer.main.get_command(app)

    def visit(command: Any, ctx: Any) -> Iterator[tuple[str, Any]]:
        if not hasattr(command, "list_commands"):
            yield ctx.command_path, command
            return
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            yield from visit(sub, type(ctx)(sub, info_name=name, parent=ctx))

    yield from visit(root, root.context_class(root, info_name="rk-agent"))


def _cell(text: str) -> str:
    """Help text as one table cell: on one line, its ``|`` and angle brackets escaped."""
    text = re.sub(r"\s+", " ", text).strip().replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _row(param: Any) -> str | None:
    if param.param_type_name == "argument":
        name = f"`{(param.metavar or param.name).upper()}`"
    else:
        flags = [*param.opts, *param.secondary_opts]
        if "--help" in flags:
            return None
        name = ", ".join(f"`{flag}`" for flag in flags)
    return f"| {name} | {_cell(getattr(param, 'help', None) or '')} |"


def command_reference() -> str:
    """The markdown between the markers: one heading and table per command."""
    from rk_agent.cli.command_list import first_sentence

    out = [
        BEGIN,
        "",
        "Every command and its options, as `--help` gives them (`rk-agent train` takes any "
        "field of TRL's `GRPOConfig` or `SFTConfig` as well, in the Hugging Face spelling).",
    ]
    for path, command in commands():
        out += ["", f"### {path}", "", _cell(first_sentence(command.help or ""))]
        rows = [row for row in map(_row, command.params) if row is not None]
        if rows:
            out += ["", "| Argument or option | Meaning |", "| --- | --- |", *rows]
    return "\n".join([*out, "", END])


def write_reference(path: Path = DOCS) -> bool:
    """Put `command_reference` between the markers of ``path``; whether it changed."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    updated = head + command_reference() + tail
    path.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rk_agent.cli.reference --write``: rewrite docs/cli.md's reference."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["--write"]:
        print(command_reference())
        return 0
    changed = write_reference()
    print(f"{DOCS.name}: {'rewritten' if changed else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
