"""Checks of what a train config points at, made before a training run loads anything heavy.

`rk_agent.trainers.config.load_train_config` checks the values of the options; this module
checks that what they name exists: the task file, the trajectories (and that some pass the SFT
filter), a model that is a local folder, the checkpoint to resume from, the reward names and
the environment; and that the output folder is no rollout run's (both keep their record in
``run.json``). It imports neither torch nor TRL; the environment and reward registries
(Gymnasium) come last, as the slowest part.

Main names: `check_train_inputs`.

Example::

    config = load_train_config("configs/train/grpo_tools.yaml", {"kind": "grpo"})
    check_train_inputs(config)
"""

from __future__ import annotations

from pathlib import Path

from rk_agent.envs.task import load_tasks
from rk_agent.errors import ConfigError
from rk_agent.policies.local_model import check_model_folder
from rk_agent.runs.run_dir import CONFIG_FILE, TRAJECTORIES_FILE
from rk_agent.runs.run_record import RUN_RECORD_FILE, RunKind, read_run_record
from rk_agent.trainers.config import TrainConfig, resume_checkpoint

__all__ = ["check_train_inputs"]


def check_train_inputs(config: TrainConfig) -> None:
    """Check that the files, folders and names ``config`` refers to exist.

    - ``tasks`` (GRPO): an existing file whose every row is a task
      (`rk_agent.envs.task.load_tasks`).
    - ``trajectories`` (SFT): a JSONL file, or a folder holding ``trajectories.jsonl``, with
      at least one trajectory that passes ``sft_filter``
      (`rk_agent.trainers.sft_data.select_for_sft`); when its environment would be built to
      read its tools and names code, a run rk-agent wrote here, or ``trust_run``
      (`rk_agent.trainers.sft_data.check_tools_trust`).
    - ``model``: when it looks like a local path (``./m``, ``/m``, ``~/m``, ``runs/x/final``, or
      ``a/b`` where ``a`` is a local folder), an existing folder; anything else is a hub id.
    - ``resume``: a checkpoint folder that exists, or ``true`` with a checkpoint in
      ``output_dir`` (`rk_agent.trainers.config.resume_checkpoint`).
    - ``rewards`` and ``env`` (GRPO): names the registries know, or code that loads; with
      ``loop: trl``, an environment TRL's tool loop can play (tools, no replies of its own,
      the same tools in every episode); with ``loop: rk``, one whose tools do not change
      between turns.
    - ``tool_call_format`` (GRPO): a registered format (`rk_agent.tool_calls`), once the
      environment's code, which may register one, has loaded.
    - ``output_dir``: not a run directory of ``rk-agent rollout`` (training would replace its
      ``run.json``).

    Raises:
        ConfigError: the first of these that fails, naming the option and how to fix it
            (`UnknownNameError` with "did you mean" for an unknown env, reward or tool-call
            format; `DataError`
            for trajectories that cannot be read or that the filter leaves none of;
            `UntrustedRunError` for a run from elsewhere that names code).
    """
    if config.kind == "grpo" and config.env.tasks is not None:
        _check_tasks(config.env.tasks)
        # Every row: a bad one fails here, before the run folder is named.
        load_tasks(config.env.tasks, config.env.tasks_columns)
    if config.kind == "sft":
        _check_trajectories(str(config.trajectories))
        from rk_agent.trainers.sft_data import check_tools_trust, select_for_sft

        kept, _ = select_for_sft(str(config.trajectories), config.sft_filter)  # some pass it
        # The tools are read from a run's environment: a run from elsewhere naming code is
        # refused here, before anything heavy loads.
        check_tools_trust(str(config.trajectories), kept, trust_run=config.trust_run)
    if config.model is not None:
        check_model_folder(config.model)
    resume_checkpoint(config)
    _check_output_dir(Path(str(config.output_dir)))
    if config.kind == "grpo":
        _check_rewards_and_env(config)


def _check_output_dir(folder: Path) -> None:
    record = read_run_record(folder)
    if (folder / CONFIG_FILE).is_file() or (record is not None and record.kind is RunKind.ROLLOUT):
        raise ConfigError(
            f"output_dir: {folder} holds a run of `rk-agent rollout`; training there would "
            f"replace its {RUN_RECORD_FILE}. Choose another --output-dir."
        )


def _check_tasks(tasks: str) -> None:
    path = Path(tasks).expanduser()
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"tasks: {tasks} {what}; give a JSONL file of tasks (--tasks FILE), or leave it "
            "out to use the environment's generated tasks."
        )


def _check_trajectories(trajectories: str) -> None:
    path = Path(trajectories).expanduser()
    if path.is_file() or (path / TRAJECTORIES_FILE).is_file():
        return
    what = f"holds no {TRAJECTORIES_FILE}" if path.is_dir() else "does not exist"
    raise ConfigError(
        f"trajectories: {trajectories} {what}; give a run folder made by `rk-agent rollout` "
        "or a trajectories JSONL file (--trajectories RUN_DIR)."
    )


def _check_rewards_and_env(config: TrainConfig) -> None:
    from rk_agent.envs.registry import get_env_class
    from rk_agent.rewards.registry import get_reward_function
    from rk_agent.tool_calls import get_tool_call_format

    for reward in config.env.rewards:
        get_reward_function(reward)
    env_class = get_env_class(config.env.name)
    get_tool_call_format(config.tool_call_format)
    if config.loop == "trl" and config.multi_turn:
        from rk_agent.trainers.trl_tool_env import check_trl_compatible

        check_trl_compatible(config.env.make(), config.env.name)
    elif config.multi_turn:  # the class's scope: nothing is built (grpo_trainer checks the env)
        from rk_agent.policies.episode_tokens import check_fixed_tools

        check_fixed_tools(env_class, config.env.name)
