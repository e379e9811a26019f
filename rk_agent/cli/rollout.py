"""``rk-agent rollout`` and ``rk-agent show``: play episodes, then read them back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rk_agent.cli.invocation import command
from rk_agent.cli.tasks_option import TasksColumnsOpt, parse_columns
from rk_agent.cli.trust_option import TrustRun
from rk_agent.errors import ConfigError, RkAgentError

if TYPE_CHECKING:
    from rich.console import Console

    from rk_agent.runs.run_dir import RunDir, RunStatus

EXIT_INTERRUPTED = 130
EXIT_ALL_FAILED = 1

# Config keys whose flag is named differently, for error messages.
_FLAGS = {
    "episode_timeout_s": "--timeout", "rewards": "--reward",
    "sampling.temperature": "--temperature", "sampling.max_tokens": "--max-tokens",
    "failure_policy.action": "--failure-policy",
    "group_size": "--group-size", "base_url": "--base-url", "max_turns": "--max-turns",
    "env_kwargs.sandbox": "--sandbox", "mcp": "--mcp",
    "ray.address": "--ray-address", "ray.num_cpus": "--worker-cpus",
    "ray.resources": "--worker-resource", "tool_call_format": "--tool-call-format",
}  # fmt: skip


def rollout(
    env: Annotated[
        str | None,
        typer.Option(
            "--env",
            "-e",
            help="Environment: tools, math, code, guess, file.py::Class or module:Class.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model name, local folder or hub id. Default: the embedded SmolLM2-135M.",
        ),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            "--policy",
            help="fireworks, openai, local, or solver (the env's reference solver, no model: "
            "solved episodes for an SFT warm start).",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="Any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp)."
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="API key (default: FIREWORKS_API_KEY / OPENAI_API_KEY). Never saved.",
            show_default=False,
        ),
    ] = None,
    tool_call_format: Annotated[
        str | None,
        typer.Option(
            "--tool-call-format",
            help="How the model writes tool calls as text where the server takes no `tools` "
            "(or a local model has no tool template): hermes (default) or llama3_json.",
        ),
    ] = None,
    n: Annotated[int | None, typer.Option("--n", "-n", help="Number of tasks.")] = None,
    group_size: Annotated[
        int | None, typer.Option("--group-size", help="Samples per task (GRPO groups, pass@k).")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Episodes played at once.")
    ] = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", help="Assistant turns per episode.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Wall-time limit per episode, seconds.")
    ] = None,
    reward: Annotated[
        list[str] | None,
        typer.Option(
            "--reward",
            help="Episode reward (repeatable): a name or file.py::fn. Replaces the env's.",
        ),
    ] = None,
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", help="JSONL dataset of tasks instead of generated ones."),
    ] = None,
    tasks_columns: TasksColumnsOpt = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Task i uses seed + i.")] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", help="Sampling temperature.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Most new tokens per turn.")
    ] = None,
    failure_policy: Annotated[
        str | None, typer.Option("--failure-policy", help="record, retry or drop_group.")
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Run directory (default runs/<env>-<time>)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="YAML file with any of these options; flags override it."
        ),
    ] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Finish an interrupted run directory.")
    ] = None,
    fork: Annotated[
        str | None,
        typer.Option(
            "--fork",
            help="RUN::ID@K: play --n continuations (default 8) of episode ID of RUN from its "
            "turn K, the env's state restored by replaying the first K recorded turns; one "
            "group, in the source run's environment, task and seed (--env, --seed, --tasks "
            "refused; --reward scores the continuations).",
        ),
    ] = None,
    sandbox: Annotated[
        str | None,
        typer.Option(
            "--sandbox",
            help="Where envs that run model code (code) run it: bwrap (isolated, the default) "
            "or process (no isolation; opt-in). See `rk-agent doctor`.",
        ),
    ] = None,
    mcp: Annotated[
        str | None,
        typer.Option(
            "--mcp",
            help="An mcpServers JSON file: MCP servers whose tools the environment offers too, "
            "connected once for the run and stopped at its end (see the MCP page of the docs).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Play the episodes on N Ray actors (processes, or machines of a cluster), "
            "--concurrency shared among them; 0: in this process. Needs "
            "`pip install 'rk-agent[ray]'`.",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="With --workers: join this Ray cluster (auto, HOST:PORT or ray://HOST:PORT) "
            "instead of starting Ray on this machine for the run.",
        ),
    ] = None,
    worker_cpus: Annotated[
        float | None,
        typer.Option("--worker-cpus", help="With --workers: CPUs each worker reserves (1)."),
    ] = None,
    worker_resource: Annotated[
        list[str] | None,
        typer.Option(
            "--worker-resource",
            help="With --workers: a custom Ray resource each worker reserves, NAME=AMOUNT "
            "(repeatable), e.g. sandbox=1.",
        ),
    ] = None,
    trust_run: TrustRun = False,
) -> None:
    """Play episodes of an environment with a model and write trajectories and a summary."""
    from rk_agent.cli.console import make_console
    from rk_agent.cli.render import render_summary
    from rk_agent.rollouts.runner import describe_model, prepare_run
    from rk_agent.runs.config import PLACEMENT_KEYS, load_rollout_config
    from rk_agent.runs.run_dir import RunStatus

    console = make_console()
    overrides: dict[str, Any] = {
        "env": env, "model": model, "provider": provider, "base_url": base_url, "n": n,
        "group_size": group_size, "concurrency": concurrency, "max_turns": max_turns,
        "episode_timeout_s": timeout, "rewards": reward or None, "tasks": tasks,
        "tasks_columns": parse_columns(tasks_columns), "seed": seed,
        "sampling.temperature": temperature, "sampling.max_tokens": max_tokens,
        "failure_policy.action": failure_policy, "output": output,
        "env_kwargs.sandbox": sandbox, "mcp": mcp,
        "workers": workers, "ray.address": ray_address, "ray.num_cpus": worker_cpus,
        "ray.resources": _resources(worker_resource), "fork": fork,
        "tool_call_format": tool_call_format,
    }  # fmt: skip
    if fork is not None:  # --n counts the continuations: one group of that many samples
        _check_fork_flags(
            env=env, seed=seed, tasks=tasks, n=n, group_size=group_size,
            tasks_columns=tasks_columns,
        )  # fmt: skip
        overrides.update(n=None, group_size=n or group_size or 8)
    placement: dict[str, Any] = {}
    if resume is not None:
        given = [
            _FLAGS.get(k, k)
            for k, v in overrides.items()
            if v is not None and k not in PLACEMENT_KEYS
        ]
        if given or config is not None:
            flags = ", ".join(f if f.startswith("--") else f"--{f}" for f in given)
            raise ConfigError(
                f"--resume finishes a run with its saved config; drop {flags or '--config'}. "
                "Only where the rest is played can change: --concurrency, --workers (0: in "
                "this process), --ray-address, --worker-cpus, --worker-resource."
            )
        placement = {k: overrides[k] for k in PLACEMENT_KEYS}
        overrides = {}
    if resume is not None and _all_played(resume):
        console.print(
            f"{resume} is finished already: every episode of its config is there, nothing is "
            f"left to play. See it with `{command()} show {resume}`."
        )
        return
    run_config = load_rollout_config(config, overrides, flags=_FLAGS)
    if trust_run and resume is None and run_config.fork is None:
        raise ConfigError(
            "--trust-run lets --resume or --fork build a run from elsewhere; give it with one "
            "of them (a new run builds only what its own options name)."
        )
    with prepare_run(
        run_config, api_key=api_key, resume=resume, placement=placement, trust_run=trust_run
    ) as run:
        _say_taken_over(run.run_dir, console)
        for note in run.notes:
            console.print(note, style="yellow")
        total = run.config.n * run.config.group_size
        console.print(describe_model(run), style="yellow" if run.uses_embedded_model else None)
        console.print(
            f"{run.env_name}: {total} episodes ({run.config.n} tasks x {run.config.group_size}), "
            f"concurrency {run.config.concurrency}, writing to {run.run_dir.path}"
            + _on_workers(run.config.workers)
            + (f" (resuming: {len(run.done)} done)" if run.done else "")
        )
        status = _play(run, console, total)
        summary = run.summarize()
        run.finish(status)
    render_summary(summary, console, title=f"Summary of {run.run_dir.path}")
    if status is RunStatus.INTERRUPTED:
        console.print(
            f"Interrupted: finished episodes are saved. Resume with "
            f"`{command()} rollout --resume {run.run_dir.path}`.", style="yellow"
        )  # fmt: skip
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.episodes and summary.failed == summary.episodes:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.failures.items()))
        console.print(
            f"Every episode failed ({kinds}): see why with `{command()} show {run.run_dir.path} "
            "--failed`.", style="red"
        )  # fmt: skip
        raise typer.Exit(EXIT_ALL_FAILED)
    if run.uses_embedded_model:
        # Never wrapped by rich: a command broken across lines cannot be pasted back.
        console.print(_next_steps(run.run_dir.path, run.env_name), soft_wrap=True)


def _on_workers(workers: int | None) -> str:
    """``, on 2 Ray workers`` (``, on 1 Ray worker``; nothing when played in this process)."""
    return f", on {workers} Ray worker{'s' if workers != 1 else ''}" if workers else ""


def _resources(specs: list[str] | None) -> dict[str, float] | None:
    """``--worker-resource NAME=AMOUNT`` flags as a mapping (``None`` when none is given)."""
    if not specs:
        return None
    out: dict[str, float] = {}
    for spec in specs:
        name, _, amount = spec.partition("=")
        try:
            out[name.strip()] = float(amount)
        except ValueError:
            raise ConfigError(
                f"--worker-resource expects NAME=AMOUNT (e.g. sandbox=1), got {spec!r}."
            ) from None
        if not name.strip():
            raise ConfigError(f"--worker-resource {spec!r} has no name; e.g. sandbox=1.")
    return out


def _next_steps(path: Path, env: str) -> str:
    """Where to go from a run of the embedded model (which solves next to nothing)."""
    rk = command()
    return "\n".join([  # each command on a line of its own, what it is for above it
        "Next steps:",
        "  # what the model did, turn by turn",
        f"  {rk} show {path} --limit 2",
        "  # solved episodes without a model, then a warm start from them",
        f"  {rk} rollout --env {env} --policy solver --n 64 --output runs/demos",
        f"  {rk} train sft --trajectories runs/demos",
        "  # a real model: vLLM, SGLang, Ollama (or --provider fireworks|openai)",
        f"  {rk} rollout --env {env} --base-url http://localhost:8000/v1 --model NAME",
    ])  # fmt: skip


def _say_taken_over(run_dir: RunDir, console: Console) -> None:
    """Say so when the last writer of a resumed run was killed without releasing its lock."""
    previous = run_dir.lock.previous if run_dir.lock is not None else None
    if previous is not None:
        console.print(
            f"The last writer of this run, {previous.describe()}, ended without releasing it "
            "(it was killed); taking over.",
            style="yellow",
        )


def _play(run: Any, console: Console, total: int) -> RunStatus:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )  # fmt: skip

    from rk_agent.gc_tuning import fewer_gc_pauses
    from rk_agent.runs.run_dir import RunStatus

    rewards: list[float] = []
    columns = (
        TextColumn("{task.description}", style="bold", markup=False), BarColumn(),
        MofNCompleteColumn(), TextColumn("{task.fields[stats]}", markup=False),
        TimeElapsedColumn(),
    )  # fmt: skip
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("episodes", total=total, completed=len(run.done), stats="")

        def on_episode(trajectory: Any) -> None:
            if trajectory.episode_reward is not None:
                rewards.append(trajectory.episode_reward)
            mean = sum(rewards) / len(rewards) if rewards else float("nan")
            progress.update(bar, advance=1, stats=f"mean reward {mean:.3f}")

        try:
            with fewer_gc_pauses():  # this process is the run's (rk_agent.gc_tuning)
                result = asyncio.run(run.play(on_episode))
        except KeyboardInterrupt:
            return RunStatus.INTERRUPTED
    lost = getattr(result, "worker_failures", [])
    if lost:
        console.print(
            f"{len(lost)} worker(s) lost ({', '.join(f.kind.value for f in lost)}); their "
            f"unfinished episodes were played by others. See {run.run_dir.path}/"
            "worker_failures.jsonl.", style="yellow"
        )  # fmt: skip
    return RunStatus.FINISHED


def show(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="A run directory made by `rk-agent rollout`, or by `rk-agent train` (then its "
            "status, last watched step and alarms)."
        ),
    ],
    episode: Annotated[
        list[str] | None, typer.Option("--episode", help="Episode id(s) to render, e.g. 3-0.")
    ] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Render the failed episodes.")] = False,
    limit: Annotated[
        int, typer.Option("--limit", help="Render at most this many episodes (0: none, -1: all).")
    ] = 3,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw the run's episode scores into this image (e.g. rewards.png): one "
            "histogram per reward component, failed and invalid episodes counted apart.",
        ),
    ] = None,
) -> None:
    """Print a run's summary and render chosen episodes turn by turn (a training run: its
    status and the alarms it raised, then its episodes; a bare trajectories file: its
    episodes)."""
    from rk_agent.cli.console import make_console
    from rk_agent.cli.render import render_summary, render_trajectory
    from rk_agent.cli.show_training import is_training_run
    from rk_agent.runs.run_dir import CONFIG_FILE, TRAJECTORIES_FILE, RunDir, read_trajectories
    from rk_agent.runs.summary import summarize

    if limit < -1:
        raise ConfigError(f"--limit must be -1 (all), 0 or more, got {limit}.")
    if plot is not None:
        from rk_agent.rewards.plots import check_plot_path

        check_plot_path(plot)
    console = make_console()
    run: RunDir | None = None
    if is_training_run(run_dir):
        from rk_agent.cli.show_training import render_training_run

        render_training_run(run_dir, console)
        if not (run_dir / TRAJECTORIES_FILE).is_file():
            return  # an SFT run, or a GRPO run before its first episode
        trajectories = read_trajectories(run_dir)
    elif run_dir.is_file():
        trajectories = read_trajectories(run_dir)
    elif not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(_not_a_run(run_dir))
    else:
        run = RunDir.open(run_dir)
        trajectories = run.read_trajectories()
    chosen = trajectories
    if episode:
        wanted = set(episode)
        chosen = [t for t in trajectories if t.id in wanted]
        missing = sorted(wanted - {t.id for t in chosen})
        if missing:
            raise ConfigError(_no_episode(missing, trajectories, run_dir))
    if run is not None:
        group_size = run.config.group_size
        worker_failures = run.worker_failure_kinds()
    else:  # samples per task, as the episodes say
        group_size = max((t.sample for t in trajectories), default=0) + 1
        worker_failures = []
    summary = summarize(trajectories, group_size, worker_failures)
    render_summary(summary, console, title=str(run_dir))
    note = _status_note(run) if run is not None else None
    if note is not None:
        console.print(note, style="yellow")
    if run is not None:
        _show_provenance(run, trajectories, console)
    if not episode and failed:
        chosen = [t for t in trajectories if t.failure is not None]
        if not chosen:
            console.print(f"No failed episodes in {run_dir} ({len(trajectories)} episodes).")
    for trajectory in chosen if limit == -1 else chosen[:limit]:
        render_trajectory(trajectory, console)
    if limit > 0 and len(chosen) > limit:
        console.print(f"Showed {limit} of {len(chosen)} episodes; --limit -1 shows all.")
    if plot is not None and trajectories:
        from rk_agent.rewards.plots import plot_reward_histograms

        title = f"{trajectories[0].env} episodes in {run_dir.name}"
        written = plot_reward_histograms([t.episode for t in trajectories], plot, title=title)
        console.print(f"reward histograms: {written}", highlight=False)


def _show_provenance(run: RunDir, trajectories: list[Any], console: Console) -> None:
    """The "what the model saw" block, from ``provenance.json`` (nothing for a run without)."""
    provenance = run.read_provenance()
    if provenance is None:
        return
    differing = sum(1 for t in trajectories if t.provenance is not None)
    console.print(f"What the model saw ({run.PROVENANCE})", style="bold", highlight=False)
    for line in provenance.describe(differing):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def _all_played(path: Path) -> bool:
    """Whether the run directory holds every episode its config plans (read, not locked; a
    path that is no run directory is left to `prepare_run` to refuse in its words)."""
    from rk_agent.runs.run_dir import RunDir

    try:
        run = RunDir.open(path)
        done = {t.id for t in run.read_trajectories()}
    except RkAgentError:
        return False
    return len(done) >= run.config.n * run.config.group_size


def _check_fork_flags(
    *, env: str | None, seed: int | None, tasks: Any, n: int | None, group_size: int | None,
    tasks_columns: str | None = None,
) -> None:  # fmt: skip
    """Refuse the options ``--fork`` cannot honour, in one line.

    Raises:
        ConfigError: ``--env``, ``--seed`` or ``--tasks`` (the fork plays the source episode's
            environment, task and seed), or ``--n`` and ``--group-size`` that disagree.
    """
    flags = (("--env", env), ("--seed", seed), ("--tasks", tasks),
             ("--tasks-columns", tasks_columns))  # fmt: skip
    given = [flag for flag, value in flags if value is not None]
    if given:
        raise ConfigError(
            f"--fork plays the source episode's environment, task and seed; drop "
            f"{', '.join(given)} (--reward scores the continuations with other rewards, --n "
            "or --group-size sets how many)."
        )
    if n is not None and group_size is not None and n != group_size:
        raise ConfigError(
            f"--fork plays one group: --n {n} and --group-size {group_size} both say how many "
            "continuations; give one of them."
        )


def _not_a_run(path: Path) -> str:
    """The error for a path ``rk-agent show`` finds no run at."""
    from rk_agent.runs.run_dir import CONFIG_FILE
    from rk_agent.runs.run_record import RUN_RECORD_FILE

    give = (
        "Give a run's folder (made by `rk-agent rollout`, `rk-agent rescore` or `rk-agent "
        "train`) or a trajectories JSONL file."
    )
    if not path.exists():
        return f"{path} does not exist. {give}"
    if (path / RUN_RECORD_FILE).is_file():
        return (
            f"{path} holds no run: no {CONFIG_FILE} (a rollout run's), and its "
            f"{RUN_RECORD_FILE} is not a training run's record (unreadable). {give}"
        )
    return (
        f"{path} holds no run: neither the {CONFIG_FILE} of a rollout run nor the "
        f"{RUN_RECORD_FILE} of a training run. {give}"
    )


def _no_episode(missing: list[str], trajectories: list[Any], where: Path) -> str:
    """The error for ``--episode`` ids a run does not have, with the ids it has."""
    ids = [t.id for t in trajectories]
    named = ", ".join(missing)
    if not ids:
        return f"no episode {named} in {where}: it holds no episodes yet."
    held = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")
    return f"no episode {named} in {where}; it holds {held}."


def _status_note(run: RunDir) -> str | None:
    """How an unfinished run stands, from ``run.json`` and its lock (``None``: finished)."""
    from rk_agent.runs.run_dir import RunStatus

    record = run.read_record()
    status = record.status if record is not None else None
    resume = f"finish it with `{command()} rollout --resume {run.path}`"
    if status is RunStatus.INTERRUPTED:
        return f"The run was interrupted (Ctrl-C); {resume}."
    if status is RunStatus.FAILED:
        return f"The run failed: {record.error if record else ''}; {resume}."
    if status is RunStatus.RUNNING:
        holder = run.holder()
        if holder is not None and holder.is_alive() is not False:
            return f"The run is still being written by {holder.describe()}."
        who = f" ({holder.describe()})" if holder is not None else ""
        return f"The run stopped without finishing: its process{who} was killed; {resume}."
    return None
