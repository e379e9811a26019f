"""`check_reward`: hackable rewards are flagged by the right probe, fair ones are not; every
built-in reward is checked on its samples (real rewards, the real sandbox for code)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent import check_reward, combine, reward_function
from rk_agent.errors import ConfigError, DataError
from rk_agent.rewards.function import RewardFunction
from rk_agent.rewards.registry import _BUILTINS
from rk_agent.soundness.probes import ProbeView, probe
from rk_agent.soundness.report import FlagKind, SoundnessReport
from rk_agent.types import EvaluateResult, Message, MetricResult
from tests.sandbox.support import needs_bwrap
from tests.soundness.builtin_samples import BUILTIN_SAMPLES

SAMPLES = [
    {"messages": [{"role": "user", "content": "What is 3 + 4?"},
                  {"role": "assistant", "content": "3 + 4 = 7.\n#### 7"}], "ground_truth": "7"},
    {"messages": [{"role": "user", "content": "What is 6 times 7?"},
                  {"role": "assistant", "content": "6 x 7 = 42.\n#### 42"}], "ground_truth": "42"},
    {"messages": [{"role": "user", "content": "What is 10 - 8?"},
                  {"role": "assistant", "content": "10 - 8 = 2.\n#### 2"}], "ground_truth": "2"},
]  # fmt: skip


def _reply(messages: list[Message]) -> str:
    return messages[-1].text


def _final(text: str) -> str:
    return text.rsplit("####", 1)[-1].strip()


@reward_function(name="fair")
def fair(messages: list[Message], ground_truth: str, **kwargs: Any) -> EvaluateResult:
    """1.0 when the one number after #### is the ground truth."""
    return EvaluateResult(score=float(_final(_reply(messages)) == ground_truth))


@reward_function(name="pays_for_length")
def pays_for_length(messages: list[Message], ground_truth: str, **kwargs: Any) -> EvaluateResult:
    """Right answers 1.0; anything else is paid for its length past 200 characters (up to
    0.5): "a long attempt shows effort"."""
    text = _reply(messages)
    if _final(text) == ground_truth:
        return EvaluateResult(score=1.0)
    return EvaluateResult(score=min(0.5, max(0, len(text) - 200) / 2000))


@reward_function(name="any_of_several")
def any_of_several(messages: list[Message], ground_truth: str, **kwargs: Any) -> EvaluateResult:
    """1.0 when any of the candidates after #### ('3 or 4', '3, 4') is the ground truth."""
    candidates = re.split(r"\s*(?:,|\bor\b)\s*", _final(_reply(messages)))
    return EvaluateResult(score=float(ground_truth in candidates))


def test_a_fair_reward_is_not_flagged() -> None:
    report = check_reward(fair, SAMPLES)
    assert report.flags == []
    assert report.kind == "generic" and report.cases == 3
    assert report.row("reference").mean == 1.0 and report.row("wrong").mean == 0.0
    assert [r.name for r in report.rows] == [
        "reference", "wrong", "empty", "refusal", "echo", "padding", "repetition", "restate",
        "format_only", "wrong_value", "two_answers",
    ]  # fmt: skip


def test_a_reward_that_pays_for_length_is_flagged_by_padding_and_repetition() -> None:
    report = check_reward(pays_for_length, SAMPLES)
    flagged = {f.probe for f in report.flags if f.kind is FlagKind.PROBE_ABOVE_WRONG}
    assert flagged == {"padding", "repetition"}
    padding = next(f for f in report.flags if f.probe == "padding")
    assert padding.message.startswith(
        "probe 'padding' (the honest wrong answer padded with filler to 4000 characters) "
        "scores 0.500 on average, above the honest wrong answer's 0.00"
    )


def test_a_reward_that_accepts_any_of_several_answers_is_flagged_by_two_answers() -> None:
    report = check_reward(any_of_several, SAMPLES)
    assert [(f.kind, f.probe) for f in report.flags] == [
        (FlagKind.PROBE_ABOVE_WRONG, "two_answers")
    ]
    assert report.row("two_answers").mean == 1.0
    # The math reward takes one answer: it is not fooled in both orders.
    assert check_reward("math", SAMPLES).row("two_answers").mean == 0.0


def test_invalid_scores_no_spread_and_a_reference_below_the_maximum_are_flagged() -> None:
    @reward_function(name="nan_on_empty")
    def nan_on_empty(messages: list[Message], ground_truth: str, **kw: Any) -> float:
        text = _reply(messages)
        return math.nan if not text else float(_final(text) == ground_truth)

    report = check_reward(nan_on_empty, SAMPLES)
    assert [(f.kind, f.probe) for f in report.flags] == [(FlagKind.INVALID_SCORE, "empty")]
    assert report.row("empty").invalid == 3

    @reward_function(name="constant")
    def constant(messages: list[Message], **kw: Any) -> float:
        return 0.5

    kinds = {f.kind for f in check_reward(constant, SAMPLES).flags}
    assert kinds == {FlagKind.NO_SPREAD, FlagKind.REFERENCE_BELOW_MAX}
    assert check_reward(constant, SAMPLES, max_score=0.5).flags[0].message == (
        "every reply scored 0.5, the reference and the probes alike: the reward cannot rank "
        "replies, so there is nothing to learn from it."
    )


