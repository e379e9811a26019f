"""Train configs: YAML and flags, TRL options checked early, saving, checkpoints and resuming,
and the bundled train and accelerate configs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rk_agent.errors import ConfigError
from rk_agent.trainers.config import (
    CONFIG_FILE,
    TrainConfig,
    last_checkpoint,
    load_train_config,
    resume_checkpoint,
    save_train_config,
)
from rk_agent.trainers.trl_args import build_trl_args, trl_config_class

ROOT = Path(__file__).parents[2]


def test_yaml_flags_and_trl_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "kind: grpo\nenv: math\nn_tasks: 8\nwandb:\n  project: p\n"
        "trl:\n  learning_rate: 1e-5\n  max_steps: 4\n"
    )
    config = load_train_config(
        path, {"n_tasks": 16, "wandb.mode": "offline", "seed": None}, {"max_steps": 8}
    )
    assert (config.kind, config.env.name, config.n_tasks) == ("grpo", "math", 16)
    assert config.env.seed == 0
    assert (config.wandb.project, config.wandb.mode, config.wandb.enabled) == ("p", "offline", None)
    # `1e-5` is a string to PyYAML; the TRL field's type makes it a number.
    assert config.trl == {"learning_rate": 1e-5, "max_steps": 8}
    assert (config.multi_turn, config.resume, config.env.rewards) == (True, "auto", [])


def test_paths_in_a_train_config_are_read_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "exp"
    (folder / "episodes").mkdir(parents=True)
    (folder / "run.yaml").write_text("kind: sft\ntrajectories: episodes\nmodel: HuggingFaceTB/x\n")
    monkeypatch.chdir(tmp_path)
    config = load_train_config(folder / "run.yaml", {}, {"output_dir": str(tmp_path / "o")})
    assert config.trajectories == str(folder / "episodes")
    assert config.model == "HuggingFaceTB/x"  # a hub id, not a folder next to the config


@pytest.mark.parametrize(
    ("env", "name"),
    [("tools", "train-grpo-tools"), ("my_pkg.envs:Maze-v1", "train-grpo-Maze-v1"),
     ("envs/my_env.py::My Env", "train-grpo-My-Env")],
)  # fmt: skip
def test_default_output_dir_names_kind_and_env(env: str, name: str) -> None:
    config = TrainConfig(kind="grpo", env=env)  # type: ignore[arg-type]
    assert re.fullmatch(rf"runs/{re.escape(name)}-\d{{8}}-\d{{6}}", str(config.output_dir))
    assert TrainConfig(kind="sft", trajectories="t", output_dir="here").output_dir == "here"


def test_sft_s_default_output_dir_names_the_env_its_trajectories_were_played_in(
    tmp_path: Path,
) -> None:
    run = tmp_path / "shop-run"
    run.mkdir()
    line = {"id": "0-0", "env": "envs/shop_env.py::ShopEnv", "model": "m"}
    (run / "trajectories.jsonl").write_text("\n" + json.dumps(line) + "\n")
    for source in (run, run / "trajectories.jsonl"):
        config = TrainConfig(kind="sft", trajectories=str(source))
        assert re.fullmatch(r"runs/train-sft-ShopEnv-\d{8}-\d{6}", str(config.output_dir))
    # Unreadable trajectories (the preflight says why): the folder is named after the source.
    config = TrainConfig(kind="sft", trajectories=str(tmp_path / "missing-run"))
    assert re.fullmatch(r"runs/train-sft-missing-run-\d{8}-\d{6}", str(config.output_dir))


def test_output_dir_from_trl_moves_to_the_top(tmp_path: Path) -> None:
    config = load_train_config(None, {"kind": "grpo"}, {"output_dir": str(tmp_path)})
    assert (config.output_dir, config.trl) == (str(tmp_path), {})


@pytest.mark.parametrize(
    ("overrides", "trl", "message"),
    [
        ({"kind": "grpo", "n_taks": 3}, {}, "unknown train config option 'n_taks'. Did you mean "
         "'n_tasks'? Options are: kind, env, env_kwargs, tasks, tasks_columns, rewards, "
         "max_turns, seed, mcp, model, multi_turn, loop, n_tasks, tool_call_format, "
         "trajectories, sft_filter, trust_run, output_dir, resume, wandb, watch, sampling, trl."),
        ({"kind": "grpo", "wandb.projet": "p"}, {}, "unknown train config option "
         "'wandb.projet'. Did you mean 'wandb.project'? Options are: wandb.enabled, "
         "wandb.project, wandb.mode."),
        ({"kind": "ppo"}, {}, "invalid train config: kind: Input should be 'grpo' or 'sft'."),
        ({}, {}, "invalid train config: kind: Field required."),
        ({"kind": "sft"}, {}, "invalid train config: sft needs trajectories: a rollout "
         "run directory or a trajectories JSONL file (--trajectories RUN_DIR)."),
        ({"kind": "grpo", "wandb.mode": "cloud"}, {}, "invalid train config: wandb.mode: Input "
         "should be 'online', 'offline' or 'disabled'."),
        ({"kind": "grpo"}, {"num_generation": 4}, "unknown GRPOConfig option "
         "'trl.num_generation'. Did you mean 'num_generations'? Options are the fields of "
         "trl.GRPOConfig, e.g. --learning_rate 1e-5."),
        ({"kind": "sft", "trajectories": "t"}, {"num_generations": 4},
         "unknown SFTConfig option 'trl.num_generations'."),
        ({"kind": "grpo"}, {"max_steps": "many"}, "trl.max_steps expects an integer, got 'many'."),
        ({"kind": "grpo", "n_tasks": 0}, {}, "invalid train config: n_tasks: Input should be "
         "greater than or equal to 1."),
        ({"kind": "grpo", "max_turns": 0}, {}, "invalid train config: max_turns: Input should "
         "be greater than or equal to 1."),
        ({"kind": "grpo", "seed": -1}, {}, "invalid train config: seed: Input should be greater "
         "than or equal to 0."),
        ({"kind": "grpo", "loop": "tlr"}, {}, "invalid train config: loop: Input should be 'rk' "
         "or 'trl'."),
        ({"kind": "grpo"}, {"max_steps": -2}, "trl.max_steps must be at least 1, or -1 (no "
         "limit: train num_train_epochs); got -2."),
        ({"kind": "sft", "trajectories": "t"}, {"learning_rate": "-1e-5"},
         "trl.learning_rate must be greater than 0; got -1e-05."),
        ({"kind": "grpo"}, {"num_generations": 3, "per_device_train_batch_size": 4},
         "trl: the generation batch must hold whole groups of num_generations 3 completions"),
    ],
)  # fmt: skip
def test_errors_name_the_option(
    overrides: dict[str, Any], trl: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        load_train_config(None, overrides, trl)


def test_trl_options_are_checked_without_importing_trl(tmp_path: Path) -> None:
    """The whole of load_train_config runs on the snapshot of TRL's classes."""
    script = (
        "import sys\n"
        "from rk_agent.trainers.config import load_train_config\n"
        "load_train_config(None, {'kind': 'grpo'}, {'learning_rate': 1e-5, 'max_steps': 2})\n"
        "print(sorted({'torch', 'trl', 'transformers'} & set(sys.modules)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert run.stdout == "[]\n"


def test_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kind: grpo\ntrl: [1, 2]\n")
    with pytest.raises(ConfigError, match=re.escape(f"invalid train config in {path}: trl must")):
        load_train_config(path)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_train_config(tmp_path / "missing.yaml")


def test_saved_config_round_trips_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-secret-0123456789"
    monkeypatch.setenv("FIREWORKS_API_KEY", secret)
    config = load_train_config(
        None,
        {"kind": "grpo", "output_dir": str(tmp_path / "run"), "env_kwargs": {"api_key": secret}},
        {"hub_token": "hf_abc", "max_steps": 3, "run_name": f"run-{secret}"},
    )
    path = save_train_config(config)
    assert path == tmp_path / "run" / CONFIG_FILE
    text = path.read_text()
    assert secret not in text and "hf_abc" not in text
    assert text.startswith(f"# rk-agent train grpo, as resolved; rerun with --config {path}\n")
    saved = yaml.safe_load(text)
    assert saved["env_kwargs"] == {"api_key": "***"}
    assert saved["trl"] == {"hub_token": "***", "max_steps": 3, "run_name": "run-***"}
    again = load_train_config(path)
    assert again.model_dump(exclude={"env", "trl"}) == config.model_dump(exclude={"env", "trl"})
    assert again.env == config.env.model_copy(update={"kwargs": {"api_key": "***"}})


def test_the_saved_config_is_signed_as_this_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rk_agent.runs.run_trust import is_signed

    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "cache"))
    config = load_train_config(None, {"kind": "grpo", "output_dir": str(tmp_path / "run")})
    path = save_train_config(config)
    assert is_signed(path)
    assert (tmp_path / "run" / "rk_agent_config.yaml.hmac").is_file()


