"""The watch in real GRPO runs (TRL, tiny random Llama, CPU), in both loops.

The alarms must fire on the rewards that teach nothing or the wrong thing (a constant reward, a
per-step bonus a policy farms, a reward that returns NaN) and stay silent on the ``tools``
environment's own rewards. A random 2-layer model cannot learn to farm a bonus in three steps,
nor solve a task at all, so those runs play their episodes against the loopback stub server
(`StubServer`, vLLM's token-id contract): a scripted policy whose tokens TRL trains the tiny
model on, exactly as with a real served policy.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rk_agent.envs.registry import make_env
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import AlarmKind, AlarmOptions
from rk_agent.runs.watch_log import WATCH_FILE, read_watch
from rk_agent.testing.stub_server import StubServer
from rk_agent.trainers.grpo import grpo_trainer
from rk_agent.trainers.scored_batch import ScoredBatch
from rk_agent.trainers.tasks import task_rows
from rk_agent.trainers.watch import WatchCallback, WatchRecorder
from rk_agent.types import Message
from tests.trainers.test_grpo import _args


def _alarms(out: Path) -> list[tuple[int, str]]:
    return [(a["step"], a["kind"]) for line in read_watch(out) for a in line["alarms"]]


def _text(request: dict[str, Any], tok: Any) -> str:
    prompt = request["prompt"]
    return str(tok.decode(prompt)) if isinstance(prompt, list) else str(prompt)


def _constant(**kwargs: Any) -> float:
    return 1.0


def _state(step: int) -> Any:
    from transformers import TrainerControl, TrainerState

    state = TrainerState()
    state.global_step = step
    return state, TrainerControl()


def test_the_recorder_keeps_each_batch_and_changes_nothing(tmp_path: Path) -> None:
    def answer(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [1.0 if c == "4" else 0.0 for c in completions]

    def length(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [float("nan") if c == "?" else 0.1 * len(c) for c in completions]

    recorder = WatchRecorder()
    funcs = recorder.wrap([answer, length])
    assert [f.__name__ for f in funcs] == ["answer", "length"]
    completions = ["4", "four", "4", "?"]
    ids = [[1], [1, 2, 3, 4], [1], [1, 2, 3, 4]]
    for fn in funcs:
        scores = fn(prompts=["q"] * 4, completions=completions, completion_ids=ids)
    assert scores[:3] == [0.1, 0.4, 0.1]  # what the function returned, untouched

    options = AlarmOptions(stop_on_alarm=True)
    callback = WatchCallback(recorder, ["answer", "length"], [1.0, 0.5], options, tmp_path)
    args = SimpleNamespace(num_generations=2, max_completion_length=4)
    state, control = _state(1)
    callback.on_step_end(args, state, control)
    [line] = read_watch(tmp_path)
    # Single turn: each weighted function is a component, the answer is the completion's text,
    # a completion as long as max_completion_length is truncated, a NaN score a NaN reward.
    assert line["reward_mean"] == pytest.approx((1.05 + 0.2 + 1.05) / 3)
    assert (line["nan_rewards"], line["invalid_rewards"], line["truncated"]) == (1, 1, 0.5)
    assert line["component_shares"] == pytest.approx({"answer": 2 / 2.3, "length": 0.3 / 2.3})
    assert line["outcome_components"] == ["answer"] and line["distinct_answers"] == 2.0
    assert line["zero_spread"] == 0.5  # the second group has one valid reward
    assert [a["kind"] for a in line["alarms"]] == ["nan_reward", "truncation"]
    assert control.should_training_stop and callback.stopped_by is not None
    assert callback.stopped_by.kind is AlarmKind.NAN_REWARD

    logs: dict[str, Any] = {"loss": 0.0}
    state.log_history.append({**logs, "step": 1})
    callback.on_log(args, state, control, logs=logs)
    assert logs["watch/nan_rewards"] == 1.0 and logs["watch/alarms"] == 2
    assert state.log_history[-1]["watch/share/answer"] == pytest.approx(2 / 2.3)
    # A step that reused an earlier generation adds no line.
    callback.on_step_end(args, *_state(2))
    assert len(read_watch(tmp_path)) == 1


def answer(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    return [1.0 if c == "4" else 0.0 for c in completions]


def length(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    return [None if c == "?" else 0.1 * len(c) for c in completions]


def _watched_step(
    out: Path, given: list[str], called: list[str], *, announced: bool
) -> dict[str, Any]:
    """The watch's line of one step of two generation batches, the reward functions given to
    the trainer in the order ``given`` and called by it in the order ``called``; each batch
    announced by the trainer's hook first, or not."""
    funcs = {"answer": answer, "length": length}
    weights = {"answer": 1.0, "length": 0.5}
    recorder = WatchRecorder()
    wrapped = dict(zip(given, recorder.wrap([funcs[name] for name in given]), strict=True))
    batches = [(["4", "four", "4", "?"], [[1], [1, 2, 3, 4], [1], [1, 2, 3, 4]]),
               (["4", "4", "no", "nope"], [[1], [1], [1, 2], [1, 2, 3]])]  # fmt: skip
    for completions, ids in batches:
        if announced:
            recorder.begin(ScoredBatch(rows=[{}] * 4, completions=completions,
                                       completion_ids=ids, trajectories=None, step=0))  # fmt: skip
        for name in called:
            wrapped[name](prompts=["q"] * 4, completions=completions, completion_ids=ids)
    callback = WatchCallback(recorder, given, [weights[name] for name in given], None, out)
    callback.on_step_end(SimpleNamespace(num_generations=2, max_completion_length=4), *_state(1))
    [line] = read_watch(out)
    return line


