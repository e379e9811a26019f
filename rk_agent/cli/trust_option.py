"""``--trust-run``: the one opt-in of the commands that build a run again from its config
(``rk-agent replay``, ``rescore``, ``rollout --fork``, ``rollout --resume``, ``train sft``,
``fireworks rft``), defined once (`rk_agent.runs.run_trust` says what it opts in to).

Main names: `TrustRun`.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["TrustRun"]

TrustRun = Annotated[
    bool,
    typer.Option(
        "--trust-run",
        help="Build the run as its config says even when rk-agent did not write it on this "
        "machine (a run from elsewhere, or edited): import the files, start the commands, "
        "connect to the URLs and read the environment variables it names. Only for runs you "
        "trust; without it such a run is refused, naming what it wanted.",
    ),
]