def _checkpoint(folder: Path, step: int, *, complete: bool = True) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "trainer_state.json").write_text("{}")
    return path


def test_last_checkpoint(tmp_path: Path) -> None:
    assert last_checkpoint(tmp_path / "missing") is None
    assert last_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 9)
    ten = _checkpoint(tmp_path, 10)  # by step number, not by name
    _checkpoint(tmp_path, 12, complete=False)  # cut short: no trainer_state.json
    (tmp_path / "checkpoint-final").mkdir()
    assert last_checkpoint(tmp_path) == ten


def test_resume_checkpoint(tmp_path: Path) -> None:
    def config(resume: bool | str) -> TrainConfig:
        return TrainConfig(kind="grpo", output_dir=str(tmp_path), resume=resume)

    assert resume_checkpoint(config("auto")) is None
    assert resume_checkpoint(config(False)) is None
    with pytest.raises(ConfigError, match=re.escape(f"resume: true but {tmp_path} has no")):
        resume_checkpoint(config(True))
    three = _checkpoint(tmp_path, 3)
    assert resume_checkpoint(config("auto")) == three == resume_checkpoint(config(True))
    assert resume_checkpoint(config(False)) is None
    assert resume_checkpoint(config(str(three))) == three
    with pytest.raises(ConfigError, match=re.escape("resume: checkpoint 'nope' does not exist")):
        resume_checkpoint(config("nope"))