@pytest.mark.parametrize("announced", [True, False], ids=["trainer-hook", "no-hook"])
def test_the_watch_does_not_depend_on_the_order_of_the_reward_functions(
    tmp_path: Path, announced: bool
) -> None:
    orders = [["answer", "length"], ["length", "answer"]]
    lines = {
        (tuple(given), tuple(called)): _watched_step(
            tmp_path / f"{'-'.join(given)}.{'-'.join(called)}", given, called, announced=announced
        )
        for given in orders
        for called in orders
    }
    first = lines[("answer", "length"), ("answer", "length")]
    # TRL's weighted sum, a None score left out (the "?" row: 0.0 from answer alone)
    assert first["reward_mean"] == pytest.approx(
        (1.05 + 0.2 + 1.05 + 0.0 + 1.05 + 1.05 + 0.1 + 0.2) / 8
    )
    assert first["component_shares"] == pytest.approx({"answer": 4 / 4.7, "length": 0.7 / 4.7})
    for (given, called), line in lines.items():
        assert _rounded(line) == _rounded(first), (given, called)


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded (sums in another order differ in the last bits)."""
    if isinstance(value, float):
        return round(value, 12)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def test_stop_on_alarm_is_refused_in_several_processes() -> None:
    callback = WatchCallback(WatchRecorder(), [], [], AlarmOptions(stop_on_alarm=True))
    callback.on_train_begin(SimpleNamespace(world_size=1), *_state(0))
    with pytest.raises(ConfigError, match=re.escape(
        "stop_on_alarm (--stop-on-alarm) works in one training process, but this run has 2: "
        "each watches its own share of the batch, and one stopping alone would leave the others "
        "waiting. Train without it (the alarms are still raised and kept), or in one process."
    )):  # fmt: skip
        callback.on_train_begin(SimpleNamespace(world_size=2), *_state(0))
    WatchCallback(WatchRecorder(), [], []).on_train_begin(SimpleNamespace(world_size=2), *_state(0))


@pytest.mark.slow
def test_a_constant_reward_raises_zero_spread_on_the_third_step(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trainer = grpo_trainer(
        "tools",
        model=tiny_model_dir,
        args=_args(tmp_path, max_steps=3),
        n_tasks=2,
        rewards={"constant": _constant},
        max_tokens_per_turn=8,
    )
    with caplog.at_level("WARNING", logger="rk_agent.trainers.watch"):
        trainer.train()
    out = tmp_path / "out"
    lines = read_watch(out)
    assert [line["step"] for line in lines] == [1, 2, 3]
    for line in lines:
        assert (line["zero_spread"], line["zero_spread_all_pass"]) == (1.0, 1.0)
        assert line["reward_mean"] == 1.0 and line["reward_group_std"] == 0.0
        assert line["component_shares"] == {"constant": 1.0, "step_rewards": 0.0}
    # The random model never ends a reply: every one is cut at 8 tokens, which is seen too.
    assert _alarms(out) == [(1, "truncation"), (3, "zero_spread")]
    assert caplog.messages[-1] == (
        "step 3: 100% of groups had zero reward spread for 3 steps (0% all fail, 100% all "
        "pass): those groups teach nothing. Try: easier tasks, more generations "
        "(--num_generations) or partial credit when they all fail; harder tasks when they all "
        "pass."
    )
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["watch/zero_spread"] for h in logged] == [1.0, 1.0, 1.0]
    assert [h["watch/alarms"] for h in logged] == [1, 1, 2]


TASK = Task(
    id="six-sevens",
    messages=[Message(role="user", content="What is 6 times 7?")],
    ground_truth=42,
    metadata={"min_tool_calls": 1},
)
GROUP = 4


def _call(expression: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "calculator", "arguments": {"expression": expression}}]}


def _per_call_bonus(tool_calls: list[Any] | None = None, **kwargs: Any) -> float:
    """A per-step reward that pays 0.1 for every tool call, needed or not: farmable."""
    return 0.1 * len(tool_calls or [])


@pytest.mark.slow
def test_a_farmed_per_step_bonus_raises_farming(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    # The policy a farmable bonus trains: each step it makes one more needless call, and one
    # more of its samples gives up on the answer. Episode e's calls carry e ("6*7+0*e").
    episodes = itertools.count()

    def farming(request: dict[str, Any]) -> Any:
        text = _text(request, embedded_tok)
        made = text.count("<tool_response>")
        found = re.search(r"6\*7\+0\*(\d+)", text)
        episode = int(found.group(1)) if found else next(episodes)
        step, sample = divmod(episode, GROUP)
        if made < step:
            return _call(f"6*7+0*{episode}")
        return "Answer: 42" if sample < GROUP - step else "Answer: 41"

    env_kwargs = {"tasks": [TASK], "tool_names": ["calculator"],
                  "step_rewards": {"bonus": _per_call_bonus}}  # fmt: skip
    with StubServer(farming, tokenizer=embedded_tok) as server:
        trainer = grpo_trainer(
            "tools",
            model=tiny_model_dir,
            args=_args(tmp_path, max_steps=3, max_completion_length=320),
            env_kwargs=env_kwargs,
            server_url=server.url,
            watch=AlarmOptions(farming_window=3),
        )
        trainer.train()
    lines = read_watch(tmp_path / "out")
    assert [line["success_mean"] for line in lines] == [1.0, 0.75, 0.5]
    assert [line["step_reward_mean"] for line in lines] == pytest.approx([0.0, 0.1, 0.2])
    assert [line["tool_calls_mean"] for line in lines] == [0.0, 1.0, 2.0]
    assert _alarms(tmp_path / "out") == [(3, "farming")]
    assert lines[-1]["alarms"][0]["message"].startswith(
        "step 3: the per-step reward rose from 0.000 to 0.200 while success fell from 100% to "
        "50% over 3 steps: the policy may be farming the step bonus."
    )


@pytest.mark.slow
def test_the_tools_envs_own_rewards_raise_nothing(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    # A fair policy on the env's default rewards: two lookups (what the task needs), then the
    # right answer in half the episodes and a wrong one in the other half.
    truth = task_rows(make_env("tools"), 1, 0)[0].task.ground_truth
    answers = itertools.cycle([f"Answer: {truth}", "Answer: 1999-01-01"])

    def fair(request: dict[str, Any]) -> Any:
        made = _text(request, embedded_tok).count("<tool_response>")
        return _call(f"{made}+1") if made < 2 else next(answers)

    with StubServer(fair, tokenizer=embedded_tok) as server:
        trainer = grpo_trainer(
            "tools",
            model=tiny_model_dir,
            args=_args(tmp_path, max_steps=5, max_completion_length=400),
            n_tasks=1,
            server_url=server.url,
        )
        trainer.train()
    lines = read_watch(tmp_path / "out")
    assert len(lines) == 5 == AlarmOptions().farming_window  # every alarm could have fired
    for line in lines:
        assert line["zero_spread"] == 0.0 and line["success_mean"] == 0.5
        assert line["truncated"] == 0.0 and line["tool_calls_mean"] == 2.0
        assert line["distinct_answers"] == 2.0 and line["nan_rewards"] == 0
        assert line["component_shares"]["answer"] > 0.8 and line["outcome_components"] == ["answer"]
    assert _alarms(tmp_path / "out") == []


NAN_REWARD = """
def nan_reward(**kwargs):
    return float("nan")
