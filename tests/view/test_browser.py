"""The viewer in a real browser: Debian's chromium, driven by Playwright (nothing downloaded).

Each test keeps a screenshot of the pages it opened under its tmp_path. The browser is the one
on PATH (``.ci/run`` installs Debian's ``chromium`` when it is missing); without it these tests
are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.view.conftest import MARKED, MARKUP, free_port, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """chromium, whose resolver points ``attacker.test`` at ``127.0.0.1``: where DNS rebinding
    ends, a page of the attacker's site whose name now reaches the viewer."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--host-resolver-rules=MAP attacker.test 127.0.0.1"],
        )  # fmt: skip
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == []


def shot(page: Any, tmp_path: Path, name: str, part: str | None = None) -> None:
    """Keep a screenshot of the page (or of its element ``part``, a CSS selector)."""
    if part is None:
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    else:
        page.locator(part).screenshot(path=str(tmp_path / f"{name}.png"))
    assert (tmp_path / f"{name}.png").stat().st_size > 0


def test_runs_filter_to_failures_open_an_episode_and_follow_a_tool_call(
    page: Any, viewer: str, tmp_path: Path
) -> None:
    page.goto(viewer + "/")
    assert page.locator("#runs a.run-link").all_inner_texts() == ["solver", "stub"]
    shot(page, tmp_path, "runs")

    page.click("text=stub")
    assert page.locator("#count").inner_text().startswith("4 of 4 episodes")
    page.select_option("#filters select[name=outcome]", "failure")  # submits on change
    page.wait_for_url("**outcome=failure**")
    assert page.locator("#count").inner_text().startswith("4 of 4 episodes")
    shot(page, tmp_path, "run-failures")
    page.goto(viewer + "/run/solver")
    page.select_option("#filters select[name=outcome]", "failure")
    page.wait_for_url("**outcome=failure**")
    assert page.locator("#count").inner_text().startswith("0 of 8 episodes")

    page.goto(viewer + "/run/solver")
    page.locator("#episodes a.episode-link").first.click()
    page.wait_for_url("**/episode/**")
    assert page.locator(".turn").count() == 3
    shot(page, tmp_path, "episode")
    called = page.locator("#t0-call0 .call-name").inner_text()
    page.locator("#t0-call0 a.call-result-link").click()
    assert page.evaluate("location.hash") == "#t0-result0"
    result = page.locator("#t0-result0")
    assert result.is_visible() and f"tool · {called}" in result.inner_text()
    page.locator("#t0-result0 a.call-link").click()
    assert page.evaluate("location.hash") == "#t0-call0"
    first = page.url.split("#")[0]
    there, back = ("#next-episode", "#prev-episode")  # to the other episode of its group
    if page.locator(there).count() == 0:  # the first listed is the group's second
        there, back = back, there
    page.click(there)
    page.wait_for_url(lambda url: url != first)
    page.click(back)
    page.wait_for_url(first)


def test_compare_two_runs_and_open_a_lost_task_side_by_side(
    page: Any, viewer: str, tmp_path: Path
) -> None:
    page.goto(viewer + "/")
    page.select_option("#compare-form select[name=a]", "solver")
    page.select_option("#compare-form select[name=b]", "stub")
    page.click("#compare-form button")
    page.wait_for_url("**/compare?**")
    assert page.locator("#lost a.task-link").count() == 4
    assert page.locator("#gained li").inner_text() == "none"
    shot(page, tmp_path, "compare")
    page.locator("#lost a.task-link").first.click()
    page.wait_for_url("**/compare/task?**")
    assert page.locator("#side-a .episode").count() == 2
    assert page.locator("#side-b .episode").count() == 1
    assert "Answer: 7" in page.locator("#side-b").inner_text()
    shot(page, tmp_path, "side-by-side")


def test_markup_in_model_output_shows_as_text_and_runs_nothing(
    page: Any, viewer: str, tmp_path: Path
) -> None:
    page.goto(viewer + "/run/stub/episode/0-0")
    text = page.locator("pre.assistant-text").first
    assert text.inner_text() == MARKUP
    assert text.is_visible()
    assert page.locator("main img").count() == 0
    assert page.locator("main script").count() == 0
    assert page.locator("main b").all_inner_texts() == ["0-0"]  # the page's own, not the model's
    assert page.evaluate("typeof window.__rk_xss") == "undefined"
    shot(page, tmp_path, "markup")


