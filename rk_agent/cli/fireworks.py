"""``rk-agent deploy`` and ``rk-agent fireworks ...``: evaluators and RFT jobs on Fireworks.

Commands: ``deploy`` (a reward as an evaluator), ``fireworks rft`` (trajectories or tasks and a
reward to a running RFT job), ``fireworks status``, ``fireworks cancel``, ``fireworks list``,
``fireworks preview``. Credentials come from ``FIREWORKS_API_KEY`` / ``FIREWORKS_ACCOUNT_ID`` /
``~/.fireworks/auth.ini``; ``FIREWORKS_API_BASE`` points them at another server (such as the
fake API, ``python -m rk_agent.testing.fake_fireworks``). ``--dry-run`` prints every request and
sends none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rk_agent.cli.command_list import WholeSentenceGroup
from rk_agent.cli.console import echo_json
from rk_agent.cli.folder_options import Combine, MetricsFolders, MoreFolders, Weight
from rk_agent.cli.trust_option import TrustRun
from rk_agent.errors import ConfigError, UnknownNameError

if TYPE_CHECKING:
    from rich.console import Console

    from rk_agent.fireworks.client import FireworksClient
    from rk_agent.fireworks.dry_run import PlannedRequest
    from rk_agent.fireworks.rft import RFTJob

EXIT_JOB_FAILED = 1
"""Exit code when the followed job ends in any state but COMPLETED."""
EXIT_INTERRUPTED = 130

app = typer.Typer(
    cls=WholeSentenceGroup,
    help="Fireworks: launch RFT jobs from trajectories, follow and cancel them.",
    no_args_is_help=True,
)

_DRY_HEADER = (
    "Dry run: nothing is sent. These are the requests, in order (the API key shows as ***; "
    "polls are listed once)."
)


def _client(dry_run: bool, console: Console) -> FireworksClient:
    from rk_agent.fireworks.client import FireworksClient

    if not dry_run:
        return FireworksClient()

    def show(request: PlannedRequest) -> None:
        console.print(request.describe(max_chars=300), markup=False, highlight=False)
        console.print()

    console.print(_DRY_HEADER, style="yellow")
    return FireworksClient.dry(on_request=show)


# ---------------------------------------------------------------------------------- deploy


def deploy(
    reward: Annotated[
        str | None,
        typer.Argument(
            metavar="REWARD",
            help="The reward: 'my_rewards.py::fn', 'package.module:fn' or a name (or give "
            "--metrics-folders instead).",
        ),
    ] = None,
    more_folders: MoreFolders = None,
    metrics_folders: MetricsFolders = None,
    combine: Combine = "mean",
    weight: Weight = None,
    evaluator_id: Annotated[
        str | None,
        typer.Option("--id", help="Evaluator id (default: the reward's name, e.g. exact-match)."),
    ] = None,
    display_name: Annotated[
        str | None, typer.Option("--display-name", help="Name shown in the console.")
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="One line (default: the docstring's).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an evaluator of this id with other code.")
    ] = False,
    requirement: Annotated[
        list[str] | None,
        typer.Option("--requirement", "-r", help="Extra pip requirement (repeatable)."),
    ] = None,
    include: Annotated[
        list[Path] | None,
        typer.Option("--include", help="Another file or folder your reward imports (repeatable)."),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until the evaluator is built.")
    ] = True,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between status checks.")] = 10.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the requests; send nothing.")
    ] = False,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help="Where the reward runs: fireworks (an evaluator), docker (a build context), "
            "gcp-cloud-run or aws-lambda. See the 'Serving rewards' docs page.",
        ),
    ] = "fireworks",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Self-hosted targets: the folder to write."),
    ] = None,
    build: Annotated[
        bool, typer.Option("--build", help="docker: build the image (docker or podman).")
    ] = False,
    tag: Annotated[str | None, typer.Option("--tag", help="docker: the image name.")] = None,
    region: Annotated[
        str | None, typer.Option("--region", help="gcp-cloud-run / aws-lambda: the region.")
    ] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="gcp-cloud-run: the Google Cloud project.")
    ] = None,
    service: Annotated[
        str | None, typer.Option("--service", help="gcp-cloud-run: the service name.")
    ] = None,
    function: Annotated[
        str | None, typer.Option("--function", help="aws-lambda: the function name.")
    ] = None,
    server_api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="RK_AGENT_SERVER_API_KEY",
            help="gcp-cloud-run / aws-lambda: the served reward's bearer key. Default: "
            "$RK_AGENT_SERVER_API_KEY. Shown as ***.",
            show_default=False,
            show_envvar=False,
        ),
    ] = None,
    api_key_secret: Annotated[
        str | None,
        typer.Option(
            "--api-key-secret",
            help="gcp-cloud-run / aws-lambda: the secret (Secret Manager / Secrets Manager) "
            "that holds the key, instead of --api-key.",
        ),
    ] = None,
    rk_agent_requirement: Annotated[
        str | None,
        typer.Option(
            "--rk-agent-requirement",
            help="Self-hosted targets: the requirement line that installs rk-agent in the image "
            "(default: this version pinned when it came from a package index, else a wheel of "
            "this install placed in the folder).",
        ),
    ] = None,
) -> None:
    """Deploy a reward function as a Fireworks evaluator (create, or update with --force).

    Packages the reward's file, its requirements and an entry point (main.py::evaluate),
    uploads them and waits for the build. Deploying unchanged code again reuses the evaluator.
    With --metrics-folders (Reward Kit's form) the folders become one evaluator: its score is
    the mean of the folders' scores unless --combine or --weight say otherwise. With
    --target docker, gcp-cloud-run or aws-lambda the reward is served by `rk-agent serve` (or
    Mangum) in a container you host instead.
    """
    from rk_agent.cli.console import make_console
    from rk_agent.fireworks.evaluators import deploy_metric_folders, deploy_reward
    from rk_agent.rewards.deploy_targets import deploy_target_names

    if target not in deploy_target_names():
        raise UnknownNameError(
            "deploy target", target, deploy_target_names(), "Give one of them with --target."
        )
    given = [*([reward] if reward is not None else []), *(more_folders or [])]
    reward, metrics_folders = _positionals(given, metrics_folders, "deploy")
    _one_reward_source(reward, metrics_folders, "deploy", "my_rewards.py::fn")
    if include and metrics_folders:
        raise ConfigError(
            "--include applies to a reward file, not to --metrics-folders (each folder is packed "
            "whole). Move the file into the metric folder instead."
        )
    if target != "fireworks":
        from rk_agent.rewards.metric_folders import parse_weights
        from rk_agent.selfhost.command import deploy_elsewhere

        deploy_elsewhere(
            target, reward, metrics_folders=metrics_folders, method=_combine_method(combine),
            weights=parse_weights(weight or ()) or None, evaluator_id=evaluator_id,
            description=description, force=force, requirements=requirement or (),
            include=include or (), dry_run=dry_run, output=output, build=build, tag=tag,
            region=region, project=project, service=service, function=function,
            api_key=server_api_key, api_key_secret=api_key_secret, rk_agent=rk_agent_requirement,
        )  # fmt: skip
        return
    console = make_console(soft_wrap=True)  # a URL is never broken across lines
    client = _client(dry_run, console)
    common: dict[str, Any] = {
        "evaluator_id": evaluator_id, "display_name": display_name, "description": description,
        "force": force, "requirements": requirement or (), "client": client, "wait": wait,
        "poll_s": poll,
    }  # fmt: skip
    with client, console.status("deploying", spinner="dots") as spinner:
        common["on_update"] = lambda e: spinner.update(
            f"evaluator {e.id or evaluator_id}: {e.state}"
        )
        if metrics_folders:
            from rk_agent.rewards.metric_folders import parse_weights

            deployment = deploy_metric_folders(
                metrics_folders, method=_combine_method(combine),
                weights=parse_weights(weight or ()) or None, **common,
            )  # fmt: skip
        else:
            deployment = deploy_reward(reward, include=include or (), **common)  # type: ignore[arg-type]
    package = deployment.package
    for left in package.left_out:
        console.print(f"Left out: {left}", style="yellow")
    if package.left_out:
        console.print(
            "(Name a file with --include on its own to pack it anyway; a file holding a key is "
            "never packed.)", style="yellow"
        )  # fmt: skip
    if package.user_dir:
        console.print(
            f"Your files are under {package.user_dir}/ in the package: one of them is named "
            "like a file the package needs (main.py, requirements.txt or rk_agent/)."
        )
    if dry_run:
        console.print(
            f"Would upload {package.archive_name} ({len(package.archive):,} bytes): "
            f"{', '.join(sorted(package.user_files()))} and the rk-agent reward modules; "
            f"requirements: {', '.join(package.requirements)}."
        )
        return
    old = deployment.replaced
    if old is not None:
        console.print(
            f"Replaced evaluator {old.name} (display name {old.display_name!r}, state "
            f"{old.state}, code {str(old.commit_hash)[:12]}): --force deleted it.",
            style="yellow",
        )
    evaluator = deployment.evaluator
    console.print(
        f"Evaluator {evaluator.name} {deployment.action} ({evaluator.state}); entry point "
        f"{package.entry_point}, requirements: {', '.join(package.requirements)}."
    )


def _one_reward_source(
    reward: str | None, metrics_folders: list[str] | None, command: str, example: str
) -> None:
    """Exactly one of a reward and --metrics-folders."""
    if reward is not None and metrics_folders:
        raise ConfigError(
            f"expected a reward or --metrics-folders, got both ({reward!r} and "
            f"{metrics_folders[0]!r}). Drop one: `rk-agent {command} {example}` or "
            f'`rk-agent {command} --metrics-folders "relevance=./metrics/relevance"`.'
        )
    if reward is None and not metrics_folders:
        raise ConfigError(
            f"expected a reward or --metrics-folders, got neither. Try `rk-agent {command} "
            f'{example}` or `rk-agent {command} --metrics-folders "relevance=./metrics/relevance"`.'
        )


def _positionals(
    given: list[str] | None, metrics_folders: list[str] | None, command: str
) -> tuple[str | None, list[str] | None]:
    """The reward, and the metric folders with any given Reward Kit's way.

    Reward Kit's ``--metrics-folders a=./a b=./b`` lists several folders after one flag; the
    later ones arrive here as positional arguments.
    """
    given = list(given or [])
    if metrics_folders and given and all("=" in g and "::" not in g for g in given):
        return None, [*metrics_folders, *given]
    if len(given) > 1:
        raise ConfigError(
            f"expected one reward, got {len(given)} ({', '.join(map(repr, given))}). Give one "
            f"reward per `rk-agent {command}`, or several metric folders with --metrics-folders."
        )
    return (given[0] if given else None), metrics_folders


def _combine_method(method: str) -> Any:
    methods = ("mean", "weighted_sum", "min", "product")
    if method not in methods:
        from rk_agent.errors import did_you_mean

        raise ConfigError(
            f"expected --combine to be one of {', '.join(methods)}, got {method!r}."
            f"{did_you_mean(method, methods)}"
        )
    return method


# ---------------------------------------------------------------------------------- rft


@app.command("rft")
def rft(
    source: Annotated[
        Path,
        typer.Option(
            "--from",
            help="A run directory (rk-agent rollout), a trajectories.jsonl or a tasks JSONL file.",
        ),
    ],
    reward: Annotated[
        str | None,
        typer.Option("--reward", help="The reward: a name, 'file.py::fn' or 'module:fn'."),
    ] = None,
    reward_endpoint: Annotated[
        str | None,
        typer.Option(
            "--reward-endpoint",
            help="Instead of --reward: your reward server's /evaluate URL. A thin evaluator "
            "forwards each sample there (its key: the RK_AGENT_SERVER_API_KEY secret).",
        ),
    ] = None,
    base_model: Annotated[
        str | None,
        typer.Option(
            "--base-model", help="Model to train, e.g. qwen3-0p6b or accounts/.../models/..."
        ),
    ] = None,
    warm_start_from: Annotated[
        str | None,
        typer.Option(
            "--warm-start-from", help="A previous fine-tune to continue (not with --base-model)."
        ),
    ] = None,
    output_model: Annotated[
        str | None, typer.Option("--output-model", help="Name of the trained model.")
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="Training epochs.")] = None,
    learning_rate: Annotated[
        float | None, typer.Option("--learning-rate", help="Learning rate.")
    ] = None,
    lora_rank: Annotated[int | None, typer.Option("--lora-rank", help="LoRA rank.")] = None,
    max_context_length: Annotated[
        int | None, typer.Option("--max-context-length", help="Context length for training.")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="Tokens per packed batch.")
    ] = None,
    group_size: Annotated[
        int | None,
        typer.Option("--group-size", help="Responses sampled per prompt (the GRPO group, >= 2)."),
    ] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", help="Rollout sampling temperature.")
    ] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", help="Rollout top-p.")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Rollout top-k.")] = None,
    max_output_tokens: Annotated[
        int | None, typer.Option("--max-output-tokens", help="Tokens per rollout response.")
    ] = None,
    loss: Annotated[
        str | None, typer.Option("--loss", help="GRPO, DAPO, GSPO_TOKEN, DPO or ORPO.")
    ] = None,
    kl_beta: Annotated[float | None, typer.Option("--kl-beta", help="KL penalty.")] = None,
    wandb_project: Annotated[
        str | None,
        typer.Option("--wandb-project", help="Log to this W&B project (key: WANDB_API_KEY)."),
    ] = None,
    wandb_entity: Annotated[
        str | None, typer.Option("--wandb-entity", help="W&B entity (team).")
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(
            "--env", help="Environment whose tools go into the rows (default: the run's)."
        ),
    ] = None,
    no_tools: Annotated[
        bool, typer.Option("--no-tools", help="Leave the environment's tools out of the rows.")
    ] = False,
    evaluator_id: Annotated[
        str | None,
        typer.Option("--evaluator-id", help="Evaluator id (default: the reward's name)."),
    ] = None,
    dataset_id: Annotated[
        str | None, typer.Option("--dataset-id", help="Dataset id (default: from the rows' hash).")
    ] = None,
    job_id: Annotated[str | None, typer.Option("--job-id", help="Job id (default: fresh).")] = None,
    display_name: Annotated[
        str | None, typer.Option("--display-name", help="Job name shown in the console.")
    ] = None,
    requirement: Annotated[
        list[str] | None,
        typer.Option(
            "--requirement", "-r", help="Extra pip requirement of the reward (repeatable)."
        ),
    ] = None,
    include: Annotated[
        list[Path] | None,
        typer.Option("--include", help="Another file or folder the reward imports (repeatable)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an evaluator of that id with other code.")
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Follow the job until it ends.")
    ] = True,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between status checks.")] = 30.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print every request it would send; send nothing.")
    ] = False,
    trust_run: TrustRun = False,
) -> None:
    """Launch a Fireworks RFT job from trajectories (or tasks) and a reward, and follow it.

    Builds one dataset row per task (its system and user messages, ground_truth, the
    environment's tools), deploys the reward as an evaluator, uploads the dataset, creates the
    job and shows its progress. Running it again reuses the dataset and the evaluator. With
    --reward-endpoint URL the evaluator forwards each sample to your self-hosted reward server.
    """
    from pydantic import ValidationError

    from rk_agent.cli.console import make_console
    from rk_agent.fireworks.launch import launch_rft
    from rk_agent.fireworks.rft import (
        InferenceParameters,
        LossConfig,
        RFTJobConfig,
        TrainingConfig,
        WandbConfig,
    )

    if (reward is None) == (reward_endpoint is None):
        got = "both" if reward is not None else "neither"
        raise ConfigError(
            f"expected --reward or --reward-endpoint, exactly one; got {got}. Try `--reward "
            "my_rewards.py::fn` or `--reward-endpoint https://rewards.example.com/evaluate`."
        )
    console = make_console(soft_wrap=True)  # a URL is never broken across lines
    try:
        config = RFTJobConfig(
            training=TrainingConfig(
                base_model=base_model, warm_start_from=warm_start_from, output_model=output_model,
                epochs=epochs, learning_rate=learning_rate, lora_rank=lora_rank,
                max_context_length=max_context_length, batch_size=batch_size,
            ),
            inference=InferenceParameters(
                temperature=temperature, top_p=top_p, top_k=top_k,
                max_output_tokens=max_output_tokens, response_candidates_count=group_size,
            ),
            loss=LossConfig.model_validate({"method": loss.upper() if loss else None,
                                            "kl_beta": kl_beta})
            if loss or kl_beta is not None else None,
            wandb=WandbConfig(project=wandb_project, entity=wandb_entity,
                              api_key=os.environ.get("WANDB_API_KEY"))
            if wandb_project else None,
            display_name=display_name,
        )  # fmt: skip
    except ValidationError as exc:
        given = {
            "base_model": base_model, "warm_start_from": warm_start_from,
            "output_model": output_model, "epochs": epochs, "learning_rate": learning_rate,
            "lora_rank": lora_rank, "max_context_length": max_context_length,
            "batch_size": batch_size, "temperature": temperature, "top_p": top_p,
            "top_k": top_k, "max_output_tokens": max_output_tokens,
            "response_candidates_count": group_size, "method": loss, "kl_beta": kl_beta,
            "project": wandb_project, "entity": wandb_entity, "display_name": display_name,
        }  # fmt: skip
        raise ConfigError(_first_problem(exc, given)) from None
    client = _client(dry_run, console)
    with client:
        launch = launch_rft(
            source, reward, config=config, client=client, env=env, tools=not no_tools,
            evaluator_id=evaluator_id, reward_endpoint=reward_endpoint,
            dataset_id=dataset_id, job_id=job_id, force=force, requirements=requirement or (),
            include=include or (), poll_s=poll, trust_run=trust_run,
            on_step=None if dry_run else lambda s: console.print(f"· {s}"),
        )  # fmt: skip
        rows = launch.rows
        where = f", tools of env {rows.env!r} ({len(rows.tools)})" if rows.tools else ""
        read = {"run": "trajectories", "trajectories": "trajectories", "tasks": "tasks"}
        console.print(
            f"{len(rows.rows)} rows (one per task) from {rows.records} {read[rows.kind]} in "
            f"{source}{where}."
        )
        if dry_run:
            console.print("first row:", json.dumps(rows.rows[0], ensure_ascii=False)[:500],
                          markup=False, highlight=False)  # fmt: skip
            return
        job = launch.job
        console.print(f"Started RFT job {job.name} ({job.short_state}).")
        if not follow:
            console.print(f"Follow it with `rk-agent fireworks status {job.id}`.")
            return
        final = _follow(client, job, console, poll)
    _report_end(final, console)


# RFT fields whose flag is named differently; any other field `name_x` is `--name-x`.
_RFT_FLAGS = {
    "response_candidates_count": "--group-size", "method": "--loss",
    "project": "--wandb-project", "entity": "--wandb-entity",
}  # fmt: skip


def _first_problem(exc: Any, given: dict[str, Any]) -> str:
    """The first problem, named by the flag it was typed as: ``--epochs 0: Input should ...``."""
    from rk_agent.config_files import problem_message
    from rk_agent.errors import sentence

    error = exc.errors()[0]
    field = str(error["loc"][-1]) if error["loc"] else ""
    if field not in given:  # not one option: name where it is
        where = ".".join(str(p) for p in error["loc"])
        return sentence(f"invalid RFT option: {where}: {problem_message(error)}")
    flag = _RFT_FLAGS.get(field, "--" + field.replace("_", "-"))
    return sentence(f"{flag} {given[field]}: {problem_message(error)}")


def _follow(client: FireworksClient, job: RFTJob, console: Console, poll: float) -> RFTJob:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rk_agent.fireworks.rft import wait_for_rft_job

    columns = (
        TextColumn("{task.description}", style="bold", markup=False), BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(),
    )  # fmt: skip
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(job.short_state, total=100, completed=int(job.percent or 0))

        def update(now: RFTJob) -> None:
            progress.update(bar, description=now.short_state, completed=now.percent or 0)

        try:
            return wait_for_rft_job(client, job.id, poll_s=poll, on_update=update)
        except KeyboardInterrupt:
            progress.stop()
            console.print(
                f"Stopped following; the job goes on. Check it with `rk-agent fireworks status "
                f"{job.id}`, stop it with `rk-agent fireworks cancel {job.id}`.",
                style="yellow",
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None


def _report_end(job: RFTJob, console: Console) -> None:
    if job.succeeded:
        console.print(f"Job {job.id} completed. Trained model: {job.output_model}.", style="green")
        return
    reason = f": {job.status.message}" if job.status and job.status.message else "."
    console.print(f"Job {job.id} ended {job.short_state}{reason}", style="red")
    raise typer.Exit(EXIT_JOB_FAILED)


# ---------------------------------------------------------------------------------- jobs


@app.command("status")
def status(
    job: Annotated[str, typer.Argument(help="The job id (or its full name).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the job as JSON.")] = False,
) -> None:
    """Show an RFT job: state, progress, dataset, evaluator, models."""
    from rk_agent.cli.console import make_console
    from rk_agent.fireworks.client import FireworksClient
    from rk_agent.fireworks.rft import get_rft_job
    from rk_agent.secrets import redact

    with FireworksClient() as client:
        found = get_rft_job(client, job)
    if as_json:
        echo_json(json.dumps(redact(found.to_api()), indent=2))
        return
    _render_job(found, make_console(soft_wrap=True))


def _render_job(job: RFTJob, console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"RFT job {job.id}", show_header=False)
    table.add_column("field", style="bold cyan")
    table.add_column("value")
    training = job.training_config or {}
    progress = f"{job.percent:g}%" if job.percent is not None else "-"
    for key, value in (
        ("state", job.short_state), ("progress", progress), ("dataset", job.dataset),
        ("evaluator", job.evaluator),
        ("base model", training.get("baseModel") or training.get("warmStartFrom")),
        ("output model", job.output_model), ("created", job.create_time),
        ("completed", job.completed_time),
        ("message", job.status.message if job.status else None),
    ):  # fmt: skip
        if value:
            table.add_row(key, str(value))
    console.print(table)


@app.command("cancel")
def cancel(job: Annotated[str, typer.Argument(help="The job id (or its full name).")]) -> None:
    """Cancel an RFT job."""
    from rk_agent.cli.console import make_console
    from rk_agent.fireworks.client import FireworksClient
    from rk_agent.fireworks.rft import cancel_rft_job

    with FireworksClient() as client:
        found = cancel_rft_job(client, job)
    make_console(soft_wrap=True).print(f"Cancelling job {found.id}: now {found.short_state}.")


@app.command("list")
def list_jobs(
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many jobs.")] = 50,
) -> None:
    """List the account's RFT jobs."""
    from rich.table import Table

    from rk_agent.cli.console import make_console
    from rk_agent.fireworks.client import FireworksClient
    from rk_agent.fireworks.rft import list_rft_jobs

    with FireworksClient() as client:
        jobs = list_rft_jobs(client, limit=limit)
    table = Table(title=f"RFT jobs ({len(jobs)})")
    for column in ("job", "state", "progress", "output model", "created"):
        table.add_column(column)
    for job in jobs:
        progress = f"{job.percent:g}%" if job.percent is not None else ""
        table.add_row(job.id, job.short_state, progress, job.output_model or "",
                      job.create_time or "")  # fmt: skip
    make_console().print(table)


@app.command("preview")
def preview(
    samples: Annotated[
        Path,
        typer.Option("--samples", "-s", help="JSONL file of samples (messages, ground_truth)."),
    ],
    reward: Annotated[
        str | None,
        typer.Option("--reward", help="The reward: a name, 'file.py::fn' or 'module:fn'."),
    ] = None,
    metrics_folders: MetricsFolders = None,
    combine: Combine = "mean",
    weight: Weight = None,
    max_samples: Annotated[
        int, typer.Option("--max-samples", help="How many samples the service scores.")
    ] = 5,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the request; send nothing.")
    ] = False,
) -> None:
    """Score samples with the reward (or metric folders) on Fireworks, without deploying it."""
    from rich.table import Table

    from rk_agent.cli.console import make_console
    from rk_agent.fireworks.evaluators import preview_evaluator
    from rk_agent.fireworks.packaging import EvaluatorPackage, package_metric_folders
    from rk_agent.jsonl import iter_jsonl
    from rk_agent.rewards.metric_folders import parse_weights

    _one_reward_source(reward, metrics_folders, "fireworks preview --samples s.jsonl",
                       "--reward my_rewards.py::fn")  # fmt: skip
    what: str | EvaluatorPackage = reward or ""
    if metrics_folders:
        what = package_metric_folders(
            metrics_folders, method=_combine_method(combine),
            weights=parse_weights(weight or ()) or None,
        )  # fmt: skip
    rows = []
    for line in iter_jsonl(samples):
        if line.error is not None or line.value is None:
            raise line.error or ConfigError(f"{samples}:{line.number}: unreadable line")
        rows.append(line.value)
    if not rows:
        raise ConfigError(f"{samples} has no samples.")
    console = make_console(soft_wrap=True)  # a URL is never broken across lines
    with _client(dry_run, console) as client:
        result = preview_evaluator(what, rows, max_samples=max_samples, client=client)
    if dry_run:
        return
    name = what.reward_name if isinstance(what, EvaluatorPackage) else what
    table = Table(title=f"Preview of {name} on Fireworks ({result.total_samples} samples)")
    for column in ("#", "score", "ok", "reason"):
        table.add_column(column)
    for i, sample in enumerate(result.results):
        score = f"{sample.score:.3f}" if sample.score is not None else "-"
        table.add_row(str(i), score, "yes" if sample.success else "no", sample.reason or "")
    console.print(table)
