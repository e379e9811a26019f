"""The rollout engine: concurrency, groups, failure policies, resume, timeouts."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from rk_agent import reward_function
from rk_agent.errors import ContextOverflowError, EndpointError
from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.policies.policy import PolicyOutput, SamplingParams
from rk_agent.rollouts.engine import plan_slots, run_rollouts
from rk_agent.runs.config import FailurePolicy, RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.summary import summarize
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.types import FailureKind, FailureSite, Message, StopReason

from .toy import AddEnv, solver


def run(config: RolloutConfig, policy: Any, run_dir: RunDir | None = None, **kw: Any) -> Any:
    return asyncio.run(
        run_rollouts(config, policy=policy, make_env=AddEnv, env_name="add", run_dir=run_dir, **kw)
    )


def test_plays_every_slot_with_groups(tmp_path: Path) -> None:
    config = RolloutConfig(env="add", n=6, group_size=3, concurrency=4, seed=10)
    run_dir = RunDir.create(tmp_path / "run", config)
    result = run(config, FunctionPolicy(solver), run_dir)
    on_disk = run_dir.read_trajectories()
    assert sorted(t.id for t in on_disk) == sorted(f"{i}-{s}" for i in range(6) for s in range(3))
    assert all(t.success and t.stop_reason is StopReason.ANSWERED for t in on_disk)
    # Samples of one task share its seed and task; tasks differ.
    by_task = {t.task_index: t.task.id for t in on_disk}
    assert all(t.task.id == by_task[t.task_index] and t.seed == 10 + t.task_index for t in on_disk)
    assert len(set(by_task.values())) == 6
    first = on_disk[0]
    assert [len(turn.tool_calls) for turn in first.turns] == [1, 0]
    assert first.turns[0].environment[0].role == "tool"
    assert first.turns[0].metrics["tool_success"].score == 1.0
    assert first.conversation[-1].text.startswith("####")
    assert len(result.trajectories) == 18


def test_concurrency_is_respected() -> None:
    in_flight = peak = 0

    async def slow(messages: list[Message], tools: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return solver(messages, tools)

    run(RolloutConfig(env="add", n=20, concurrency=5), FunctionPolicy(slow))
    assert peak == 5


def test_model_failures_are_recorded_not_raised(tmp_path: Path) -> None:
    policy = ScriptedPolicy([EndpointError("down", status=503, retryable=True)])
    config = RolloutConfig(env="add", n=3)
    run_dir = RunDir.create(tmp_path / "run", config)
    run(config, policy, run_dir)
    trajectories = run_dir.read_trajectories()
    assert len(trajectories) == 3
    for t in trajectories:
        assert t.stop_reason is StopReason.ERROR
        assert t.failure is not None and t.failure.kind is FailureKind.MODEL_ERROR
        assert t.failure.message == "down" and t.failure.retryable
        assert t.episode is None and t.success is None


def test_retry_policy_plays_again() -> None:
    calls = 0

    def flaky(messages: list[Message], tools: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise EndpointError("blip", status=502, retryable=True)
        return solver(messages, tools)

    config = RolloutConfig(env="add", n=1, failure_policy=FailurePolicy(action="retry"))
    [trajectory] = run(config, FunctionPolicy(flaky)).trajectories
    assert trajectory.failure is None and trajectory.attempt == 2 and trajectory.success


def test_retry_does_not_repeat_permanent_failures() -> None:
    policy = ScriptedPolicy([EndpointError("bad key", status=401, retryable=False)])
    config = RolloutConfig(env="add", n=1, failure_policy=FailurePolicy(action="retry"))
    [trajectory] = run(config, policy).trajectories
    assert trajectory.attempt == 1 and policy.calls == 1


def test_drop_group_drops_every_sample_of_a_failed_group(tmp_path: Path) -> None:
    def fails_on_task_1(messages: list[Message], tools: Any) -> Any:
        if messages[0].text.startswith(AddEnv().reset(seed=1)[0][0]["content"]):
            raise EndpointError("overloaded", status=503, retryable=True)
        return solver(messages, tools)

    config = RolloutConfig(
        env="add", n=3, group_size=2, seed=0, failure_policy=FailurePolicy(action="drop_group")
    )
    run_dir = RunDir.create(tmp_path / "run", config)
    result = run(config, FunctionPolicy(fails_on_task_1), run_dir)
    assert result.dropped_groups == [1]
    assert sorted(t.id for t in run_dir.read_trajectories()) == ["0-0", "0-1", "2-0", "2-1"]
    dropped = [
        json.loads(line) for line in (run_dir.path / "dropped.jsonl").read_text().splitlines()
    ]
    assert dropped[0]["task_index"] == 1 and "overloaded" in dropped[0]["reason"]


def test_episode_timeout_keeps_finished_turns() -> None:
    async def stalls_on_second_turn(messages: list[Message], tools: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            await asyncio.sleep(30)
        return solver(messages, tools)

    config = RolloutConfig(env="add", n=1, episode_timeout_s=0.3)
    # Without the episode timeout the stall would end after 30 s and the episode finish well.
    [trajectory] = run(config, FunctionPolicy(stalls_on_second_turn)).trajectories
    assert trajectory.stop_reason is StopReason.TIMEOUT
    assert trajectory.failure is not None and trajectory.failure.kind is FailureKind.TIMEOUT
    assert len(trajectory.turns) == 1  # the first turn survived the timeout


class _HangsInItsStep(AddEnv):
    """Its step blocks its thread until the test releases it (a step that never returns)."""

    inline_steps = False
    release = threading.Event()

    def play_turn(self, *args: Any, **kwargs: Any) -> Any:
        self.release.wait(120)
        return super().play_turn(*args, **kwargs)


def test_a_step_that_hangs_past_the_timeout_does_not_keep_the_run_from_returning() -> None:
    # The timed-out step is abandoned on its thread; asyncio.run must not wait for it (the
    # loop's default executor joins its threads at the end, which never came).
    config = RolloutConfig(env="add", n=2, concurrency=2, episode_timeout_s=0.3)
    done: dict[str, Any] = {}

    def play() -> None:
        done["result"] = asyncio.run(
            run_rollouts(
                config, policy=FunctionPolicy(solver), make_env=_HangsInItsStep, env_name="add"
            )
        )

    player = threading.Thread(target=play, daemon=True)
    player.start()
    player.join(60)  # not a time bound on the run: a guard against waiting forever
    returned = not player.is_alive()
    _HangsInItsStep.release.set()
    assert returned, "the run did not return: it waited for the hung step's thread"
    trajectories = done["result"].trajectories
    assert [t.stop_reason for t in trajectories] == [StopReason.TIMEOUT] * 2


def test_context_overflow_truncates_and_scores() -> None:
    def overflow(messages: list[Message], tools: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            raise ContextOverflowError("prompt is 9000 tokens, the model takes 8192", status=400)
        return solver(messages, tools)

    [trajectory] = run(RolloutConfig(env="add", n=1), FunctionPolicy(overflow)).trajectories
    assert trajectory.stop_reason is StopReason.TRUNCATED
    assert trajectory.failure is not None
    assert trajectory.failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert trajectory.episode is not None and trajectory.episode.score == 0.0


def test_parse_errors_are_fed_back_with_a_penalty() -> None:
    bad = PolicyOutput(
        message=Message(role="assistant", content="<tool_call>{oops</tool_call>"),
        parse_error="invalid JSON at char 1",
    )
    policy = ScriptedPolicy([bad, "#### 0"])
    [trajectory] = run(RolloutConfig(env="add", n=1), policy).trajectories
    first = trajectory.turns[0]
    assert first.parse_error == "invalid JSON at char 1"
    assert first.metrics["parse_error"].score == -1.0
    assert first.environment[0].role == "user"
    assert first.environment[0].text.startswith(
        "Your tool call could not be read: invalid JSON at char 1\nCall a tool with <tool_call>"
    )
    assert len(trajectory.turns) == 2  # the model got another turn


def test_a_crashing_environment_is_an_env_error() -> None:
    class Broken(AddEnv):
        def respond(self, action: Message, state: Any) -> None:
            raise RuntimeError("feedback generator crashed")

    config = RolloutConfig(env="broken", n=1)
    result = asyncio.run(
        run_rollouts(config, policy=ScriptedPolicy(["no tools"]), make_env=Broken, env_name="b")
    )
    [trajectory] = result.trajectories
    assert trajectory.failure is not None
    assert trajectory.failure.kind is FailureKind.ENV_ERROR
    assert trajectory.failure.where is FailureSite.ENVIRONMENT
    assert "RuntimeError: feedback generator crashed" in trajectory.failure.message


def test_resume_skips_finished_episodes(tmp_path: Path) -> None:
    config = RolloutConfig(env="add", n=4, group_size=2)
    run_dir = RunDir.create(tmp_path / "run", config)
    first = run(RolloutConfig(env="add", n=2, group_size=2), FunctionPolicy(solver), run_dir)
    assert len(first.trajectories) == 4
    # A crash mid-write leaves a torn line; resuming cuts it off and finishes the rest.
    with (run_dir.path / "trajectories.jsonl").open("a") as handle:
        handle.write('{"id": "2-0", "task_ind')
    assert len(run_dir.read_trajectories()) == 4
    assert run_dir.repair() > 0
    done = {t.id for t in run_dir.read_trajectories()}
    second = run(config, FunctionPolicy(solver), run_dir, done=done)
    assert second.skipped == 4 and len(second.trajectories) == 4
    ids = [t.id for t in run_dir.read_trajectories()]
    assert sorted(ids) == sorted(f"{i}-{s}" for i in range(4) for s in range(2))
    assert len(ids) == len(set(ids))


def test_plan_uses_dataset_rows_when_the_env_has_a_dataset() -> None:
    slots = plan_slots(RolloutConfig(n=2, group_size=2, seed=5), dataset_size=10)
    assert [(s.id, s.seed, s.options) for s in slots] == [
        ("0-0", 5, {"task_index": 0}), ("0-1", 5, {"task_index": 0}),
        ("1-0", 6, {"task_index": 1}), ("1-1", 6, {"task_index": 1}),
    ]  # fmt: skip


def test_sampling_seed_differs_per_sample() -> None:
    seen: list[int | None] = []

    class Recording(ScriptedPolicy):
        async def generate(self, messages: Any, tools: Any, sampling: SamplingParams) -> Any:
            seen.append(sampling.seed)
            return await super().generate(messages, tools, sampling)

    config = RolloutConfig(n=1, group_size=3, concurrency=1, sampling=SamplingParams(seed=100))
    run(config, Recording(["#### 1"]))
    assert sorted(seen) == [100, 101, 102]


def test_summary_of_a_run() -> None:
    result = run(RolloutConfig(env="add", n=5, group_size=2), FunctionPolicy(solver))
    summary = summarize(result.trajectories, 2)
    assert summary.episodes == 10 and summary.tasks == 5
    assert summary.success_rate == 1.0 and summary.pass_at_k == {"pass@1": 1.0, "pass@2": 1.0}
    assert summary.tool_calls == 10 and summary.tool_call_success_rate == 1.0
    assert summary.stop_reasons == {"answered": 10}
    assert summary.turns_mean == 2.0
    assert summary.metric_means["answer"] == 1.0


@reward_function
def broken_judge(messages: list[Message], **kwargs: Any) -> float:
    raise TimeoutError("judge endpoint timed out")


def test_the_summary_counts_reward_errors_by_message() -> None:
    config = RolloutConfig(env="add", n=3)
    result = asyncio.run(
        run_rollouts(
            config,
            policy=FunctionPolicy(solver),
            make_env=lambda: AddEnv(episode_rewards={"answer": "math", "judge": broken_judge}),
            env_name="add",
        )
    )
    summary = summarize(result.trajectories)
    assert summary.reward_errors == {"judge: TimeoutError: judge endpoint timed out": 3}
    assert summary.episode_reward.invalid == 3  # never trained on as a 0.0


# ---------------------------------------------------------------------------------------------
# Where environment steps run: on threads, unless the environment declares they never block


def _step_threads(env_class: type[AddEnv], episodes: int, **config: Any) -> list[bool]:
    """For each ``play_turn`` of the run, in order: whether it ran on the event loop's thread."""
    on_loop: list[bool] = []
    loop_thread: list[int] = []

    class Recording(env_class):  # type: ignore[valid-type, misc]
        def play_turn(self, message: Any) -> Any:
            on_loop.append(threading.get_ident() == loop_thread[0])
            return super().play_turn(message)

    async def main() -> Any:
        loop_thread.append(threading.get_ident())
        return await run_rollouts(
            RolloutConfig(env="add", n=episodes, **config), policy=FunctionPolicy(solver),
            make_env=Recording, env_name="add",
        )  # fmt: skip

    result = asyncio.run(main())
    assert all(t.success for t in result.trajectories)
    return on_loop


