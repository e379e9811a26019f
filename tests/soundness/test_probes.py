"""The probe catalogue: what each kind plays, how probes read answers and the conversation,
and the docstring examples of the soundness modules."""

from __future__ import annotations

import doctest
import importlib

import pytest

from rk_agent import Probe
from rk_agent.soundness.catalogue import catalogue
from rk_agent.soundness.code_probes import revealed_values
from rk_agent.soundness.probes import KINDS, ProbeView, answer_of, fill_slots, other_value
from rk_agent.soundness.tool_probes import nonsense_arguments
from rk_agent.types import Message

GENERIC = ["empty", "refusal", "echo", "padding", "repetition", "restate"]


@pytest.mark.parametrize(
    "module",
    ["probes", "catalogue", "code_probes", "tool_probes", "report", "reward_check", "env_check"],
)
def test_docstring_examples(module: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(f"rk_agent.soundness.{module}"))
    assert (failures, tried > 0) == (0, True)


def test_each_kind_plays_the_generic_probes_and_its_own() -> None:
    names = {kind: [p.name for p in catalogue(kind)] for kind in KINDS}
    answers = ["format_only", "wrong_value", "two_answers"]
    assert names["generic"] == GENERIC + answers
    assert names["shape"] == [*GENERIC, "format_only"]
    assert names["math"] == GENERIC + answers + ["unit_trick", "hedge_range"]
    code = ["lookup_table", "print_expected", "exit_early", "catch_everything", "always_equal"]
    assert names["code"] == GENERIC + code
    assert names["function_calling"] == [*GENERIC, "call_every_tool", "nonsense_args"]
    assert names["tools"] == GENERIC + answers + [
        "call_every_tool", "nonsense_args", "farm_calls", "answer_at_once", "never_answer",
    ]  # fmt: skip


def test_answers_are_found_emptied_and_changed() -> None:
    assert answer_of("so \\boxed{\\frac{1}{2}} it is") == "\\frac{1}{2}"
    assert answer_of("steps...\n#### 1,200") == "1,200"
    assert answer_of("Lookups done.\nAnswer: Paris") == "Paris"
    assert answer_of("no answer here") is None
    assert fill_slots("x\n#### 12", lambda answer: "") == "x\n#### "
    assert other_value("12", None) == "13"
    wrong = Message(role="assistant", content="#### 40")
    assert other_value("12", wrong) == "40"  # the honest wrong answer's value, when it differs


def test_a_class_with_the_attributes_is_a_probe() -> None:
    class Mine:
        name = "mine"
        description = "always 42"
        variants = 1
        kinds: frozenset[str] = frozenset()

        def reply(self, view: ProbeView) -> str:
            return "#### 42"

    assert isinstance(Mine(), Probe)
    assert not isinstance(object(), Probe)


def test_the_lookup_table_reads_examples_asserts_and_revealing_feedback() -> None:
    messages = [
        Message(role="user", content="Write `f(x)`. For example, `f([1, 2])` returns `3`."),
        Message(role="assistant", content="```python\ndef f(x): return 0\n```"),
        Message(role="user", content="first failure: test 2 (f(*[[4]])): expected 4, got 0."),
        Message(role="user", content="assert f([5]) == 5"),
        Message(role="user", content="first failure: test 3 (f(*[[7]])): returned 0."),
    ]
    assert revealed_values(messages) == {"[[1, 2]]": 3, "[[4]]": 4, "[[5]]": 5}


def test_nonsense_arguments_fit_the_types_only() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "on": {"type": ["boolean", "null"]},
                       "xs": {"type": "array"}},
    }  # fmt: skip
    assert nonsense_arguments(schema) == {"n": 0, "on": False, "xs": []}
    assert nonsense_arguments(None) == {}
