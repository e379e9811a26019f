"""rk-agent's GRPOTrainer: dynamic sampling and task retirement in real GRPO runs (TRL, tiny
random Llama, CPU), in both loops: what each step trained on (the advantages TRL received),
what it logged, the bound, the retired tasks, a resumed run, and nothing changed when they are
off or have nothing to do.

The rewards (`tests.trainers.sampling_rewards`) read the random model's replies where a group
should have spread and ignore them where it should have none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rk_agent.runs.alarms import AlarmOptions
from rk_agent.runs.run_record import read_run_record
from rk_agent.runs.watch_log import read_watch
from rk_agent.trainers.group_sampling import SamplingOptions
from rk_agent.trainers.grpo import grpo_trainer
from rk_agent.trainers.hooked_trainer import SAMPLING_STATE_FILE, HookedGRPOTrainer
from rk_agent.trainers.trl_env import trl_grpo_trainer
from tests.trainers.sampling_rewards import by_reply, constant, on_a_third
from tests.trainers.test_grpo import _args

GROUP = 2
LOOPS = ["rk", "trl"]


def _trainer(loop: str, tmp_path: Path, model: Path, *, steps: int = 2, **kwargs: Any) -> Any:
    """Two groups of two episodes a step on the tools env (its lookup tool), six tasks."""
    args = _args(
        tmp_path, max_steps=steps, num_generations=GROUP, per_device_train_batch_size=4,
        max_completion_length=16, **kwargs.pop("args", {}),
    )  # fmt: skip
    common = {"model": model, "args": args, "n_tasks": 6, "env_kwargs": {"tool_names": ["lookup"]}}
    if loop == "rk":
        return grpo_trainer("tools", max_tokens_per_turn=8, **common, **kwargs)
    return trl_grpo_trainer("tools", **common, **kwargs)


def _trained_batches(trainer: Any) -> list[dict[str, Any]]:
    """Every batch the sampler handed TRL to train on (the sampler still does the work)."""
    batches: list[dict[str, Any]] = []
    generate = trainer.rk_sampler.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        batch = generate(*args, **kwargs)
        batches.append(batch)
        return batch

    trainer.rk_sampler.generate = spy
    return batches


def _groups_with_spread(batch: dict[str, Any]) -> list[bool]:
    advantages = batch["advantages"].tolist()
    return [
        any(abs(a) > 1e-3 for a in advantages[i : i + GROUP])
        for i in range(0, len(advantages), GROUP)
    ]


def _episodes(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("loop", LOOPS)
def test_each_step_trains_on_groups_with_spread_when_most_tasks_give_none(
    loop: str, tmp_path: Path, tiny_model_dir: Path
) -> None:
    trainer = _trainer(
        loop, tmp_path, tiny_model_dir, rewards={"on_a_third": on_a_third},
        sampling=SamplingOptions(dynamic=True, max_extra_draws=8),
    )  # fmt: skip
    assert isinstance(trainer, HookedGRPOTrainer)
    batches = _trained_batches(trainer)
    trainer.train()

    # TRL received two groups a step, each with spread: advantages that are not all zero.
    assert [_groups_with_spread(b) for b in batches] == [[True, True], [True, True]]
    assert [len(b["advantages"]) for b in batches] == [4, 4]
    lines = read_watch(tmp_path / "out")
    counts = [line["sampling"] for line in lines]
    assert [(c["kept"], c["filled"], c["bound_hit"]) for c in counts] == [(2, 0, False)] * 2
    for c in counts:
        assert c["drawn"] == c["kept"] + c["dropped"] and c["draws"] >= 1
    assert sum(c["dropped"] for c in counts) > 0
    # The watch's signals are those of every group played, the dropped ones too.
    assert [line["groups"] for line in lines] == [c["drawn"] for c in counts]
    assert sum(line["zero_spread"] * line["groups"] for line in lines) == pytest.approx(
        sum(c["dropped"] for c in counts)
    )
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["sampling/groups_kept"] for h in logged] == [2.0, 2.0]
    assert [h["sampling/groups_dropped"] for h in logged] == [c["dropped"] for c in counts]
    # Every group played was recorded, each a task of its own in its step.
    episodes = _episodes(tmp_path / "out")
    assert len(episodes) == GROUP * sum(c["drawn"] for c in counts)
    for step in (0, 1):
        tasks = [e["task"]["id"] for e in episodes if e["metadata"]["train_step"] == step]
        assert len(set(tasks)) == counts[step]["drawn"]


@pytest.mark.slow
@pytest.mark.parametrize("loop", LOOPS)
def test_a_constant_reward_stops_drawing_at_the_bound_and_says_so(
    loop: str, tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trainer = _trainer(
        loop, tmp_path, tiny_model_dir, steps=1, rewards={"constant": constant},
        sampling=SamplingOptions(dynamic=True, max_extra_draws=2),
        watch=AlarmOptions(zero_spread_steps=1),
    )  # fmt: skip
    batches = _trained_batches(trainer)
    with caplog.at_level("WARNING"):
        trainer.train()
    [counts] = [line["sampling"] for line in read_watch(tmp_path / "out")]
    assert counts == {
        "dynamic": True, "draws": 3, "drawn": 6, "kept": 0, "dropped": 4, "filled": 2,
        "bound_hit": True, "replaced": 0, "retired": [],
    }  # fmt: skip
    note = (
        "dynamic sampling dropped 4 of the 6 groups drawn (3 draws) and trained on 0 with "
        "spread; it hit its bound, so 2 zero-spread groups filled the batch."
    )
    assert f"step 1: {note} Raise --max-extra-draws" in caplog.text
    alarms = {a["kind"]: a["message"] for line in read_watch(tmp_path / "out")
              for a in line["alarms"]}  # fmt: skip
    assert alarms["zero_spread"].endswith(f"This step {note}")
    # The batch keeps TRL's shape with the first draw's groups, which teach nothing.
    assert [_groups_with_spread(b) for b in batches] == [[False, False]]
    assert len(batches[0]["advantages"]) == 4
    assert trainer.state.log_history[0]["sampling/bound_hit"] == 1.0


def _replies(episodes: list[dict[str, Any]]) -> list[Any]:
    """What the model wrote in each episode, turn by turn (timings left out)."""
    return [[(t["assistant"]["content"], t.get("token_ids")) for t in e["turns"]] for e in episodes]


def _weights(trainer: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


@pytest.mark.slow
@pytest.mark.parametrize("loop", LOOPS)
def test_off_nothing_changes_and_on_with_spread_everywhere_it_changes_nothing(
    loop: str, tmp_path: Path, tiny_model_dir: Path
) -> None:
    import torch

    # The tools env's defaults: no sampler, TRL's own generation, nothing sampled or saved.
    plain = _trainer(loop, tmp_path / "defaults", tiny_model_dir, steps=1,
                     args={"save_strategy": "steps", "save_steps": 1})  # fmt: skip
    assert isinstance(plain, HookedGRPOTrainer) and plain.rk_sampler is None
    plain.train()
    out = tmp_path / "defaults" / "out"
    assert "sampling" not in read_watch(out)[0]
    assert not any(k.startswith("sampling/") for k in plain.state.log_history[0])
    assert not (out / "checkpoint-1" / SAMPLING_STATE_FILE).exists()

    # A reward with spread in every group: dynamic sampling and retirement have nothing to do,
    # and the run is the run without them, weight for weight.
    runs = {}
    for name, sampling in (("off", None), ("on", SamplingOptions(dynamic=True, retire_after=1))):
        trainer = _trainer(loop, tmp_path / name, tiny_model_dir, rewards={"by_reply": by_reply},
                           sampling=sampling)  # fmt: skip
        trainer.train()
        runs[name] = (trainer, _weights(trainer), _episodes(tmp_path / name / "out"))
    (off, off_weights, off_episodes), (on, on_weights, on_episodes) = runs["off"], runs["on"]
    assert off.rk_sampler is None and on.rk_sampler is not None
    for key, value in off_weights.items():
        torch.testing.assert_close(on_weights[key], value, rtol=0, atol=0, msg=key)
    assert _replies(on_episodes) == _replies(off_episodes)
    losses = [[h["loss"] for h in t.state.log_history if "loss" in h] for t in (off, on)]
    assert losses[0] == losses[1]
    counts = [line["sampling"] for line in read_watch(tmp_path / "on" / "out")]
    assert [(c["draws"], c["kept"], c["dropped"], c["retired"]) for c in counts] == [
        (1, 2, 0, [])
    ] * 2


RETIRE = """
from tests.trainers.sampling_rewards import solved
from rk_agent.envs.registry import make_env
from rk_agent.trainers.tasks import task_rows

