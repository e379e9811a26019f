"""Relevance: does the response talk about what the user asked, and answer it directly?

Main names:
    relevance_reward: ``"relevance"``, keyword overlap with the question plus a direct-answer bonus
        (the metric built in the "Creating your first reward function" tutorial of Fireworks'
        Reward Kit).
    extract_keywords: the question's keywords, as the reward sees them.
    STOPWORDS: the English stopwords left out of the keywords.

This is a cheap lexical signal for English text, meant as a tutorial-sized example and as one
component among others: it cannot tell a right answer from a wrong one that uses the same words.
Words are runs of letters, digits and underscores, lowercased; a final plural ``s`` is dropped
from words longer than three letters (not after ``s``, ``u`` or ``i``: "class", "virus", "paris"
stay) so that "capitals" matches "capital". Text without spaces (Chinese, Japanese) is not split
into words and is not supported.

The question restated in the response does not count: its verbatim copies (ignoring case,
spaces and punctuation) are cut from the response before it is scored, so echoing the question
earns nothing (``rk-agent check reward relevance`` found that an echo scored 1.0).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._reply import no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["STOPWORDS", "extract_keywords", "relevance_reward"]

_STOPWORD_TEXT = """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else
    ever few for from further get got had has have having he her here hers herself him himself
    his how i if in into is it its itself just let me might more most much must my myself no
    nor not now of off on once only or other our ours ourselves out over own please same shall
    she should so some such tell than that the their theirs them themselves then there these
    they this those through to too under until up upon us very was we were what when where
    whether which while who whom whose why will with would yes yet you your yours yourself
    yourselves s t d ll m re ve don doesn didn isn aren wasn weren won wouldn shouldn couldn
    cannot explain describe give know like make want way
"""

STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""English function words, question words and request verbs ("tell", "explain", "describe")."""

_WORD = re.compile(r"\w+")
_COPULAS = frozenset({"is", "are", "was", "were", "am", "equals", "means", "refers"})
_HEDGES = (
    "i'm not sure",
    "i am not sure",
    "i don't know",
    "i do not know",
    "i can't",
    "i cannot",
    "sorry",
    "as an ai",
    "it depends",
)
_SENTENCE_END = re.compile(r"[.!?\n]")
_LEADING_MARKUP = re.compile(r"^[\s*#>_`\-]+")


