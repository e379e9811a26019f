"""docs/cli.md lists every command and option the CLI has (issue 40 item 15)."""

from __future__ import annotations

import re

from rk_agent.cli.reference import BEGIN, DOCS, END, command_reference, commands

REGENERATE = "uv run python -m rk_agent.cli.reference --write"


def test_the_reference_in_docs_is_the_clis_own() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    documented = BEGIN + text.partition(BEGIN)[2].partition(END)[0] + END
    assert documented == command_reference(), f"docs/cli.md is out of date: run `{REGENERATE}`"


def test_every_command_and_option_is_in_the_reference() -> None:
    reference = command_reference()
    for path, command in commands():
        section = reference.partition(f"### {path}\n")[2].partition("\n### ")[0]
        assert section, path
        for param in command.params:
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("--") and flag != "--help":
                    assert f"`{flag}`" in section, (path, flag)


def test_the_table_of_commands_names_every_command() -> None:
    table = DOCS.read_text(encoding="utf-8").partition("| Command | What it does |")[2]
    table = table.partition("\n\n")[0]
    listed = set(re.findall(r"`(rk-agent [a-z -]+?)`", table))
    for path, _ in commands():
        words = path.split()
        assert any(" ".join(words[:n]) in listed for n in (2, 3)), path
