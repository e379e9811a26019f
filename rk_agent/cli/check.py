"""``rk-agent check reward`` and ``rk-agent check env``: play the policies that cheat;
``rk-agent check tokens``: does a run's conversation re-tokenize to the ids its model generated?

The first two print a table (or ``--json``): the mean reward and each component of the
reference, an honest wrong answer and every probe, then the flags. ``check tokens`` prints each
drifted turn and the drift rate (`rk_agent.runs.token_drift`). Exit code 0: nothing flagged;
1: flagged (drift found); 2: bad input (one line saying what was expected, what came and how to
fix it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rk_agent.cli.command_list import WholeSentenceGroup
from rk_agent.cli.console import echo, echo_json, shown_text
from rk_agent.errors import ConfigError
from rk_agent.terminal_text import terminal_text

if TYPE_CHECKING:
    from rich.console import Console

    from rk_agent.soundness.probes import Probe
    from rk_agent.soundness.report import SoundnessReport

EXIT_FLAGGED = 1
"""Exit code when the check flagged something."""

app = typer.Typer(
    cls=WholeSentenceGroup,
    help="Is a reward or an environment sound? Play the policies that cheat against it. Does a "
    "run re-tokenize to the ids its model generated?",
    no_args_is_help=True,
)

AsJson = Annotated[
    bool, typer.Option("--json", help="Print the report as JSON (for CI) instead of tables.")
]
Probes = Annotated[
    list[str] | None,
    typer.Option(
        "--probe",
        help="Your own probe, 'path/to/file.py::name' or 'package.module:name' (a Probe, "
        "e.g. made with rk_agent.soundness.probes.probe); repeat for several.",
    ),
]
Kind = Annotated[
    str | None,
    typer.Option(
        "--kind",
        help="Which probes to add to the generic ones: generic, math, code, function_calling "
        "or tools (default: from the reward's or the environment's name).",
    ),
]
MaxScore = Annotated[
    float | None,
    typer.Option("--max-score", help="The score the reference should reach (default 1.0)."),
]


@app.command("reward")
def check_reward_command(
    reward: Annotated[
        str,
        typer.Argument(
            help="The reward: a registered name (see `rk-agent rewards list`), "
            "'path/to/file.py::fn' or 'package.module:fn'."
        ),
    ],
    samples: Annotated[
        Path,
        typer.Option(
            "--samples",
            "-s",
            help='JSONL file, one sample per line: {"messages": [...], "ground_truth": ...}, '
            "whose last message is the reference reply (the correct answer). At least 2.",
        ),
    ],
    kwargs: Annotated[
        str | None,
        typer.Option("--kwargs", help="JSON object of keyword arguments for the reward."),
    ] = None,
    sandbox: Annotated[
        str | None,
        typer.Option("--sandbox", help="For rewards that run code: bwrap (default) or process."),
    ] = None,
    max_samples: Annotated[
        int | None, typer.Option("--max-samples", help="Use only the first N samples.")
    ] = None,
    kind: Kind = None,
    max_score: MaxScore = None,
    probe: Probes = None,
    as_json: AsJson = False,
) -> None:
    """Play the probe catalogue against a reward, next to each sample's reference reply and an
    honest wrong answer (another sample's reference reply)."""
    from rk_agent.cli.preview import _parse_kwargs
    from rk_agent.cli.reward_options import check_reward_options
    from rk_agent.soundness.reward_check import check_reward

    bound: dict[str, Any] = _parse_kwargs(kwargs)
    check_reward_options(reward, bound)
    if max_samples is not None and max_samples < 2:
        raise ConfigError(f"--max-samples must be at least 2, got {max_samples}.")
    report = check_reward(
        reward,
        samples,
        probes=_load_probes(probe),
        kind=kind,
        max_score=max_score,
        sandbox=sandbox,
        max_samples=max_samples,
        **bound,
    )
    _finish(report, as_json)


@app.command("env")
def check_env_command(
    env: Annotated[
        str,
        typer.Argument(
            help="The environment: a registered name (see `rk-agent envs list`), a Gymnasium "
            "id, 'path/to/file.py::Class' or 'package.module:Class'."
        ),
    ],
    episodes: Annotated[
        int, typer.Option("--episodes", help="Episodes per row (seeds 0 to N-1).")
    ] = 10,
    kwargs: Annotated[
        str | None,
        typer.Option("--kwargs", help="JSON object of constructor arguments for the env."),
    ] = None,
    kind: Kind = None,
    max_score: MaxScore = 1.0,
    probe: Probes = None,
    as_json: AsJson = False,
) -> None:
    """Check the environment's contract, then play the probe catalogue as policies, next to
    its reference solver and an honest wrong answer (the solver on another task)."""
    from rk_agent.cli.preview import _parse_kwargs
    from rk_agent.soundness.env_check import check_env

    bound: dict[str, Any] = _parse_kwargs(kwargs)
    report = check_env(
        env,
        adversarial=True,
        episodes=episodes,
        probes=_load_probes(probe),
        kind=kind,
        max_score=max_score,
        **bound,
    )
    _finish(report, as_json)


@app.command("tokens")
def check_tokens_command(
    run: Annotated[Path, typer.Argument(help="A run directory (or a trajectories JSONL file).")],
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer",
            help="A model folder whose tokenizer and chat template re-render the episodes, or "
            "'embedded' (default: the run's local model folder, from its provenance.json).",
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Re-render each episode with the chat template, tokenize it, and check that every turn's
    generated token ids are where the re-tokenized conversation puts that turn (what a trainer
    that re-tokenizes would train on). Reports each drifted turn's first differing position with
    a sample, and the drift rate. Exit 0: no drift; 1: drift; 2: bad input."""
    from rk_agent.runs.token_drift import check_tokens

    report = check_tokens(run, tokenizer)
    if as_json:
        echo_json(report.model_dump_json(indent=2))
    else:
        echo("\n".join(report.describe()))
    if report.drifts:
        raise typer.Exit(EXIT_FLAGGED)


def _load_probes(specs: list[str] | None) -> list[Probe]:
    from rk_agent.loading import load_object
    from rk_agent.soundness.probes import Probe

    probes = []
    for spec in specs or []:
        loaded = load_object(spec, kind="probe")
        if not isinstance(loaded, Probe):
            raise ConfigError(
                f"--probe {spec!r} is a {type(loaded).__name__}, not a probe: expected an object "
                "with name, description, variants, kinds and reply(view), e.g. a function "
                "decorated with @rk_agent.soundness.probes.probe(name, description)."
            )
        probes.append(loaded)
    return probes


def _finish(report: SoundnessReport, as_json: bool) -> None:
    if as_json:
        echo_json(report.model_dump_json(indent=2))
    else:
        from rk_agent.cli.console import make_console

        render_report(report, make_console())
    if report.flagged:
        raise typer.Exit(EXIT_FLAGGED)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_report(report: SoundnessReport, console: Console) -> None:
    """Print the report: one table row per baseline and probe, then the flags (plain text)."""
    from rich.table import Table

    unit = "samples" if report.checked == "reward" else "episodes"
    table = Table(title=shown_text(f"{report.target} ({report.kind}): {report.cases} {unit}"))
    table.add_column("policy")
    table.add_column("mean", justify="right")
    is_env = report.checked == "env"
    if is_env:
        table.add_column("episode", justify="right")
    components = sorted({name for row in report.rows for name in row.components})
    for name in components:
        table.add_column(shown_text(name), justify="right")
    table.add_column("n", justify="right")
    table.add_column("flag")
    flagged = {flag.probe for flag in report.flags}
    for row in report.rows:
        cells: list[Any] = [shown_text(row.name), _fmt(row.mean)]
        if is_env:
            cells.append(_fmt(row.outcome))
        cells += [_fmt(row.components.get(name)) for name in components]
        count = str(row.cases) + (f" (+{row.skipped} n/a)" if row.skipped else "")
        count += f", {row.invalid} invalid" if row.invalid else ""
        cells += [count, shown_text("FLAG", style="bold red") if row.name in flagged else ""]
        table.add_row(*cells, end_section=row.role == "wrong")
    console.print(table)
    for flag in report.flags:
        line = shown_text(f"{flag.kind.value}: ", style="bold red")
        line.append(terminal_text(flag.message))
        console.print(line)
    if not report.flags:
        console.print(shown_text("nothing flagged", style="bold green"))
