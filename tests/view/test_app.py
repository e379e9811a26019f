"""The viewer's pages over plain HTTP (no browser): status codes, content, escaping, token."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from rk_agent.runs.run_dir import read_trajectories
from rk_agent.runs.summary import summarize
from rk_agent.view.app import COMPONENT_ROWS, HISTOGRAMS, TOKEN_COOKIE, make_app
from rk_agent.view.catalog import find_runs
from rk_agent.view.index import COMPONENT_NAMES
from tests.view.conftest import MARKUP
from tests.view.test_index import scored, write


@pytest.fixture(scope="module")
def client(runs_root: Path) -> TestClient:
    return TestClient(make_app(find_runs([runs_root])))


def test_the_runs_page_lists_both_runs_with_their_figures(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert 'href="/run/solver"' in page.text and 'href="/run/stub"' in page.text
    assert "tools-reference-solver" in page.text and "stub-model" in page.text
    assert "finished" in page.text
    assert "1.000" in page.text and "0.000" in page.text  # success rates of solver and stub
    assert page.headers["content-security-policy"].startswith("default-src 'none'")


def test_the_run_page_filters_and_pages_on_the_server(client: TestClient) -> None:
    everything = client.get("/run/solver")
    assert everything.status_code == 200
    assert "8 of 8 episodes" in everything.text
    assert "0 of 8 episodes" in client.get("/run/solver?outcome=failure").text
    assert "4 of 4 episodes" in client.get("/run/stub?outcome=failure").text
    assert "0 of 8 episodes" in client.get("/run/solver?max_reward=0.5").text
    assert "8 of 8 episodes" in client.get("/run/solver?min_reward=0.5&max_reward=1").text
    assert "0 of 8 episodes" in client.get("/run/solver?text=no+such+question").text
    assert "8 of 8 episodes" in client.get("/run/solver?stop=answered").text
    assert "0 of 4 episodes" in client.get("/run/stub?stop=answered&outcome=success").text


def test_a_bad_filter_is_a_400_that_says_why(client: TestClient) -> None:
    page = client.get("/run/solver?min_reward=lots")
    assert page.status_code == 400
    assert escape("min_reward must be a number, got 'lots'.") in page.text


def test_unknown_runs_and_episodes_are_404(client: TestClient) -> None:
    assert client.get("/run/nope").status_code == 404
    missing = client.get("/run/solver/episode/99-0")
    assert missing.status_code == 404
    assert escape("Run 'solver' has no episode '99-0'.") in missing.text
    assert client.get("/compare?a=solver&b=nope").status_code == 404
    assert client.get("/compare/task?a=solver&b=stub&task=no-such-task").status_code == 404
    assert client.get("/no/such/page").status_code == 404


def test_the_episode_page_links_calls_results_and_the_group(client: TestClient) -> None:
    page = client.get("/run/solver/episode/1-0")
    assert page.status_code == 200
    assert 'id="next-episode" href="/run/solver/episode/1-1"' in page.text
    assert 'id="prev-episode"' not in page.text
    assert 'href="#t0-result0"' in page.text and 'id="t0-result0"' in page.text
    assert 'href="#t0-call0"' in page.text
    assert "tool_use" in page.text and "efficiency" in page.text  # components
    assert "episode reward 1.000" in page.text


def test_model_output_is_escaped_never_markup(client: TestClient) -> None:
    page = client.get("/run/stub/episode/0-0")
    assert page.status_code == 200
    assert "<script>window.__rk_xss" not in page.text
    assert "<img src=x" not in page.text
    assert escape(MARKUP.splitlines()[0]) in page.text  # shown as text
    listing = client.get("/run/stub")
    assert "<script>window" not in listing.text


def test_compare_lists_lost_tasks_and_opens_both_sides(client: TestClient) -> None:
    page = client.get("/compare?a=solver&b=stub")
    assert page.status_code == 200
    assert 'id="lost"' in page.text
    assert page.text.count('class="task-link"') == 4  # the stub lost every task
    link = page.text.split('class="task-link" href="', 1)[1].split('"', 1)[0]
    side = client.get(html.unescape(link))
    assert side.status_code == 200
    assert 'id="side-a"' in side.text and 'id="side-b"' in side.text
    assert "tools-reference-solver" in side.text and "stub-model" in side.text
    assert side.text.count('class="episode"') == 3  # the solver's group of 2, the stub's 1


def test_compare_counts_the_episodes_of_shared_tasks_as_the_cli_does(
    runs_root: Path, tmp_path: Path
) -> None:
    """B plays 6 tasks, 4 of them A's: both count B's 4 episodes on the shared tasks beside
    figures over those tasks, not its 6 (issue 40 item 13)."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    shutil.copytree(runs_root / "solver", tmp_path / "solver")
    rk = [sys.executable, "-m", "rk_agent"]
    wide = [*rk, "rollout", "--env", "tools", "--n", "6", "--provider", "solver", "--output"]
    subprocess.run([*wide, str(tmp_path / "wide")], check=True, capture_output=True)
    cli = subprocess.run(
        [*rk, "compare", str(tmp_path / "solver"), str(tmp_path / "wide")], capture_output=True,
        text=True, check=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    row = next(line for line in cli.stdout.splitlines() if "episodes (shared tasks)" in line)
    assert re.findall(r"\d+", row) == ["8", "4"]
    page = TestClient(make_app(find_runs([tmp_path]))).get("/compare?a=solver&b=wide")
    assert page.status_code == 200
    assert "<tr><th>episodes (shared tasks)</th><td>8</td><td>4</td><td></td></tr>" in page.text


def test_static_assets_are_shipped(client: TestClient) -> None:
    assert client.get("/static/view.css").status_code == 200
    script = client.get("/static/view.js")
    assert script.status_code == 200 and "toggle-folds" in script.text


def test_a_token_is_required_and_set_as_a_cookie(runs_root: Path) -> None:
    client = TestClient(make_app(find_runs([runs_root]), token="s3cret"))
    assert client.get("/").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    opened = client.get("/run/solver?token=s3cret&outcome=success", follow_redirects=False)
    assert opened.status_code == 303
    assert opened.headers["location"] == "/run/solver?outcome=success"
    assert client.cookies.get(TOKEN_COOKIE) == "s3cret"
    assert client.get("/run/solver").status_code == 200


def test_a_long_tool_result_is_folded(runs_root: Path, tmp_path: Path) -> None:
    import json
    import shutil

    run = tmp_path / "long"
    shutil.copytree(runs_root / "solver", run)
    file = run / "trajectories.jsonl"
    records = [json.loads(line) for line in file.read_text().splitlines()]
    records[0]["turns"][0]["environment"][0]["content"] = "<row>\n" * 400
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    client = TestClient(make_app(find_runs([run])))
    page = client.get(f"/run/long/episode/{records[0]['id']}")
    assert page.status_code == 200
    assert page.text.count('<details class="fold">') == 1
    assert "(2400 characters)" in page.text and "<row>" not in page.text


def test_a_run_of_many_component_names_draws_a_bounded_page(tmp_path: Path) -> None:
    """One new reward-component name per episode: a 27 MB page of 6,000 histograms before
    (issue 38); now at most HISTOGRAMS, the rest counted."""
    run = tmp_path / "many"
    run.mkdir()
    names = 1000
    write(run / "trajectories.jsonl", *(scored(i, {f"n{i:04}": 1.0}) for i in range(names)))
    (run / "config.yaml").write_text("env: tools\n")  # a rollout run: its summary is shown
    episodes = read_trajectories(run / "trajectories.jsonl")
    (run / "summary.json").write_text(summarize(episodes).model_dump_json())
    page = TestClient(make_app(find_runs([run]))).get("/run/many")
    assert page.status_code == 200
    assert page.text.count('class="chart histogram"') == HISTOGRAMS + 1  # and the reward's
    assert f"{COMPONENT_NAMES - HISTOGRAMS} more reward component(s) not drawn" in page.text
    other = names - COMPONENT_NAMES
    assert f"{other} more reward component name(s) in this run, {other} score(s)" in page.text
    assert page.text.count("<tr><td>n0") == COMPONENT_ROWS
    assert f"and {names - COMPONENT_ROWS} more" in page.text
    assert len(page.content) < 400_000
