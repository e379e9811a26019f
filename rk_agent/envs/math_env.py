"""The ``math`` environment: grade-school word problems, checked by the ``math`` reward.

Problems are generated from 10 GSM8K-style templates (shopping, change, reading, travel, wages,
percentages, sharing, discounts, ages, savings) with random names, items and numbers; the
answer is computed from the same numbers. The model answers in one message, ending with
``#### <number>``; the built-in ``math`` reward compares its final answer with the ground truth.

With ``retries=k`` a wrong answer gets "That is not correct" feedback and another try, up to
``k`` times (the episode then has up to ``k + 1`` turns); the episode reward is the correctness
of the last answer.

JSONL tasks: ``{"prompt": "...", "ground_truth": "42"}``, e.g. GSM8K rows renamed (a GSM8K
``answer`` with its ``#### 42`` line works as ground truth too).

Main names: `MathEnv`, `solve` (the reference solver), `SYSTEM_PROMPT`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from rk_agent.envs._template import (
    Template,
    ensure_system_prompt,
    not_recognised,
    pick,
    question_text,
    stable_id,
)
from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.math import math_reward
from rk_agent.rewards.registry import RewardLike
from rk_agent.types import Message

__all__ = ["SYSTEM_PROMPT", "MathEnv", "solve"]

SYSTEM_PROMPT = (
    "Solve the math word problem. Think step by step, then give the final answer as a plain "
    "number on the last line, in the form\n#### <number>"
)

_PEOPLE = (
    ("Ava", "She"), ("Liam", "He"), ("Maya", "She"), ("Noah", "He"), ("Zoe", "She"),
    ("Omar", "He"), ("Lena", "She"), ("Ravi", "He"), ("Chloe", "She"), ("Mateo", "He"),
    ("Aisha", "She"), ("Jonas", "He"), ("Priya", "She"), ("Kenji", "He"), ("Sofia", "She"),
    ("Tariq", "He"),
)  # fmt: skip
_ITEMS = ("apples", "pencils", "stickers", "marbles", "cards", "stamps", "beads", "shells")
_THINGS = ("bike", "jacket", "lamp", "backpack", "board game", "helmet", "watch", "kettle")

Fields = dict[str, Any]


@dataclass(frozen=True)
class _Kind:
    """One problem template: its fields' sampler and the answer from the numeric fields."""

    name: str
    template: Template
    sample: Callable[[np.random.Generator], Fields]
    answer: Callable[[Mapping[str, Fraction]], Fraction]


def _person(rng: np.random.Generator, key: str = "name") -> Fields:
    name, pronoun = pick(rng, _PEOPLE)
    return {key: name, "pronoun": pronoun}


def _two_people(rng: np.random.Generator) -> Fields:
    first, second = rng.choice(len(_PEOPLE), size=2, replace=False)
    return {"name": _PEOPLE[int(first)][0], "name2": _PEOPLE[int(second)][0]}


def _int(rng: np.random.Generator, low: int, high: int) -> int:
    """An integer in ``[low, high]``."""
    return int(rng.integers(low, high + 1))


def _shopping(rng: np.random.Generator) -> Fields:
    a, b, c = _int(rng, 3, 60), _int(rng, 2, 9), _int(rng, 2, 12)
    return {**_person(rng), "item": pick(rng, _ITEMS), "a": a, "b": b, "c": c,
            "d": _int(rng, 1, a + b * c - 1)}  # fmt: skip


