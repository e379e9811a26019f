"""Throughput of the ``math`` reward on GSM8K-style answers, single-threaded.

Run: ``uv run python benchmarks/bench_math.py [--pairs 3000] [--repeats 5]``

Builds a deterministic (seeded) set of (response, ground_truth) pairs in GRPO groups of 8
responses per problem, a mix of right and wrong answers:

* GSM8K-style: a short chain of thought ending in ``#### 42`` or ``The answer is 42.`` (some with
  ``$`` amounts, thousands separators or decimals); ground truth an int, a string, or a GSM8K
  solution ending in ``#### 42``. This is the set the target (>= 5,000 evals/s) is about.
* ``\\boxed{}`` numbers and fractions (``\\boxed{\\frac{3}{4}}`` against ``0.75``): still the
  exact fast path.
* ``\\boxed{}`` LaTeX expressions (``\\frac{\\sqrt{2}}{2}``, ``\\frac{3}{4}\\pi``): math-verify
  and sympy, the slow path; half are written exactly as the reference, half differently.

Each figure calls the decorated reward as a trainer would
(``math_reward(messages=[...], ground_truth=...)``), after a warm-up, and reports the best of
several repeats measured with ``time.perf_counter``. The reward's caches are cleared before every
repeat, so only the caching a real GRPO group gets (the shared reference, repeated answers)
helps.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from figures import figure

from rk_agent.rewards.builtin import math as math_module
from rk_agent.rewards.builtin.math import extract_answer, math_reward

TARGET = 5_000
GROUP = 8
NAMES = ("Natalia", "Weng", "Betty", "James", "Julie", "Albert", "Mark", "Ken", "Tina", "Randy")
ITEMS = ("clips", "apples", "marbles", "books", "stickers", "cookies", "pencils", "cards")

Pair = tuple[list[dict[str, str]], Any, str, bool]  # messages, ground_truth, kind, is right


def _gsm8k_problem(rng: random.Random) -> tuple[str, int, str]:
    """A word problem, its answer and a GSM8K-style reference solution."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(12, 900), rng.randint(2, 60), rng.randint(2, 9)
    total = (a + b) * c
    question = (
        f"{name} has {a} {item} and buys {b} more. Each is worth {c} points. "
        f"How many points are the {item} worth?"
    )
    solution = (
        f"{name} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {item}.\n"
        f"They are worth {a + b} * {c} = <<{a + b}*{c}={total}>>{total} points.\n#### {total}"
    )
    return question, total, solution


def _gsm8k_response(rng: random.Random, answer: int, correct: bool) -> tuple[str, bool]:
    given = answer if correct else answer + rng.choice((-10, -1, 1, 2, 7, 100))
    shown = f"{given:,}" if given >= 1000 and rng.random() < 0.5 else str(given)
    a = rng.randint(10, 99)
    work = (
        f"First we add the {a} new ones to what we had. Then we multiply by the value of each, "
        f"which gives {a} * 3 = {a * 3} for the first part and the rest follows the same way. "
        f"Adding everything up gives the total."
    )
    style = rng.random()
    if style < 0.45:
        return f"{work}\n#### {shown}", correct
    if style < 0.8:
        return f"{work} The answer is {shown}.", correct
    if style < 0.9:
        return f"{work} So the total is ${shown}.00 in all. The answer is ${shown}.", correct
    return f"{work} The answer is {given}.0", correct


_FRACTIONS = ((1, 2), (3, 4), (1, 8), (5, 4), (7, 20))

_LATEX = (  # (reference, the same answer written otherwise, a wrong answer)
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", "\\sqrt{2}"),
    ("\\frac{3}{4}\\pi", "\\frac{3\\pi}{4}", "\\frac{4\\pi}{3}"),
    ("2\\sqrt{3}", "\\sqrt{12}", "3\\sqrt{2}"),
    ("x^2+3x", "x(x+3)", "x^2+3"),
    ("(1, 4]", "(1,4]", "[1, 4]"),
    ("\\frac{5}{6}", "\\dfrac{10}{12}", "\\frac{6}{5}"),
)


def _boxed_number_group(rng: random.Random) -> tuple[Any, list[tuple[str, bool]]]:
    """A fraction reference (``0.75``, ``3/4`` or ``\\frac{3}{4}``) and boxed answers to it."""
    num, den = rng.choice(_FRACTIONS)
    gold = rng.choice((f"{num / den}", f"{num}/{den}", f"\\frac{{{num}}}{{{den}}}"))
    responses = []
    for _ in range(GROUP):
        n = num if rng.random() < 0.6 else num + 1
        shown = f"\\frac{{{n}}}{{{den}}}" if rng.random() < 0.7 else f"{n / den}"
        responses.append((f"Simplifying the fraction, we get $\\boxed{{{shown}}}$.", n == num))
    return gold, responses


