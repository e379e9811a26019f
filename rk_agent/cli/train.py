"""``rk-agent train grpo`` and ``rk-agent train sft``: TRL training from a config and flags.

Any option of TRL's ``GRPOConfig`` / ``SFTConfig`` can be given as an extra flag, in the
Hugging Face spelling (``--learning_rate 1e-5``, ``--max-steps=20``, ``--bf16``); it overrides
the ``trl:`` section of ``--config``. Every option, file and name is checked before torch or
TRL is imported, so bad input fails at once with one ``error:`` line (exit code 2).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from rk_agent.cli.command_list import WholeSentenceGroup
from rk_agent.cli.console import echo
from rk_agent.cli.rollout import EXIT_INTERRUPTED
from rk_agent.cli.tasks_option import TasksColumnsOpt, parse_columns
from rk_agent.cli.trust_option import TrustRun

app = typer.Typer(
    cls=WholeSentenceGroup,
    help="Train a model with TRL: GRPO on an environment, or SFT on trajectories.",
    no_args_is_help=True,
)

_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}

# Config keys whose flag is named differently, for error messages
# (`rk_agent.config_files.flag_problems`; any other key `name_x` is `--name-x`).
_FLAGS = {
    "rewards": "--reward", "multi_turn": "--single-turn", "wandb.enabled": "--wandb",
    "watch.stop_on_alarm": "--stop-on-alarm", "watch.zero_spread_share": "--alarm-zero-spread",
    "watch.zero_spread_steps": "--alarm-zero-spread-steps",
    "watch.farming_window": "--alarm-farming-window",
    "watch.farming_min_drop": "--alarm-farming-drop", "watch.collapse_share": "--alarm-collapse",
    "watch.dominant_share": "--alarm-dominant-share",
    "watch.truncated_share": "--alarm-truncated", "sft_filter.min_reward": "--min-reward",
    "sft_filter.success_only": "--include-unsuccessful",
    "sft_filter.max_per_task": "--max-per-task", "sampling.dynamic": "--dynamic-sampling",
    "sampling.max_extra_draws": "--max-extra-draws", "sampling.retire_after": "--retire-after",
    "sampling.retire_keep": "--retire-keep",
}  # fmt: skip

ConfigOpt = Annotated[
    str | None,
    typer.Option("--config", "-c", help="YAML train config (configs/train/*.yaml)."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Model folder or hub id. Default: the embedded SmolLM2-135M."
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output-dir", "-o", help="Run folder (default: runs/train-<kind>-<env>-<time>)."
    ),
]
ResumeOpt = Annotated[
    str | None,
    typer.Option(
        "--resume",
        help="auto (default: the last checkpoint in the run folder, if any), true, false, "
        "or a checkpoint folder.",
    ),
]
WandbOpt = Annotated[
    bool | None,
    typer.Option(
        "--wandb/--no-wandb",
        help="Log to Weights & Biases (default: on when installed; offline without a key).",
        show_default=False,
    ),
]


_ALARMS = "Alarms (GRPO's watch)"
StopOnAlarmOpt = Annotated[
    bool,
    typer.Option(
        "--stop-on-alarm",
        help="End the run at the first alarm, after its step: no final model, the checkpoints "
        "written so far are kept.",
        rich_help_panel=_ALARMS,
    ),
]


def _share(flag: str, what: str) -> Any:
    return typer.Option(flag, help=what, rich_help_panel=_ALARMS, show_default=False)


_SAMPLING = "Dynamic sampling and task retirement (GRPO, off by default)"


def _sampling(flag: str, what: str) -> Any:
    return typer.Option(flag, help=what, rich_help_panel=_SAMPLING, show_default=False)


def _resume(value: str | None) -> bool | str | None:
    if value is None:
        return None
    lowered = value.lower()
    return {"true": True, "false": False}.get(lowered, value)


def _train(
    kind: Literal["grpo", "sft"], ctx: typer.Context, config: str | None, overrides: dict[str, Any]
) -> None:
    """Check every option, then train. The checks import neither torch nor TRL: a mistake
    fails in about a second, not after the ten seconds those take to import. A core install
    (no ``train`` extra) stops first, in one line naming the install command."""
    from rk_agent.errors import require_extra

    require_extra("train", f"rk-agent train {kind}")
    from rk_agent.trainers.config import load_train_config
    from rk_agent.trainers.preflight import check_train_inputs
    from rk_agent.trainers.trl_args import parse_cli_overrides, trl_fields
    from rk_agent.trainers.trl_schema import schema_class

    config_cls = schema_class(kind)
    _check_typos(ctx, kind, set(trl_fields(config_cls)))
    trl_overrides = parse_cli_overrides(list(ctx.args), config_cls)
    resolved = load_train_config(config, {"kind": kind, **overrides}, trl_overrides, _FLAGS)
    check_train_inputs(resolved)
    from rk_agent.trainers.allocator import return_freed_memory

    return_freed_memory()  # before torch loads and its threads allocate
    from rk_agent.cli.invocation import command
    from rk_agent.trainers.run import run_training

    outcome = run_training(resolved, say=echo, command=command())
    if outcome.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if outcome.stopped_by is not None:  # --stop-on-alarm: the run did not finish
        raise typer.Exit(1)


def _check_typos(ctx: typer.Context, kind: str, trl_options: set[str]) -> None:
    """An extra flag that is no TRL option but close to one of ours: say which one was meant."""
    import difflib

    from rk_agent.errors import ConfigError

    ours = [
        opt[2:]
        for param in ctx.command.params
        for opt in [*param.opts, *param.secondary_opts]
        if opt.startswith("--")
    ]
    for arg in ctx.args:
        flag = arg.partition("=")[0]
        name = flag[2:].replace("-", "_")
        if not flag.startswith("--") or {name, name.removeprefix("no_")} & trl_options:
            continue
        close = difflib.get_close_matches(flag[2:], ours, n=1, cutoff=0.6)
        if close:
            raise ConfigError(
                f"unknown option {flag!r} for rk-agent train {kind}. Did you mean "
                f"'--{close[0]}'? See `rk-agent train {kind} --help`."
            )


@app.command(context_settings=_EXTRA)
def grpo(
    ctx: typer.Context,
    env: Annotated[
        str | None,
        typer.Option("--env", "-e", help="Environment: tools, math, code, guess, file.py::Class."),
    ] = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    output_dir: OutputOpt = None,
    n_tasks: Annotated[int | None, typer.Option("--n-tasks", help="Training tasks.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="First task seed.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="Turns per episode.")] = None,
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="A JSONL task dataset instead of generated tasks.")
    ] = None,
    tasks_columns: TasksColumnsOpt = None,
    reward: Annotated[
        list[str] | None,
        typer.Option("--reward", help="Episode reward replacing the env's (repeatable)."),
    ] = None,
    single_turn: Annotated[
        bool,
        typer.Option("--single-turn", help="Train on one reply per task instead of episodes."),
    ] = False,
    loop: Annotated[
        str | None,
        typer.Option(
            "--loop",
            help="Who plays the episodes: rk (rk-agent's loop, any env; default) or trl "
            "(TRL's environment_factory tool loop: tool envs, use_vllm as TRL documents).",
        ),
    ] = None,
    tool_call_format: Annotated[
        str | None,
        typer.Option(
            "--tool-call-format",
            help="How the model writes tool calls as text, in both loops: hermes (<tool_call> "
            "blocks; default) or llama3_json.",
        ),
    ] = None,
    resume: ResumeOpt = None,
    wandb: WandbOpt = None,
    stop_on_alarm: StopOnAlarmOpt = False,
    alarm_zero_spread: Annotated[
        float | None,
        _share(
            "--alarm-zero-spread",
            "Share of groups with zero reward spread that raises the alarm when it lasts "
            "--alarm-zero-spread-steps steps (0.5).",
        ),
    ] = None,
    alarm_zero_spread_steps: Annotated[
        int | None,
        _share(
            "--alarm-zero-spread-steps",
            "Steps in a row the --alarm-zero-spread share must last to raise the alarm (3).",
        ),
    ] = None,
    alarm_farming_window: Annotated[
        int | None,
        _share(
            "--alarm-farming-window",
            "Steps over which rising per-step reward and falling success mean farming (5).",
        ),
    ] = None,
    alarm_farming_drop: Annotated[
        float | None,
        _share("--alarm-farming-drop", "The fall in success over that window that counts (0.1)."),
    ] = None,
    alarm_collapse: Annotated[
        float | None,
        _share(
            "--alarm-collapse",
            "Share of groups whose episodes all gave one final answer that raises the alarm "
            "(0.5, for 3 steps).",
        ),
    ] = None,
    alarm_dominant_share: Annotated[
        float | None,
        _share(
            "--alarm-dominant-share",
            "Share of the reward one component other than the outcome may reach (0.8).",
        ),
    ] = None,
    alarm_truncated: Annotated[
        float | None,
        _share("--alarm-truncated", "Share of completions cut by a token limit allowed (0.3)."),
    ] = None,
    dynamic_sampling: Annotated[
        bool,
        _sampling(
            "--dynamic-sampling",
            "Drop the groups whose rewards are all equal (they teach nothing) and play groups "
            "of fresh tasks in their place, until the step holds only groups with spread.",
        ),
    ] = False,
    max_extra_draws: Annotated[
        int | None,
        _sampling(
            "--max-extra-draws",
            "Most rounds of fresh groups a step plays beyond its first (2); then it trains "
            "on what it has, filled with dropped groups.",
        ),
    ] = None,
    retire_after: Annotated[
        int | None,
        _sampling(
            "--retire-after",
            "Retire a task whose last K groups all passed or all failed: it is played no "
            "more (see --retire-keep), a fresh task in its place. Default: never.",
        ),
    ] = None,
    retire_keep: Annotated[
        float | None,
        _sampling("--retire-keep", "Share of its draws a retired task is still played in (0)."),
    ] = None,
) -> None:
    """GRPO on an environment: whole episodes, environment tokens masked out of the loss.

    Every step is watched (zero-spread groups, farmed step rewards, collapsing answers, NaN
    rewards, a dominant component, truncation): watch.jsonl in the run folder, watch/* in the
    logs, a one-line warning per alarm; `rk-agent show RUN` lists them. --dynamic-sampling
    replaces the groups that teach nothing, --retire-after the tasks that do.

    Example: rk-agent train grpo --env tools --max_steps 20 --learning_rate 1e-5
    """
    _train(
        "grpo",
        ctx,
        config,
        {
            "env": env,
            "model": model,
            "output_dir": output_dir,
            "n_tasks": n_tasks,
            "seed": seed,
            "max_turns": max_turns,
            "tasks": tasks,
            "tasks_columns": parse_columns(tasks_columns),
            "rewards": reward or None,
            "multi_turn": False if single_turn else None,
            "loop": loop,
            "tool_call_format": tool_call_format,
            "resume": _resume(resume),
            "wandb.enabled": wandb,
            "watch.stop_on_alarm": True if stop_on_alarm else None,
            "watch.zero_spread_share": alarm_zero_spread,
            "watch.zero_spread_steps": alarm_zero_spread_steps,
            "watch.farming_window": alarm_farming_window,
            "watch.farming_min_drop": alarm_farming_drop,
            "watch.collapse_share": alarm_collapse,
            "watch.dominant_share": alarm_dominant_share,
            "watch.truncated_share": alarm_truncated,
            "sampling.dynamic": True if dynamic_sampling else None,
            "sampling.max_extra_draws": max_extra_draws,
            "sampling.retire_after": retire_after,
            "sampling.retire_keep": retire_keep,
        },
    )


@app.command(context_settings=_EXTRA)
def sft(
    ctx: typer.Context,
    trajectories: Annotated[
        str | None,
        typer.Option(
            "--trajectories", "-t", help="A rollout run folder or a trajectories JSONL file."
        ),
    ] = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    output_dir: OutputOpt = None,
    min_reward: Annotated[
        float | None, typer.Option("--min-reward", help="Keep episodes scoring at least this.")
    ] = None,
    include_unsuccessful: Annotated[
        bool,
        typer.Option("--include-unsuccessful", help="Keep unsolved episodes too."),
    ] = False,
    max_per_task: Annotated[
        int | None, typer.Option("--max-per-task", help="Keep the best N episodes per task.")
    ] = None,
    resume: ResumeOpt = None,
    wandb: WandbOpt = None,
    trust_run: TrustRun = False,
) -> None:
    """SFT on trajectories (rejection sampling): the assistant's tokens of the kept episodes.

    Example: rk-agent train sft --trajectories runs/tools-solver --num_train_epochs 2
    """
    _train(
        "sft",
        ctx,
        config,
        {
            "trajectories": trajectories,
            "model": model,
            "output_dir": output_dir,
            "sft_filter.min_reward": min_reward,
            "sft_filter.success_only": False if include_unsuccessful else None,
            "sft_filter.max_per_task": max_per_task,
            "resume": _resume(resume),
            "wandb.enabled": wandb,
            "trust_run": trust_run or None,
        },
    )
