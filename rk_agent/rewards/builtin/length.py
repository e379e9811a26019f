"""Length rewards: keep responses near a target length, or short when right and long when wrong.

Main names:
    length_reward: ``"length"``, how close the response is to a target length (or under a limit).
    cosine_length_reward: ``"cosine_length"``, the cosine-scaled length reward of "Demystifying
        Long Chain-of-Thought Reasoning in LLMs" (Yeo et al., 2025), as open-r1 and TRL use it.

Lengths are counted on the last assistant message, stripped of surrounding whitespace, either in
*tokens* (whitespace-separated words, ``len(text.split())``: cheap and model-independent, but a
Chinese or Japanese paragraph without spaces counts as one token, so use characters there) or in
*characters* (``len(text)``).
"""

from __future__ import annotations

import importlib
import math
import re
from typing import Any, Literal

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["cosine_length_reward", "count_length", "credited_working", "length_reward"]

Unit = Literal["tokens", "chars"]
Falloff = Literal["linear", "smooth"]

_UNITS = ("tokens", "chars")
_FALLOFFS = ("linear", "smooth")


def count_length(text: str, unit: Unit = "tokens") -> int:
    """The length of ``text`` in whitespace tokens or characters, ignoring surrounding space.

    Example:
        >>> count_length("  The answer is 42.  "), count_length("The answer is 42.", "chars")
        (4, 17)
    """
    if unit not in _UNITS:
        raise ConfigError(f"unit must be one of {_UNITS}, got {unit!r}")
    text = text.strip()
    return len(text.split()) if unit == "tokens" else len(text)


# --------------------------------------------------------------------------------------------
# length


def _length_unit(
    target_tokens: int | None, target_chars: int | None, unit: Unit | None
) -> tuple[Unit, int | None]:
    """Work out the unit and the target from the options, or raise `ConfigError`."""
    if target_tokens is not None and target_chars is not None:
        raise ConfigError("length reward: give target_tokens or target_chars, not both")
    target = target_tokens if target_tokens is not None else target_chars
    implied: Unit | None = "tokens" if target_tokens is not None else None
    if target_chars is not None:
        implied = "chars"
    if unit is not None and unit not in _UNITS:
        raise ConfigError(f"length reward: unit must be one of {_UNITS}, got {unit!r}")
    if unit is not None and implied is not None and unit != implied:
        raise ConfigError(f"length reward: unit={unit!r} contradicts target_{implied}=")
    if target is not None and (isinstance(target, bool) or target <= 0):
        raise ConfigError(f"length reward: the target length must be a positive int, got {target}")
    return unit or implied or "tokens", target


def _falloff(x: float, falloff: Falloff) -> float:
    """1 at ``x = 0`` falling to 0 at ``x >= 1``: a straight line, or a raised cosine."""
    x = min(max(x, 0.0), 1.0)
    if falloff == "linear":
        return 1.0 - x
    return 0.5 * (1.0 + math.cos(math.pi * x))


def _distance(n: int, target: int | None, max_length: int | None) -> float:
    """How far ``n`` is from acceptable, as a fraction of the way to a score of zero."""
    if target is None:
        limit = max_length or 1  # the caller makes sure one of the two is set
        return max(0.0, (n - limit) / limit)
    if n <= target:
        return (target - n) / target
    width = (max_length - target) if max_length is not None else target
    return (n - target) / width


@reward_function(name="length", description="How close the response is to a target length.")
def length_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    target_tokens: int | None = None,
    target_chars: int | None = None,
    max_length: int | None = None,
    unit: Unit | None = None,
    falloff: Falloff = "linear",
    **kwargs: Any,
) -> EvaluateResult:
    """Score how close the last assistant message is to a target length.

    The length ``n`` is counted in whitespace tokens (``target_tokens``) or characters
    (``target_chars``); ``max_length`` is in the same unit. With a target ``T`` the distance is
    ``x = (T - n) / T`` below the target and ``x = (n - T) / (max_length - T)`` above it
    (``(n - T) / T`` without ``max_length``), so the score reaches 0 at an empty response, at
    ``max_length`` (or ``2 T``) and beyond. With only ``max_length`` ``M``, anything up to ``M``
    scores 1 and ``x = (n - M) / M`` above it. The score is then ``1 - x`` (``falloff="linear"``)
    or ``(1 + cos(pi x)) / 2`` (``"smooth"``, flat near the target), clipped to [0, 1].

    Args:
        messages: the conversation; the last assistant message is scored.
        ground_truth: not used.
        target_tokens: the ideal length in whitespace tokens.
        target_chars: the ideal length in characters (use this for text without spaces).
        max_length: the length at which the score reaches 0 (with a target) or above which it
            starts to fall (without one).
        unit: ``"tokens"`` or ``"chars"`` when only ``max_length`` is given (default tokens).
        falloff: ``"linear"`` or ``"smooth"``.
        **kwargs: ignored.

    Returns:
        The score, with the metric ``length`` (the same score; its reason gives the count).

    Raises:
        ConfigError: no target and no ``max_length``, both targets, a non-positive target, or
            ``max_length`` not above the target.

    Example:
        >>> msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "a b c"}]
        >>> length_reward(msgs, target_tokens=4).score
        0.75
    """
    unit, target = _length_unit(target_tokens, target_chars, unit)
    if falloff not in _FALLOFFS:
        raise ConfigError(f"length reward: falloff must be one of {_FALLOFFS}, got {falloff!r}")
    if target is None and max_length is None:
        raise ConfigError("length reward needs target_tokens, target_chars or max_length")
    if max_length is not None and max_length <= (target or 0):
        raise ConfigError(
            f"length reward: max_length ({max_length}) must be greater than "
            f"{'the target (' + str(target) + ')' if target else 'zero'}"
        )
    reply = last_reply(messages)
    if reply is None:
        return no_reply("length")
    text = reply.text
    n = count_length(text, unit)
    score = _falloff(_distance(n, target, max_length), falloff)
    goal = f"target {target}" if target is not None else "limit"
    if max_length is not None:
        goal += f", max {max_length}" if target is not None else f" {max_length}"
    reason = f"{n} {unit} ({goal} {unit}): length score {score:.3f}"
    return EvaluateResult(
        score=score,
        reason=reason,
        metrics={"length": MetricResult(score=score, success=score >= 1.0, reason=reason)},
    )


