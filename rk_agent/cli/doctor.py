"""``rk-agent doctor``: does this machine isolate untrusted code, and if not, why not."""

from __future__ import annotations

from typing import Annotated

import typer

from rk_agent.cli.console import echo, echo_json


def doctor(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False,
) -> None:
    """Check, with a real isolated run, whether the code sandbox works here.

    Code-executing rewards and envs (code_execution, the code env) run model-written programs
    under bubblewrap; this says whether that works on this machine, why not, and how to fix it.
    Exits with status 1 when isolation is not available.
    """
    from rk_agent.sandbox import isolation_report

    report = isolation_report()
    if as_json:
        echo_json(report.model_dump_json())
    else:
        for line in report.lines():
            echo(line)
    if not report.isolated:
        raise typer.Exit(1)
