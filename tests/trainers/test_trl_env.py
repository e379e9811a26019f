"""rk-agent environments in TRL's own tool loop (``environment_factory``), for real on CPU."""

from __future__ import annotations

import asyncio
import doctest
import inspect
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import pytest

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.registry import make_env
from rk_agent.envs.task import Task
from rk_agent.envs.tool import Tool, tool
from rk_agent.errors import ConfigError, DataError
from rk_agent.policies.policy import SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.watch_log import read_watch
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.trainers import trl_env, trl_tool_methods
from rk_agent.trainers.trl_env import trl_environment, trl_grpo_trainer
from rk_agent.trainers.trl_tool_env import TRLToolEnv, episode_trajectory, trl_env_class
from rk_agent.types import FailureKind, Message, StopReason
from tests.trainers.scripted import scripted_model

GUESS_MESSAGE = (
    "environment 'guess' cannot train with TRL's tool loop (--loop trl): it talks back with "
    "user messages (GuessEnv overrides ChatEnv.respond) and it offers no tools. TRL only "
    "answers tool calls and ends an episode at the first reply without one. Train it with "
    "rk-agent's episode loop instead: --loop rk (rk_agent.grpo_trainer in a script)."
)
QUESTION = "What is the population of France divided by the population of Japan?"


def _call(tool_name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool_name, "arguments": arguments}}


def _trl_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as TRL hands them to rewards (``parse_response``: arguments as dicts)."""
    out = []
    for m in messages:
        if m.role == "assistant":
            calls = [_call(c.function.name, **c.function.parsed_arguments())
                     for c in m.tool_calls or []]  # fmt: skip
            out.append(
                {"role": "assistant", "content": m.text, **({"tool_calls": calls} if calls else {})}
            )
        else:
            out.append({"role": m.role, "name": m.name, "content": m.text})
    return out


def _tool_message(*calls: tuple[str, dict[str, Any]]) -> Message:
    return Message.coerce({
        "role": "assistant", "content": "",
        "tool_calls": [{"id": f"c{i}", "type": "function",
                        "function": {"name": n, "arguments": json.dumps(a)}}
                       for i, (n, a) in enumerate(calls)],
    })  # fmt: skip


def _row(spec: Any, index: int = 0) -> dict[str, Any]:
    return dict(spec.train_dataset[index])


def _rk_trajectory(env: ChatEnv, row: dict[str, Any], replies: list[Message]) -> Trajectory:
    """The same episode played by rk-agent's own loop (a scripted policy)."""
    slot = EpisodeSlot(0, 0, row["seed"], options={"task": Task.model_validate_json(row["task"])})
    policy = ScriptedPolicy(replies)
    return asyncio.run(play_episode(env, policy, slot, sampling=SamplingParams(), env_name="tools"))


def _comparable(t: Trajectory) -> dict[str, Any]:
    """What both loops must agree on (not latencies, ids or the model's name)."""
    turns = [
        {
            "reward": turn.reward,
            "valid": turn.reward_valid,
            "metrics": {k: m.model_dump() for k, m in turn.metrics.items()},
            "tools": [(c.name, c.ok, c.error_kind) for c in turn.tool_calls],
            "environment": [(m.role, m.text) for m in turn.environment],
            "parse_error": turn.parse_error,
        }
        for turn in t.turns
    ]
    episode = t.episode.model_dump(exclude={"step_outputs"}) if t.episode else None
    return {"turns": turns, "episode": episode, "stop": t.stop_reason, "success": t.success,
            "total": t.total_reward, "task": t.task.id}  # fmt: skip


# --------------------------------------------------------------------------------------------
# The environment class and its tools


def test_public_methods_are_exactly_reset_and_the_envs_tools() -> None:
    env = make_env("tools")
    factory = trl_env_class(lambda: make_env("tools"), name="tools")
    # TRL lists tools the way it does here: functions of the class, minus reset/get_reward/_*.
    members = [n for n, _ in inspect.getmembers(factory, predicate=inspect.isfunction)
               if not n.startswith("_")]  # fmt: skip
    names = [s["function"]["name"] for s in env.tool_schemas]
    assert sorted(members) == sorted([*names, "reset"])
    assert factory.__name__ == "ToolsEnvForTRL"


