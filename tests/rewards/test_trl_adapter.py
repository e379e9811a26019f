"""The TRL adapter: TRL's reward signature, per-row columns, None for invalid, a real TRL step."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rk_agent import EvaluateResult, Message, RewardFunction, reward_function
from rk_agent.errors import ConfigError, EndpointError, RewardInputError
from rk_agent.rewards.trl_adapter import to_trl_reward
from rk_agent.server import serving


@reward_function
def exact(messages: list[Message], ground_truth: str, **kwargs: Any) -> EvaluateResult:
    text = messages[-1].text
    if ground_truth == "explode":
        raise ValueError("cannot score")
    ok = text.strip() == ground_truth
    return EvaluateResult(score=float(ok), metrics={"match": float(ok), "length": len(text) / 10})


def test_plain_text_rows_with_columns_and_invalid_as_none() -> None:
    adapter = RewardFunction(exact).get_trl_adapter()
    assert adapter.__name__ == "exact"
    scores = adapter(
        prompts=["a?", "b?", "c?"],
        completions=["4", "5", "x"],
        ground_truth=["4", "4", "explode"],
        completion_ids=[[1], [2], [3]],
        trainer_state=object(),
    )
    assert scores == [1.0, 0.0, None]


def test_conversational_rows_keep_tool_calls() -> None:
    seen: list[list[Message]] = []

    @reward_function
    def count_calls(messages: list[Message], **kwargs: Any) -> float:
        seen.append(messages)
        return float(len(messages[-1].tool_calls or []))

    adapter = RewardFunction(count_calls).get_trl_adapter(name="calls")
    prompt = [{"role": "system", "content": "use tools"}, {"role": "user", "content": "weather?"}]
    call = {"id": "c", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    completion = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    assert adapter(prompts=[prompt], completions=[completion]) == [1.0]
    assert [m.role for m in seen[0]] == ["system", "user", "assistant"]
    assert adapter.__name__ == "calls"


def test_component_metric_and_logging() -> None:
    logged: dict[str, float] = {}
    adapter = RewardFunction(exact).get_trl_adapter(metric="length")
    scores = adapter(
        prompts=["q", "q", "q"],
        completions=["4", "long answer", "z"],
        ground_truth=["4", "4", "explode"],
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    assert scores == [0.1, 1.1, None]
    assert adapter.__name__ == "exact.length"
    assert logged["exact.length/invalid_fraction"] == pytest.approx(1 / 3)
    assert logged["exact.length/match"] == pytest.approx(0.5)


def test_async_reward_gives_an_async_adapter() -> None:
    @reward_function
    async def judged(response: str) -> float:
        await asyncio.sleep(0)
        return 0.25

    adapter = RewardFunction(judged).get_trl_adapter()
    assert inspect.iscoroutinefunction(adapter)
    assert asyncio.run(adapter(prompts=["q", "q"], completions=["a", "b"])) == [0.25, 0.25]


def test_mismatched_lengths() -> None:
    adapter = RewardFunction(exact).get_trl_adapter()
    with pytest.raises(RewardInputError, match="got 2 prompts but 1 completions"):
        adapter(prompts=["a", "b"], completions=["x"])


def _tiny_model_dir(path: Path) -> Path:
    """A random 2-layer Llama and a word-level tokenizer, saved like a real checkpoint."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>", *(str(i) for i in range(20)), "what", "is", "plus", "?"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    config = LlamaConfig(
        vocab_size=len(words), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.mark.slow
def test_a_real_grpo_step_uses_the_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's GRPOTrainer calls the adapter with its own kwargs and logs it by name."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("WANDB_MODE", "disabled")
    calls: list[dict[str, Any]] = []

    @reward_function
    def answer_is_seven(response: str, ground_truth: str, **kwargs: Any) -> EvaluateResult:
        calls.append({"response": response, "ground_truth": ground_truth})
        return EvaluateResult(
            score=float("7" in response), metrics={"nonempty": float(bool(response))}
        )

    steps: list[int] = []

    @reward_function
    def curriculum_reward(response: str, step: int, **kwargs: Any) -> float:
        """The guides' curriculum example: what counts depends on training progress."""
        steps.append(step)
        return 1.0 if step == 0 else float("7" in response)

    model_dir = _tiny_model_dir(tmp_path / "model")
    data = Dataset.from_dict({"prompt": ["what is 3 plus 4 ?"] * 4, "ground_truth": ["7"] * 4})
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
        max_completion_length=4, max_steps=2, logging_steps=1, report_to=[], use_cpu=True,
        bf16=False, activation_checkpointing=False, save_strategy="no", seed=0,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[
            RewardFunction(answer_is_seven).get_trl_adapter(),
            RewardFunction(curriculum_reward).get_trl_adapter(),
        ],
        args=args,
        train_dataset=data,
    )
    trainer.train()
    assert len(calls) == 8
    assert steps == [0] * 4 + [1] * 4  # the training step, as the guides' curriculum reward asks
    assert {c["ground_truth"] for c in calls} == {"7"}
    logged = trainer.state.log_history[0]
    assert "rewards/answer_is_seven/mean" in logged
    assert logged["answer_is_seven/nonempty"] >= 0.0