@pytest.mark.slow
def test_a_run_saves_checkpoints_and_resumes_from_the_last(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Real SFT steps: checkpoints land in output_dir, and a second run picks up the last."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    data = Dataset.from_dict({"text": ["The answer is 7."] * 16})
    config = TrainConfig(kind="sft", trajectories="t", output_dir=str(tmp_path / "run"))

    def train(max_steps: int) -> Any:
        values = {"max_steps": max_steps, "save_steps": 1, "max_length": 32}
        args = build_trl_args(SFTConfig, {**values, "report_to": []}, output_dir=tmp_path / "run")
        trainer = SFTTrainer(model=str(tiny_model_dir), args=args, train_dataset=data)
        trainer.train(resume_from_checkpoint=resume_checkpoint(config))
        return trainer

    assert train(2).state.global_step == 2
    assert last_checkpoint(tmp_path / "run") == tmp_path / "run" / "checkpoint-2"
    resumed = train(3)
    assert resumed.state.global_step == 3
    assert len(resumed.state.log_history) == 4  # steps 1-2 come from the checkpoint
    # save_total_limit=2 (a device default) keeps the two newest checkpoints.
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-3",
    ]


BUNDLED = sorted((ROOT / "configs" / "train").glob("*.yaml"))


def test_bundled_train_configs_are_found() -> None:
    assert {p.name for p in BUNDLED} >= {"grpo_tools.yaml", "sft_tools.yaml"}


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_train_configs_are_valid(path: Path, tmp_path: Path) -> None:
    config = load_train_config(path)
    assert config.env.name == "tools" and config.model is None
    given = yaml.safe_load(path.read_text())
    saved = config.model_dump(mode="json")
    assert {key: saved[key] for key in given if key != "trl"} == {
        key: value for key, value in given.items() if key != "trl"
    } | {"wandb": saved["wandb"]}
    assert saved["wandb"] | given["wandb"] == saved["wandb"]
    assert {key: saved["trl"][key] for key in given["trl"]} == given["trl"]
    args = build_trl_args(
        trl_config_class(config.kind), config.trl, output_dir=tmp_path, has_gpu=False
    )
    assert args.max_steps > 0 or args.num_train_epochs > 0
    if config.kind == "grpo":
        assert config.multi_turn
        assert (args.max_steps, args.num_generations, args.max_completion_length) == (4, 4, 192)
        assert args.generation_batch_size % args.num_generations == 0


ACCELERATE = {
    "ddp.yaml": "MULTI_GPU",
    "deepspeed_zero2.yaml": "DEEPSPEED",
    "deepspeed_zero3.yaml": "DEEPSPEED",
    "fsdp.yaml": "FSDP",
}


def test_accelerate_configs_are_the_set() -> None:
    found = {p.name for p in (ROOT / "configs" / "accelerate").glob("*.yaml")}
    assert found == set(ACCELERATE)