def test_trl_derived_schemas_match_the_envs_tool_schemas() -> None:
    from transformers.utils import get_json_schema

    env = make_env("tools")
    instance = trl_env_class(lambda: make_env("tools"), name="tools")()
    for schema in env.tool_schemas:
        derived = get_json_schema(getattr(instance, schema["function"]["name"]))
        # get_json_schema cannot write `additionalProperties: false` nor `format`: all else equal.
        expected = json.loads(json.dumps(schema))
        expected["function"]["parameters"].pop("additionalProperties")
        for prop in expected["function"]["parameters"]["properties"].values():
            prop.pop("format", None)
        assert derived == expected
        assert trl_tool_methods.trl_tool_schema(schema) == derived


def test_schemas_of_richer_parameter_types_carry_over() -> None:
    @tool
    def pick(kind: Literal["a", "b"], sizes: list[int], weights: dict[str, float],
             note: str | None = None, n: int = 3) -> str:  # fmt: skip
        """Pick something.

        Args:
            kind: which kind.
            sizes: the sizes.
            weights: a weight per name.
            note: an optional note.
            n: how many.
        """
        return kind

    derived = trl_tool_methods.trl_tool_schema(pick.schema)["function"]["parameters"]
    assert derived == {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["a", "b"], "description": "which kind."},
            "sizes": {"type": "array", "items": {"type": "integer"}, "description": "the sizes."},
            "weights": {"type": "object", "additionalProperties": {"type": "number"},
                        "description": "a weight per name."},
            "note": {"type": "string", "nullable": True, "description": "an optional note."},
            "n": {"type": "integer", "description": "how many."},
        },
        "required": ["kind", "sizes", "weights"],
    }  # fmt: skip


def test_tool_methods_give_what_the_envs_own_step_gives() -> None:
    spec = trl_environment("tools", n_tasks=2)
    row = _row(spec)
    calls = [
        ("lookup", {"name": "France", "attribute": "population"}),  # succeeds
        ("calculator", {"expression": "1 / 0"}),  # raises inside the tool
        ("calculator", {"expr": "1 + 1"}),  # bad arguments: extra and missing
        ("add_days", {"date": "not a date", "days": 3}),  # fails the env's `format: date`
    ]
    rk_env = make_env("tools")
    rk_env.reset(seed=row["seed"], options={"task": Task.model_validate_json(row["task"])})
    *_, info = rk_env.step(_tool_message(*calls))

    instance = spec.environment_factory()
    assert instance.reset(**row) is None
    results = [getattr(instance, name)(**arguments) for name, arguments in calls]

    assert results == [r.result.content for r in info["tool_calls"]]
    assert not results[0].startswith("Error")
    assert [r.result.error_kind for r in info["tool_calls"]] == [
        None, "exception", "bad_arguments", "bad_arguments",
    ]  # fmt: skip
    trl = episode_trajectory(instance, _trl_messages(rk_env.state.messages[-5:]))
    turn = trl.turns[0]
    assert turn.reward == info["step"].score
    assert turn.metrics == info["step"].metrics
    assert [(c.name, c.ok, c.error_kind) for c in turn.tool_calls] == [
        (r.call.function.name, r.result.ok, r.result.error_kind) for r in info["tool_calls"]
    ]


def test_a_whole_episode_scores_as_in_rk_agents_loop() -> None:
    spec = trl_environment("tools", n_tasks=1, env_kwargs={"kinds": ["population_ratio"]})
    row = _row(spec)
    replies = [
        _tool_message(("lookup", {"name": "France", "attribute": "population"}),
                      ("lookup", {"name": "Atlantis", "attribute": "population"})),
        _tool_message(("search", {"query": "population"})),  # a tool the env does not have
        Message(role="assistant", content="Answer: 1.23"),
    ]  # fmt: skip
    rk = _rk_trajectory(make_env("tools", kinds=["population_ratio"]), row, replies)

    instance = spec.environment_factory()
    instance.reset(**row)
    # TRL runs the known tools through the methods; "search" it cannot find, so never calls us.
    for call in replies[0].tool_calls or []:
        getattr(instance, call.function.name)(**call.function.parsed_arguments())
    trl = episode_trajectory(instance, _trl_messages(rk.conversation[len(rk.task.messages) :]))

    assert _comparable(trl) == _comparable(rk)
    assert trl.stop_reason is StopReason.ANSWERED and trl.metadata["loop"] == "trl"
    assert [t.tool_calls[0].error_kind for t in trl.turns[:2]] == [None, "unknown_tool"]
    assert episode_trajectory(instance, []) is trl  # stepped once per episode