SOLVED = task_rows(make_env("tools", tool_names=["lookup"]), 4, 0)[0].task
solved_one = solved(SOLVED.ground_truth)
"""


@pytest.mark.slow
def test_a_task_always_solved_is_drawn_no_more_after_k_steps(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from rk_agent.trainers.config import load_train_config
    from rk_agent.trainers.run import run_training

    (tmp_path / "retire.py").write_text(RETIRE)
    solved_id = _solved_task()

    def train(name: str, retire_after: int | None) -> tuple[Any, list[str], list[Any]]:
        folder = tmp_path / name
        config = load_train_config(None, {
            "kind": "grpo", "env": "tools", "env_kwargs": {"tool_names": ["lookup"]},
            "model": str(tiny_model_dir), "rewards": [f"{tmp_path / 'retire.py'}::solved_one"],
            "n_tasks": 4, "output_dir": str(folder), "wandb.enabled": False,
            "sampling.retire_after": retire_after,
        }, {"max_steps": 6, "num_generations": GROUP, "per_device_train_batch_size": 4,
            "max_completion_length": 8, "save_strategy": "no", "seed": 0})  # fmt: skip
        said: list[str] = []
        outcome = run_training(config, say=said.append)
        return outcome, said, _episodes(folder)

    def steps_played(episodes: list[Any]) -> list[int]:
        return sorted({e["metadata"]["train_step"] for e in episodes
                       if e["task"]["id"] == solved_id})  # fmt: skip

    # Four tasks, two a step: TRL draws each once every two steps, three times in six.
    _, _, without = train("without", None)
    assert len(steps_played(without)) == 3
    outcome, said, episodes = train("run", 2)
    played = steps_played(episodes)
    assert len(played) == 2  # its second all-pass group retired it: a fresh task took its place
    retired = outcome.sampling.retired
    assert [(r.task_id, r.settled.value, r.groups) for r in retired] == [(solved_id, "all_pass", 2)]
    assert retired[0].step == played[-1] + 1  # TRL's steps count from 1, train_step from 0
    assert f"1 task retired: {solved_id} (step {retired[0].step}, all_pass)." in said
    assert not any(line.startswith("dynamic sampling over") for line in said)  # that was off
    record = read_run_record(tmp_path / "run")
    assert record is not None and record.sampling is not None
    assert record.sampling.retired == retired and record.sampling.replaced == 1
    for step in range(6):  # still two groups every step
        assert len({e["task"]["id"] for e in episodes if e["metadata"]["train_step"] == step}) == 2

    from typer.testing import CliRunner

    from rk_agent.cli.app import app

    shown = CliRunner().invoke(app, ["show", str(tmp_path / "run")], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "tasks retired" in shown.output
    assert f"1: {solved_id} (step {retired[0].step})" in shown.output
    assert "12 in 6 generations: " in shown.output and "1 replaced" in shown.output


def _solved_task() -> str:
    from rk_agent.envs.registry import make_env
    from rk_agent.trainers.tasks import task_rows

    return task_rows(make_env("tools", tool_names=["lookup"]), 4, 0)[0].task.id


@pytest.mark.slow
def test_a_resumed_run_draws_the_fresh_tasks_the_whole_run_would_have(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    sampling = SamplingOptions(dynamic=True, max_extra_draws=1)
    save = {"save_strategy": "steps", "save_steps": 1}

    def fresh_tasks(out: Path) -> dict[int, list[str]]:
        by_step: dict[int, list[str]] = {}
        for e in _episodes(out):
            tasks = by_step.setdefault(e["metadata"]["train_step"], [])
            if e["task"]["id"] not in tasks:
                tasks.append(e["task"]["id"])
        return by_step

    whole = _trainer("rk", tmp_path / "whole", tiny_model_dir, rewards={"constant": constant},
                     sampling=sampling, args=save)  # fmt: skip
    whole.train()
    first = _trainer("rk", tmp_path / "halves", tiny_model_dir, steps=1,
                     rewards={"constant": constant}, sampling=sampling, args=save)  # fmt: skip
    first.train()
    state = json.loads((tmp_path / "halves" / "out" / "checkpoint-1" / SAMPLING_STATE_FILE)
                       .read_text())  # fmt: skip
    assert state["draws"]["next_seed"] > 6 and state["record"]["steps"] == 1
    second = _trainer("rk", tmp_path / "halves", tiny_model_dir, rewards={"constant": constant},
                      sampling=sampling, args=save)  # fmt: skip
    second.train(resume_from_checkpoint=True)

    expected = fresh_tasks(tmp_path / "whole" / "out")
    assert fresh_tasks(tmp_path / "halves" / "out") == expected
    assert len(set(expected[0]) | set(expected[1])) == 8  # no fresh task played twice
    assert second.rk_sampler.record == whole.rk_sampler.record
    assert second.rk_sampler.record.steps == 2
