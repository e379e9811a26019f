"""One episode return: the rule (`EpisodeReturn`) and every reader of an episode agreeing on it.

One real episode of the ``tools`` environment, played by its reference solver, whose step reward
is invalid on the turn that calls a tool (it raises, or returns NaN), goes through every place
that reads an episode's return: the engine's trajectory and its run summary, ``check_env``'s
`play_with_solver`, a rescore, SFT's ranking, the watch, GRPO's reward functions (rk-agent's loop
and TRL's tool loop, through the watch's recorder and callback). All say the same: no return,
for the same reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rk_agent.envs.check import play_with_solver
from rk_agent.envs.registry import get_solver, make_env
from rk_agent.rewards.decorator import reward_function
from rk_agent.runs.rescore import rescore
from rk_agent.runs.run_dir import read_trajectories, trajectory_line
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.watch import outcome_of, watch_signals
from rk_agent.runs.watch_log import read_watch
from rk_agent.trainers.rewards import episode_reward_funcs, weighted_rewards
from rk_agent.trainers.scored_batch import ScoredBatch
from rk_agent.trainers.sft_data import SFTFilter, select_trajectories
from rk_agent.trainers.trl_env import trl_environment
from rk_agent.trainers.trl_tool_env import episode_trajectory
from rk_agent.trainers.watch import WatchCallback, WatchRecorder
from rk_agent.types import EpisodeReturn, EvaluateResult, Message, ScoreFault
from tests.rollouts.runs import play_run

REWARDS = '''
import math


def answer(messages, ground_truth):
    """1.0 when the final reply holds the ground truth."""
    text = messages[-1].text if hasattr(messages[-1], "text") else messages[-1]["content"]
    return 1.0 if str(ground_truth) in (text or "") else 0.0


def flaky_raises(messages, tool_calls):
    """0.25 a step, but it raises on a step with tool calls."""
    if tool_calls:
        raise ValueError("no score for tool calls")
    return 0.25


def flaky_nan(messages, tool_calls):
    """0.25 a step, but NaN on a step with tool calls."""
    return math.nan if tool_calls else 0.25
'''


# ---------------------------------------------------------------------------- the rule


def _step(reward: float, fault: ScoreFault | None = None) -> tuple[float, bool, ScoreFault | None]:
    return (reward, fault is None, fault)


def test_a_return_is_the_episode_score_plus_the_step_rewards() -> None:
    returned = EpisodeReturn.of(EvaluateResult(score=1.0), [_step(0.25), _step(-0.5)])
    assert (returned.value, returned.episode, returned.steps) == (0.75, 1.0, -0.25)
    assert returned.valid and returned.fault is None and not returned.non_finite
    assert returned.weighted(2.0, 0.5) == 1.875
    assert EpisodeReturn.of(EvaluateResult(score=0.5)).value == 0.5  # no turns


def test_an_invalid_step_leaves_no_return_never_a_zero() -> None:
    returned = EpisodeReturn.of(EvaluateResult(score=1.0), [_step(0.25), (7.0, False, None)])
    assert returned.value is None and returned.weighted(1.0, 0.0) is None
    assert returned.fault is ScoreFault.INVALID and not returned.valid
    assert (returned.episode, returned.steps) == (1.0, 0.25)  # the parts still read


@pytest.mark.parametrize(
    ("episode", "fault"),
    [
        (None, ScoreFault.MISSING),
        (EvaluateResult.invalid("TimeoutError: judge"), ScoreFault.INVALID),
        (EvaluateResult(score=0.0, error="ValueError: non-finite words"), ScoreFault.INVALID),
        (EvaluateResult.invalid("inf", fault=ScoreFault.NON_FINITE), ScoreFault.NON_FINITE),
    ],
)
def test_a_missing_or_invalid_episode_score_leaves_no_return(
    episode: EvaluateResult | None, fault: ScoreFault
) -> None:
    returned = EpisodeReturn.of(episode, [_step(0.25)])
    assert (returned.value, returned.fault, returned.episode) == (None, fault, None)
    assert returned.non_finite is (fault is ScoreFault.NON_FINITE)


def test_the_most_telling_fault_wins() -> None:
    nan_step = _step(0.0, ScoreFault.NON_FINITE)
    assert EpisodeReturn.of(None, [nan_step]).fault is ScoreFault.NON_FINITE
    assert EpisodeReturn.of(None, [_step(0.0, ScoreFault.INVALID)]).fault is ScoreFault.INVALID
    invalid = EvaluateResult.invalid("boom")
    assert EpisodeReturn.of(invalid, [nan_step, _step(1.0)]).fault is ScoreFault.NON_FINITE
    assert list(ScoreFault) == [ScoreFault.MISSING, ScoreFault.INVALID, ScoreFault.NON_FINITE]


def test_a_fault_makes_a_result_invalid_and_round_trips() -> None:
    result = EvaluateResult(score=0.0, fault=ScoreFault.NON_FINITE)
    assert not result.is_score_valid
    assert EvaluateResult.model_validate_json(result.model_dump_json()) == result
    assert EpisodeReturn.fault_of(result) is ScoreFault.NON_FINITE
    assert EpisodeReturn.fault_of(EvaluateResult.invalid("x")) is ScoreFault.INVALID
    assert EpisodeReturn.fault_of(EvaluateResult(score=1.0)) is None
    assert EpisodeReturn.fault_of(None) is ScoreFault.MISSING


@pytest.mark.parametrize(
    "returned",
    [math.nan, math.inf, (math.nan, {}), {"score": -math.inf}, "EvaluateResult"],
)
def test_a_reward_that_returns_nan_or_inf_is_non_finite_by_type(returned: Any) -> None:
    @reward_function
    def bad(messages: list[Message], **kwargs: Any) -> Any:
        if returned == "EvaluateResult":  # pydantic refuses it inside the function
            return EvaluateResult(score=math.nan)
        return returned

    result = bad(messages=[Message(role="user", content="x")])
    assert not result.is_score_valid and result.fault is ScoreFault.NON_FINITE


def test_a_reward_that_raises_is_invalid_not_non_finite() -> None:
    @reward_function
    def bad(messages: list[Message], **kwargs: Any) -> float:
        raise ValueError("a non-finite score, says the message")

    result = bad(messages=[Message(role="user", content="x")])
    assert not result.is_score_valid and result.fault is None
    assert EpisodeReturn.fault_of(result) is ScoreFault.INVALID


def test_total_reward_is_the_return_and_never_stored_apart(tmp_path: Path) -> None:
    from rk_agent.envs.task import Task
    from rk_agent.runs.trajectory import Turn

    turn = Turn(index=0, assistant=Message(role="assistant", content="4"), reward=0.5)
    t = Trajectory(
        id="0-0", task_index=0, sample=0, task=Task(id="t", messages=[]), env="e", model="m",
        stop_reason="answered", episode=EvaluateResult(score=1.0), turns=[turn],
        total_reward=9.0,  # a value given is ignored
    )  # fmt: skip
    assert t.total_reward == 1.5 and json.loads(trajectory_line(t))["total_reward"] == 1.5
    bad = turn.model_copy(update={"reward_valid": False})
    invalid = t.model_copy(update={"turns": [bad]})
    assert invalid.total_reward is None and "total_reward" not in trajectory_line(invalid)
    assert Trajectory.model_validate_json(trajectory_line(t)) == t


# ---------------------------------------------------------------------------- every reader


@pytest.fixture
def rewards_file(tmp_path: Path) -> Path:
    path = tmp_path / "flaky_rewards.py"
    path.write_text(REWARDS)
    return path


def _completion(t: Trajectory) -> list[dict[str, Any]]:
    """The episode's messages after its opening, as TRL's tool loop hands them over."""
    return [m.to_openai() for turn in t.turns for m in (turn.assistant, *turn.environment)]


def _trl_loop(
    t: Trajectory, env_kwargs: dict[str, Any], answer: str, out: Path
) -> tuple[Trajectory, dict[str, list[Any]], dict[str, Any]]:
    """The episode replayed through TRL's tool loop, scored by its reward functions through
    the watch's recorder, and the watch line the step writes."""
    spec = trl_environment("tools", n_tasks=1, env_kwargs=env_kwargs, rewards={"answer": answer})
    instance = spec.environment_factory()
    instance.reset(task=t.task.model_dump_json(), seed=t.seed)
    recorder = WatchRecorder()
    funcs = recorder.wrap(spec.reward_funcs)
    completion = _completion(t)
    # The batch as HookedGRPOTrainer announces it before TRL calls the reward functions.
    played = spec.trajectories([instance], [completion], None, 1)
    recorder.begin(ScoredBatch(rows=[{}], completions=[completion], completion_ids=[[]],
                               trajectories=played, step=1))  # fmt: skip
    scores = {
        f.__name__: f(prompts=[[]], completions=[completion], environments=[instance])
        for f in funcs
    }
    from transformers import TrainerControl, TrainerState

    names = [f.__name__ for f in funcs]
    callback = WatchCallback(recorder, names, spec.reward_weights, output_dir=out)
    state = TrainerState()
    state.global_step = 1
    callback.on_step_end(SimpleNamespace(num_generations=1), state, TrainerControl())
    [line] = read_watch(out)
    return episode_trajectory(instance, completion), scores, line


