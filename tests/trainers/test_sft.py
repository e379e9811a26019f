"""SFT with TRL on real trajectories: the assistant-only mask token by token, a real run."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.registry import get_solver, make_env
from rk_agent.errors import ConfigError
from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig
from rk_agent.trainers.sft import build_sft_trainer, training_chat_template
from rk_agent.trainers.sft_data import sft_dataset

_PLAIN_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
)


def _trl_template(name: str) -> str:
    return (resources.files("trl") / "chat_templates" / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def solved() -> Any:
    """Two episodes of the tools environment played by its reference solver, as SFT rows."""
    config = RolloutConfig(env="tools", n=2, seed=0)
    result = asyncio.run(
        run_rollouts(
            config,
            policy=FunctionPolicy(get_solver("tools")),
            make_env=lambda: make_env("tools"),
            env_name="tools",
        )
    )
    return sft_dataset(result.trajectories)


def _args(tmp_path: Path, **overrides: Any) -> Any:
    from trl import SFTConfig

    values: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "per_device_train_batch_size": 1,
        "max_steps": 2,
        "learning_rate": 1e-3,
        "max_length": None,
        "use_cpu": True,
        "bf16": False,
        "activation_checkpointing": False,
        "report_to": [],
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": 0,
    }
    values.update(overrides)
    return SFTConfig(**values)


def _runs(tokenizer: Any, ids: list[int], labels: list[int]) -> tuple[list[str], list[str]]:
    """The decoded runs of consecutive trained (label set) and untrained (-100) tokens."""
    trained: list[str] = []
    untrained: list[str] = []
    start = 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or (labels[end] == -100) != (labels[start] == -100):
            text = tokenizer.decode(ids[start:end])
            (untrained if labels[start] == -100 else trained).append(text)
            start = end
    return trained, untrained


def _assistant_text(message: dict[str, Any]) -> str:
    """What the assistant wrote, as the Qwen2.5 template renders it, with its end of turn.

    The template's generation block starts after ``<|im_start|>assistant`` and ends after the
    newline that follows ``<|im_end|>``.
    """
    text = "\n" + message["content"] if message["content"] else ""
    for call in message.get("tool_calls") or []:
        function = call["function"]
        arguments = json.dumps(function["arguments"], ensure_ascii=False)
        text += f'\n<tool_call>\n{{"name": "{function["name"]}", "arguments": {arguments}}}'
        text += "\n</tool_call>"
    return text + "<|im_end|>\n"


def test_the_loss_covers_exactly_the_assistants_tokens(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any, solved: Any
) -> None:
    one = solved.select([0])
    trainer = build_sft_trainer(tiny_model_dir, embedded_tok, one, _args(tmp_path))
    assert trainer.chat_template == _trl_template("qwen2_5_training.jinja")
    row = trainer.train_dataset[0]
    ids, labels = row["input_ids"], row["labels"]
    assert all(label in (-100, token) for token, label in zip(ids, labels, strict=True))

    messages, tools = one[0]["messages"], one[0]["tools"]
    assert [m["role"] for m in messages].count("tool") >= 1
    full = embedded_tok.apply_chat_template(messages, tools=tools, tokenize=False)
    assert embedded_tok.decode(ids) == full  # the training template renders the same text
    expected = [_assistant_text(m) for m in messages if m["role"] == "assistant"]
    trained, untrained = _runs(embedded_tok, ids, labels)
    assert trained == expected, trained

    # Everything else is not trained on: the system prompt with the tools, the question, the
    # tool results, and the `<|im_start|>assistant` header before each reply.
    rest, pieces = full, []
    for text in expected:
        before, _, rest = rest.partition(text)
        pieces.append(before)
    assert rest == ""
    assert untrained == pieces
    assert pieces[0].startswith("<|im_start|>system\n") and "<tools>" in pieces[0]
    assert all(p.endswith("<|im_start|>assistant") for p in pieces)
    assert all("<tool_response>" in p for p in pieces[1:])


def test_the_turns_a_fork_copied_are_left_out_of_the_loss(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    """Issue 40 item 8: another policy's replies, copied by `rollout --fork`, are context."""
    from tests.trainers.test_sft_data import forked_run

    data = sft_dataset(forked_run(tmp_path)).select([0])
    trainer = build_sft_trainer(tiny_model_dir, embedded_tok, data, _args(tmp_path))
    row = trainer.train_dataset[0]
    messages, context = data[0]["messages"], data[0]["context_messages"]
    assert [m["role"] for m in messages][context - 1] == "assistant"  # the copied reply
    trained, _ = _runs(embedded_tok, row["input_ids"], row["labels"])
    own = [_assistant_text(m) for m in messages[context:] if m["role"] == "assistant"]
    assert trained == own and own  # the fork's own replies, and not the copied one
    copied = _assistant_text(messages[context - 1])
    assert copied not in "".join(trained)