# --------------------------------------------------------------------------------------------
# cosine_length


def _check_cosine_options(
    min_value_wrong: float,
    max_value_wrong: float,
    min_value_correct: float,
    max_value_correct: float,
    max_len: int,
    unit: Unit,
) -> None:
    values = (min_value_wrong, max_value_wrong, min_value_correct, max_value_correct)
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"cosine_length reward: the min/max values must be finite, got {values}")
    if min_value_wrong > max_value_wrong or min_value_correct > max_value_correct:
        raise ConfigError(
            "cosine_length reward: need min_value_wrong <= max_value_wrong and "
            f"min_value_correct <= max_value_correct, got wrong=({min_value_wrong}, "
            f"{max_value_wrong}), correct=({min_value_correct}, {max_value_correct})"
        )
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len <= 0:
        raise ConfigError(f"cosine_length reward: max_len must be a positive int, got {max_len!r}")
    if unit not in _UNITS:
        raise ConfigError(f"cosine_length reward: unit must be one of {_UNITS}, got {unit!r}")


def _judge_correct(messages: list[Message], ground_truth: Any) -> tuple[bool | None, str]:
    """Check the answer with the math reward; ``(None, error)`` when that cannot be done."""
    if ground_truth is None:
        return None, (
            "reward 'cosine_length' needs to know whether the answer is right: pass correct=True/"
            "False, or ground_truth= to check it with the math reward"
        )
    # Imported on use: math-verify and sympy are slow to import, and most callers pass correct=.
    math_reward = importlib.import_module("rk_agent.rewards.builtin.math").math_reward
    result: EvaluateResult = math_reward(messages=messages, ground_truth=ground_truth)
    if not result.is_score_valid:
        return None, f"the math reward could not check the answer: {result.error or result.reason}"
    metric = result.metrics.get("correct")
    if metric is not None and metric.success is not None:
        return metric.success, "checked by the math reward"
    return result.score >= 1.0 - 1e-9, "checked by the math reward"


_MARK = re.compile(r"####|\\(?:boxed|fbox)(?![A-Za-z])")


def _final_marks(text: str) -> list[int]:
    """Where the marked final answers start: ``\\boxed{}``/``\\fbox{}`` and ``####`` lines.

    A box on a ``####`` line is part of that line's answer (``#### \\boxed{4}`` is one answer).
    """
    marks: list[int] = []
    for match in _MARK.finditer(text):
        hash_line = bool(marks) and text.startswith("####", marks[-1])
        if match.group() != "####" and hash_line and "\n" not in text[marks[-1] : match.start()]:
            continue
        marks.append(match.start())
    return marks


def _distinct_share(text: str) -> float:
    """The share of distinct word trigrams in ``text`` (1.0 when it has fewer than three words)."""
    words = text.split()
    grams = list(zip(words, words[1:], words[2:], strict=False))
    return len(set(grams)) / len(grams) if grams else 1.0


def credited_working(text: str, unit: Unit = "chars") -> tuple[int, str]:
    """The length a wrong answer is credited with by ``cosine_length``, and why.

    The working is the text before the reply's one marked final answer (thinking included),
    scaled by its share of distinct word trigrams; no marked answer, or several, earn 0.

    Example:
        >>> credited_working("2 + 2 makes 5.\\n#### 5")
        (14, '14 chars of working before the answer')
        >>> credited_working("#### 5\\n#### 5")[0], credited_working("I cannot say.")[0]
        (0, 0)
    """
    end = text.rfind("</think>")
    start = end + len("</think>") if end >= 0 else 0
    if end < 0 and "<think>" in text:
        return 0, "an unfinished <think> block: no length credit"
    marks = _final_marks(text[start:])
    if not marks:
        return 0, "no marked final answer (\\boxed{} or ####): no length credit"
    if len(marks) > 1:
        return 0, f"{len(marks)} marked final answers: no length credit"
    working = text[: start + marks[0]]
    share = _distinct_share(working)
    n = round(count_length(working, unit) * share)
    why = f"{n} {unit} of working before the answer"
    return n, why if share == 1.0 else f"{why} ({share:.0%} of its word trigrams distinct)"


