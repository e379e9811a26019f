"""The token drift GRPO logs per step, in both loops: real tokenizer, real TRL, tiny Llama.

The planted drift is a chat template that renders a tool result otherwise when it is not the
conversation's last message (``<tool_result>`` instead of ``<tool_response>``). Both loops
append a tool result to the ids as a template suffix rendered after it, where it *is* last; a
trainer that re-renders the whole conversation gets the other tag, in the prompt of every turn
after a tool call.
"""

from __future__ import annotations

import copy
import doctest
import json
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.task import Task
from rk_agent.envs.tools_env import system_prompt
from rk_agent.runs.run_dir import read_trajectories
from rk_agent.runs.token_drift import check_tokens
from rk_agent.runs.watch_log import read_watch
from rk_agent.testing.stub_server import StubServer
from rk_agent.trainers import drift_rate
from rk_agent.trainers.drift_rate import DriftMeter
from rk_agent.trainers.grpo import grpo_trainer
from rk_agent.trainers.trl_env import trl_grpo_trainer
from rk_agent.types import Message
from tests.runs.test_token_drift import COMPACT, play, play_bare_task
from tests.trainers.scripted import scripted_model
from tests.trainers.test_grpo import _args

KEYS = ("tokens/drift_episodes", "tokens/drift_turns")
# With its system prompt, as the env's own tasks have it: TRL's loop prompts with the task's
# messages as they are, without the one the env's reset adds to a task that has none.
TASK = Task(
    id="six-sevens",
    messages=[
        Message(role="system", content=system_prompt(["calculator"])),
        Message(role="user", content="What is 6 times 7?"),
    ],
    ground_truth=42,
    metadata={"min_tool_calls": 1},
)
ENV_KWARGS = {"tasks": [TASK], "tool_names": ["calculator"]}
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6 * 7"}}\n</tool_call>'


def planted(tok: Any) -> Any:
    """``tok`` with a template that renders a tool result otherwise unless it comes last."""
    from trl.chat_template_utils import add_response_schema

    changed = copy.deepcopy(tok)
    add_response_schema(changed)  # TRL reads replies by the template it knows: keep its parser
    source = str(changed.chat_template)
    tag = "{{- '\\n<tool_response>\\n' }}"
    assert source.count(tag) == 1
    changed.chat_template = source.replace(
        tag, "{{- '\\n<tool_response>\\n' if loop.last else '\\n<tool_result>\\n' }}"
    )
    return changed


def _figures(out: Path, trainer: Any) -> list[tuple[float, float]]:
    """Each step's drift figures, from ``watch.jsonl``, checked equal to the log's."""
    lines = [(line[KEYS[0]], line[KEYS[1]]) for line in read_watch(out)]
    steps = [h for h in trainer.state.log_history if "loss" in h]  # not the closing summary
    logged = [(h[KEYS[0]], h[KEYS[1]]) for h in steps]
    assert logged == lines
    return lines


def _solved_figures(out: Path, trainer: Any, episodes: int) -> list[tuple[float, float]]:
    """`_figures`, once every episode is checked to be the scripted two turns, solved."""
    played = read_trajectories(out / "trajectories.jsonl")
    assert [len(e.turns) for e in played] == [2] * episodes and all(e.success for e in played)
    return _figures(out, trainer)


def test_docstring_examples() -> None:
    assert doctest.testmod(drift_rate, raise_on_error=True).failed == 0


def test_the_meter_counts_what_check_tokens_finds(
    tmp_path: Path, embedded_tok: Any, tok_dir: Path
) -> None:
    from rk_agent.envs.registry import make_env

    tools = make_env("tools").tool_schemas
    meter = DriftMeter(embedded_tok, tools)
    clean = meter.measure(read_trajectories(play(tmp_path / "clean", embedded_tok, tok_dir)))
    assert (clean.episodes, clean.turns, clean.figures()) == (
        3, 9, {KEYS[0]: 0.0, KEYS[1]: 0.0}
    )  # fmt: skip
    run = play(tmp_path / "compact", embedded_tok, tok_dir, COMPACT)
    drifted = meter.measure(read_trajectories(run))
    report = check_tokens(run)
    assert (drifted.episodes_drifted, drifted.turns_drifted) == (3, 6)
    assert drifted.figures() == {
        KEYS[0]: report.episodes_affected / report.episodes_checked,
        KEYS[1]: report.drift_rate,
    }