class _SlowEnv(ChatEnv):
    """One tool that sleeps past its timeout, and a call_tool that crashes on request."""

    def tools(self) -> list[Tool]:
        @tool(timeout_s=0.05)
        def nap(seconds: float) -> str:
            """Sleep a while.

            Args:
                seconds: how long.
            """
            time.sleep(seconds)
            return "rested"

        return [nap]

    fail_resets = False

    def on_reset(self, state: Any) -> None:
        if self.fail_resets:
            raise OSError("no sandbox today")

    def call_tool(self, call: Any, state: Any) -> Any:
        if call.function.parsed_arguments().get("seconds") == -1:
            raise RuntimeError("the sandbox is gone")
        return super().call_tool(call, state)


def _slow_spec() -> Any:
    task = Task(id="nap", messages=[Message(role="user", content="Rest.")], ground_truth="ok")
    return trl_environment(_SlowEnv, env_kwargs={"tasks": [task]})


def test_timeouts_become_the_envs_tool_message() -> None:
    spec = _slow_spec()
    instance = spec.environment_factory()
    instance.reset(**_row(spec))
    assert instance.nap(seconds=0.5) == "Error: tool 'nap' timed out after 0.05 s."
    message = {"role": "assistant", "content": "", "tool_calls": [_call("nap", seconds=0.5)]}
    trl = episode_trajectory(instance, [message, {"role": "assistant", "content": "done"}])
    assert trl.turns[0].tool_calls[0].error_kind == "timeout"
    assert trl.turns[0].metrics["tool_success"].score == 0.0


def test_an_env_that_crashes_fails_the_episode_and_its_rewards_are_none() -> None:
    spec = _slow_spec()
    instance = spec.environment_factory()
    instance.reset(**_row(spec))
    text = instance.nap(seconds=-1)
    assert text == (
        "Error: the environment failed: the environment's call_tool() raised RuntimeError: "
        "the sandbox is gone"
    )
    completion = [{"role": "assistant", "content": "", "tool_calls": [_call("nap", seconds=-1)]}]
    trl = episode_trajectory(instance, completion)
    assert trl.failure is not None and trl.failure.kind is FailureKind.ENV_ERROR
    assert trl.episode is None
    rewards = {f.__name__: f(prompts=[[]], completions=[completion], environments=[instance])
               for f in spec.reward_funcs}  # fmt: skip
    assert rewards == {"episode": [None], "step_rewards": [None]}


def test_a_failed_reset_fails_the_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _slow_spec()
    instance = spec.environment_factory()
    monkeypatch.setattr(_SlowEnv, "fail_resets", True)
    instance.reset(**_row(spec))
    assert instance.nap(seconds=0.0) == (
        "Error: the environment failed: the environment's reset() raised OSError: no sandbox today"
    )
    trl = episode_trajectory(instance, [{"role": "assistant", "content": "hi"}])
    assert trl.failure is not None and trl.failure.where == "environment"
    assert trl.task.id == "nap" and trl.turns == [] and trl.episode is None


def test_a_cut_episode_is_truncated_and_a_broken_call_is_a_parse_error() -> None:
    spec = trl_environment("tools", n_tasks=1)
    row = _row(spec)
    instance = spec.environment_factory()
    instance.reset(**row)
    broken = {"role": "assistant", "content": '<tool_call>{"name": "lookup", </tool_call>'}
    trl = episode_trajectory(instance, [broken])
    assert trl.turns[0].parse_error is not None
    assert trl.turns[0].metrics["parse_error"].score == -1.0
    assert trl.stop_reason is StopReason.TRUNCATED and trl.metadata["budget_hit"] is True
    assert trl.episode is not None and trl.episode.score == 0.0  # scored, as truncated

    instance.reset(**row)
    instance.lookup(name="France", attribute="population")
    # The budget ran out: TRL rolled the tool result back, the episode ends on the call.
    call = {"role": "assistant", "content": "",
            "tool_calls": [_call("lookup", name="France", attribute="population")]}  # fmt: skip
    trl = episode_trajectory(instance, [call])
    assert trl.turns[0].tool_calls[0].ok and trl.stop_reason is StopReason.TRUNCATED


