"""Every reward the docs and examples write passes `rk-agent check` (issue 40 item 2).

A reward a user copies from the docs should not pay for a trick. Each one that grades an answer
is run through the command a user types (`rk-agent check reward` on samples with the right
answer, `rk-agent check env` on an environment), as a real subprocess. The rest are listed in
``NOT_CHECKED`` with the reason: they show one feature of the API and have no right answer to
check against, or are unsound on purpose (the page shows `check` flagging them). A reward added
to the docs must be put in one list or the other.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_examples import SKIP, code_blocks

ROOT = Path(__file__).parents[1]
DEFINED = re.compile(r"^\s*(?:async )?(?:def|class) (\w+)", re.M)


def qa(question: str, reply: str, answer: str) -> dict:
    user = {"role": "user", "content": question}
    return {"messages": [user, {"role": "assistant", "content": reply}], "ground_truth": answer}


QA = [qa("What is 6*7?", "42", "42"), qa("What is 2+2?", "4", "4"),
      qa("Capital of France?", "Paris", "Paris")]  # fmt: skip
POLITE = [qa("Capital of France?", "Paris. Please ask again any time.", "Paris"),
          qa("Capital of Italy?", "Rome. Please ask if you need more.", "Rome"),
          qa("What is 6*7?", "42. Please check my working.", "42")]  # fmt: skip

# (page, name): the samples `check reward` scores it on.
DOC_REWARDS = {
    ("README.md", "exact_answer"): QA,
    ("docs/index.md", "exact_answer"): QA,
    ("docs/rewards.md", "polite_answer"): POLITE,
    ("docs/rewards.md", "exact_answer"): QA,
    ("docs/rewards.md", "strict_match"): QA,
    ("docs/rewards.md", "matches_reference"): QA,
    ("docs/fireworks.md", "exact"): QA,
}
# (page, class): played by `check env`.
DOC_ENVS = {("docs/environments.md", "ProductEnv"), ("docs/environments.md", "PatientProductEnv")}
NOT_CHECKED = {
    # Features of the API, with no right answer to check against.
    ("docs/rewards.md", "short"): "the decorator's arguments",
    ("docs/rewards.md", "answered_in_turn"): "the messages call shape",
    ("docs/rewards.md", "graded"): "the output rules",
    ("docs/rewards.md", "ratio"): "a reward that raises: failures are data",
    ("docs/rewards.md", "brief"): "async rewards",
    ("docs/errors.md", "first_word_length"): "a reward that raises: failures are data",
    ("docs/reward-function.md", "curriculum_reward"): "the training step passed to a reward",
    ("docs/environments.md", "ShopEnv"): "tools per turn; it has no reward",
    ("docs/environments-from-elsewhere.md", "CountEnv"): "how a source plugs in; no reward",
    ("docs/reproducing-runs.md", "DiceEnv"): "replaying an episode; it has no reward",
    # Unsound on purpose: the page shows the check flagging it.
    ("docs/reward-soundness.md", "tool_use_uncapped"): "the farmed step bonus, flagged",
}


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", "check", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip


def doc_source(page: str, name: str) -> str:
    """The page's examples up to the one that defines ``name``, as one module."""
    kept = []
    for _, source in code_blocks((ROOT / page).read_text()):
        if any(marker in source for marker in SKIP):
            continue
        kept.append(source)
        written = re.search(r"write_text\('''(.*?)'''\)", source, re.S)
        if written and name in DEFINED.findall(written[1]):
            return written[1]  # the page writes the reward to a file of its own
        if name in DEFINED.findall(source):
            return "\n".join(kept) + "\n"
    raise AssertionError(f"{page} defines no {name}")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_every_reward_and_env_the_docs_define_is_checked_or_says_why_not() -> None:
    """A page that defines a reward or an environment: it is checked below, or exempt."""
    defined = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for _, source in code_blocks(text):
            decorated = r"@reward_function(?:\([^)]*\))?\s*\n\s*(?:async )?def (\w+)"
            for match in re.finditer(decorated, source):
                defined.add((str(page.relative_to(ROOT)), match[1]))
            for match in re.finditer(r"^class (\w+)\((?:ChatEnv|\w+Env)\)", source, re.M):
                defined.add((str(page.relative_to(ROOT)), match[1]))
    exact_product = ("docs/environments.md", "exact_product")  # ProductEnv's, checked with it
    assert defined == set(DOC_REWARDS) | DOC_ENVS | set(NOT_CHECKED) | {exact_product}


