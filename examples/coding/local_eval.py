"""Score the reference and the buggy solution of every coding problem, locally.

Run it from the repository root::

    uv run python examples/coding/local_eval.py

Each solution runs in rk-agent's sandbox against the problem's test cases (the built-in
``code_execution`` reward); the score is the fraction of tests it passes. Every reference
solution should score 1.0 and every buggy one less; the script exits with status 1 if not.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dataset.py beside this file

from dataset import chat, load_problems

from rk_agent import RewardFunction


def main() -> int:
    reward = RewardFunction("code_execution")
    problems = load_problems()
    print(f"{'problem':<15} {'reference':>9} {'buggy':>6}  first failure of the buggy solution")
    wrong: list[str] = []
    buggy_scores: list[float] = []
    for problem in problems:
        good = reward(messages=chat(problem, problem["reference_solution"]),
                      ground_truth=problem["ground_truth"])  # fmt: skip
        bad = reward(messages=chat(problem, problem["buggy_solution"]),
                     ground_truth=problem["ground_truth"])  # fmt: skip
        buggy_scores.append(bad.score)
        if good.score != 1.0 or bad.score >= 1.0:
            wrong.append(problem["id"])
        print(f"{problem['id']:<15} {good.score:>9.3f} {bad.score:>6.3f}  {bad.reason}")
    mean = sum(buggy_scores) / len(buggy_scores)
    print(f"{len(problems)} problems; buggy solutions pass {mean:.3f} of the tests on average")
    if wrong:
        print(f"unexpected scores for: {', '.join(wrong)}")
        return 1
    print("every reference solution passes all its tests; every buggy one fails some")
    return 0


if __name__ == "__main__":
    sys.exit(main())