def _normalise(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and word[-2] not in "siu":
        return word[:-1]
    return word


def _words(text: str) -> list[str]:
    return [_normalise(w) for w in _WORD.findall(text.lower())]


def _without_question(response: str, question: str) -> tuple[str, int]:
    """``response`` with every verbatim copy of ``question`` cut out, and how many there were."""
    words = re.findall(r"\w+", question)
    if not words:
        return response, 0
    copy = re.compile(r"\W+".join(map(re.escape, words)) + r"[^\w\s]*", re.IGNORECASE)
    return copy.subn(" ", response)


def _normalised_set(words: Collection[str]) -> frozenset[str]:
    lowered = {w.lower() for w in words}
    return frozenset(lowered | {_normalise(w) for w in lowered})


_NORMALISED_STOPWORDS = _normalised_set(STOPWORDS)


def extract_keywords(text: str, stopwords: Collection[str] = STOPWORDS) -> set[str]:
    """The lowercased, de-pluralised words of ``text`` that are not stopwords.

    Example:
        >>> sorted(extract_keywords("What is the capital of France?"))
        ['capital', 'france']
    """
    stop = _NORMALISED_STOPWORDS if stopwords is STOPWORDS else _normalised_set(stopwords)
    return {w for w in _words(text) if w not in stop}


def _first_sentence(text: str) -> tuple[str, bool]:
    """The response's first sentence without leading markdown, and whether it ends with ``?``."""
    text = _LEADING_MARKUP.sub("", text)
    end = _SENTENCE_END.search(text)
    if end is None:
        return text, False
    return text[: end.start()], end.group() == "?"


def _direct_answer(response: str, keywords: set[str]) -> tuple[bool, str]:
    """Whether the response opens by answering (see `relevance_reward` for the rule)."""
    sentence, is_question = _first_sentence(response)
    lowered = sentence.lower().replace("\u2019", "'").strip()
    words = _words(lowered)
    if not words:
        return False, "the response does not open with a sentence"
    if is_question:
        return False, "the response opens with a question"
    if lowered.startswith(_HEDGES):
        return False, "the response opens with a hedge"
    if words[0] in ("yes", "no"):
        return True, f"opens with {words[0]!r}"
    if _COPULAS.intersection(_WORD.findall(lowered)) and keywords.intersection(words):
        return True, "the first sentence states something about the question's keywords"
    return False, "the first sentence is not a statement about the question's keywords"


def _conversation_parts(messages: list[Message]) -> tuple[str | None, str | None]:
    """``(question, response)``: the last assistant text and the last user text before it."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            question = next(
                (m.text for m in reversed(messages[:i]) if m.role == "user"),
                None,
            )
            return question, messages[i].text
    return None, None


@reward_function(
    name="relevance",
    description="Keyword overlap with the question, plus a bonus for answering directly.",
)
def relevance_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    direct_answer_bonus: float = 0.2,
    stopwords: Collection[str] | None = None,
    **kwargs: Any,
) -> EvaluateResult:
    """Score how much of the user's question the response addresses.

    ``keyword_overlap`` is the fraction of the question's keywords (see `extract_keywords`) that
    appear in the response. ``direct_answer`` holds when the response's first sentence (up to
    the first ``.``, ``!``, ``?`` or line break, leading markdown ignored) is not a question, does
    not open with a hedge ("I'm not sure", "I cannot", "Sorry", ...), and either starts with
    "yes"/"no" or contains one of the question's keywords and one of "is", "are", "was",
    "were", "am", "equals", "means", "refers". The score is
    ``min(1, keyword_overlap + direct_answer_bonus * direct_answer)``.

    Args:
        messages: the conversation; the last assistant message is scored against the last user
            message before it.
        ground_truth: not used.
        direct_answer_bonus: added when the response answers directly (0.2).
        stopwords: words that are not keywords; defaults to `STOPWORDS`.
        **kwargs: ignored.

    Returns:
        The score in [0, 1] with the metrics ``keyword_overlap`` and ``direct_answer``. Invalid
        when there is no assistant message, no user message before it, or the question has no
        keywords at all ("What is it?"): relevance cannot be measured then.

    Raises:
        ConfigError: ``direct_answer_bonus`` outside [0, 1].

    Example:
        >>> msgs = [{"role": "user", "content": "What is the capital of France?"},
        ...         {"role": "assistant", "content": "The capital of France is Paris."}]
        >>> relevance_reward(msgs).score
        1.0
    """
    if not 0.0 <= direct_answer_bonus <= 1.0:
        raise ConfigError(
            f"relevance reward: direct_answer_bonus must be in [0, 1], got {direct_answer_bonus!r}"
        )
    question, response = _conversation_parts(messages)
    if response is None:
        return no_reply("relevance")
    if question is None:
        return EvaluateResult.invalid(
            "reward 'relevance' needs the user's question, but no user message comes before "
            "the last assistant message"
        )
    keywords = extract_keywords(question, STOPWORDS if stopwords is None else stopwords)
    if not keywords:
        return EvaluateResult.invalid(
            f"reward 'relevance' cannot measure relevance: the question {question[:80]!r} has "
            "no keywords (only stopwords)"
        )
    response, restated = _without_question(response, question)
    found = keywords.intersection(_words(response))
    overlap = len(found) / len(keywords)
    missing = sorted(keywords - found)
    overlap_reason = (
        f"{len(found)}/{len(keywords)} question keywords in the response"
        + (
            f"; missing: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}"
            if missing
            else ""
        )
        + ("; the question restated in the response is not counted" if restated else "")
    )
    direct, direct_reason = _direct_answer(response, keywords)
    score = min(1.0, overlap + (direct_answer_bonus if direct else 0.0))
    return EvaluateResult(
        score=score,
        reason=f"{overlap_reason}; direct answer: {'yes' if direct else 'no'} ({direct_reason})",
        metrics={
            "keyword_overlap": MetricResult(score=overlap, reason=overlap_reason),
            "direct_answer": MetricResult(
                score=float(direct), success=direct, reason=direct_reason
            ),
        },
    )