def test_reset_needs_the_task_column() -> None:
    instance = trl_env_class(lambda: make_env("tools"), name="tools")()
    with pytest.raises(DataError, match=re.escape("a training row has no 'task' column")):
        instance.reset(prompt=[{"role": "user", "content": "hi"}])


# --------------------------------------------------------------------------------------------
# The spec and its rewards


def test_the_spec_has_trls_shape_and_the_envs_weights() -> None:
    spec = trl_environment("tools", n_tasks=3, seed=5)
    assert spec.train_dataset.num_rows == 3 and spec.train_dataset["seed"] == [5, 6, 7]
    assert [f.__name__ for f in spec.reward_funcs] == ["episode", "step_rewards", "answer",
                                                      "efficiency"]  # fmt: skip
    assert spec.reward_weights == [1.0, 1.0, 0.0, 0.0]
    assert spec.max_tool_calling_iterations == make_env("tools").max_turns - 1
    assert issubclass(spec.environment_factory, TRLToolEnv)


def test_a_runs_env_factory_is_played_as_its_setup_says() -> None:
    factory = EnvSetup(name="rk_agent/Tools-v0", max_turns=2).factory()
    spec = trl_environment(factory, n_tasks=2, seed=5)
    assert (spec.env_name, spec.max_tool_calling_iterations) == ("tools", 1)
    assert spec.train_dataset["seed"] == [5, 6]
    assert spec.reward_weights == [1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ConfigError, match=re.escape("EnvFactory('tools') holds its environment")):
        trl_environment(factory, env_kwargs={"max_turns": 3})


def test_the_prompt_is_the_opening_the_env_shows() -> None:
    task = Task(id="q", messages=[Message(role="user", content=QUESTION)], ground_truth=1.0)
    spec = trl_environment("tools", env_kwargs={"tasks": [task]})
    prompt = _row(spec)["prompt"]
    assert [m["role"] for m in prompt] == ["system", "user"]  # the env adds its system prompt


def test_rewards_log_episode_and_tool_metrics_through_trl() -> None:
    spec = trl_environment("tools", n_tasks=1)
    row = _row(spec)
    instances = [spec.environment_factory(), spec.environment_factory()]
    for instance in instances:
        instance.reset(**row)
    instances[0].lookup(name="France", attribute="population")
    completions = [
        [{"role": "assistant", "content": "",
          "tool_calls": [_call("lookup", name="France", attribute="population")]},
         {"role": "tool", "name": "lookup", "content": "x"},
         {"role": "assistant", "content": "Answer: 3"}],
        [{"role": "assistant", "content": "Answer: 3"}],
    ]  # fmt: skip
    metrics: dict[str, float] = {}
    extra: dict[str, list[Any]] = {}
    kwargs = {"environments": instances, "task_id": [row["task_id"]] * 2,
              "log_metric": metrics.__setitem__, "log_extra": extra.__setitem__}  # fmt: skip
    rewards = {f.__name__: f(prompts=[row["prompt"]] * 2, completions=completions, **kwargs)
               for f in spec.reward_funcs}  # fmt: skip
    assert rewards["step_rewards"] == [0.05, 0.0]
    assert rewards["answer"] == [0.0, 0.0] and rewards["episode"] == [0.0, 0.0]
    assert metrics["episodes/tool_calls_per_episode"] == 0.5
    assert metrics["episodes/tool_success_rate"] == 1.0
    assert metrics["episodes/step_reward_max"] == 0.05
    assert "[assistant, turn 1, reward 0.05]" in extra["trajectory"][0]


def test_the_rewards_need_trls_environments() -> None:
    spec = trl_environment("tools", n_tasks=1)
    with pytest.raises(DataError, match=re.escape("pass spec.environment_factory to")):
        spec.reward_funcs[0](prompts=[[]], completions=[[]])


def test_the_guess_env_needs_rk_agents_loop() -> None:
    with pytest.raises(ConfigError, match=re.escape(GUESS_MESSAGE)):
        trl_environment("guess")


