"""`EpisodeRollout` with a served policy: real TRL (tiny random Llama, CPU), real HTTP to the
loopback stub server speaking vLLM's token-id completions contract."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError, EndpointError
from rk_agent.testing.stub_server import Fault, StubRequest, StubServer
from rk_agent.trainers.grpo import grpo_trainer
from rk_agent.trainers.rollout import vllm_server_url
from rk_agent.types import FailureKind, StopReason
from tests.policies.test_episode_tokens import _runs
from tests.trainers.test_grpo import _args, _trajectories

CALL = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]}
ANSWER = "Answer: 4"


def _answered(server: StubServer) -> dict[tuple[int, ...], dict[str, Any]]:
    """Each prompt the server answered (faults left out), with the choice it answered."""
    requests: list[StubRequest] = server.completion_requests
    return {tuple(r.body["prompt"]): r.response["choices"][0] for r in requests if r.response}


def _served_trainer(tmp_path: Path, model: Path, url: str, **options: Any) -> Any:
    return grpo_trainer(
        "tools",
        model=model,
        args=_args(tmp_path, max_completion_length=96),
        n_tasks=2,
        server_url=url,
        server_options=options or None,
    )


@pytest.mark.slow
def test_grpo_trains_on_exactly_the_tokens_sent_to_and_returned_by_the_server(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    with StubServer([CALL, ANSWER], tokenizer=embedded_tok) as server:
        trainer = _served_trainer(tmp_path, tiny_model_dir, server.url)
        rollout, seen = trainer.rollout_func, []

        def spy(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            seen.append(rollout(prompts, trainer))
            return seen[-1]

        trainer.rollout_func = spy
        trainer.train()
        answered = _answered(server)
    assert len(seen) == 2 and len(server.completion_requests) == 2 * 4 * 2  # steps, rows, turns

    for out in seen:
        rows = zip(
            out["prompt_ids"], out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
        )
        for prompt, completion, mask, logprobs in rows:
            runs = _runs(mask)
            assert [value for value, _, _ in runs] == [1, 0, 1]
            for value, start, end in runs:
                if value == 0:  # the environment's turn: the tool result in the chat template
                    text = embedded_tok.decode(completion[start:end])
                    assert "<tool_response>\n4\n</tool_response>" in text
                    assert all(lp == 0.0 for lp in logprobs[start:end])
                    continue
                # Each turn's prompt is exactly the tokens so far: nothing re-tokenized...
                choice = answered[tuple(prompt + completion[:start])]
                # ...and the reply is exactly what the server returned, with its logprobs.
                assert completion[start:end] == choice["token_ids"]
                assert logprobs[start:end] == choice["logprobs"]["token_logprobs"]
            assert completion[runs[0][2] - 1] == embedded_tok.eos_token_id

    logs = [h for h in trainer.state.log_history if "rewards/episode/mean" in h]
    assert len(logs) == 2
    episodes = _trajectories(tmp_path / "out")
    assert len(episodes) == 8 and {e["metadata"]["train_step"] for e in episodes} == {0, 1}
    for episode in episodes:
        assert episode["model"] == "stub-model"
        assert episode["stop_reason"] == StopReason.ANSWERED and episode.get("failure") is None
        first, last = episode["turns"]
        assert first["tool_calls"][0]["name"] == "calculator" and first["tool_calls"][0]["ok"]
        assert last["assistant"]["content"] == ANSWER
        so_far = first["prompt_token_ids"] + first["token_ids"]
        assert last["prompt_token_ids"][: len(so_far)] == so_far
    # TRL counted only the model's tokens: its length metric is the server's replies.
    model_tokens = [sum(len(t["token_ids"]) for t in e["turns"]) for e in episodes[:4]]
    assert logs[0]["completions/mean_length"] == pytest.approx(sum(model_tokens) / 4)


@pytest.mark.slow
def test_a_server_error_mid_episode_is_recorded_as_a_failure(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    replies = [CALL, Fault.http(500, "the GPU fell over")]
    with StubServer(replies, tokenizer=embedded_tok) as server:
        trainer = _served_trainer(tmp_path, tiny_model_dir, server.url, max_retries=0)
        prompts = [trainer.train_dataset[0]["prompt"]] * 2
        out = trainer.rollout_func(prompts, trainer)
        answered = _answered(server)
    assert len(server.completion_requests) == 4  # two turns each, the second failed
    for trajectory, prompt, completion, mask in zip(
        out["trajectory"], out["prompt_ids"], out["completion_ids"], out["env_mask"], strict=True
    ):
        assert trajectory.stop_reason is StopReason.ERROR
        failure = trajectory.failure
        assert failure is not None and failure.kind is FailureKind.MODEL_ERROR
        assert failure.where == "policy" and failure.retryable
        assert "HTTP 500: the GPU fell over" in failure.message
        assert len(trajectory.turns) == 1
        reply = answered[tuple(prompt)]["token_ids"]
        assert completion[: len(reply)] == reply and set(mask[: len(reply)]) == {1}
        assert set(mask[len(reply) :]) == {0}  # the tool result the failed turn was to read


@pytest.mark.slow
def test_a_server_that_is_down_at_the_start_is_an_error_naming_its_url(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    server = StubServer().start()
    url = server.url
    server.stop()
    trainer = _served_trainer(tmp_path, tiny_model_dir, url)
    with pytest.raises(EndpointError, match=re.escape(f"no model server answers at {url}/v1")):
        trainer.rollout_func([trainer.train_dataset[0]["prompt"]], trainer)


@pytest.mark.slow
def test_trls_vllm_server_mode_is_used_without_being_asked(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    trainer = grpo_trainer(
        "tools", model=tiny_model_dir, args=_args(tmp_path, max_completion_length=96), n_tasks=2
    )
    prompts = [trainer.train_dataset[0]["prompt"]]
    with StubServer([CALL, ANSWER], tokenizer=embedded_tok) as server:
        # What TRL's config says in server mode (vLLM itself does not install here, so the
        # trainer was built without it and the settings are switched on afterwards).
        trainer.args.use_vllm, trainer.args.vllm_mode = True, "server"
        trainer.args.vllm_server_base_url = server.url
        by_url = trainer.rollout_func(prompts, trainer)
        trainer.args.vllm_server_base_url = None
        trainer.args.vllm_server_host, trainer.args.vllm_server_port = server.host, server.port
        by_host = trainer.rollout_func(prompts, trainer)
        requests = server.completion_requests
    assert len(requests) == 4
    assert by_url["completion_ids"] == by_host["completion_ids"]
    assert by_url["trajectory"][0].stop_reason is StopReason.ANSWERED
    body = requests[0].body
    # TRL's own vLLM sampling options go along (min_p is unset, so not sent).
    assert body["top_k"] == 0 and body["repetition_penalty"] == 1.0 and "min_p" not in body
    assert body["temperature"] == 1.0 and body["max_tokens"] == 96


def test_colocated_vllm_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    args = _args(tmp_path, use_vllm=True, vllm_mode="colocate")
    with pytest.raises(ConfigError, match=re.escape("vllm_mode is 'colocate'")) as caught:
        grpo_trainer("tools", model=tmp_path / "no-model-here", args=args)
    assert "--loop trl" in str(caught.value) and "--vllm_mode server" in str(caught.value)


def test_vllm_server_url_follows_trls_settings(tmp_path: Path) -> None:
    assert vllm_server_url(_args(tmp_path)) is None
    server = _args(tmp_path, use_vllm=True, vllm_mode="server")
    assert vllm_server_url(server) == "http://0.0.0.0:8000"
    server.vllm_server_base_url = "http://gpu-0:8001"
    assert vllm_server_url(server) == "http://gpu-0:8001"