@reward_function(
    name="cosine_length",
    description="Cosine-scaled length reward: short right answers best, long wrong ones least bad.",
)
def cosine_length_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    correct: bool | None = None,
    min_value_wrong: float = -1.0,
    max_value_wrong: float = -0.5,
    min_value_correct: float = 0.5,
    max_value_correct: float = 1.0,
    max_len: int = 1000,
    unit: Unit = "chars",
    **kwargs: Any,
) -> EvaluateResult:
    """Reward right answers more when shorter; penalise wrong ones less when they work longer.

    With ``p = min(n / max_len, 1)`` the progress through the length budget and
    ``c = (1 + cos(pi p)) / 2`` (1 for an empty response, 0 at ``max_len``):

    * a correct answer scores ``min_value_correct + (max_value_correct - min_value_correct) c``,
      from ``max_value_correct`` when empty down to ``min_value_correct`` at ``max_len``, with
      ``n`` the length of the whole reply;
    * a wrong answer scores ``max_value_wrong + (min_value_wrong - max_value_wrong) c``, from
      ``min_value_wrong`` (the strongest penalty) when short up to ``max_value_wrong`` at
      ``max_len``: a long attempt is penalised less, encouraging the model to keep thinking.

    The defaults are those of open-r1, and length is counted in characters as there. Unlike
    open-r1, a wrong answer's ``n`` counts only its *working*, so that the length credit cannot
    be farmed (``rk-agent check reward cosine_length`` finds every one of these paid above an
    honest wrong answer under open-r1's rule):

    * the working is the text before the reply's final answer, which must be marked
      (``\\boxed{}`` or ``####``) and given once: a reply with no marked answer (a refusal, an
      echo of the question) or with several (two boxed answers, ``####`` lines repeated) earns no
      length credit, and neither does anything written after the answer (padding) or inside
      its slot (``#### 3 or 4``, a list of candidates);
    * the working's length is scaled by its share of distinct word trigrams, the n-gram
      repetition penalty of Yeo et al.: text repeated to fill the budget earns next to nothing.

    Varied filler before the answer still counts as working: no length rule can tell it from
    thinking. For a signal that pays wrong answers nothing for length, set
    ``max_value_wrong=min_value_wrong``. Lengths past ``max_len`` are clipped to ``max_len``
    (open-r1's cosine would climb back up and reward running far over budget).

    Args:
        messages: the conversation; the last assistant message is scored.
        ground_truth: the reference answer; used to check correctness with the math reward
            when ``correct`` is not given.
        correct: whether the answer is right, when the caller already knows.
        min_value_wrong: the reward of a wrong answer of length 0.
        max_value_wrong: the reward of a wrong answer of length ``max_len`` or more.
        min_value_correct: the reward of a correct answer of length ``max_len`` or more.
        max_value_correct: the reward of a correct answer of length 0.
        max_len: the length budget.
        unit: ``"chars"`` (default, as open-r1) or ``"tokens"`` (whitespace tokens).
        **kwargs: ignored.

    Returns:
        The score (in ``[min_value_wrong, max_value_correct]``), with the metrics ``length``
        (``c``: 1 when empty, 0 at ``max_len``; for a wrong answer, of its credited working,
        the reason says why) and ``correct`` (1.0 or 0.0). Invalid when
        correctness is unknown: neither ``correct`` nor ``ground_truth`` given, or the math
        reward could not check the answer.

    Raises:
        ConfigError: min above max for right or wrong answers, a non-finite value, a
            non-positive ``max_len`` or an unknown unit.

    Example:
        >>> msgs = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
        >>> round(cosine_length_reward(msgs, correct=True, max_len=100).score, 4)
        0.9999
    """
    _check_cosine_options(
        min_value_wrong, max_value_wrong, min_value_correct, max_value_correct, max_len, unit
    )
    reply = last_reply(messages)
    if reply is None:
        return no_reply("cosine_length")
    text = reply.text
    if correct is None:
        correct, how = _judge_correct(messages, ground_truth)
        if correct is None:
            return EvaluateResult.invalid(how)
    else:
        correct, how = bool(correct), "given"
    if correct:
        n = count_length(text, unit)
        counted = f"{n} {unit} of a budget of {max_len}"
    else:
        n, counted = credited_working(text, unit)
        counted += f", of a budget of {max_len}"
    c = 0.5 * (1.0 + math.cos(math.pi * min(n / max_len, 1.0)))
    if correct:
        score = min_value_correct + (max_value_correct - min_value_correct) * c
    else:
        score = max_value_wrong + (min_value_wrong - max_value_wrong) * c
    verdict = "correct" if correct else "wrong"
    return EvaluateResult(
        score=score,
        reason=f"{verdict} answer ({how}): {counted}: {score:.3f}",
        metrics={
            "length": MetricResult(score=c, reason=counted),
            "correct": MetricResult(score=float(correct), success=correct, reason=how),
        },
    )