def test_a_running_rollout_updates_itself(page: Any, runs_root: Path, tmp_path: Path) -> None:
    from rk_agent.runs.run_dir import RunDir, read_trajectories

    folder = tmp_path / "live"
    shutil.copytree(runs_root / "stub", folder)
    (folder / "summary.json").unlink()  # a run still playing has none yet
    first = read_trajectories(folder)[0]
    with RunDir.resume(folder) as run, serving([folder]) as url:  # a live writer holds it
        run.mark_running()
        page.goto(url + "/run/live")
        assert "running" in page.locator("#run-title").inner_text()
        assert page.locator("#count").inner_text().startswith("4 of 4 episodes")
        shot(page, tmp_path, "running-before")
        run.append(first.model_copy(update={"id": "9-0", "task_index": 9}))
        page.locator("#count", has_text="5 of 5 episodes").wait_for(timeout=20_000)
        assert page.locator("#episodes a.episode-link", has_text="9-0").count() == 1
        shot(page, tmp_path, "running-after")
        run.finish("finished")


@pytest.fixture(scope="module")
def training_viewer(runs_root: Path, training_root: Path) -> Iterator[str]:
    """The viewer over the rollout runs and the training runs: its base URL."""
    with serving([runs_root, training_root]) as url:
        yield url


def test_a_training_run_draws_its_charts_and_filters_by_alarm(
    page: Any, training_viewer: str, tmp_path: Path
) -> None:
    page.goto(training_viewer + "/")
    assert "zero_spread (step 4)" in page.locator("#runs").inner_text()
    page.click("#runs a.run-link >> text=train")
    for chart in ("chart-reward", "chart-success", "chart-zero-spread", "chart-length"):
        svg = page.locator(f"#{chart} svg")
        assert svg.is_visible()
        assert svg.bounding_box()["width"] > 200
        assert page.locator(f"#{chart} polyline").count() >= 1
        marker = page.locator(f"#{chart} .alarm-marker")  # step 4 raised 3
        assert marker.count() == 1 and marker.locator("text").inner_html() == "3 alarms"
    reward = page.locator("#chart-reward polyline.series-0").first.get_attribute("points")
    assert len(reward.split()) == 4  # a point per step
    assert page.locator("#hist-reward rect.bar").count() == 20
    shot(page, tmp_path, "training-run")
    shot(page, tmp_path, "training-charts", "#charts")

    page.click("#alarms a.alarm-link >> text=zero_spread")
    page.wait_for_url("**alarm=zero_spread**")
    assert page.locator("#count").inner_text().startswith("8 of 32 episodes")
    steps = page.locator("#episodes tbody tr td:nth-child(2)").all_inner_texts()
    assert set(steps) == {"4"}
    shot(page, tmp_path, "training-run-alarm")
    page.select_option("#filters select[name=alarm]", "")  # submits on change
    page.wait_for_url(lambda url: "alarm=zero_spread" not in url)
    assert page.locator("#count").inner_text().startswith("32 of 32 episodes")
    page.select_option("#filters select[name=alarm]", "answer_collapse")
    page.wait_for_url("**alarm=answer_collapse**")
    assert page.locator("#count").inner_text().startswith("8 of 32 episodes")


def test_a_running_training_run_updates_its_charts(
    page: Any, runs_root: Path, tmp_path: Path
) -> None:
    from tests.view.conftest import mixed_steps
    from tests.view.training import TrainingRun

    steps = mixed_steps(runs_root)
    run = TrainingRun(tmp_path / "live")
    run.step(steps[0])
    run.step(steps[1])
    with serving([tmp_path / "live"]) as url:
        page.goto(url + "/run/live")
        assert "running" in page.locator("#run-title").inner_text()
        assert page.locator("#chart-reward").get_attribute("data-steps") == "2"
        shot(page, tmp_path, "training-running-before")
        run.step(steps[2])
        page.locator('#chart-reward[data-steps="3"]').wait_for(timeout=20_000)
        assert page.locator("#count").inner_text().startswith("24 of 24 episodes")
        success = page.locator("#chart-success polyline").first.get_attribute("points")
        assert len(success.split()) == 3
        run.step(steps[3])
        page.locator('#chart-reward[data-steps="4"]').wait_for(timeout=20_000)
        page.locator("#alarms a.alarm-link", has_text="zero_spread (step 4)").wait_for()
        assert page.locator("#chart-reward .alarm-marker title").count() == 1
        assert page.locator("#filters select[name=alarm] option").count() == 4  # any, and 3
        shot(page, tmp_path, "training-running-after")
        run.finish()
        page.locator("#summary", has_text="finished").wait_for(timeout=20_000)