def test_steps_run_on_threads_by_default_however_quick_they_are() -> None:
    on_loop = _step_threads(AddEnv, 20, concurrency=1)
    assert len(on_loop) == 40  # two turns an episode
    assert on_loop == [False] * 40  # the safe choice: no load history decides it


def test_an_environment_that_declares_its_steps_never_block_plays_them_on_the_loop() -> None:
    class Inline(AddEnv):
        inline_steps = True

    assert _step_threads(Inline, 20, concurrency=2) == [True] * 40


def test_rewards_given_to_an_inline_environment_put_its_steps_on_threads() -> None:
    class Inline(AddEnv):
        inline_steps = True

    assert not Inline(episode_rewards={"answer": "math"}).inline_steps
    assert Inline().inline_steps


def test_a_tool_not_declared_inline_puts_an_inline_environments_steps_on_threads() -> None:
    from rk_agent.envs import tool

    @tool
    def wait(seconds: float) -> str:
        """Wait on something outside."""
        return "done"

    class WithWaitingTool(AddEnv):
        inline_steps = True

        def tools(self) -> list[Any]:
            return [*super().tools(), wait]

    assert not WithWaitingTool().inline_steps


def test_the_built_in_environments_declare_whether_their_steps_block() -> None:
    from rk_agent.envs.code_env import CodeEnv
    from rk_agent.envs.guess_env import GuessEnv
    from rk_agent.envs.math_env import MathEnv
    from rk_agent.envs.tools_env import ToolsEnv

    assert ToolsEnv.inline_steps and MathEnv.inline_steps and GuessEnv.inline_steps
    assert not CodeEnv.inline_steps  # its steps run code in the sandbox: they block


def test_a_step_on_a_thread_does_not_hold_up_other_episodes() -> None:
    # One episode's first step waits until another episode has finished: on the event loop it
    # could never see that happen.
    finished = threading.Event()
    waited: list[bool] = []

    class Blocking(AddEnv):
        inline_steps = False

        def play_turn(self, message: Any) -> Any:
            if self.task.ground_truth == first_task and not waited:
                waited.append(finished.wait(timeout=60))
            return super().play_turn(message)

    first_task = AddEnv().reset(seed=0)[1]["task"].ground_truth
    config = RolloutConfig(env="add", n=2, concurrency=2, seed=0)
    result = asyncio.run(
        run_rollouts(config, policy=FunctionPolicy(solver), make_env=Blocking, env_name="add",
                     on_episode=lambda t: finished.set())
    )  # fmt: skip
    assert waited == [True]
    assert all(t.success for t in result.trajectories)
