"""Real TRL GRPO runs (tiny random Llama, CPU): multi-turn episodes, single-turn, resume."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.trainers.grpo import grpo_trainer
from rk_agent.types import StopReason


def _args(tmp_path: Path, **overrides: Any) -> Any:
    from trl import GRPOConfig

    values: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 40,
        "max_steps": 2,
        "learning_rate": 1e-3,
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": [],
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": 0,
    }
    values.update(overrides)
    return GRPOConfig(**values)


def _trajectories(out: Path) -> list[dict[str, Any]]:
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_multi_turn_run_trains_on_whole_episodes_with_the_env_masked(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    trainer = grpo_trainer(
        "guess",
        model=tiny_model_dir,
        args=_args(tmp_path),
        n_tasks=4,
        env_kwargs={"max_turns": 4},
        max_tokens_per_turn=6,
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/episode/mean" in h]
    assert len(logs) == 2
    for key in ("rewards/step_rewards/mean", "rewards/solved/mean", "episodes/turns_mean",
                "episodes/step_reward_mean", "episodes/parse_error_rate"):  # fmt: skip
        assert key in logs[0], key

    episodes = _trajectories(tmp_path / "out")
    assert len(episodes) == 8  # 2 steps x 4 rows (one task, 4 generations)
    assert {e["metadata"]["train_step"] for e in episodes} == {0, 1}
    for step, log in enumerate(logs):
        rows = [e for e in episodes if e["metadata"]["train_step"] == step]
        assert len({e["task"]["id"] for e in rows}) == 1  # the 4 rows are one GRPO group
        assert sorted(e["sample"] for e in rows) == [0, 1, 2, 3]
        # TRL counted only the model's tokens: its length metric is ours, not prompt+feedback.
        model_tokens = [sum(len(t["token_ids"]) for t in e["turns"]) for e in rows]
        assert log["completions/mean_length"] == pytest.approx(sum(model_tokens) / 4)
        assert log["episodes/turns_mean"] == pytest.approx(sum(len(e["turns"]) for e in rows) / 4)
    # The random model's replies are no numbers: the game gives feedback and goes on.
    assert max(len(e["turns"]) for e in episodes) > 1
    assert all(e["stop_reason"] in (StopReason.MAX_TURNS, StopReason.TRUNCATED) for e in episodes)


def test_the_rollout_answers_prompts_that_trl_already_repeated(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    trainer = grpo_trainer(
        "tools", model=tiny_model_dir, args=_args(tmp_path, max_completion_length=24), n_tasks=2
    )
    prompts = [trainer.train_dataset[1]["prompt"]] * 3 + [trainer.train_dataset[0]["prompt"]]
    out = trainer.rollout_func(prompts, trainer)
    assert len(out["prompt_ids"]) == len(out["completion_ids"]) == len(out["env_mask"]) == 4
    tasks = [t.task.id for t in out["trajectory"]]
    assert tasks[:3] == [tasks[0]] * 3 and tasks[3] != tasks[0]
    assert [t.sample for t in out["trajectory"]] == [0, 1, 2, 0]
    # Named by the step they feed (the first), the task's row and the sample: once in the run.
    assert [t.id for t in out["trajectory"]] == ["s1-1-0", "s1-1-1", "s1-1-2", "s1-0-0"]
    assert [t.task_index for t in out["trajectory"]] == [1, 1, 1, 0]
    for ids, mask, logps in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert 0 < len(ids) <= 24
        assert len(mask) == len(ids) == len(logps)


def test_single_turn_grpo_scores_each_reward_component(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    trainer = grpo_trainer(
        "math",
        model=tiny_model_dir,
        args=_args(tmp_path, max_steps=1, max_completion_length=8),
        n_tasks=4,
        multi_turn=False,
    )
    assert trainer.rollout_func is None
    trainer.train()
    log = trainer.state.log_history[0]
    assert log["rewards/correct/mean"] == 0.0  # random tokens never solve a word problem


def test_resume_continues_from_the_last_checkpoint(tmp_path: Path, tiny_model_dir: Path) -> None:
    common = {"save_strategy": "steps", "save_steps": 1, "max_completion_length": 16}
    first = grpo_trainer(
        "guess", model=tiny_model_dir, args=_args(tmp_path, max_steps=1, **common), n_tasks=4
    )
    first.train()
    assert (tmp_path / "out" / "checkpoint-1").is_dir()
    second = grpo_trainer(
        "guess", model=tiny_model_dir, args=_args(tmp_path, max_steps=2, **common), n_tasks=4
    )
    second.train(resume_from_checkpoint=True)
    assert second.state.global_step == 2
    assert (tmp_path / "out" / "checkpoint-2").is_dir()
    steps = [e["metadata"]["train_step"] for e in _trajectories(tmp_path / "out")]
    assert steps == [0] * 4 + [1] * 4  # the resumed run did not replay step 0


def test_reward_weights_of_the_wrong_length_are_refused(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    with pytest.raises(ConfigError, match=r"reward_weights has 1 entries but there are 3"):
        grpo_trainer(
            "guess",
            model=tiny_model_dir,
            args=_args(tmp_path, reward_weights=[1.0]),
            n_tasks=4,
        )


def test_an_unknown_tool_call_format_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    message = "unknown tool-call format 'llama'. Did you mean 'llama3_json'?"
    with pytest.raises(ConfigError, match=re.escape(message)):
        grpo_trainer(
            "tools",
            model=tmp_path / "no-model-here",
            args=_args(tmp_path),
            tool_call_format="llama",
        )


def test_a_runs_env_factory_holds_the_envs_arguments(tmp_path: Path) -> None:
    from rk_agent.envs.env_setup import EnvSetup

    factory = EnvSetup(name="guess").factory()
    message = "EnvFactory('guess') holds its environment's arguments; give high in its EnvSetup"
    with pytest.raises(ConfigError, match=re.escape(message)):
        grpo_trainer(
            factory,
            model=tmp_path / "no-model-here",
            args=_args(tmp_path),
            env_kwargs={"high": 5},
        )
    factory.close()