def test_an_imported_env_is_refused_for_what_its_sessions_do() -> None:
    # ImportedEnv hands every reply to its session, but a reasoning-gym session never talks
    # back: the refusal names only what is so (it said "it talks back with user messages").
    with pytest.raises(ConfigError, match=re.escape(
        "environment 'reasoning-gym:chain_sum' cannot train with TRL's tool loop (--loop trl): "
        "it offers no tools. TRL only answers tool calls"
    )):  # fmt: skip
        trl_environment("reasoning-gym:chain_sum")


def test_the_env_is_checked_before_any_model_loads(tmp_path: Path) -> None:
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[])
    with pytest.raises(ConfigError, match=re.escape(GUESS_MESSAGE)):
        trl_grpo_trainer("guess", args=args, model=tmp_path / "no-such-model")
    assert not (tmp_path / "trajectories.jsonl").exists()


def test_a_template_without_tool_calls_is_a_config_error(tmp_path: Path, embedded_tok: Any) -> None:
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    embedded_tok.save_pretrained(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[])
    with pytest.raises(ConfigError, match="cannot render tool calls"):
        trl_grpo_trainer("tools", args=args, model=tmp_path / "tok", tokenizer=tok, n_tasks=2)


def test_docstring_examples() -> None:
    for module in (trl_env, trl_tool_methods):
        assert doctest.testmod(module, raise_on_error=True).failed == 0


# --------------------------------------------------------------------------------------------
# Real training


@pytest.mark.slow
def test_a_drop_in_trl_script_trains_with_tools_and_logs_the_components(
    tmp_path: Path, embedded_tok: Any
) -> None:
    from trl import GRPOConfig, GRPOTrainer

    task = Task(id="six-sevens", messages=[Message(role="user", content="What is 6 times 7?")],
                ground_truth=42, metadata={"min_tool_calls": 1})  # fmt: skip
    spec = trl_environment("tools", env_kwargs={"tasks": [task], "tool_names": ["calculator"]})
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6 * 7"}}\n</tool_call>'
    model = scripted_model(embedded_tok, [call, "Answer: 42"])
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=2, num_generations=2,
        per_device_train_batch_size=2, max_completion_length=96, learning_rate=1e-3,
        use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], logging_steps=1,
        save_strategy="no", reward_weights=spec.reward_weights,
        max_tool_calling_iterations=spec.max_tool_calling_iterations,
        generation_kwargs={"use_cache": False},  # the scripted forward reads the whole sequence
    )  # fmt: skip
    with pytest.warns(UserWarning, match="environment_factory"):
        trainer = GRPOTrainer(
            model=model, args=args, processing_class=embedded_tok,
            train_dataset=spec.train_dataset, environment_factory=spec.environment_factory,
            reward_funcs=spec.reward_funcs,
        )  # fmt: skip
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/episode/mean" in h]
    assert len(logs) == 2
    for log in logs:
        assert log["tools/call_frequency"] == 1.0  # TRL ran one call per episode, through us
        assert log["rewards/answer/mean"] == 1.0 and log["rewards/episode/mean"] == 1.0
        assert log["rewards/efficiency/mean"] == 1.0
        assert log["rewards/step_rewards/mean"] == pytest.approx(0.05)
        assert log["episodes/tool_calls_per_episode"] == 1.0
        assert log["episodes/tool_success_rate"] == 1.0
        assert log["episodes/step_reward_max"] == pytest.approx(0.05)
        assert log["episodes/success_rate"] == 1.0 and log["episodes/turns_mean"] == 2.0