@pytest.mark.parametrize(("name", "kind"), sorted(ACCELERATE.items()))
def test_accelerate_configs_load_with_accelerate(name: str, kind: str) -> None:
    """Each file loads with accelerate's own loader, and `accelerate launch` accepts it."""
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    path = ROOT / "configs" / "accelerate" / name
    config = load_config_from_file(str(path))
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type.value == kind
    assert (config.mixed_precision, config.num_machines, config.use_cpu) == ("bf16", 1, False)
    launch = ["--config_file", str(path), "-m", "rk_agent", "train", "grpo"]
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(launch))
    assert (args.module, args.training_script, args.num_processes) == (True, "rk_agent", 8)
    if kind == "DEEPSPEED":
        assert args.use_deepspeed and args.zero_stage == int(name[-6])
    if kind == "FSDP":
        assert args.use_fsdp and str(args.fsdp_version) == "2"
    # Every nested key is an `accelerate launch` option (else launch would ignore it).
    options = {action.dest for action in launch_command_parser()._actions}
    nested = {**(config.deepspeed_config or {}), **(config.fsdp_config or {})}
    assert set(nested) <= options


SFT_FIELDS = (
    "success_only (true or false), min_reward (a number, or null for none), drop_failed (true "
    "or false), max_per_task (an integer of at least 1, or null for no limit)"
)


NOT_A_MAPPING = (
    "invalid train config{where}: sft_filter must be a mapping of filter fields, got {got}. It "
    "takes: " + SFT_FIELDS + "; e.g. sft_filter: {min_reward: 0.5}, or leave it out to keep "
    "solved, unfailed episodes."
)


@pytest.mark.parametrize(
    ("sft_filter", "message"),
    [
        ({"min_rewrd": 1}, "unknown train config option 'sft_filter.min_rewrd'{where}. Did you "
         "mean 'sft_filter.min_reward'? Options are: sft_filter.success_only, "
         "sft_filter.min_reward, sft_filter.drop_failed, sft_filter.max_per_task."),
        ({"max_per_task": 0}, "invalid train config{where}: sft_filter.max_per_task: Input "
         f"should be greater than or equal to 1. sft_filter takes: {SFT_FIELDS}."),
        ({"success_only": "sometimes"}, "invalid train config{where}: sft_filter.success_only: "
         "Input should be a valid boolean, unable to interpret input. sft_filter takes: "
         f"{SFT_FIELDS}."),
        ([0.5], NOT_A_MAPPING.replace("{got}", "list [0.5]")),
        (None, NOT_A_MAPPING.replace("{got}", "null")),
    ],
)  # fmt: skip
def test_sft_filter_is_checked_when_the_config_is_read(
    sft_filter: Any, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"kind": "sft", "trajectories": "t", "sft_filter": sft_filter}))
    expected = message.replace("{where}", f" in {path}")
    with pytest.raises(ConfigError, match=f"^{re.escape(expected)}$"):
        load_train_config(path)


def test_sft_filter_is_typed_with_today_s_keys(tmp_path: Path) -> None:
    from rk_agent.trainers.sft_data import SFTFilter

    path = tmp_path / "c.yaml"
    path.write_text("kind: sft\ntrajectories: t\nsft_filter: {min_reward: 0.5, max_per_task: 2}\n")
    config = load_train_config(path, {"sft_filter.success_only": False})
    assert config.sft_filter == SFTFilter(success_only=False, min_reward=0.5, max_per_task=2)
    assert load_train_config(None, {"kind": "sft", "trajectories": "t"}).sft_filter == SFTFilter()
    saved = load_train_config(save_train_config(config, tmp_path / "run"))
    assert saved.sft_filter == config.sft_filter


def test_flat_environment_keys_make_one_spec(tmp_path: Path) -> None:
    from rk_agent.envs.env_setup import EnvSetup

    (tmp_path / "tasks.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    path = tmp_path / "c.yaml"
    path.write_text(
        "kind: grpo\nenv: math\nenv_kwargs: {retries: 2}\ntasks: tasks.jsonl\n"
        "rewards: [math]\nmax_turns: 2\nseed: 7\n"
    )
    config = load_train_config(path, {"seed": 8, "env_kwargs.retries": 1})
    assert config.env == EnvSetup(name="math", kwargs={"retries": 1},
                                 tasks=str(tmp_path / "tasks.jsonl"), rewards=["math"],
                                 max_turns=2, seed=8)  # fmt: skip
    assert TrainConfig(kind="grpo", env="math", seed=8).env == EnvSetup(name="math", seed=8)
    saved = yaml.safe_load(save_train_config(config, tmp_path / "run").read_text())
    assert {k: saved[k] for k in ("env", "env_kwargs", "tasks", "max_turns", "seed")} == {
        "env": "math", "env_kwargs": {"retries": 1}, "tasks": str(tmp_path / "tasks.jsonl"),
        "max_turns": 2, "seed": 8,
    }  # fmt: skip
    path.write_text("kind: grpo\nenv: {name: math, kwarg: {}}\n")
    message = f"unknown train config option 'env.kwarg' in {path}. Did you mean 'env.kwargs'?"
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_train_config(path)
