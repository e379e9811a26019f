"""Score a right and a wrong answer to every problem of the mixed math/coding set.

Run it from the repository root::

    uv run python examples/composite_math_coding/evaluate_mixed.py

Every right answer should score 1.0 and every wrong one less (0.0 for math, the fraction of
tests passed for code); the script prints each score, the mean per kind, and exits with
status 1 if a score is not as expected.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # composite_reward.py beside this file

from composite_reward import composite  # noqa: E402


def main() -> int:
    problems = [json.loads(line) for line in (HERE / "problems.jsonl").read_text().splitlines()
                if line.strip()]  # fmt: skip
    print(f"{'problem':<8} {'right':>6} {'wrong':>6}  why the wrong answer lost")
    by_kind: dict[str, list[float]] = {}
    unexpected: list[str] = []
    for problem in problems:
        scores = []
        for key in ("right_answer", "wrong_answer"):
            chat = [*problem["messages"], {"role": "assistant", "content": problem[key]}]
            result = composite(messages=chat, ground_truth=problem["ground_truth"],
                               kind=problem["kind"])  # fmt: skip
            scores.append(result)
        right, wrong = scores
        by_kind.setdefault(problem["kind"], []).append(right.score)
        if right.score != 1.0 or not wrong.is_score_valid or wrong.score >= 1.0:
            unexpected.append(problem["id"])
        why = wrong.metrics[problem["kind"]].reason
        print(f"{problem['id']:<8} {right.score:>6.3f} {wrong.score:>6.3f}  {why}")
    for kind, values in by_kind.items():
        print(
            f"{kind}: {len(values)} problems, right answers score {sum(values) / len(values):.3f}"
        )
    if unexpected:
        print(f"unexpected scores for: {', '.join(unexpected)}")
        return 1
    print("every right answer scores 1.0; every wrong one less")
    return 0


if __name__ == "__main__":
    sys.exit(main())
