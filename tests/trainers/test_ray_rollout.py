"""`EpisodeRollout(workers=2)`: GRPO's episodes played on Ray workers against a served policy;
real TRL (tiny random Llama, CPU), real Ray on this machine, real HTTP to the loopback stub
server speaking vLLM's token-id completions contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray is in the dev group: `uv sync` installs it")

from rk_agent.testing.stub_server import StubServer
from rk_agent.types import StopReason
from tests.policies.test_episode_tokens import _runs
from tests.trainers.test_grpo import _trajectories
from tests.trainers.test_rollout import ANSWER, CALL, _answered, _served_trainer


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_grpo_steps_play_on_ray_workers_with_the_servers_exact_tokens(
    tmp_path: Path, tiny_model_dir: Path, embedded_tok: Any
) -> None:
    with StubServer([CALL, ANSWER], tokenizer=embedded_tok) as server:
        trainer = _served_trainer(tmp_path, tiny_model_dir, server.url)
        rollout, seen = trainer.rollout_func, []
        rollout.workers = 2

        def spy(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            seen.append(rollout(prompts, trainer))
            return seen[-1]

        trainer.rollout_func = spy
        try:
            trainer.train()
            pool = rollout._ray_episodes._pool
            assert pool is not None and len(pool.live) == 2, "both workers lived through both steps"
            assert rollout._ray_episodes.failures == []
        finally:
            rollout.close()
        answered = _answered(server)
    assert rollout._envs == [], "no episode was played in the trainer's process"
    assert len(seen) == 2 and len(server.completion_requests) == 2 * 4 * 2  # steps, rows, turns
    for out in seen:
        rows = zip(
            out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"], strict=True
        )
        for prompt, completion, logprobs, mask in rows:
            runs = _runs(mask)
            assert [value for value, _, _ in runs] == [1, 0, 1]
            for value, start, end in runs:
                if value == 1:  # the model's turn: exactly what the server returned
                    choice = answered[tuple(prompt + completion[:start])]
                    assert completion[start:end] == choice["token_ids"]
                    assert logprobs[start:end] == choice["logprobs"]["token_logprobs"]
    episodes = _trajectories(tmp_path / "out")
    assert len(episodes) == 8 and {e["metadata"]["train_step"] for e in episodes} == {0, 1}
    assert all(e["stop_reason"] == StopReason.ANSWERED for e in episodes)
    assert all(e.get("failure") is None for e in episodes)
