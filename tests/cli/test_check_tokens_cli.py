"""`rk-agent check tokens` as a real subprocess: its lines and exit codes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.cli.test_rescore_cli import rk
from tests.runs.test_token_drift import COMPACT, play


def test_no_drift_exits_0(tmp_path: Path, embedded_tok: Any) -> None:
    folder = tmp_path / "tok"
    embedded_tok.save_pretrained(folder)
    run = play(tmp_path / "run", embedded_tok, folder)
    out = rk("check", "tokens", str(run))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Checked 9 turns of 3 episodes (of 3) in {run} with the tokenizer of {folder}",
        "No drift: every turn re-tokenizes to the ids the model saw and generated.",
    ]


def test_drift_exits_1_naming_each_turn_and_the_rate(tmp_path: Path, embedded_tok: Any) -> None:
    folder = tmp_path / "tok"
    embedded_tok.save_pretrained(folder)
    run = play(tmp_path / "run", embedded_tok, folder, COMPACT)
    out = rk("check", "tokens", str(run), "--tokenizer", "embedded")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        f"Checked 9 turns of 3 episodes (of 3) in {run} with the tokenizer of the embedded model"
    )
    assert [line.split(":")[0] for line in lines[1:-1]] == [
        f"episode {e} turn {t}" for e in ("0-0", "1-0", "2-0") for t in (0, 1)
    ]
    assert lines[1].startswith("episode 0-0 turn 0: reply differs at token 8: generated ")
    assert lines[-1] == (
        "Drift: 6 of 9 turns (66.7%) in 3 of 3 episodes re-tokenize otherwise than generated."
    )


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    out = rk("check", "tokens", str(tmp_path / "nope"))
    assert out.returncode == 2
    assert out.stderr == (
        f"error: {tmp_path / 'nope'} does not exist: expected a run directory made by "
        "`rk-agent rollout`, or a trajectories JSONL file.\n"
    )


def test_a_run_without_token_ids_says_so_before_asking_for_a_tokenizer(tmp_path: Path) -> None:
    """The solver's run names no model: what is wrong is that it has no ids (issue 40 item 9)."""
    run = tmp_path / "solver"
    assert rk("rollout", "--env", "tools", "--provider", "solver", "--n", "2",
              "--output", str(run)).returncode == 0  # fmt: skip
    for given in (run, run / "trajectories.jsonl"):
        out = rk("check", "tokens", str(given))
        assert (out.returncode, out.stderr) == (2, (
            f"error: {given} has no generated token ids in its 2 episodes: only HFPolicy (the "
            "local model, --provider local), VLLMPolicy, and OpenAIPolicy with "
            "return_token_ids against a vLLM server record them. Play the run with one of "
            "those.\n"
        ))  # fmt: skip


def test_a_runs_trajectories_file_is_read_with_the_runs_provenance(
    tmp_path: Path, embedded_tok: Any
) -> None:
    folder = tmp_path / "tok"
    embedded_tok.save_pretrained(folder)
    run = play(tmp_path / "run", embedded_tok, folder)
    out = rk("check", "tokens", str(run / "trajectories.jsonl"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        f"Checked 9 turns of 3 episodes (of 3) in {run / 'trajectories.jsonl'} with the "
        f"tokenizer of {folder}"
    )
    # Away from its run, the file names no model: said as such, with what to give.
    apart = tmp_path / "episodes.jsonl"
    shutil.copy(run / "trajectories.jsonl", apart)
    out = rk("check", "tokens", str(apart))
    assert (out.returncode, out.stderr) == (2, (
        f"error: {apart} is a trajectories file without its run's provenance.json beside it "
        f"(in {tmp_path}): no tokenizer to re-render its episodes with. Give one with "
        "--tokenizer PATH (a model folder with the tokenizer and chat template the run used) "
        "or --tokenizer embedded.\n"
    ))  # fmt: skip