def test_the_meter_renders_the_system_prompt_the_environment_added(
    tmp_path: Path, embedded_tok: Any
) -> None:
    from rk_agent.envs.registry import make_env

    run, _ = play_bare_task(tmp_path, embedded_tok)
    meter = DriftMeter(embedded_tok, make_env("tools").tool_schemas)
    count = meter.measure(read_trajectories(run))
    assert (count.episodes, count.turns, count.figures()) == (2, 4, {KEYS[0]: 0.0, KEYS[1]: 0.0})


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory, embedded_tok: Any) -> Path:
    folder = tmp_path_factory.mktemp("embedded-tokenizer")
    embedded_tok.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_the_rk_loop_logs_the_drift_check_tokens_finds_in_its_episodes(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    # The random model writes random tokens: some re-tokenize otherwise, some do not.
    trainer = grpo_trainer(
        "guess", model=tiny_model_dir, args=_args(tmp_path, max_completion_length=32), n_tasks=4,
        env_kwargs={"max_turns": 3}, max_tokens_per_turn=8,
    )  # fmt: skip
    trainer.train()
    out = tmp_path / "out"
    figures = _figures(out, trainer)
    assert len(figures) == 2
    episodes = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    for step, (drift_episodes, drift_turns) in enumerate(figures):
        part = tmp_path / f"step-{step}.jsonl"
        rows = [e for e in episodes if e["metadata"]["train_step"] == step]
        part.write_text("".join(json.dumps(e) + "\n" for e in rows))
        report = check_tokens(part, tiny_model_dir)
        assert drift_turns == report.drift_rate
        assert drift_episodes == report.episodes_affected / report.episodes_checked


def _served_run(tmp_path: Path, tiny_model_dir: Path, tokenizer: Any) -> list[tuple[float, float]]:
    from transformers import AutoTokenizer

    embedded = AutoTokenizer.from_pretrained(tiny_model_dir)
    calls = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}
    with StubServer([calls, "Answer: 42"], tokenizer=embedded) as server:
        trainer = grpo_trainer(
            "tools", model=tiny_model_dir, tokenizer=tokenizer, env_kwargs=ENV_KWARGS,
            args=_args(tmp_path, max_completion_length=200), server_url=server.url,
        )  # fmt: skip
        trainer.train()
    return _solved_figures(tmp_path / "out", trainer, 8)


@pytest.mark.slow
def test_the_rk_loop_logs_no_drift_on_canonical_ids_and_finds_a_planted_one(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    assert _served_run(tmp_path / "clean", tiny_model_dir, embedded_tok) == [(0.0, 0.0)] * 2
    # Every episode's second turn follows the tool result the planted template re-renders.
    drifted = _served_run(tmp_path / "planted", tiny_model_dir, planted(embedded_tok))
    assert drifted == [(1.0, 0.5)] * 2


def _trl_run(tmp_path: Path, tokenizer: Any) -> list[tuple[float, float]]:
    from trl import GRPOConfig

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=2, num_generations=2,
        per_device_train_batch_size=2, max_completion_length=96, learning_rate=1e-3,
        use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], logging_steps=1,
        save_strategy="no", generation_kwargs={"use_cache": False},
    )  # fmt: skip
    model = scripted_model(tokenizer, [CALL, "Answer: 42"])
    trainer = trl_grpo_trainer(
        "tools", args=args, model=model, tokenizer=tokenizer, env_kwargs=ENV_KWARGS
    )
    trainer.train()
    return _solved_figures(tmp_path / "out", trainer, 4)


@pytest.mark.slow
def test_trls_loop_logs_no_drift_on_canonical_ids_and_finds_a_planted_one(
    tmp_path: Path, embedded_tok: Any
) -> None:
    from trl.chat_template_utils import add_response_schema

    clean = add_response_schema(copy.deepcopy(embedded_tok))
    assert _trl_run(tmp_path / "clean", clean) == [(0.0, 0.0)] * 2
    assert _trl_run(tmp_path / "planted", planted(embedded_tok)) == [(1.0, 0.5)] * 2