def _boxed_latex_group(rng: random.Random) -> tuple[Any, list[tuple[str, bool]]]:
    """A LaTeX reference and boxed answers: as written, written otherwise, or wrong."""
    gold, other, wrong = rng.choice(_LATEX)
    responses = []
    for _ in range(GROUP):
        shown = rng.choice((gold, other)) if rng.random() < 0.6 else wrong
        text = f"Putting it together, the answer is $\\boxed{{{shown}}}$."
        responses.append((text, shown != wrong))
    return gold, responses


def build_pairs(n: int, seed: int = 0) -> list[Pair]:
    """``n`` (messages, ground_truth, kind, is right) pairs, `GROUP` per shared reference."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    while len(pairs) < n:
        roll = rng.random()
        question, answer, solution = _gsm8k_problem(rng)
        if roll < 0.85:
            kind, gold = "gsm8k", rng.choice((answer, str(answer), solution))
            responses = [_gsm8k_response(rng, answer, rng.random() < 0.6) for _ in range(GROUP)]
        elif roll < 0.96:
            kind, (gold, responses) = "boxed number", _boxed_number_group(rng)
        else:
            kind, (gold, responses) = "boxed latex", _boxed_latex_group(rng)
        for response, right in responses:
            messages = [
                {"role": "user", "content": question},
                {"role": "assistant", "content": response},
            ]
            pairs.append((messages, gold, kind, right))
    return pairs[:n]


def _fast(pair: Pair) -> bool:
    # Private names: which comparison a pair takes, for the report only.
    answer = extract_answer(pair[0][-1]["content"])
    gold = math_module._gold_text(pair[1])
    return (
        answer is not None
        and math_module._number(answer) is not None
        and (math_module._number(gold) is not None)
    )


def _clear_caches() -> None:
    for cached in (math_module._number, math_module._symbolic, math_module._gold_from_text):
        cached.cache_clear()


def measure(pairs: list[Pair], repeats: int) -> float:
    """Best evaluations per second over ``repeats`` passes (caches cleared before each)."""
    best = float("inf")
    for _ in range(repeats):
        _clear_caches()
        start = time.perf_counter()
        for messages, gold, _kind, _right in pairs:
            math_reward(messages=messages, ground_truth=gold)
        best = min(best, time.perf_counter() - start)
    return len(pairs) / best


def _misjudged(pairs: list[Pair]) -> int:
    """How many pairs the reward scores differently from the generator's label."""
    return sum(
        (math_reward(messages=m, ground_truth=g).score == 1.0) != right for m, g, _, right in pairs
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3000, help="number of pairs (default 3000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes (default 5)")
    args = parser.parse_args()

    pairs = build_pairs(args.pairs)
    gsm8k = [p for p in pairs if p[2] == "gsm8k"]
    fast = [p for p in pairs if _fast(p)]
    slow = [p for p in pairs if not _fast(p)]
    for messages, gold, _, _ in pairs[:200]:  # warm-up, and the one-off import of math-verify
        math_reward(messages=messages, ground_truth=gold)

    share = len(fast) / len(pairs)
    right = sum(p[3] for p in pairs) / len(pairs)
    print(
        f"{len(pairs):,} pairs ({len(gsm8k):,} GSM8K-style, {right:.0%} right answers); "
        f"misjudged by the reward: {_misjudged(pairs)}"
    )
    rate = measure(gsm8k, args.repeats)
    print(f"math reward, GSM8K-style: {rate:,.0f} evals/s (target >= {TARGET:,})")
    print(
        f"math reward, fast path only ({len(fast):,} pairs): {measure(fast, args.repeats):,.0f}"
        " evals/s"
    )
    if slow:
        slow_rate = measure(slow, max(1, args.repeats // 2))
        label = f"LaTeX off the fast path ({len(slow):,} pairs)"
        print(f"math reward, {label}: {slow_rate:,.0f} evals/s")
    mix = measure(pairs, max(1, args.repeats // 2))
    print(f"math reward, overall mix ({share:.1%} fast path): {mix:,.0f} evals/s")
    if rate < TARGET:
        print(f"BELOW TARGET: {rate:,.0f} < {TARGET:,} evals/s")
    figure("math reward, GSM8K-style", rate, "evals/s", f">= {TARGET:,}", rate >= TARGET)


if __name__ == "__main__":
    main()
