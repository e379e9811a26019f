"""Command-line options of the commands that take Reward Kit metric folders (``rk-agent
preview``, ``rk-agent deploy``, ``rk-agent fireworks preview``): one definition each.

Main names: `MetricsFolders`, `MoreFolders`, `Combine`, `Weight`.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["Combine", "MetricsFolders", "MoreFolders", "Weight"]

MetricsFolders = Annotated[
    list[str] | None,
    typer.Option(
        "--metrics-folders",
        "-m",
        help="Instead of --reward: a Reward Kit metric folder as NAME=PATH, a folder whose "
        "main.py defines evaluate() (repeatable). Several folders make one reward whose score is "
        "the mean of the folders' scores (see --combine) and whose metrics are NAME.<metric>.",
    ),
]
MoreFolders = Annotated[
    list[str] | None,
    typer.Argument(hidden=True, metavar="NAME=PATH", help="More metric folders after -m."),
]
Combine = Annotated[
    str,
    typer.Option(
        "--combine",
        help="With --metrics-folders: how the folders' scores become one: mean (default), "
        "weighted_sum, min or product.",
    ),
]
Weight = Annotated[
    list[str] | None,
    typer.Option(
        "--weight", help="With --metrics-folders: NAME=NUMBER, a folder's weight (repeatable)."
    ),
]