def test_rewards_get_the_training_step_and_local_ones_the_trainer_state() -> None:
    seen: list[tuple[int, Any]] = []

    @reward_function
    def curriculum_reward(response: str, step: int, **kwargs: Any) -> float:
        seen.append((step, kwargs.get("trainer_state")))
        return min(1.0, step / 10)

    @reward_function
    def plain(response: str) -> float:  # names neither: gets neither, and still works
        return 1.0

    state = SimpleNamespace(global_step=7)
    adapter = RewardFunction(curriculum_reward).get_trl_adapter()
    assert adapter(prompts=["q"], completions=["a"], trainer_state=state) == [0.7]
    assert seen == [(7, state)]
    assert to_trl_reward(plain)(prompts=["q"], completions=["a"], trainer_state=state) == [1.0]
    with serving(curriculum_reward) as url:
        remote = RewardFunction(mode="remote", endpoint=f"{url}/evaluate").get_trl_adapter()
        assert remote(prompts=["q"], completions=["a"], trainer_state=state) == [0.7]
    assert seen[-1] == (7, None)  # a remote reward gets the step, not the (unsendable) state


class _FlakyEndpoint(BaseHTTPRequestHandler):
    """A reward endpoint that is down (503) for replies containing 'unlucky'."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        down = "unlucky" in json.dumps(body["messages"])
        payload = b'{"detail": "overloaded"}' if down else b'{"score": 1.0}'
        self.send_response(503 if down else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def flaky_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/evaluate"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_reward_that_fails_after_retries_gives_none_for_those_rows(
    flaky_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = RewardFunction(mode="remote", endpoint=flaky_url).get_trl_adapter()
    completions = ["fine", "unlucky", "fine", "fine"]
    with caplog.at_level(logging.WARNING, logger="rk_agent.rewards"):
        scores = adapter(prompts=["q"] * 4, completions=completions)
    assert scores == [1.0, None, 1.0, 1.0]
    assert "TRL reward 'remote_reward': 1 of 4 samples could not be scored" in caplog.text


def test_a_remote_reward_that_is_mostly_down_stops_the_step(flaky_url: str) -> None:
    adapter = RewardFunction(mode="remote", endpoint=flaky_url).get_trl_adapter(
        max_failed_fraction=0.25
    )
    message = (
        "2 of 4 samples of this batch could not be scored, more than max_failed_fraction=0.25; "
        "last error: "
    )
    with pytest.raises(EndpointError, match=re.escape(message)) as caught:
        adapter(prompts=["q"] * 4, completions=["fine", "unlucky", "unlucky", "fine"])
    assert "Is the reward endpoint up?" in str(caught.value)
    with pytest.raises(ConfigError, match="max_failed_fraction must be between 0 and 1"):
        RewardFunction(mode="remote", endpoint=flaky_url).get_trl_adapter(max_failed_fraction=2)
