"""Repetition penalty: a negative reward for responses that repeat the same n-grams.

Main names:
    repetition_penalty_reward: ``"repetition"``, the n-gram repetition penalty of open-r1.
    tokenize: the tokenisation it uses, usable on its own.

The penalty is ``max_penalty * (1 - unique n-grams / all n-grams)``: 0 for text that never
repeats an n-gram, close to ``max_penalty`` for a model stuck in a loop.

Tokenisation (``tokenizer=``):

* ``"whitespace"``: lowercased whitespace-separated words, as open-r1 does for English
  (punctuation stays attached, so ``"end."`` and ``"end"`` differ).
* ``"chars"``: every non-space character is a token.
* ``"auto"`` (default): like ``"whitespace"``, except that each character of a script written
  without spaces (Chinese, Japanese kana, Thai, Lao, Khmer, Myanmar, and CJK punctuation) is a
  token of its own. Plain English scores exactly as ``"whitespace"``; a Chinese paragraph, which
  has no spaces and would be a single "word", is scored on character n-grams instead of escaping
  the penalty. Korean is written with spaces and is split into words.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["repetition_penalty_reward", "tokenize"]

Tokenizer = Literal["auto", "whitespace", "chars"]
_TOKENIZERS = ("auto", "whitespace", "chars")

# Scripts written without spaces between words: kana, CJK ideographs (and extensions), CJK and
# full-width punctuation, half-width katakana, Thai, Lao, Myanmar, Khmer.
_NO_SPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3001-\u303f\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\uff01-\uff9f\U00020000-\U0003134f"
)
_AUTO_TOKEN = re.compile(f"[{_NO_SPACE}]|[^\\s{_NO_SPACE}]+")
_CHAR_TOKEN = re.compile(r"\S")


def tokenize(text: str, tokenizer: Tokenizer = "auto") -> list[str]:
    """Split ``text`` into lowercased tokens for n-gram counting (see the module docstring).

    Example:
        >>> tokenize("The cat SAT.")
        ['the', 'cat', 'sat.']
        >>> tokenize("我爱 Python")
        ['我', '爱', 'python']
    """
    text = text.lower()
    if tokenizer == "whitespace":
        return text.split()
    if tokenizer == "auto":
        return _AUTO_TOKEN.findall(text)
    if tokenizer == "chars":
        return _CHAR_TOKEN.findall(text)
    raise ConfigError(
        f"repetition reward: tokenizer must be one of {_TOKENIZERS}, got {tokenizer!r}"
    )


def _check_options(ngram_size: int, max_penalty: float, tokenizer: str) -> None:
    if isinstance(ngram_size, bool) or not isinstance(ngram_size, int) or ngram_size < 1:
        raise ConfigError(
            f"repetition reward: ngram_size must be a positive int, got {ngram_size!r}"
        )
    if not math.isfinite(max_penalty) or max_penalty > 0:
        raise ConfigError(
            f"repetition reward: max_penalty must be a finite number <= 0 (it is a penalty), "
            f"got {max_penalty!r}"
        )
    if tokenizer not in _TOKENIZERS:
        raise ConfigError(
            f"repetition reward: tokenizer must be one of {_TOKENIZERS}, got {tokenizer!r}"
        )


@reward_function(name="repetition", description="Penalty for repeated n-grams in the response.")
def repetition_penalty_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    ngram_size: int = 3,
    max_penalty: float = -1.0,
    tokenizer: Tokenizer = "auto",
    **kwargs: Any,
) -> EvaluateResult:
    """Penalise the last assistant message for repeating n-grams.

    The score is ``max_penalty * (1 - unique / total)`` over the response's n-grams, in
    ``[max_penalty, 0]``. An empty response, or one shorter than ``ngram_size`` tokens, cannot
    repeat anything and scores 0.

    Args:
        messages: the conversation; the last assistant message is scored.
        ground_truth: not used.
        ngram_size: the n of the n-grams (3, as open-r1).
        max_penalty: the score of a response made of one n-gram repeated forever (<= 0).
        tokenizer: ``"auto"``, ``"whitespace"`` or ``"chars"`` (see the module docstring).
        **kwargs: ignored.

    Returns:
        The penalty, with the metric ``repeated_ngrams`` (the fraction of n-grams that repeat
        an earlier one, in [0, 1]).

    Raises:
        ConfigError: ``ngram_size`` not a positive int, ``max_penalty`` above 0 or not finite,
            or an unknown tokenizer.

    Example:
        >>> msgs = [{"role": "assistant", "content": "go go go go go"}]
        >>> repetition_penalty_reward(msgs, ngram_size=2).score
        -0.75
    """
    _check_options(ngram_size, max_penalty, tokenizer)
    reply = last_reply(messages)
    if reply is None:
        return no_reply("repetition")
    text = reply.text
    tokens = tokenize(text, tokenizer)
    if len(tokens) < ngram_size:
        reason = f"{len(tokens)} tokens, fewer than ngram_size={ngram_size}: nothing can repeat"
        return EvaluateResult(
            score=0.0,
            reason=reason,
            metrics={"repeated_ngrams": MetricResult(score=0.0, success=True, reason=reason)},
        )
    ngrams = [tuple(tokens[i : i + ngram_size]) for i in range(len(tokens) - ngram_size + 1)]
    unique = len(set(ngrams))
    repeated = 1.0 - unique / len(ngrams)
    score = max_penalty * repeated + 0.0  # + 0.0 turns -0.0 into 0.0
    reason = (
        f"{unique} unique of {len(ngrams)} {ngram_size}-grams ({repeated:.1%} repeated): "
        f"penalty {score:.3f}"
    )
    return EvaluateResult(
        score=score,
        reason=reason,
        metrics={
            "repeated_ngrams": MetricResult(score=repeated, success=repeated == 0.0, reason=reason)
        },
    )
