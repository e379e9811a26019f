"""The viewer in a real browser: Debian's chromium, driven by Playwright (nothing downloaded).

Each test keeps a screenshot of the pages it opened under its tmp_path. The browser is the one
on PATH (``.ci/run`` installs Debian's ``chromium`` when it is missing); without it these tests
are skipped with the reason.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.view.conftest import MARKUP, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
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


def shot(page: Any, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
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
    from rk_agent.rollouts.run_dir import RunDir, read_trajectories

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