def test_a_component_that_decides_the_total_alone_is_flagged() -> None:
    @reward_function(name="tidy")
    def tidy(messages: list[Message], **kw: Any) -> EvaluateResult:
        return EvaluateResult(score=float("####" in _reply(messages)))

    gated = combine({"answer": fair, "tidy": tidy}, weights=[1.0, 1e-12])
    flags = check_reward(gated, SAMPLES).flags
    assert [f.kind for f in flags] == [FlagKind.ONE_COMPONENT]
    assert flags[0].message == (
        "component 'answer' decides the total alone: tidy vary but never change it (check the "
        "weights and the gate)."
    )
    assert check_reward(combine({"answer": fair, "tidy": tidy}), SAMPLES).flags == []


def test_your_own_probes_are_played_through_the_hook() -> None:
    @probe("shout", "the reference in capitals")
    def shout(view: ProbeView) -> str | None:
        return view.reference.text.upper() if view.reference is not None else None

    @probe("only_first", "applies to the first sample only")
    def only_first(view: ProbeView) -> str | None:
        return "#### 7" if view.question.startswith("What is 3") else None

    report = check_reward(fair, SAMPLES, probes=[shout, only_first], builtin_probes=False)
    assert [r.name for r in report.rows] == ["reference", "wrong", "shout", "only_first"]
    assert report.row("only_first").cases == 1 and report.row("only_first").skipped == 2
    assert [f.probe for f in report.flags] == ["shout", "only_first"]


def test_the_report_round_trips_through_json() -> None:
    report = check_reward(pays_for_length, SAMPLES)
    assert SoundnessReport.model_validate_json(report.model_dump_json()) == report
    assert json.loads(report.model_dump_json())["flags"][0]["kind"] == "probe_above_wrong"


def test_bad_input_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=re.escape(
        "sample 1: expected the last message to be the reference reply (an assistant message "
        "the reward scores at its maximum), got a 'user' message. Add the correct reply as the "
        "last message."
    )):  # fmt: skip
        check_reward(fair, [{"messages": [{"role": "user", "content": "hi"}]}] * 2)
    with pytest.raises(DataError, match=re.escape(
        "check_reward needs at least 2 samples (a sample's honest wrong answer is another "
        "sample's reference reply); got 1. Add samples with other answers."
    )):  # fmt: skip
        check_reward(fair, SAMPLES[:1])
    with pytest.raises(DataError, match=re.escape(
        "every sample has the same answer as sample 1: the honest wrong answer is another "
        "sample's reference reply, so give samples with different answers."
    )):  # fmt: skip
        check_reward(fair, [SAMPLES[0], SAMPLES[0]])
    broken = tmp_path / "samples.jsonl"
    broken.write_text(json.dumps(SAMPLES[0]) + "\n{not json\n")
    with pytest.raises(DataError, match=re.escape(f"{broken}:2: invalid JSON")):
        check_reward(fair, broken)
    with pytest.raises(ConfigError, match=re.escape(
        "unknown probe kind 'maths'; expected one of generic, shape, math, code, "
        "function_calling, tools."
    )):  # fmt: skip
        check_reward(fair, SAMPLES, kind="maths")

    with pytest.raises(ConfigError, match=re.escape(
        "give the sandbox mode and the reward's options to the RewardFunction, not to "
        "check_reward."
    )):  # fmt: skip
        check_reward(RewardFunction(fair), SAMPLES, sandbox="process")
    assert check_reward(RewardFunction(fair), SAMPLES).flags == []

    @probe("broken", "raises")
    def broken_probe(view: ProbeView) -> str:
        raise RuntimeError("boom")

    with pytest.raises(ConfigError, match=re.escape("probe 'broken' raised RuntimeError: boom")):
        check_reward(fair, SAMPLES, probes=[broken_probe])


# Every built-in reward but llm_judge, which needs a model endpoint to judge with.
CHECKED = sorted(set(_BUILTINS) - {"llm_judge"})


def test_every_builtin_reward_has_samples() -> None:
    assert sorted(BUILTIN_SAMPLES) == CHECKED


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=needs_bwrap) if n == "code_execution" else n for n in CHECKED],
)
def test_every_builtin_reward_passes_its_own_check(name: str) -> None:
    samples, options = BUILTIN_SAMPLES[name]
    report = check_reward(name, samples, **options)
    flagged = {f.probe for f in report.flags}
    assert all(f.kind is FlagKind.PROBE_ABOVE_WRONG for f in report.flags), report.flags
    assert flagged == set()
    assert report.row("reference").invalid == 0


def test_scores_the_reward_returns_as_metrics_are_its_components() -> None:
    @reward_function(name="parts")
    def parts(messages: list[Message], ground_truth: str, **kw: Any) -> EvaluateResult:
        right = _final(_reply(messages)) == ground_truth
        return EvaluateResult(score=float(right), metrics={"right": MetricResult(score=right)})

    assert check_reward(parts, SAMPLES).row("reference").components == {"right": 1.0}