@pytest.mark.slow
def test_two_real_sft_steps_write_a_checkpoint(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any, solved: Any
) -> None:
    from transformers import AutoTokenizer

    args = _args(tmp_path, save_strategy="steps", save_steps=2)
    trainer = build_sft_trainer(str(tiny_model_dir), None, solved, args)  # tokenizer: its folder
    result = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert math.isfinite(result.training_loss)
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert (checkpoint / "model.safetensors").is_file()
    # The checkpoint keeps the tokenizer's own template, which generation and TRL's tool-call
    # parsing recognise; the training variant was only used to tokenize.
    saved = AutoTokenizer.from_pretrained(checkpoint)
    assert saved.chat_template == embedded_tok.chat_template == _trl_template("qwen2_5.jinja")


def test_the_callers_settings_are_left_alone(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any, solved: Any
) -> None:
    args = _args(tmp_path)
    trainer = build_sft_trainer(tiny_model_dir, embedded_tok, solved, args)
    assert trainer.args.assistant_only_loss is True
    assert args.assistant_only_loss is False


def test_training_chat_template(embedded_tok: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert training_chat_template(embedded_tok) == _trl_template("qwen2_5_training.jinja")
    monkeypatch.setattr(embedded_tok, "chat_template", _trl_template("qwen2_5_training.jinja"))
    assert training_chat_template(embedded_tok) is None  # it has the markers already
    monkeypatch.setattr(embedded_tok, "chat_template", None)
    with pytest.raises(ConfigError, match=re.escape("the tokenizer has no chat template, so")):
        training_chat_template(embedded_tok)


def test_a_template_without_markers_needs_them_or_the_full_loss(
    tmp_path: Path,
    tiny_model_dir: Path,
    embedded_tok: Any,
    solved: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedded_tok, "chat_template", _PLAIN_CHATML)
    with pytest.raises(ConfigError) as error:
        build_sft_trainer(tiny_model_dir, embedded_tok, solved, _args(tmp_path))
    assert str(error.value) == (
        "assistant-only loss needs a chat template that marks the assistant's output with "
        "{% generation %} ... {% endgeneration %}; this tokenizer's template has no markers and "
        "TRL has no training variant of it. Add the markers around the assistant's content, "
        "tool calls and end-of-turn token; or use a template TRL knows (its "
        "trl/chat_templates/, e.g. qwen2_5.jinja for a ChatML model); or pass "
        "assistant_only_loss=False to train on every token."
    )
    trainer = build_sft_trainer(
        tiny_model_dir, embedded_tok, solved, _args(tmp_path), assistant_only_loss=False
    )
    row = trainer.train_dataset[0]
    assert row["labels"] == row["input_ids"]


def test_a_dataset_without_conversations(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    from datasets import Dataset

    text = Dataset.from_dict({"text": ["hello"]})
    with pytest.raises(ConfigError) as error:
        build_sft_trainer(tiny_model_dir, embedded_tok, text, _args(tmp_path))
    assert str(error.value) == (
        "assistant-only loss needs conversations: expected a dataset with a `messages` column "
        "(as sft_dataset() makes), got columns ['text']. Pass assistant_only_loss=False to "
        "train on plain text."
    )


def test_an_in_memory_model_needs_its_tokenizer(tmp_path: Path, solved: Any) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=re.escape("give the tokenizer: the model was built")):
        build_sft_trainer(LlamaForCausalLM(config), None, solved, _args(tmp_path))


def test_conversations_longer_than_max_length_are_reported(
    tmp_path: Path,
    tiny_model_dir: Path,
    embedded_tok: Any,
    solved: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lengths = [
        len(embedded_tok.apply_chat_template(r["messages"], tools=r["tools"], tokenize=True,
                                             return_dict=True)["input_ids"])
        for r in solved
    ]  # fmt: skip
    limit = min(lengths) - 5  # cuts the end of every conversation, keeps assistant tokens
    with caplog.at_level(logging.WARNING, logger="rk_agent.trainers"):
        trainer = build_sft_trainer(
            tiny_model_dir, embedded_tok, solved, _args(tmp_path, max_length=limit)
        )
    assert caplog.messages == [
        f"2 of 2 SFT conversations are longer than max_length={limit} tokens (the longest has "
        f"{max(lengths)}); TRL cuts them from the end, so their last assistant turns are not "
        "trained on. Raise max_length in the SFT settings, or set it to None."
    ]
    assert all(len(r["input_ids"]) == limit for r in trainer.train_dataset)


def test_fit_max_length_keeps_every_conversation_whole(
    tmp_path: Path,
    tiny_model_dir: Path,
    embedded_tok: Any,
    solved: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    short = _args(tmp_path, max_length=16)  # would cut everything, but is replaced
    with caplog.at_level(logging.WARNING, logger="rk_agent.trainers"):
        trainer = build_sft_trainer(
            tiny_model_dir, embedded_tok, solved, short, fit_max_length=True
        )
    kept = [len(r["input_ids"]) for r in trainer.train_dataset]
    assert trainer.args.max_length == max(kept) > 16
    assert short.max_length == 16  # the caller's settings are left as they were
    assert caplog.messages == []


def _solver_rows(env_name: str, n: int) -> Any:
    config = RolloutConfig(env=env_name, n=n, seed=0)
    result = asyncio.run(
        run_rollouts(
            config,
            policy=FunctionPolicy(get_solver(env_name)),
            make_env=lambda: make_env(env_name),
            env_name=env_name,
        )
    )
    return result.trajectories, sft_dataset(result.trajectories)


@pytest.mark.parametrize("env_name", ["tools", "mcp_tools"])
def test_sft_trains_on_exactly_the_tokens_the_policy_is_sent(
    tmp_path: Path, tiny_model_dir: Path, env_name: str
) -> None:
    """Each turn's prompt, as the policy renders it with the saved checkpoint's template, is a
    prefix of the tokens SFT trains on for that episode; what is trained on is exactly each
    reply: from the newline that ends the prompt (``<|im_start|>assistant`` + newline) through
    the reply's ``<|im_end|>`` and the newline after it."""
    from transformers import AutoTokenizer

    from rk_agent.policies.hf_policy import HFPolicy

    trajectories, data = _solver_rows(env_name, 3)
    saved = AutoTokenizer.from_pretrained(tiny_model_dir)  # the template as the checkpoint has it
    trainer = build_sft_trainer(tiny_model_dir, saved, data, _args(tmp_path))
    policy = HFPolicy(tiny_model_dir, device="cpu")
    try:
        end = saved.convert_tokens_to_ids("<|im_end|>")
        assert policy.native_tools  # the template renders tools: the rows carry them
        tools = make_env(env_name).tool_schemas
        by_id = {t.id: t for t in trajectories}
        for row, trajectory_id in zip(trainer.train_dataset, data["trajectory_id"], strict=True):
            ids, labels = row["input_ids"], row["labels"]
            conversation = by_id[trajectory_id].conversation
            expected: set[int] = set()
            for k, message in enumerate(conversation):
                if message.role != "assistant":
                    continue
                prompt = policy.encode(conversation[:k], tools)
                assert ids[: len(prompt)] == prompt, (env_name, k)
                reply_end = ids.index(end, len(prompt)) + 1
                expected.update(range(len(prompt) - 1, reply_end + 1))
            trained = {i for i, label in enumerate(labels) if label != -100}
            assert expected and trained == expected
    finally:
        policy.close()


@pytest.mark.slow
def test_the_same_episodes_in_any_order_train_the_same_model(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    """A run's file holds its episodes as they finished (threads, load); SFT must not depend on
    that: the rows come in task order, so a seeded run trains the same weights."""
    import torch
    from safetensors.torch import load_file

    trajectories, _ = _solver_rows("tools", 6)
    orders = [sorted(trajectories, key=lambda t: t.task_index), trajectories[::-1]]
    orders.append([orders[0][i] for i in (3, 0, 5, 1, 4, 2)])
    weights = []
    for index, episodes in enumerate(orders):
        data = sft_dataset(episodes)
        assert data["trajectory_id"] == [t.id for t in orders[0]]
        args = _args(tmp_path / str(index), max_steps=3, per_device_train_batch_size=2)
        trainer = build_sft_trainer(tiny_model_dir, embedded_tok, data, args)
        trainer.train()
        trainer.save_model(str(tmp_path / str(index) / "final"))
        weights.append(load_file(str(tmp_path / str(index) / "final" / "model.safetensors")))
    for other in weights[1:]:
        assert other.keys() == weights[0].keys()
        assert all(torch.equal(other[k], weights[0][k]) for k in weights[0])
