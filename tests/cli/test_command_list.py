"""Every command's --help, and every group's list of commands, reads as whole sentences."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from rk_agent.cli.app import app
from rk_agent.cli.command_list import first_sentence


def _helps() -> dict[str, str]:
    """``rk-agent ... --help`` of every command and group, by command line, 80 columns."""
    root = typer.main.get_command(app)
    found: dict[str, str] = {}

    def visit(command: Any, ctx: Any) -> None:
        ctx.max_content_width = ctx.terminal_width = 80
        found[ctx.command_path] = command.get_help(ctx)
        for name in command.list_commands(ctx) if hasattr(command, "list_commands") else []:
            sub = command.get_command(ctx, name)
            visit(sub, type(ctx)(sub, info_name=name, parent=ctx))

    visit(root, root.context_class(root, info_name="rk-agent"))
    return found


HELPS = _helps()


def test_every_command_is_reached() -> None:
    assert {"rk-agent rollout", "rk-agent train grpo", "rk-agent mcp serve"} <= set(HELPS)


@pytest.mark.parametrize("command", sorted(HELPS))
def test_no_sentence_is_cut_and_flags_show_no_value(command: str) -> None:
    text = HELPS[command]
    listed = text.partition("\nCommands:\n")[2]
    assert not [line for line in listed.splitlines() if line.endswith("...")], text  # cut short
    assert "<bool>" not in text, text  # a flag takes no value


def test_a_group_lists_each_command_by_its_whole_first_sentence() -> None:
    assert (
        "  rollout    Play episodes of an environment with a model and write trajectories\n"
        "             and a summary.\n"
    ) in HELPS["rk-agent"]


def test_first_sentence_keeps_a_colon_and_stops_at_the_first_full_stop() -> None:
    text = "GRPO on an environment: whole episodes.\nMasked.\n\nEvery step is watched."
    assert first_sentence(text) == "GRPO on an environment: whole episodes."
