"""Tests for `rk_agent.rewards.builtin.relevance`: keyword overlap plus a direct-answer bonus."""

from __future__ import annotations

import re

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.relevance import STOPWORDS, extract_keywords, relevance_reward

FRANCE = "What is the capital of France?"


def qa(question: str, answer: str | None) -> list[dict[str, str | None]]:
    return [
        {"role": "system", "content": "You are a helpful geography tutor."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]


def test_a_direct_on_topic_answer_scores_one_and_the_bonus_is_capped() -> None:
    result = relevance_reward(qa(FRANCE, "The capital of France is Paris."))
    assert result.is_score_valid
    assert result.score == 1.0  # 1.0 overlap + 0.2 bonus, capped
    assert result.metrics["keyword_overlap"].score == 1.0
    assert result.metrics["direct_answer"].score == 1.0
    assert result.metrics["direct_answer"].success is True
    assert result.reason == (
        "2/2 question keywords in the response; direct answer: yes "
        "(the first sentence states something about the question's keywords)"
    )


def test_an_off_topic_response_scores_zero() -> None:
    result = relevance_reward(qa(FRANCE, "I like turtles. They are slow."))
    assert result.score == 0.0
    assert result.metrics["keyword_overlap"].score == 0.0
    assert result.metrics["direct_answer"].success is False
    assert "missing: capital, france" in (result.reason or "")


def test_partial_overlap_without_a_direct_statement() -> None:
    result = relevance_reward(
        qa("How do I install numpy on Windows?", "Run pip install numpy in a terminal.")
    )
    # keywords: install, numpy, window(s); "window" is missing; no copula -> no bonus
    assert result.metrics["keyword_overlap"].score == pytest.approx(2 / 3)
    assert result.metrics["direct_answer"].score == 0.0
    assert result.score == pytest.approx(2 / 3)
    assert "missing: window" in (result.reason or "")


def test_the_bonus_is_added_when_the_overlap_is_partial() -> None:
    question = "Which river flows through Paris and what is its length?"
    result = relevance_reward(qa(question, "The Seine is the river that flows through Paris."))
    # keywords: river, flow(s), paris, length -> 3 of 4 found, direct: +0.2
    assert result.metrics["keyword_overlap"].score == pytest.approx(0.75)
    assert result.score == pytest.approx(0.95)
    assert relevance_reward(qa(question, "Yes."), direct_answer_bonus=0.0).score == 0.0


def test_yes_or_no_opening_is_a_direct_answer_even_without_keywords() -> None:
    result = relevance_reward(qa("Is Python dynamically typed?", "Yes."))
    assert result.metrics["keyword_overlap"].score == 0.0
    assert result.metrics["direct_answer"].reason == "opens with 'yes'"
    assert result.score == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("What do you mean by the capital of France?", "the response opens with a question"),
        ("I'm not sure what the capital of France is.", "the response opens with a hedge"),
        ("I\u2019m not sure what the capital of France is.", "the response opens with a hedge"),
        ("Sorry, France is not something I know.", "the response opens with a hedge"),
        (
            "France. Its capital is Paris.",
            "the first sentence is not a statement about the question's keywords",
        ),
        ("", "the response does not open with a sentence"),
    ],
)
def test_responses_that_do_not_answer_directly(answer: str, why: str) -> None:
    result = relevance_reward(qa(FRANCE, answer))
    assert result.metrics["direct_answer"].score == 0.0
    assert result.metrics["direct_answer"].reason == why


def test_leading_markdown_does_not_hide_a_direct_answer() -> None:
    result = relevance_reward(qa(FRANCE, "**Paris** is the capital of France.\n\nMore details..."))
    assert result.metrics["direct_answer"].success is True


def test_an_empty_response_is_a_valid_zero() -> None:
    result = relevance_reward(qa(FRANCE, ""))
    assert (result.score, result.is_score_valid) == (0.0, True)
    tool_only = relevance_reward(qa(FRANCE, None))
    assert (tool_only.score, tool_only.is_score_valid) == (0.0, True)


def test_echoing_the_question_earns_nothing() -> None:
    # An echo of the question used to score 1.0 (`rk-agent check reward relevance` flagged
    # it): copies of the question are cut from the response before it is scored.
    result = relevance_reward(qa(FRANCE, FRANCE))
    assert result.score == 0.0
    assert result.reason == (
        "0/2 question keywords in the response; missing: capital, france; the question "
        "restated in the response is not counted; direct answer: no (the response does not "
        "open with a sentence)"
    )
    restated = relevance_reward(qa(FRANCE, f"You asked: {FRANCE} The capital of France is Paris."))
    assert restated.score == 1.0  # the answer after the restated question still counts


def test_plurals_match_their_singular_but_names_ending_in_s_stay_whole() -> None:
    assert extract_keywords("List the capitals of the Baltic states") == {
        "list",
        "capital",
        "baltic",
        "state",
    }
    assert extract_keywords("Paris, class, virus, news") == {"paris", "class", "virus", "new"}
    result = relevance_reward(qa("Name two European capitals.", "Two capital cities: Rome."))
    # keywords: name, two, european, capital(s); "name" and "european" are missing
    assert result.metrics["keyword_overlap"].score == pytest.approx(0.5)


def test_the_last_user_message_before_the_response_is_the_question() -> None:
    messages = [
        {"role": "user", "content": FRANCE},
        {"role": "assistant", "content": "The capital of France is Paris."},
        {"role": "user", "content": "And the capital of Germany?"},
        {"role": "assistant", "content": "The capital of Germany is Berlin."},
        {"role": "tool", "tool_call_id": "x", "content": "irrelevant"},
    ]
    result = relevance_reward(messages)
    assert result.score == 1.0
    assert result.metrics["keyword_overlap"].reason == "2/2 question keywords in the response"


def test_custom_stopwords_replace_the_default_list() -> None:
    result = relevance_reward(qa(FRANCE, "Its capital is Paris."), stopwords=STOPWORDS | {"france"})
    assert result.metrics["keyword_overlap"].score == 1.0  # only "capital" is a keyword now


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [{"role": "user", "content": FRANCE}],
            "reward 'relevance' scores the last assistant message, but the conversation has none",
        ),
        (
            [
                {"role": "system", "content": "Be brief."},
                {"role": "assistant", "content": "Paris is the capital of France."},
            ],
            "reward 'relevance' needs the user's question, but no user message comes before the "
            "last assistant message",
        ),
        (
            qa("What is it?", "It is a cat."),
            "reward 'relevance' cannot measure relevance: the question 'What is it?' has no "
            "keywords (only stopwords)",
        ),
    ],
)
def test_inputs_where_relevance_cannot_be_measured_are_invalid(
    messages: list[dict[str, str]], error: str
) -> None:
    result = relevance_reward(messages)
    assert not result.is_score_valid
    assert result.error == error


def test_a_bonus_outside_zero_to_one_is_a_config_error() -> None:
    message = "relevance reward: direct_answer_bonus must be in [0, 1], got 1.5"
    with pytest.raises(ConfigError, match=re.escape(message)):
        relevance_reward(qa(FRANCE, "Paris."), direct_answer_bonus=1.5)