@pytest.mark.parametrize(("page", "name"), sorted(DOC_REWARDS), ids=lambda v: v)
def test_doc_reward_passes_check_reward(page: str, name: str, tmp_path: Path) -> None:
    (tmp_path / "doc.py").write_text(doc_source(page, name))
    samples = write_jsonl(tmp_path / "samples.jsonl", DOC_REWARDS[page, name])
    done = check("reward", f"{tmp_path / 'doc.py'}::{name}", "--samples", str(samples))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("nothing flagged")


@pytest.mark.parametrize(("page", "name"), sorted(DOC_ENVS), ids=lambda v: v)
def test_doc_env_passes_check_env(page: str, name: str, tmp_path: Path) -> None:
    (tmp_path / "doc.py").write_text(doc_source(page, name))
    done = check("env", f"{tmp_path / 'doc.py'}::{name}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("nothing flagged")


def test_the_tutorials_first_draft_is_flagged_as_the_docs_show(tmp_path: Path) -> None:
    """The draft that read ``messages[-1]`` pays for calling tools and never answering."""
    page = (ROOT / "docs/environments.md").read_text()
    source = doc_source("docs/environments.md", "ProductEnv")
    fixed = (
        '    reply = next((m for m in reversed(messages) if m.role == "assistant"), None)\n'
        "    return float(reply is not None and reply.text.strip() == str(ground_truth))\n"
    )
    assert fixed in source
    draft = "    return float(messages[-1].text.strip() == str(ground_truth))\n"
    (tmp_path / "product.py").write_text(source.replace(fixed, draft))
    done = check("env", f"{tmp_path / 'product.py'}::ProductEnv")
    assert done.returncode == 1, done.stdout + done.stderr
    shown = page.split("### Check it for cheats", 1)[1].split("```text\n", 1)[1].split("```")[0]
    for line in shown.splitlines():
        assert line in done.stdout


def example_samples(problems: str, reply_key: str, *keep: str) -> list[dict]:
    rows = [json.loads(line) for line in (ROOT / problems).read_text().splitlines() if line]
    return [
        {
            "messages": [*row["messages"], {"role": "assistant", "content": row[reply_key]}],
            "ground_truth": row["ground_truth"],
            **{key: row[key] for key in keep},
        }
        for row in rows
    ]


def test_example_rewards_pass_check_reward(tmp_path: Path) -> None:
    """The examples' rewards, each as its README runs it."""
    relevance = check(
        "reward", "examples/first_reward/metrics/relevance/main.py::evaluate",
        "--samples", "examples/first_reward/samples.jsonl", "--max-samples", "2",
        "--max-score", "0.6",
    )  # fmt: skip
    assert relevance.returncode == 0, relevance.stdout + relevance.stderr
    coding = example_samples("examples/coding/problems.jsonl", "reference_solution")
    for row in coding:
        row["messages"][-1]["content"] = f"```python\n{row['messages'][-1]['content']}```"
    code = check(
        "reward", "examples/coding/metrics/code_tests/main.py::evaluate", "--kind", "code",
        "--samples", str(write_jsonl(tmp_path / "code.jsonl", coding)),
    )  # fmt: skip
    assert code.returncode == 0, code.stdout + code.stderr
    mixed = example_samples("examples/composite_math_coding/problems.jsonl", "right_answer", "kind")
    composite = check(
        "reward", "examples/composite_math_coding/composite_reward.py::composite",
        "--samples", str(write_jsonl(tmp_path / "mixed.jsonl", mixed)),
    )  # fmt: skip
    assert composite.returncode == 0, composite.stdout + composite.stderr
