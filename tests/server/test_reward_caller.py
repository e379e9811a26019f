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


@reward_function
def napping(response: str, ground_truth: str) -> float:
    """Sleeps ``ground_truth`` seconds (``"slow"``: until the test releases it)."""
    if ground_truth == "slow":
        RELEASE.wait(timeout=30)
    else:
        threading.Event().wait(float(ground_truth))
    return 1.0


def _queue_behind_a_held_call(caller: RewardCaller, history: str) -> tuple[float, bool]:
    """Score three samples of ``history`` seconds, hold the one thread, queue 255 calls behind
    it, let the held call run 0.2 s; return the expected wait and whether a sample is shed."""

    async def main() -> tuple[float, bool]:
        for _ in range(3):
            await caller.score({"messages": CHAT, "ground_truth": history}, ["body"])
        slow = asyncio.ensure_future(
            caller.score({"messages": CHAT, "ground_truth": "slow"}, ["body"])
        )
        while not caller.pool.running:
            await asyncio.sleep(0.01)
        queued = [caller.pool.submit(lambda: None) for _ in range(255)]
        await asyncio.sleep(0.2)
        seen = caller.expected_wait(), caller.saturated()
        RELEASE.set()
        await slow
        await asyncio.gather(*queued)
        return seen

    RELEASE.clear()
    try:
        return asyncio.run(main())
    finally:
        RELEASE.set()
        caller.pool.close()


def test_a_quick_reward_held_up_once_is_not_taken_for_a_slow_one() -> None:
    # A running call's age is not the queue's run time: a call kept from the GIL by a burst
    # of requests is not a slow reward, and 255 samples times its age would be shed.
    wait, shed = _queue_behind_a_held_call(RewardCaller(napping, None, threads=1), "0")
    assert not shed
    assert 0.2 <= wait < 255 * 0.2  # the held call's age and a little, not 255 times it


def test_samples_queued_behind_a_slow_reward_are_shed_before_they_wait() -> None:
    # Three finished calls of 0.1 s: 255 queued samples are some 25 s of work, over --max-wait.
    wait, shed = _queue_behind_a_held_call(RewardCaller(napping, None, threads=1), "0.1")
    assert shed
    assert wait > 255 * 0.09
