"""Text from elsewhere reaches the terminal as text: every command that prints what a model, a
tool, a reward or a file said shows its control characters escaped (issue 38, item 9).

A model's reply, a task id in a shared run, a run folder's name: ``rk-agent show`` passed OSC 52
(a clipboard write), OSC 8 (a link hidden behind other words), a screen clear, cursor moves and
C1 controls from them straight to the terminal. Each command here runs as a real subprocess on
real runs whose text carries them; its output must hold no control character but newlines
(and tabs), and must show the escaped form where it shows the text.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rk_agent.terminal_text import CONTROLS
from tests.cli.test_rescore_cli import rk
from tests.rollouts.runs import play_run

HOSTILE = (
    "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
    "\x1b]8;;https://evil.example/\x1b\\innocent\x1b]8;;\x1b\\"  # OSC 8: a hidden link
    "\x1b[2J\x1b[H\x1b[3A"  # clear the screen, cursor home, cursor up
    "\x9b31m\x85"  # C1: CSI, NEL
    "over\rwritten\x08\x7f"
)
SHOWN = ("\\x1b]52;c;ZXZpbA==", "\\u001b]52;c;ZXZpbA==")
"""How the clipboard write may look: as Python writes it in a string, or as JSON does."""


QUOTING = """
from rk_agent import EvaluateResult, reward_function


@reward_function
def quoting(messages, ground_truth=None, **kwargs):
    reply = messages[-1]["content"] if isinstance(messages[-1], dict) else messages[-1].content
    return EvaluateResult(score=0.5, reason=f"got {reply}")
"""
"""A reward whose reason quotes the reply (as judges' reasons do)."""


def assert_escaped(output: str, *, shows: bool = True) -> None:
    """No control character but newline and tab reached ``output``; where it shows the hostile
    text (``shows``), it shows it escaped."""
    raw = sorted({hex(ord(c)) for c in output if ord(c) in CONTROLS and c not in "\n\t"})
    assert raw == [], f"control characters printed raw: {raw}"
    if shows:
        assert any(shown in output for shown in SHOWN)


def _tasks(path: Path) -> str:
    rows = [
        {
            "id": f"t{i}{HOSTILE}",
            "prompt": f"What is {i} + {i}? {HOSTILE}",
            "ground_truth": str(2 * i),
        }
        for i in range(4)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _replying(solved: set[int]) -> Any:
    def reply(messages: list[Any], tools: Any) -> str:
        i = int(messages[-1].text.split("What is ", 1)[1].split(" ")[0])
        return f"{HOSTILE}\n#### {2 * i if i in solved else -1}"

    return reply


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two math runs of the real engine on tasks whose ids and questions carry the codes, by a
    policy whose replies carry them: A solves tasks 0 and 1, B tasks 2 and 3."""
    root = tmp_path_factory.mktemp("codes")
    tasks = _tasks(root / "tasks.jsonl")
    a = play_run(root / "a", _replying({0, 1}), env="math", tasks=tasks, n=4)
    b = play_run(root / "b", _replying({2, 3}), env="math", tasks=tasks, n=4)
    return a, b


def test_show_an_episode(runs: tuple[Path, Path]) -> None:
    out = rk("show", str(runs[0]), "--episode", "0-0")
    assert out.returncode == 0, out.stderr
    assert_escaped(out.stdout)
    for shown in ("\\x07", "\\x9b31m\\x85", "over\\rwritten\\x08\\x7f"):
        assert shown in out.stdout  # not dropped either
    assert "#### 0" in out.stdout


def test_show_a_summary(runs: tuple[Path, Path]) -> None:
    out = rk("show", str(runs[0]))
    assert out.returncode == 0, out.stderr
    assert_escaped(out.stdout, shows=False)


def test_compare(runs: tuple[Path, Path]) -> None:
    out = rk("compare", *map(str, runs))
    assert out.returncode == 0, out.stderr
    assert_escaped(out.stdout)  # the tasks gained and lost, by id
    as_json = rk("compare", *map(str, runs), "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert_escaped(as_json.stdout, shows=False)


def test_replay_quotes_a_difference(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    lines = (run / "trajectories.jsonl").read_text().split("\n")  # NEL is no line end here
    first = json.loads(lines[0])
    first["task"]["messages"][-1]["content"] = f"What was it? {HOSTILE}"
    (run / "trajectories.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]))
    out = rk("replay", str(run), "--episode", first["id"], "--trust-run")
    assert out.returncode == 1, out.stderr  # the task differs from the record
    assert_escaped(out.stdout)
    as_json = rk("replay", str(run), "--episode", first["id"], "--trust-run", "--json")
    assert as_json.returncode == 1, as_json.stderr
    assert_escaped(as_json.stdout)


def test_preview_of_a_reward_that_quotes_the_reply(tmp_path: Path) -> None:
    (tmp_path / "quoting.py").write_text(QUOTING)
    samples = tmp_path / "samples.jsonl"
    sample = {"messages": [{"role": "user", "content": "Say it."},
                           {"role": "assistant", "content": HOSTILE}]}  # fmt: skip
    samples.write_text(json.dumps(sample) + "\n")
    reward = f"{tmp_path}/quoting.py::quoting"
    out = rk("preview", "--samples", str(samples), "--reward", reward)
    assert out.returncode == 0, out.stderr
    assert_escaped(out.stdout)
    as_json = rk("preview", "--samples", str(samples), "--reward", reward, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert_escaped(as_json.stdout, shows=False)
    assert "\\u009b31m" in as_json.stdout  # C1 as JSON's own escape: the same string
    assert json.loads(as_json.stdout)["rows"][0]["result"]["reason"] == f"got {HOSTILE}"


def test_the_error_line_and_log_lines(runs: tuple[Path, Path], tmp_path: Path) -> None:
    missing = rk("show", str(tmp_path / f"no-run-{HOSTILE}"))
    assert missing.returncode == 2
    assert_escaped(missing.stderr)
    shared = tmp_path / f"shared-{HOSTILE}"  # a folder someone named
    shutil.copytree(runs[0], shared)
    lines = (shared / "trajectories.jsonl").read_text()
    (shared / "trajectories.jsonl").write_text(lines + lines)  # every episode twice: a warning
    out = rk("show", str(shared))
    assert out.returncode == 0, out.stderr
    assert "appear more than once" in out.stderr
    assert_escaped(out.stderr)
    assert_escaped(out.stdout, shows=False)
