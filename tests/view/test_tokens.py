"""Token ids on the episode page: folded per turn, and the turns whose re-tokenization differs
from the generated ids marked (checked with the run's own tokenizer, as ``rk-agent check
tokens`` does)."""

from __future__ import annotations

import shutil
from pathlib import Path

from fastapi.testclient import TestClient

from rk_agent.runs.run_dir import read_trajectories
from rk_agent.view.app import make_app
from rk_agent.view.catalog import find_runs


def test_each_turns_ids_are_folded_and_the_drifted_ones_marked(drift_root: Path) -> None:
    client = TestClient(make_app(find_runs([drift_root])))
    page = client.get("/run/drift/episode/0-0")
    assert page.status_code == 200
    trajectory = next(t for t in read_trajectories(drift_root / "drift") if t.id == "0-0")
    for turn in trajectory.turns:
        assert turn.token_ids and turn.prompt_token_ids
        assert f'id="t{turn.index}-tokens"' in page.text
        assert " ".join(map(str, turn.token_ids)) in page.text
        assert " ".join(map(str, turn.prompt_token_ids)) in page.text
    assert page.text.count('<details class="tokens drifted"') == 2  # the tool-call turns
    assert page.text.count('class="drift-mark" href="#t0-tokens"') == 1
    assert 'class="drift-mark" href="#t2-tokens"' not in page.text
    assert "the reply differs at token" in page.text
    assert "3 turn(s) checked for drift with the tokenizer of" in page.text
    assert "{&#34;name&#34;:&#34;" in page.text  # the compact JSON as generated, as text


def test_without_a_tokenizer_the_ids_are_shown_unchecked(drift_root: Path, tmp_path: Path) -> None:
    bare = tmp_path / "episodes.jsonl"  # a bare file names no model to take a tokenizer from
    shutil.copy(drift_root / "drift" / "trajectories.jsonl", bare)
    page = TestClient(make_app(find_runs([bare]))).get("/run/episodes.jsonl/episode/0-0")
    assert page.status_code == 200
    assert page.text.count('<details class="tokens"') == 3
    assert "Not checked for drift:" in page.text and "drift-mark" not in page.text


def test_an_episode_without_ids_has_no_token_section(runs_root: Path) -> None:
    page = TestClient(make_app(find_runs([runs_root]))).get("/run/solver/episode/0-0")
    assert 'class="tokens' not in page.text and "token ids" not in page.text