@pytest.mark.slow
def test_trl_grpo_trainer_trains_the_tools_env(tmp_path: Path, tiny_model_dir: Path) -> None:
    from trl import GRPOConfig

    from rk_agent.trainers.hooked_trainer import HookedGRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=2, num_generations=2,
        per_device_train_batch_size=2, max_completion_length=16, use_cpu=True, bf16=False,
        gradient_checkpointing=False, report_to=[], logging_steps=1, save_strategy="no",
    )  # fmt: skip
    trainer = trl_grpo_trainer(
        "tools", args=args, model=tiny_model_dir, n_tasks=2, env_kwargs={"tool_names": ["lookup"]}
    )
    assert args.reward_weights == [1.0, 1.0, 0.0, 0.0] and args.max_tool_calling_iterations == 7
    assert isinstance(trainer, HookedGRPOTrainer)
    announced: list[Trajectory] = []  # what the trainer's hook hands on, before the rewards
    trainer.rk_batch_hooks.append(lambda batch: announced.extend(batch.trajectories or []))
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/episode/mean" in h]
    assert len(logs) == 2
    for key in ("rewards/step_rewards/mean", "rewards/answer/mean", "rewards/efficiency/mean",
                "tools/call_frequency", "episodes/tool_calls_per_episode"):  # fmt: skip
        assert key in logs[0], key
    lines = (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    episodes = [json.loads(line) for line in lines]
    assert len(episodes) == 4 and {e["metadata"]["loop"] for e in episodes} == {"trl"}
    assert [e["metadata"]["train_step"] for e in episodes] == [0, 0, 1, 1]
    # A step's batch is one task's group (num_generations 2, batch 2), named by the task's row.
    tasks = [e["task_index"] for e in episodes]
    assert tasks[0] == tasks[1] and tasks[2] == tasks[3] and set(tasks) <= {0, 1}
    assert len({e["id"] for e in episodes}) == 4
    # written from the trainer's hook, once per batch: the episodes the rewards scored
    assert [Trajectory.model_validate_json(line) for line in lines] == announced
    assert [line["episodes"] for line in read_watch(tmp_path / "out")] == [2, 2]


@pytest.mark.slow
def test_the_cli_trains_with_loop_trl(tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "rk_agent", "train", "grpo", "--env", "tools", "--loop", "trl",
         "--model", str(tiny_model_dir), "--output-dir", str(out), "--n-tasks", "2",
         "--no-wandb", "--max_steps", "1", "--num_generations", "2",
         "--per_device_train_batch_size", "2", "--max_completion_length", "12"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (out / "final" / "config.json").is_file()
    episodes = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(episodes) == 2 and json.loads(episodes[0])["metadata"]["loop"] == "trl"


@pytest.mark.slow
def test_the_cli_refuses_guess_with_loop_trl(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rk_agent", "train", "grpo", "--env", "guess", "--loop", "trl",
         "--output-dir", str(tmp_path / "run"), "--no-wandb", "--max_steps", "1"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "HOME": str(tmp_path / "home"), "COLUMNS": "300"},
    )  # fmt: skip
    assert result.returncode != 0
    assert GUESS_MESSAGE in " ".join(result.stderr.split())


def test_replies_are_checked_in_the_trainers_tool_call_format() -> None:
    spec = trl_environment("tools", n_tasks=1)
    instance = spec.environment_factory()
    instance.reset(**_row(spec))
    # Hermes (the default): a stray closing tag is a malformed call, as in rk-agent's own loop
    stray = {"role": "assistant", "content": 'lookup {"name": "France"}</tool_call>'}
    trl = episode_trajectory(instance, [stray])
    assert trl.turns[0].parse_error == "</tool_call> at char 25 closes no <tool_call>"
    assert instance.env.conversation[-1].text.startswith("Your tool call could not be read")

    # Another format (`tests/trainers/test_trl_tool_env.py` compares it with rk-agent's loop)
    spec = trl_environment("tools", n_tasks=1, tool_call_format="llama3_json")
    instance = spec.environment_factory()
    instance.reset(**_row(spec))
    broken = {"role": "assistant", "content": '{"name": "lookup", "parameters": {'}
    trl = episode_trajectory(instance, [broken])
    assert trl.turns[0].parse_error is not None
    assert trl.turns[0].parse_error.startswith("tool call 1: invalid JSON at char 34")
    feedback = instance.env.conversation[-1].text
    assert feedback.startswith("Your function call could not be read: tool call 1: invalid JSON")


def test_an_unknown_tool_call_format_is_refused_before_anything_loads() -> None:
    message = "unknown tool-call format 'llama'. Did you mean 'llama3_json'?"
    with pytest.raises(ConfigError, match=re.escape(message)):
        trl_environment("tools", n_tasks=1, tool_call_format="llama")


def test_an_env_whose_tools_differ_per_task_is_refused_by_trls_loop() -> None:
    from rk_agent.envs.offered_tools import ToolScope
    from tests.envs.varying_tools import ShopEnv

    class PerTask(ShopEnv):
        tool_scope = ToolScope.TASK

    message = (
        "environment 'PerTask' cannot train with TRL's tool loop (--loop trl): its tools differ "
        "per task (tool_scope 'task'), and TRL 1.16's environment_factory offers every rollout "
        "the same tools"
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        trl_environment(PerTask, n_tasks=2)