@pytest.mark.parametrize(
    ("step_reward", "fault"),
    [("flaky_raises", ScoreFault.INVALID), ("flaky_nan", ScoreFault.NON_FINITE)],
)
def test_every_reader_agrees_on_an_episode_with_an_invalid_step(
    tmp_path: Path, rewards_file: Path, step_reward: str, fault: ScoreFault
) -> None:
    answer, step = f"{rewards_file}::answer", f"{rewards_file}::{step_reward}"
    env_kwargs = {"step_rewards": {"flaky": step}}
    solver = get_solver("tools")
    run = play_run(
        tmp_path / "run", solver, env="tools", n=1, rewards=[answer], env_kwargs=env_kwargs
    )

    # The engine's trajectory: a valid episode score, an invalid step, so no return.
    [t] = read_trajectories(run)
    assert t.episode is not None and t.episode.is_score_valid and t.episode.score == 1.0
    assert [turn.reward_valid for turn in t.turns] == [False, False, True]  # 2 calls, answer
    assert [turn.reward_fault for turn in t.turns] == [fault, fault, None]
    expected = EpisodeReturn(episode=1.0, steps=0.25, fault=fault)
    assert t.episode_return == expected and t.total_reward is None
    assert "total_reward" not in (run / "trajectories.jsonl").read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["total_reward"]["invalid"], summary["total_reward"]["mean"]) == (1, None)
    assert summary["episode_reward"]["mean"] == 1.0  # the episode score itself is valid

    # check_env's episode, played with the same solver on the same task and seed.
    env = make_env("tools", episode_rewards={"answer": answer}, **env_kwargs)
    played = play_with_solver(env, solver, seed=t.seed, options={"task": t.task})
    assert played.episode_return == expected and played.total_reward is None

    # A rescore with the same rewards scores it the same, and its summary counts it invalid.
    rescored = rescore(run, answer, step_reward=step, output=tmp_path / "rescored")
    [again] = read_trajectories(rescored.output)
    assert again.episode_return == expected
    assert rescored.summary.total_reward.invalid == 1

    # SFT ranks it below an episode of the same task with a lower return, not as a 0.
    assert t.episode is not None
    worse = t.model_copy(
        update={
            "id": "0-1", "sample": 1,
            "turns": [turn.model_copy(update={"reward_valid": True, "reward_fault": None,
                                              "reward": 0.0}) for turn in t.turns],
            "episode": t.episode.model_copy(update={"score": -1.0}),
        }
    )  # fmt: skip
    assert worse.total_reward == -1.0
    kept, _ = select_trajectories([t, worse], SFTFilter(success_only=False, max_per_task=1))
    assert [k.id for k in kept] == ["0-1"]

    # The watch: an invalid reward, a NaN one when the step came out NaN.
    outcome = outcome_of(t)
    assert outcome.reward is None and outcome.nan is (fault is ScoreFault.NON_FINITE)
    signals = watch_signals([[outcome]])
    assert (signals.invalid_rewards, signals.nan_rewards) == (1, int(outcome.nan))

    # GRPO in rk-agent's loop: every reward function gives None, the weight-0 components too,
    # so TRL finds the row unscorable (no advantage) instead of training on the episode score.
    funcs, weights = episode_reward_funcs(env)
    scores = {f.__name__: f([[]], [None], trajectory=[t]) for f in funcs}
    assert set(scores) == {"episode", "step_rewards", "answer"}
    assert all(values == [None] for values in scores.values())
    assert weighted_rewards(scores, list(scores), weights) == ([None], [False])

    # GRPO in TRL's tool loop: the same episode replayed, the same return, the same scores,
    # and the watch's step line counts it as the rollout watch does.
    trl, trl_scores, line = _trl_loop(t, env_kwargs, answer, tmp_path / "train")
    assert trl.episode_return == expected and trl.total_reward is None
    assert trl_scores == scores
    assert (line["invalid_rewards"], line["nan_rewards"]) == (1, int(outcome.nan))
