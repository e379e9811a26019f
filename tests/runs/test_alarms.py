"""The alarms: each condition, its threshold, once per run, exact messages; a batch alone."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.runs.alarms import AlarmKind, AlarmOptions, AlarmWatch, batch_alarms
from rk_agent.runs.group_sampling import StepSampling
from rk_agent.runs.watch import STEP_REWARDS, WatchSignals
from rk_agent.trainers.config import load_train_config


def _signals(**figures: Any) -> WatchSignals:
    values: dict[str, Any] = {
        "groups": 4,
        "episodes": 16,
        "zero_spread": 0.0,
        "zero_spread_all_fail": 0.0,
        "zero_spread_all_pass": 0.0,
        "reward_mean": 0.5,
        "reward_std": 0.5,
        "reward_group_std": 0.5,
        "success_mean": 0.5,
        "success_std": 0.5,
        "step_reward_mean": 0.0,
        "component_shares": {"answer": 1.0},
        "outcome_components": ["answer"],
        "distinct_answers": 3.0,
        "single_answer_groups": 0.0,
        "completion_tokens_mean": 50.0,
        "truncated": 0.0,
        "invalid_rewards": 0,
        "nan_rewards": 0,
        "tool_calls_mean": 1.0,
    }
    values.update(figures)
    return WatchSignals(**values)


def _feed(watch: AlarmWatch, steps: list[WatchSignals]) -> list[tuple[int, str]]:
    fired = []
    for step, signals in enumerate(steps, start=1):
        fired += [(a.step, a.kind.value) for a in watch.observe(step, signals)]
    return fired


def test_a_healthy_run_raises_nothing() -> None:
    assert _feed(AlarmWatch(), [_signals()] * 8) == []


def test_zero_spread_needs_half_the_groups_for_three_steps_in_a_row() -> None:
    half = _signals(zero_spread=0.5, zero_spread_all_fail=0.5)
    watch = AlarmWatch()
    assert _feed(watch, [half, half, _signals(zero_spread=0.25), half, half]) == []
    alarm = watch.observe(6, _signals(zero_spread=0.75, zero_spread_all_fail=0.5,
                                      zero_spread_all_pass=0.25))  # fmt: skip
    assert [a.kind for a in alarm] == [AlarmKind.ZERO_SPREAD]
    assert alarm[0].message == (
        "step 6: 75% of groups had zero reward spread for 3 steps (50% all fail, 25% all pass): "
        "those groups teach nothing. Try: easier tasks, more generations (--num_generations) "
        "or partial credit when they all fail; harder tasks when they all pass."
    )


def test_with_dynamic_sampling_the_zero_spread_alarm_says_what_was_dropped() -> None:
    watch = AlarmWatch(AlarmOptions(zero_spread_steps=1))
    sampling = StepSampling(draws=3, drawn=10, kept=2, dropped=6, filled=2, bound_hit=True)
    flat = _signals(zero_spread=0.8, zero_spread_all_pass=0.8, truncated=0.9)
    alarms = watch.observe(4, flat, sampling)
    assert [a.kind for a in alarms] == [AlarmKind.ZERO_SPREAD, AlarmKind.TRUNCATION]
    assert alarms[0].message == (
        "step 4: 80% of groups had zero reward spread for 1 steps (0% all fail, 80% all pass): "
        "those groups teach nothing. Try: easier tasks, more generations (--num_generations) "
        "or partial credit when they all fail; harder tasks when they all pass. This step "
        "dynamic sampling dropped 6 "
        "of the 10 groups drawn (3 draws) and trained on 2 with spread; it hit its bound, so 2 "
        "zero-spread groups filled the batch."
    )
    assert "dynamic sampling" not in alarms[1].message
    # Retirement alone drops nothing: the message is the one without sampling.
    alone = AlarmWatch(AlarmOptions(zero_spread_steps=1))
    [alarm] = alone.observe(1, _signals(zero_spread=1.0), StepSampling(dynamic=False, drawn=4))
    assert alarm.message.endswith("harder tasks when they all pass.")


def test_each_alarm_is_raised_once() -> None:
    watch = AlarmWatch()
    nan = _signals(nan_rewards=2, invalid_rewards=2)
    assert _feed(watch, [nan, nan, _signals(), nan]) == [(1, "nan_reward")]
    assert [a.kind for a in watch.raised] == [AlarmKind.NAN_REWARD]
    assert watch.raised[0].message == (
        "step 1: 2 of 16 rewards were NaN or infinite; TRL leaves them out of the advantages. "
        "Try: make the reward return a finite score, or an invalid result "
        "(EvaluateResult(error=...)) when it cannot score."
    )


def test_farming_is_shaping_rising_while_success_falls_over_the_window() -> None:
    steps = [
        _signals(step_reward_mean=0.0 + 0.1 * i, success_mean=1.0 - 0.25 * i) for i in range(3)
    ]
    watch = AlarmWatch(AlarmOptions(farming_window=3))
    assert _feed(watch, steps) == [(3, "farming")]
    assert watch.raised[0].message == (
        "step 3: the per-step reward rose from 0.000 to 0.200 while success fell from 100% to "
        "50% over 3 steps: the policy may be farming the step bonus. Try: pay per-step rewards "
        "only for the steps a task needs, lower their weight, or train on the outcome alone."
    )


@pytest.mark.parametrize(
    "steps",
    [
        # success falls, shaping flat: not farming (a run that gets worse)
        [_signals(step_reward_mean=0.1, success_mean=1.0 - 0.25 * i) for i in range(3)],
        # both rise: learning to use the tools
        [_signals(step_reward_mean=0.1 * i, success_mean=0.25 * i) for i in range(3)],
        # shaping rises, success falls by less than farming_min_drop
        [_signals(step_reward_mean=0.1 * i, success_mean=0.5 - 0.02 * i) for i in range(3)],
    ],
)
def test_farming_needs_both_trends(steps: list[WatchSignals]) -> None:
    assert _feed(AlarmWatch(AlarmOptions(farming_window=3)), steps) == []


def test_answer_collapse_needs_the_share_for_collapse_steps() -> None:
    collapsed = _signals(single_answer_groups=0.5, distinct_answers=1.5)
    watch = AlarmWatch(AlarmOptions(collapse_steps=2))
    assert _feed(watch, [collapsed, collapsed]) == [(2, "answer_collapse")]
    assert watch.raised[0].message == (
        "step 2: in 50% of groups every episode gave the same final answer for 2 steps: the "
        "samples no longer explore. Try: a higher temperature (--temperature), more generations "
        "(--num_generations), a lower learning rate (--learning_rate)."
    )


def test_a_dominant_component_other_than_the_outcome() -> None:
    watch = AlarmWatch()
    # the outcome may make up all of the reward
    assert watch.observe(1, _signals(component_shares={"answer": 1.0})) == []
    shares = {"answer": 0.15, STEP_REWARDS: 0.85}
    alarm = watch.observe(2, _signals(component_shares=shares))
    assert alarm[0].message == (
        "step 2: the per-step rewards made up 85% of the reward, more than the outcome "
        "(answer): the policy learns that, not the task. Try: lower its weight or cap it."
    )
    other = AlarmWatch(AlarmOptions(dominant_share=0.9))
    assert other.observe(1, _signals(component_shares={"answer": 0.1, "format": 0.9})) == []
    fired = other.observe(2, _signals(component_shares={"answer": 0.05, "format": 0.95}))
    assert "the component 'format' made up 95% of the reward" in fired[0].message


def test_truncation_above_the_share() -> None:
    watch = AlarmWatch()
    assert watch.observe(1, _signals(truncated=0.3)) == []
    alarm = watch.observe(2, _signals(truncated=0.5))
    assert alarm[0].message == (
        "step 2: 50% of completions were cut by a token limit: the reward scores unfinished "
        "work. Try: a larger --max_completion_length, or fewer turns (--max-turns)."
    )


def test_several_alarms_in_one_step_come_in_a_fixed_order() -> None:
    bad = _signals(nan_rewards=1, truncated=1.0, component_shares={STEP_REWARDS: 1.0})
    assert [a.kind.value for a in AlarmWatch().observe(1, bad)] == [
        "nan_reward",
        "dominant_component",
        "truncation",
    ]


def test_a_batch_alone_raises_what_needs_no_history_without_a_step() -> None:
    assert batch_alarms(_signals()) == []
    everything = _signals(zero_spread=1.0, zero_spread_all_fail=1.0, single_answer_groups=1.0,
                          nan_rewards=2, truncated=0.5, success_mean=0.0,
                          component_shares={"answer": 0.1, STEP_REWARDS: 0.9})  # fmt: skip
    alarms = batch_alarms(everything)
    assert [a.kind for a in alarms] == [
        AlarmKind.NAN_REWARD,
        AlarmKind.ZERO_SPREAD,
        AlarmKind.ANSWER_COLLAPSE,
        AlarmKind.DOMINANT_COMPONENT,
        AlarmKind.TRUNCATION,
    ]  # farming needs a trend over steps
    assert {a.step for a in alarms} == {None}
    assert alarms[1].message.startswith(
        "100% of groups had zero reward spread (100% all fail, 0% all pass): those groups"
    )
    # One episode per task: every group trivially has one answer and no spread.
    ungrouped = batch_alarms(everything, grouped=False)
    assert [a.kind for a in ungrouped] == [
        AlarmKind.NAN_REWARD, AlarmKind.DOMINANT_COMPONENT, AlarmKind.TRUNCATION
    ]  # fmt: skip
    assert batch_alarms(everything, AlarmOptions(truncated_share=0.6))[-1].kind is not (
        AlarmKind.TRUNCATION
    )


def test_alarm_options_are_train_config_options() -> None:
    config = load_train_config(
        None, {"kind": "grpo", "watch.stop_on_alarm": True, "watch.truncated_share": 0.5}
    )
    assert config.watch == AlarmOptions(stop_on_alarm=True, truncated_share=0.5)
    with pytest.raises(ConfigError, match=re.escape("watch.dominant_share: Input should be")):
        load_train_config(None, {"kind": "grpo", "watch.dominant_share": 1.5})
