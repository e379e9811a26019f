"""Tests for `rk_agent.rewards.builtin.repetition`: the ``repetition`` n-gram penalty."""

from __future__ import annotations

import math
import re

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.repetition import repetition_penalty_reward, tokenize


def convo(response: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": "Tell me about the sea."},
        {"role": "assistant", "content": response},
    ]


NATURAL = (
    "The sea covers most of the planet. Its currents move heat from the equator toward the "
    "poles, and its tides follow the pull of the moon and, more weakly, the sun."
)


def test_text_without_repeated_trigrams_scores_exactly_zero() -> None:
    result = repetition_penalty_reward(convo(NATURAL))
    assert result.is_score_valid
    assert result.score == 0.0
    assert math.copysign(1.0, result.score) == 1.0  # not -0.0
    assert result.metrics["repeated_ngrams"].score == 0.0
    assert result.metrics["repeated_ngrams"].success is True


def test_a_degenerate_loop_gets_nearly_the_full_penalty() -> None:
    result = repetition_penalty_reward(convo("I will help you. " * 500))
    # 2000 words, 1998 trigrams, of which only 4 are distinct.
    assert result.score == pytest.approx(-(1 - 4 / 1998))
    assert result.score < -0.99
    assert "4 unique of 1998 3-grams" in (result.reason or "")


def test_penalty_is_the_fraction_of_repeated_ngrams_times_max_penalty() -> None:
    # trigrams: abc bcd cda dab abc bcd -> 4 unique of 6
    result = repetition_penalty_reward(convo("a b c d a b c d"))
    assert result.score == pytest.approx(-1 / 3)
    assert result.metrics["repeated_ngrams"].score == pytest.approx(1 / 3)
    half = repetition_penalty_reward(convo("a b c d a b c d"), max_penalty=-0.5)
    assert half.score == pytest.approx(-1 / 6)


def test_ngram_size_changes_what_counts_as_a_repeat() -> None:
    text = "to be or not to be"
    assert repetition_penalty_reward(convo(text), ngram_size=2).score == pytest.approx(-1 / 5)
    assert repetition_penalty_reward(convo(text), ngram_size=3).score == 0.0
    assert repetition_penalty_reward(convo(text), ngram_size=1).score == pytest.approx(-2 / 6)


def test_matching_is_case_insensitive_but_punctuation_sticks_to_words() -> None:
    assert repetition_penalty_reward(convo("Go Home now go home NOW")).score < 0
    repeated = repetition_penalty_reward(convo("go home now. go home now."))
    assert repeated.score == pytest.approx(-1 / 4)
    assert repetition_penalty_reward(convo("go home now. go home now!")).score == 0.0


@pytest.mark.parametrize("text", ["", "   \n ", "two words"])
def test_text_shorter_than_n_cannot_repeat_and_scores_zero(text: str) -> None:
    result = repetition_penalty_reward(convo(text))
    assert result.is_score_valid
    assert result.score == 0.0
    assert "fewer than ngram_size=3: nothing can repeat" in (result.reason or "")


def test_chinese_loop_without_spaces_is_caught_by_the_auto_tokenizer() -> None:
    loop = "我会帮助你。" * 200
    assert repetition_penalty_reward(convo(loop)).score < -0.99
    # Split on whitespace alone the whole loop is one "word" and escapes the penalty.
    assert repetition_penalty_reward(convo(loop), tokenizer="whitespace").score == 0.0


def test_natural_chinese_and_japanese_are_not_penalised() -> None:
    chinese = "大海覆盖了地球表面的大部分。洋流把热量从赤道带向两极。"
    japanese = "海は地球の表面の大部分を覆っている。"
    assert repetition_penalty_reward(convo(chinese)).score == 0.0
    assert repetition_penalty_reward(convo(japanese)).score == 0.0


def test_tokenize_auto_splits_no_space_scripts_per_character_and_keeps_words() -> None:
    assert tokenize("The cat SAT.") == ["the", "cat", "sat."]
    assert tokenize("The cat SAT.") == tokenize("The cat SAT.", "whitespace")
    assert tokenize("我爱 Python 3!") == ["我", "爱", "python", "3!"]
    assert tokenize("数学abc") == ["数", "学", "abc"]
    assert tokenize("ภาษาไทย") == ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]
    assert tokenize("한국어 문장") == ["한국어", "문장"]  # Korean is written with spaces


def test_tokenize_chars_uses_every_non_space_character() -> None:
    assert tokenize("Ab c", "chars") == ["a", "b", "c"]
    assert repetition_penalty_reward(convo("abab"), ngram_size=2, tokenizer="chars").score == (
        pytest.approx(-1 / 3)
    )


def test_tokenize_rejects_an_unknown_tokenizer() -> None:
    message = (
        "repetition reward: tokenizer must be one of ('auto', 'whitespace', 'chars'), got 'bpe'"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        tokenize("abc", "bpe")  # type: ignore[arg-type]


def test_the_last_assistant_message_is_scored() -> None:
    messages = [
        {"role": "user", "content": "spam spam spam spam spam"},
        {"role": "assistant", "content": NATURAL},
        {"role": "user", "content": "thanks"},
    ]
    assert repetition_penalty_reward(messages).score == 0.0


def test_no_assistant_message_is_invalid() -> None:
    result = repetition_penalty_reward([{"role": "user", "content": "hi hi hi hi"}])
    assert not result.is_score_valid
    assert result.error == (
        "reward 'repetition' scores the last assistant message, but the conversation has none"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ngram_size": 0}, "repetition reward: ngram_size must be a positive int, got 0"),
        ({"ngram_size": 2.5}, "repetition reward: ngram_size must be a positive int, got 2.5"),
        (
            {"max_penalty": 0.5},
            "repetition reward: max_penalty must be a finite number <= 0 (it is a penalty), "
            "got 0.5",
        ),
        (
            {"max_penalty": -math.inf},
            "repetition reward: max_penalty must be a finite number <= 0 (it is a penalty), "
            "got -inf",
        ),
        (
            {"tokenizer": "bpe"},
            "repetition reward: tokenizer must be one of ('auto', 'whitespace', 'chars'), "
            "got 'bpe'",
        ),
    ],
)
def test_bad_options_raise_a_config_error(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        repetition_penalty_reward(convo(NATURAL), **options)
