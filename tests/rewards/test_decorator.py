"""@reward_function: call shapes, coercion, output rules, failures as data."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent import EvaluateResult, Message, MetricResult, reward_function
from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.rewards.decorator import is_reward_function, standardize_result

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
]


def test_bare_and_with_arguments() -> None:
    @reward_function
    def bare(messages: list[Message], **kwargs: Any) -> float:
        """Bare reward."""
        return 1.0

    @reward_function(name="named", requirements=["numpy"])
    def with_args(messages: list[Message], **kwargs: Any) -> float:
        return 0.5

    assert bare(CHAT).score == 1.0
    assert with_args(CHAT).score == 0.5
    assert bare.reward_spec.name == "bare"
    assert bare.reward_spec.description == "Bare reward."
    assert with_args.__name__ == "named"
    assert with_args.reward_spec.requirements == ("numpy",)
    assert is_reward_function(bare)
    assert not is_reward_function(lambda: 1)


def test_closures_of_one_definition_share_their_call_plan() -> None:
    from rk_agent.rewards import decorator

    def make(bonus: float) -> Any:
        def scored(messages: list[Message], **kwargs: Any) -> float:
            return bonus + len(messages[-1].text)

        return reward_function(scored)

    first, second = make(0.0), make(1.0)
    assert decorator._known_plan(first.__wrapped__, "scored") is decorator._known_plan(
        second.__wrapped__, "scored"
    )
    # Each still scores with its own closure, and dicts still become messages.
    assert (first(messages=CHAT).score, second(messages=CHAT).score) == (1.0, 2.0)


def test_a_function_whose_hints_are_not_strings_gets_a_plan_of_its_own() -> None:
    from rk_agent.rewards import decorator

    def make(hint: Any) -> Any:
        def scored(messages, **kwargs):  # type: ignore[no-untyped-def]
            return float(isinstance(messages[0], Message))

        scored.__annotations__ = {"messages": hint}  # evaluated hints may differ per closure
        return reward_function(scored)

    as_messages, as_dicts = make(list[Message]), make(list[dict])
    assert decorator._known_plan(as_messages.__wrapped__, "scored") is not (
        decorator._known_plan(as_dicts.__wrapped__, "scored")
    )
    assert (as_messages(messages=CHAT).score, as_dicts(messages=CHAT).score) == (1.0, 0.0)


def test_keeps_the_function_identity() -> None:
    def original(messages: list[Message], original_messages: list[Message], metadata: Any) -> float:
        """Docs."""
        return 1.0

    wrapped = reward_function(original)
    assert wrapped.__wrapped__ is original
    assert wrapped.__doc__ == "Docs."
    assert list(inspect.signature(wrapped).parameters) == [
        "messages",
        "original_messages",
        "metadata",
    ]
    assert reward_function(wrapped) is wrapped  # decorating twice is a no-op


def test_positional_call_like_the_launch_post() -> None:
    seen: dict[str, Any] = {}

    @reward_function
    def combined_reward(messages, original_messages, metadata):  # type: ignore[no-untyped-def]
        seen.update(messages=messages, original=original_messages, metadata=metadata)
        return 1.0

    result = combined_reward(CHAT, CHAT[:-1], {"k": 1})
    assert result.score == 1.0
    assert seen["messages"] is CHAT  # unannotated: passed through untouched
    assert seen["metadata"] == {"k": 1}


def test_dicts_become_messages_when_annotated() -> None:
    @reward_function
    def r(messages: list[Message], original_messages: list[Message], **kwargs: Any) -> float:
        assert all(isinstance(m, Message) for m in messages + original_messages)
        return float(messages[-1].role == "assistant" and len(original_messages) == 2)

    assert r(messages=CHAT).score == 1.0  # original_messages defaults to messages[:-1]
    assert r(CHAT).score == 1.0
    assert r(CHAT, None).score == 1.0  # an explicit None also means "the default"


def test_messages_become_dicts_when_dicts_are_annotated() -> None:
    @reward_function
    def r(messages: list[dict[str, Any]], **kwargs: Any) -> float:
        assert all(isinstance(m, dict) for m in messages)
        return 1.0

    assert r(messages=[Message(role="user", content="x")]).score == 1.0


def test_ground_truth_message_coercion_and_plain_strings() -> None:
    @reward_function
    def r(messages: list[Message], ground_truth: Message | None = None, **kw: Any) -> float:
        return 1.0 if isinstance(ground_truth, Message) else 0.0

    assert r(CHAT, ground_truth={"role": "assistant", "content": "4"}).score == 1.0


def test_bad_messages_raise_input_error() -> None:
    @reward_function
    def r(messages: list[Message], **kwargs: Any) -> float:
        return 1.0

    with pytest.raises(
        RewardInputError, match=re.escape("argument 'messages' is not in the OpenAI")
    ):
        r(messages=[{"role": "bot", "content": "x"}])
    with pytest.raises(RewardInputError, match="expected a list of messages, got int"):
        r(messages=3)


def test_simple_signature_gets_response_prompt_and_answer() -> None:
    seen: dict[str, Any] = {}

    @reward_function
    def exact(response: str, prompt: str, answer: str) -> float:
        seen.update(response=response, prompt=prompt)
        return float(response.strip() == answer)

    assert exact(messages=CHAT, answer="4").score == 1.0
    assert seen == {"response": "4", "prompt": "What is 2+2?"}
    # ground_truth feeds `answer` when the function has no ground_truth parameter,
    # and keyword arguments the function does not take are dropped.
    assert exact(messages=CHAT, ground_truth="5", trainer_state=object()).score == 0.0
    # Direct calls still behave like the function.
    assert exact("4", "q", "4").score == 1.0


def test_simple_signature_needs_an_assistant_message() -> None:
    @reward_function
    def r(response: str) -> float:
        return 1.0

    with pytest.raises(RewardInputError, match="the messages have no assistant message"):
        r(messages=CHAT[:2])


def test_calling_with_wrong_arguments_raises_not_scores() -> None:
    @reward_function
    def r(messages: list[Message], ground_truth: str) -> float:
        return 1.0

    with pytest.raises(RewardInputError, match="missing 1 required positional argument"):
        r(messages=CHAT)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (0.25, EvaluateResult(score=0.25)),
        (3, EvaluateResult(score=3.0)),
        (True, EvaluateResult(score=1.0)),
        (
            (0.5, {"a": 1.0, "b": MetricResult(score=0.0, reason="no"), "c": {"score": 0.2}}),
            EvaluateResult(
                score=0.5,
                metrics={
                    "a": MetricResult(score=1.0),
                    "b": MetricResult(score=0.0, reason="no"),
                    "c": MetricResult(score=0.2),
                },
            ),
        ),
        ({"score": 0.9, "reason": "ok"}, EvaluateResult(score=0.9, reason="ok")),
    ],
)
def test_output_standardisation(output: Any, expected: EvaluateResult) -> None:
    @reward_function
    def r(messages: Any) -> Any:
        return output

    assert r(CHAT) == expected


def test_numpy_scores_are_accepted() -> None:
    import numpy as np

    assert standardize_result(np.float32(0.5)).score == 0.5


@pytest.mark.parametrize(
    ("output", "fragment"),
    [
        (None, "returned NoneType None"),
        ("0.5", "returned str '0.5'"),
        (float("nan"), "a non-finite score (nan)"),
        ((1.0, "metrics?"), "a tuple whose second item is str"),
        ({"reason": "no score"}, "returned dict"),
        ({"score": "high"}, "which does not validate"),
    ],
)
def test_unusable_output_is_an_invalid_score(output: Any, fragment: str) -> None:
    @reward_function
    def r(messages: Any) -> Any:
        return output

    result = r(CHAT)
    assert result.is_score_valid is False
    assert result.error is not None and fragment in result.error
    assert result.error.startswith("RewardOutputError: reward 'r' returned")


def test_exception_is_an_invalid_score_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    @reward_function
    def flaky(messages: list[Message]) -> float:
        raise ZeroDivisionError("division by zero")

    with caplog.at_level(logging.WARNING, logger="rk_agent.rewards"):
        result = flaky(CHAT)
    assert result.is_score_valid is False
    assert result.error == "ZeroDivisionError: division by zero"
    assert result.score == 0.0
    assert "reward 'flaky' raised ZeroDivisionError" in caplog.text
    assert caplog.records[0].exc_info is not None  # the traceback is logged


def test_an_error_repeated_on_every_call_is_logged_once_then_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @reward_function
    def always_broken(messages: list[Message]) -> float:
        raise ValueError("the judge's answer has no score")

    @reward_function
    def broken_otherwise(messages: list[Message]) -> float:
        raise KeyError("score")

    with caplog.at_level(logging.WARNING, logger="rk_agent.rewards"):
        for _ in range(25):
            assert not always_broken(CHAT).is_score_valid
        broken_otherwise(CHAT)
    lines = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert lines == [
        ("reward 'always_broken' raised ValueError: the judge's answer has no score", True),
        ("reward 'always_broken' raised ValueError: the judge's answer has no score "
         "(10 times so far)", False),
        ("reward 'broken_otherwise' raised KeyError: 'score'", True),  # another error: logged
    ]  # fmt: skip


def test_keyboard_interrupt_is_not_swallowed() -> None:
    @reward_function
    def r(messages: Any) -> float:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        r(CHAT)


def test_async_reward() -> None:
    @reward_function
    async def judge(response: str) -> tuple[float, dict[str, float]]:
        await asyncio.sleep(0)
        return 0.8, {"politeness": 1.0}

    @reward_function
    async def broken(messages: Any) -> float:
        raise ValueError("judge down")

    assert inspect.iscoroutinefunction(judge)
    assert judge.reward_spec.is_async
    result = asyncio.run(judge(messages=CHAT))
    assert result.score == 0.8 and result.metrics["politeness"].score == 1.0
    failed = asyncio.run(broken(CHAT))
    assert failed.is_score_valid is False and failed.error == "ValueError: judge down"


def test_deploy_creates_a_fireworks_evaluator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rk_agent.loading import load_object
    from rk_agent.testing.fake_fireworks import FakeFireworks

    (tmp_path / "rewards_file.py").write_text(
        "from rk_agent import reward_function\n\n@reward_function\n"
        "def r(messages):\n    return 1.0\n"
    )
    r = load_object(f"{tmp_path / 'rewards_file.py'}::r", kind="reward")
    for name in ("FIREWORKS_API_KEY", "FIREWORKS_ACCOUNT_ID", "FIREWORKS_AUTH_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match=re.escape("no Fireworks API key: set FIREWORKS_API_KEY")):
        r.deploy(name="r", description="d", force=True)
    with FakeFireworks(api_key="fw-test-key", account_id="me") as fake:
        monkeypatch.setenv("FIREWORKS_API_KEY", "fw-test-key")
        monkeypatch.setenv("FIREWORKS_API_BASE", fake.url)
        deployment = r.deploy(name="r", description="d", force=True, poll_s=0.01)
    assert deployment.evaluator.name == "accounts/me/evaluators/r"
    assert deployment.evaluator.state == "ACTIVE" and deployment.action == "created"


def test_not_a_function() -> None:
    with pytest.raises(RewardInputError, match="expects a function, got int"):
        reward_function(3)  # type: ignore[call-overload]


def test_misuse_of_options_fails_fast() -> None:
    from rk_agent.errors import ConfigError

    @reward_function
    def strict(messages: Any, strictness: str = "exact") -> float:
        if strictness not in ("exact", "partial"):
            raise ConfigError(f"strictness must be 'exact' or 'partial', got {strictness!r}")
        return 1.0

    with pytest.raises(ConfigError, match="got 'fuzzy'"):
        strict(CHAT, strictness="fuzzy")
