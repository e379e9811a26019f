"""The reward server's calls to the reward (`rk_agent.server._reward_caller`), on real threads
and real event loops."""

from __future__ import annotations

import asyncio
import threading

from rk_agent import reward_function
from rk_agent.server._reward_caller import RewardCaller
from rk_agent.types import EvaluateResult

RELEASE = threading.Event()
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


@reward_function
def held(response: str, ground_truth: str) -> float:
    """Blocks its worker thread on ``ground_truth="slow"`` until the test releases it."""
    if ground_truth == "slow":
        RELEASE.wait(timeout=30)
    return float(response.strip() == ground_truth)


def test_the_timeout_holds_on_each_event_loop_a_caller_serves() -> None:
    # One sweep of the calls in flight answers the limits. The first loop closes with its
    # sweep still scheduled; on the next loop the caller starts a sweep there.
    caller = RewardCaller(held, timeout_s=0.2, threads=2)
    fast = {"messages": CHAT, "ground_truth": "4"}
    RELEASE.clear()
    try:
        first = asyncio.run(caller.score(fast, ["body"]))
        late = asyncio.run(caller.score({**fast, "ground_truth": "slow"}, ["body"]))
    finally:
        RELEASE.set()
        caller.pool.close()
    assert first.score == 1.0
    assert isinstance(late, EvaluateResult) and not late.is_score_valid
    assert str(late.error).startswith("TimeoutError: reward 'held' did not finish within 0.2 s")
