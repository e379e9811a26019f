"""What a train config points at is checked before training: files, folders and names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError, DataError, EnvLoadError, UnknownNameError
from rk_agent.trainers.config import TrainConfig
from rk_agent.trainers.preflight import check_train_inputs


def grpo(tmp_path: Path, **options: Any) -> TrainConfig:
    return TrainConfig(kind="grpo", output_dir=str(tmp_path / "run"), **options)


def sft(tmp_path: Path, trajectories: str | Path, **options: Any) -> TrainConfig:
    return TrainConfig(
        kind="sft", trajectories=str(trajectories), output_dir=str(tmp_path / "run"), **options
    )


def fails(config: TrainConfig, message: str, error: type[ConfigError] = ConfigError) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        check_train_inputs(config)


def test_good_inputs_pass(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "2+2?", "answer": "4"}\n')
    run = tmp_path / "rollout"
    run.mkdir()
    (run / "trajectories.jsonl").write_text(_episode(success=True))
    model = tmp_path / "model"
    model.mkdir()
    check_train_inputs(grpo(tmp_path))
    check_train_inputs(grpo(tmp_path, env="math", tasks=str(tasks), rewards=["math", "length"]))
    check_train_inputs(grpo(tmp_path, model=str(model), env="rk_agent/Guess-v0"))
    check_train_inputs(grpo(tmp_path, model="HuggingFaceTB/SmolLM2-135M-Instruct"))
    check_train_inputs(sft(tmp_path, run, sft_filter={"max_per_task": 2}))
    check_train_inputs(sft(tmp_path, run / "trajectories.jsonl"))


def _episode(*, success: bool) -> str:
    """One played episode (one turn), as a line of trajectories.jsonl."""
    from rk_agent.runs.trajectory import Trajectory

    return Trajectory.model_validate({
        "id": "0-0", "task_index": 0, "sample": 0, "env": "math", "model": "m",
        "task": {"id": "t0", "messages": [{"role": "user", "content": "2+2?"}]},
        "turns": [{"index": 0, "assistant": {"role": "assistant", "content": "4"}}],
        "success": success, "stop_reason": "answered",
    }).model_dump_json() + "\n"  # fmt: skip


def test_sft_needs_a_trajectory_that_passes_its_filter(tmp_path: Path) -> None:
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text("")
    fails(
        sft(tmp_path, episodes),
        f"{episodes}: no trajectories to train on (the run is empty). Collect episodes with "
        "`rk-agent rollout` first.",
        DataError,
    )
    episodes.write_text(_episode(success=True))
    fails(
        sft(tmp_path, episodes, sft_filter={"min_reward": 0.5}),
        f"{episodes}: 0 of 1 trajectories passed the filter (success_only=True, min_reward=0.5, "
        "drop_failed=True, max_per_task=None): 1 without a valid reward. To keep more: leaving "
        "out --min-reward keeps episodes without a valid reward; collect more episodes (solved "
        "ones: `rk-agent rollout --provider solver`).",
        DataError,
    )


def test_tasks_must_be_a_file(tmp_path: Path) -> None:
    fails(
        grpo(tmp_path, tasks=str(tmp_path / "tasks.jsonl")),
        f"tasks: {tmp_path / 'tasks.jsonl'} does not exist; give a JSONL file of tasks "
        "(--tasks FILE), or leave it out to use the environment's generated tasks.",
    )
    fails(grpo(tmp_path, tasks=str(tmp_path)), f"tasks: {tmp_path} is a folder; give a JSONL")


def test_trajectories_must_exist(tmp_path: Path) -> None:
    fails(
        sft(tmp_path, "missing/"),
        "trajectories: missing/ does not exist; give a run folder made by `rk-agent rollout` "
        "or a trajectories JSONL file (--trajectories RUN_DIR).",
    )
    fails(sft(tmp_path, tmp_path), f"trajectories: {tmp_path} holds no trajectories.jsonl; give")


@pytest.mark.parametrize("model", ["./nope", "runs/x/final", "~/no-such-rk-agent-model"])
def test_a_model_that_looks_local_must_be_a_folder(tmp_path: Path, model: str) -> None:
    fails(
        grpo(tmp_path, model=model),
        f"model {model!r} looks like a local folder but does not exist; give a model folder "
        "(--model runs/<run>/final) or a Hugging Face hub id (org/name).",
    )


def test_a_model_path_under_a_local_folder_is_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "weights.bin").write_text("")
    fails(grpo(tmp_path, model="runs/final"), "model 'runs/final' looks like a local folder but")
    fails(
        grpo(tmp_path, model="runs/weights.bin"),
        "model 'runs/weights.bin' looks like a local folder but is a file, not a model folder;",
    )
    check_train_inputs(grpo(tmp_path, model="HuggingFaceTB/SmolLM2-135M"))  # no such folder


def test_resume(tmp_path: Path) -> None:
    fails(grpo(tmp_path, resume="nope"), "resume: checkpoint 'nope' does not exist; give a")
    fails(grpo(tmp_path, resume=True), f"resume: true but {tmp_path / 'run'} has no complete")


def test_env_and_rewards_are_known_names_or_code(tmp_path: Path) -> None:
    fails(
        grpo(tmp_path, env="toolz"),
        "unknown environment 'toolz'. Did you mean 'tools'? Known environments: code, guess, "
        "math, mcp_tools, tools.",
        UnknownNameError,
    )
    fails(
        grpo(tmp_path, env="no_such_dir/env.py::Env"),
        "cannot load environment 'no_such_dir/env.py::Env': file 'no_such_dir/env.py' does not "
        "exist",
        EnvLoadError,
    )
    fails(
        grpo(tmp_path, rewards=["lenght"]),
        "unknown reward 'lenght'. Did you mean 'length'?",
        UnknownNameError,
    )
    fails(
        grpo(tmp_path, tool_call_format="llama"),
        "unknown tool-call format 'llama'. Did you mean 'llama3_json'? Known tool-call formats: "
        "hermes, llama3_json.",
        UnknownNameError,
    )
    check_train_inputs(grpo(tmp_path, env="tools", loop="trl", tool_call_format="llama3_json"))


def test_trls_tool_loop_needs_a_tool_env_that_does_not_talk_back(tmp_path: Path) -> None:
    fails(
        grpo(tmp_path, env="guess", loop="trl"),
        "environment 'guess' cannot train with TRL's tool loop (--loop trl): it talks back with "
        "user messages (GuessEnv overrides ChatEnv.respond) and it offers no tools.",
    )
    check_train_inputs(grpo(tmp_path, env="tools", loop="trl"))
    check_train_inputs(grpo(tmp_path, env="guess", loop="rk"))


def test_a_rollout_runs_folder_is_no_output_dir(tmp_path: Path) -> None:
    from rk_agent.runs.run_record import RunKind, RunRecord, write_run_record

    run = tmp_path / "run"
    write_run_record(run, RunRecord.start(RunKind.TRAINING, global_step=0))
    check_train_inputs(grpo(tmp_path))  # a training run's folder: resumed in place
    write_run_record(run, RunRecord.start(RunKind.ROLLOUT))
    message = (
        f"output_dir: {run} holds a run of `rk-agent rollout`; training there would replace "
        "its run.json. Choose another --output-dir."
    )
    fails(grpo(tmp_path), message)
    (run / "run.json").unlink()
    (run / "config.yaml").write_text("env: tools\n")  # a rollout run, its record lost
    fails(grpo(tmp_path), message)


def test_tools_that_vary_are_refused_where_a_loop_cannot_offer_them(tmp_path: Path) -> None:
    shop = "tests/envs/varying_tools.py::ShopEnv"
    fails(
        grpo(tmp_path, env=shop, loop="trl"),
        f"environment {shop!r} cannot train with TRL's tool loop (--loop trl): its tools change "
        "between turns (tool_scope 'turn'), and TRL 1.16's environment_factory offers every "
        "rollout the same tools, the methods of one class read once when the trainer starts. "
        "Train it with rk-agent's episode loop instead: --loop rk (rk_agent.grpo_trainer in a "
        "script).",
    )
    fails(
        grpo(tmp_path, env=shop, loop="rk"),
        f"environment {shop!r} changes its tools between the turns of an episode (tool_scope "
        "'turn'); rk-agent's GRPO loop trains on one token sequence per episode, its prompt "
        "rendered once with the first turn's tools, so it cannot show the model the tools a "
        "later turn adds. Train on an environment whose tools change only between tasks "
        "(tool_scope 'task').",
    )