def _change(rng: np.random.Generator) -> Fields:
    bill = pick(rng, (20, 50, 100))
    n = _int(rng, 2, 8)
    return {**_person(rng), "item": pick(rng, _ITEMS), "n": n, "bill": bill,
            "p": _int(rng, 1, (bill - 1) // n)}  # fmt: skip


def _reading(rng: np.random.Generator) -> Fields:
    p, d = _int(rng, 5, 40), _int(rng, 2, 14)
    return {**_person(rng), "p": p, "d": d, "total": p * d + _int(rng, 1, 400)}


def _travel(rng: np.random.Generator) -> Fields:
    return {"s1": _int(rng, 4, 30) * 5, "h1": _int(rng, 1, 6), "s2": _int(rng, 4, 30) * 5,
            "h2": _int(rng, 1, 6)}  # fmt: skip


def _wages(rng: np.random.Generator) -> Fields:
    return {**_person(rng), "w": _int(rng, 8, 45), "h": _int(rng, 2, 10), "d": _int(rng, 2, 6),
            "k": _int(rng, 2, 8)}  # fmt: skip


def _class(rng: np.random.Generator) -> Fields:
    return {"n": _int(rng, 1, 8) * 20, "pct": pick(rng, (10, 20, 25, 40, 45, 50, 55, 60, 75))}


def _cookies(rng: np.random.Generator) -> Fields:
    b, c, k = _int(rng, 2, 6), _int(rng, 6, 24), _int(rng, 2, 6)
    e = (b * c) % k + k * _int(rng, 0, 2)
    if e >= b * c:
        e = (b * c) % k
    return {**_person(rng), "b": b, "c": c, "k": k, "e": e}


def _discount(rng: np.random.Generator) -> Fields:
    return {"thing": pick(rng, _THINGS), "p": _int(rng, 10, 250),
            "pct": pick(rng, (10, 15, 20, 25, 30, 40, 50))}  # fmt: skip


def _ages(rng: np.random.Generator) -> Fields:
    a, k = _int(rng, 4, 15), _int(rng, 2, 4)
    return {**_two_people(rng), "a": a, "k": k, "m": _int(rng, 1, a), "y": _int(rng, 2, 20)}


def _savings(rng: np.random.Generator) -> Fields:
    s, w = _int(rng, 5, 40), _int(rng, 3, 20)
    return {**_person(rng), "s": s, "w": w, "x": _int(rng, 1, s * w - 1),
            "thing": pick(rng, _THINGS)}  # fmt: skip


_KINDS: tuple[_Kind, ...] = (
    _Kind("shopping", Template(
        "{name} has {a} {item}. {pronoun} buys {b} packs with {c} {item} in each pack, and then "
        "gives {d} {item} to a friend. How many {item} does {name} have now?"),
        _shopping, lambda n: n["a"] + n["b"] * n["c"] - n["d"]),
    _Kind("change", Template(
        "{name} buys {n} {item} that cost ${p} each and pays with a ${bill} bill. How many "
        "dollars of change does {name} get back?"),
        _change, lambda n: n["bill"] - n["n"] * n["p"]),
    _Kind("reading", Template(
        "A book has {total} pages. {name} reads {p} pages every day for {d} days. How many "
        "pages are left to read?"),
        _reading, lambda n: n["total"] - n["p"] * n["d"]),
    _Kind("travel", Template(
        "A train travels at {s1} km/h for {h1} hours and then at {s2} km/h for {h2} hours. How "
        "many kilometres does it travel in total?"),
        _travel, lambda n: n["s1"] * n["h1"] + n["s2"] * n["h2"]),
    _Kind("wages", Template(
        "{name} earns ${w} per hour and works {h} hours a day, {d} days a week. How many "
        "dollars does {name} earn in {k} weeks?"),
        _wages, lambda n: n["w"] * n["h"] * n["d"] * n["k"]),
    _Kind("class", Template(
        "A class has {n} students, and {pct}% of them are girls. How many boys are in the "
        "class?"),
        _class, lambda n: n["n"] - n["n"] * n["pct"] / 100),
    _Kind("cookies", Template(
        "{name} bakes {b} batches of {c} cookies, eats {e} of them, and shares the rest "
        "equally among {k} friends. How many cookies does each friend get?"),
        _cookies, lambda n: (n["b"] * n["c"] - n["e"]) / n["k"]),
    _Kind("discount", Template(
        "A {thing} costs ${p}. It is on sale for {pct}% off. What is the sale price in "
        "dollars?"),
        _discount, lambda n: n["p"] * (100 - n["pct"]) / 100),
    _Kind("ages", Template(
        "{name} is {a} years old. {name2} is {k} times as old as {name}, minus {m} years. How "
        "old will {name2} be in {y} years?"),
        _ages, lambda n: n["k"] * n["a"] - n["m"] + n["y"]),
    _Kind("savings", Template(
        "{name} saves ${s} every week. After {w} weeks, {name} spends ${x} on a {thing}. How "
        "many dollars does {name} have left?"),
        _savings, lambda n: n["s"] * n["w"] - n["x"]),
)  # fmt: skip


def _numbers(fields: Mapping[str, Any]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for key, value in fields.items():
        try:
            out[key] = Fraction(str(value))
        except ValueError:
            continue  # a name or an item
    return out


def _format(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return format(Decimal(value.numerator) / Decimal(value.denominator), "f").rstrip("0")


def solve(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None) -> Message:
    """The reference solver: recognises the problem's template and computes its answer.

    Raises:
        EnvError: none of the templates reads the question (a task the environment did not
            generate).

    Example:
        >>> env = MathEnv()
        >>> observation, info = env.reset(seed=0)
        >>> solve(Message.coerce_list(observation)).text.endswith(info["task"].ground_truth)
        True
    """
    question = question_text(Message.coerce_list(messages))
    for kind in _KINDS:
        fields = kind.template.parse(question)
        if fields is not None:
            answer = _format(kind.answer(_numbers(fields)))
            return Message(
                role="assistant", content=f"This is a {kind.name} problem.\n#### {answer}"
            )
    raise not_recognised("math", "problem")


class MathEnv(ChatEnv):
    """Grade-school word problems with a numeric answer; optional retries with feedback.

    Args:
        retries: how many times a wrong answer gets feedback and another try (default 0: one
            answer, one turn).
        **kwargs: see `ChatEnv`; ``max_turns`` defaults to ``retries + 1``.

    Raises:
        ConfigError: ``retries`` is negative.

    Example:
        >>> env = MathEnv(retries=1)
        >>> _ = env.reset(seed=0)
        >>> _, reward, terminated, truncated, info = env.step({"role": "assistant",
        ...                                                    "content": "#### -1"})
        >>> terminated, info["step"].score, env.state.messages[-1].role
        (False, 0.0, 'user')
    """

    default_max_turns: ClassVar[int] = 1
    inline_steps = True  # its steps are quick, pure Python: they never block (ChatEnv)
    default_episode_rewards: ClassVar[Mapping[str, RewardLike]] = {"correct": math_reward}
    reference_solver = staticmethod(solve)
    env_name: ClassVar[str] = "math"

    def __init__(self, *, retries: int = 0, **kwargs: Any) -> None:
        if retries < 0:
            raise ConfigError(f"retries must be 0 or more, got {retries}.")
        self.retries = retries
        if kwargs.get("max_turns") is None:
            kwargs["max_turns"] = retries + 1
        super().__init__(**kwargs)

    def generate_task(self, rng: np.random.Generator) -> Task:
        """A random word problem and its answer."""
        kind = pick(rng, _KINDS)
        fields = kind.sample(rng)
        question = kind.template.render(**fields)
        return Task(
            id=stable_id("math", question),
            messages=[
                Message(role="system", content=SYSTEM_PROMPT),
                Message(role="user", content=question),
            ],
            ground_truth=_format(kind.answer(_numbers(fields))),
            metadata={"kind": kind.name},
        )

    def on_reset(self, state: EpisodeState) -> None:
        """Add the system prompt to dataset tasks that have none; count the attempts."""
        ensure_system_prompt(state, SYSTEM_PROMPT)
        state.scratch["attempts"] = 0

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """End on a right answer or when retries are spent; otherwise say it is wrong."""
        state.scratch["attempts"] += 1
        left = self.retries - (state.scratch["attempts"] - 1)
        if left <= 0:
            return None
        verdict = math_reward(messages=state.messages, ground_truth=state.task.ground_truth)
        if verdict.is_score_valid and verdict.score >= 1.0:
            return None
        return [
            Message(
                role="user",
                content=(
                    "That is not correct, try again. Check your working and give the final "
                    f"answer on the last line as #### <number>. ({left} "
                    f"{'try' if left == 1 else 'tries'} left.)"
                ),
            )
        ]