def test_the_first_open_of_a_run_shows_how_far_it_got(
    page: Any, runs_root: Path, tmp_path: Path
) -> None:
    held: list[Any] = []

    def hold(route: Any) -> None:  # the page's polls wait until the shot is taken
        held.append(route)

    page.route("**/progress", hold)
    with serving([runs_root], index_wait_s=0) as url:
        response = page.goto(url + "/run/solver")
        assert response.status == 202
        assert page.locator("#indexing progress").is_visible()
        assert "Reading this run's episodes" in page.locator("#indexing").inner_text()
        with page.expect_request("**/progress"):
            pass  # the page's script polls (and the poll is held)
        shot(page, tmp_path, "first-open")
        for route in held:
            route.continue_()
        page.unroute("**/progress")
        page.locator("#count").wait_for(timeout=20_000)  # the run page, once the index is done
        assert page.locator("#count").inner_text().startswith("8 of 8 episodes")


def test_token_ids_fold_per_turn_and_drifted_turns_are_marked(
    page: Any, drift_root: Path, tmp_path: Path
) -> None:
    with serving([drift_root]) as url:
        page.goto(url + "/run/drift/episode/0-0")
        marks = page.locator(".turn h3 a.drift-mark")
        assert marks.count() == 2
        assert not page.locator("#t0-tokens pre.ids").first.is_visible()  # folded
        marks.first.click()
        assert page.evaluate("location.hash") == "#t0-tokens"
        assert page.locator("#t0-tokens pre.ids").first.is_visible()  # the mark opens it
        shot(page, tmp_path, "token-drift-turn", "#turn-0")
        prompt = page.locator("#t0-tokens details.prompt-ids")  # long: folded again
        assert not prompt.locator("pre.ids").is_visible()
        prompt.locator("summary").click()
        assert prompt.locator("pre.ids").is_visible()
        assert "re-tokenized otherwise" in page.locator("#t0-tokens > summary").inner_text()
        assert "re-tokenized otherwise" not in page.locator("#t2-tokens > summary").inner_text()
        shot(page, tmp_path, "token-drift")


def test_markup_in_charts_alarms_and_task_names_runs_nothing(
    page: Any, training_viewer: str, tmp_path: Path
) -> None:
    page.goto(training_viewer + "/run/marked")
    assert MARKED in page.locator("#alarms .alarm-message").inner_text()
    captions = page.locator("#histograms figcaption").all_inner_texts()
    assert any(caption.startswith(MARKED) for caption in captions), captions
    assert page.locator("#episodes tbody td:nth-child(3)").first.inner_text() == MARKED
    assert page.locator("main img").count() == 0
    assert page.evaluate("typeof window.__rk_xss") == "undefined"
    shot(page, tmp_path, "training-markup")
    page.goto(training_viewer + "/")
    assert page.locator("main img").count() == 0
    assert page.evaluate("typeof window.__rk_xss") == "undefined"


@contextlib.contextmanager
def rk_agent_view(paths: list[Path]) -> Iterator[int]:
    """``rk-agent view PATHS`` as a real process on a free loopback port: the port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "view", *map(str, paths), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once it listens
        assert line.startswith("rk-agent view: http://127.0.0.1:"), line
        yield port
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_dns_rebinding_reads_no_runs_or_scores_from_view(
    browser: Any, runs_root: Path, tmp_path: Path
) -> None:
    # Issue 38: a page whose own name DNS rebinding points at 127.0.0.1 read the runs page and
    # whole runs from `rk-agent view` (same origin, as far as the browser knows).
    context = browser.new_context()
    page = context.new_page()
    with rk_agent_view([runs_root]) as port:
        front = page.goto(f"http://attacker.test:{port}/")
        read = page.evaluate(
            "fetch('/run/solver').then(async (r) => [r.status, await r.text()])"
        )  # the attacker's script, same origin as the page
        shot(page, tmp_path, "rebinding")
        own = page.goto(f"http://127.0.0.1:{port}/run/solver")
        own_text = page.locator("main").inner_text()
    context.close()
    assert front is not None and front.status == 421
    assert read[0] == 421 and "solver" not in read[1].replace("attacker.test", "")
    assert json.loads(read[1])["detail"].startswith(
        "this server listens on a loopback address and answers only its loopback names"
    )
    assert own is not None and own.status == 200 and "8 of 8 episodes" in own_text