"""


@pytest.mark.slow
def test_a_nan_reward_stops_a_trl_loop_run_at_its_last_checkpoint(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from typer.testing import CliRunner

    from rk_agent.cli.app import app
    from rk_agent.runs.run_record import RunStatus, read_run_record
    from rk_agent.trainers.config import load_train_config
    from rk_agent.trainers.run import run_training

    (tmp_path / "nan_reward.py").write_text(NAN_REWARD)
    out = tmp_path / "run"
    config = load_train_config(
        None,
        {
            "kind": "grpo", "env": "tools", "loop": "trl", "model": str(tiny_model_dir),
            "rewards": [f"{tmp_path / 'nan_reward.py'}::nan_reward"], "n_tasks": 2,
            "output_dir": str(out), "wandb.enabled": False, "watch.stop_on_alarm": True,
        },
        {"max_steps": 3, "num_generations": 2, "per_device_train_batch_size": 2,
         "max_completion_length": 12, "save_steps": 1},
    )  # fmt: skip
    said: list[str] = []
    outcome = run_training(config, say=said.append)

    assert outcome.stopped_by is not None and outcome.stopped_by.kind is AlarmKind.NAN_REWARD
    assert outcome.global_step == 1 and outcome.final_model is None
    assert outcome.last_checkpoint == out / "checkpoint-1"
    assert not (out / "final").exists()
    assert (
        f"stopped at step 1 by the nan_reward alarm (--stop-on-alarm); no final model was "
        f"saved; its last checkpoint is {out / 'checkpoint-1'}." in said
    )
    record = read_run_record(out)
    assert record is not None and record.status is RunStatus.STOPPED
    assert (record.alarms[0].step, record.alarms[0].kind) == (1, AlarmKind.NAN_REWARD)
    line = json.loads((out / WATCH_FILE).read_text().splitlines()[0])
    # Both rows are invalid, not a 0 (the per-step rewards of an unscored episode are left out).
    assert (line["nan_rewards"], line["invalid_rewards"], line["reward_mean"]) == (2, 2, None)

    shown = CliRunner().invoke(app, ["show", str(out)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "stopped" in shown.output
    assert record.alarms[0].message in " ".join(shown.output.split())
