"""The viewer's web app: read-only pages of runs, episodes and comparisons (FastAPI).

Pages, all ``GET``:

- ``/``: every run found (`rk_agent.view.catalog`) with its alarms, and a form to compare two;
- ``/run/KEY``: a run's summary; a training run's record, config, checkpoints and charts per
  step (`rk_agent.view.training`: the loss; GRPO's watch), an SFT run's without episodes;
  the histograms of its episode reward and of its reward components (`rk_agent.view.charts`;
  at most `HISTOGRAMS` components a page, the rest counted);
  its alarms, each a link to the episodes behind it; filters and one page of its episode list
  (`rk_agent.view.listing`); while the run is being written the page's script fetches it again
  every few seconds and swaps in the parts that change;
- ``/run/KEY/episode/KEY``: one episode turn by turn (`rk_agent.view.episode`), with links to
  the previous and next episode of its group, and its token ids checked for drift where it
  has them (`rk_agent.runs.token_drift`, with the run's tokenizer);
- ``/run/KEY/progress``: how far the run's index got (JSON), for the page shown while a big
  run is first read: a page that needs a run's index waits up to ``index_wait_s`` for it, then
  shows that page instead, whose script polls this and loads the page asked for when done;
- ``/compare?a=KEY&b=KEY``: run B against run A on their shared tasks
  (`rk_agent.runs.compare.compare_runs`), gained and lost tasks listed;
- ``/compare/task?a=KEY&b=KEY&task=ID``: a task's episodes in both runs, side by side;
- ``/static/...``: the stylesheet and script shipped in the package.

Pages are drawn by Jinja2 templates with autoescaping on: what came from a model, a tool or a
user is always text, and the Content-Security-Policy header lets only the shipped script run.
With a ``token``, every request must carry it (``Authorization: Bearer``, or the cookie set by
opening any page once with ``?token=``); others get 401.

Main names: `make_app`, `HISTOGRAMS`, `COMPONENT_ROWS`.
"""

from __future__ import annotations

import hmac
import itertools
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader
from pydantic import ValidationError

from rk_agent.errors import ConfigError
from rk_agent.runs.summary import RunSummary
from rk_agent.runs.trajectory import Trajectory
from rk_agent.view.catalog import Catalog, Run
from rk_agent.view.charts import HistogramChart, histogram_chart
from rk_agent.view.episode import EpisodeView, episode_view
from rk_agent.view.filters import EpisodeFilter
from rk_agent.view.index import COMPONENT_NAMES, EpisodeIndex
from rk_agent.view.listing import Listing
from rk_agent.view.training import FINAL_DIR, Training

__all__ = ["COMPONENT_ROWS", "HISTOGRAMS", "TOKEN_COOKIE", "make_app"]

TOKEN_COOKIE = "rk_agent_view_token"

HISTOGRAMS = 24
"""At most this many reward components get a histogram on a run page (by name; the rest are
counted under the histograms): a page stays small whatever a run names."""

COMPONENT_ROWS = 64
"""At most this many rows of the summary's component means on a run page (the rest counted)."""
"""The cookie that carries the token after a page was opened with ``?token=``."""

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _NotFound(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Indexing(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(run.key)
        self.run = run


def make_app(catalog: Catalog, *, token: str | None = None, index_wait_s: float = 1.0) -> FastAPI:
    """The viewer's app over the runs of ``catalog`` (module docstring).

    Args:
        catalog: the runs to show (`rk_agent.view.catalog.find_runs`).
        token: when set, every request must carry it.
        index_wait_s: how long a page waits for a run's index before it shows how far it got.

    Example:
        >>> app = make_app(find_runs(["runs/"]))  # doctest: +SKIP
        >>> uvicorn.run(app, host="127.0.0.1", port=8765)  # doctest: +SKIP
    """
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    templates = Environment(
        loader=PackageLoader("rk_agent.view", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["num"] = _num
    templates.globals["qs"] = lambda **fields: urlencode({k: v for k, v in fields.items() if v})
    listings: dict[str, Listing] = {}
    histograms: dict[str, tuple[int, list[HistogramChart]]] = {}
    comparisons: dict[tuple[str, str], tuple[tuple[int, int], Any]] = {}
    lock = threading.Lock()

    def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status, headers=_HEADERS)

    def run_or_404(key: str) -> Run:
        run = catalog.get(key)
        if run is None:
            raise _NotFound(f"No run {key!r} here: the runs page lists the runs this viewer has.")
        return run

    def ready(run: Run) -> EpisodeIndex:
        index = run.indexed(index_wait_s)
        if index is None:
            raise _Indexing(run)
        return index

    def listing(run: Run, index: EpisodeIndex) -> Listing:
        with lock:
            if run.key not in listings:
                listings[run.key] = Listing(index)
            return listings[run.key]

    def run_histograms(run: Run, index: EpisodeIndex) -> list[HistogramChart]:
        with lock:
            kept = histograms.get(run.key)
        if kept is not None and kept[0] == len(index):
            return kept[1]
        drawn = [histogram_chart("hist-reward", "episode reward", index.rewards)]
        names = index.components
        for number, name in enumerate(sorted(names)[:HISTOGRAMS]):
            base = name.partition(".")[0]
            part = base != name and base in names  # answer.format: a part of answer
            scores = names[name].dense(len(index))
            drawn.append(histogram_chart(f"hist-{number}", name, scores, part=part))
        with lock:
            histograms[run.key] = (len(index), drawn)
        return drawn

    @app.exception_handler(_NotFound)
    async def not_found(request: Request, exc: _NotFound) -> Response:
        return render("error.html", 404, title="Not found", message=exc.message)

    @app.exception_handler(_Indexing)
    async def indexing(request: Request, exc: _Indexing) -> Response:
        run = exc.run
        return render(
            "indexing.html", 202, title=f"Reading {run.key}", run=run, share=run.progress()
        )

    @app.exception_handler(ConfigError)
    async def bad_request(request: Request, exc: ConfigError) -> Response:
        return render("error.html", 400, title="Bad request", message=str(exc))

    if token is not None:
        _require_token(app, token)

    @app.get("/", response_class=HTMLResponse)
    def runs_page() -> Response:
        # Every pass started at once, then waited for (up to index_wait_s in all).
        started = {key: run.indexed(0) for key, run in catalog.runs.items()}
        deadline = time.monotonic() + index_wait_s
        runs = []
        for key, run in catalog.runs.items():
            index = started[key]
            if index is None and index_wait_s > 0:
                index = run.indexed(max(0.0, deadline - time.monotonic()))
            runs.append((run, run.info(index, indexing=index is None)))
        return render("runs.html", title="Runs", runs=runs)

    @app.get("/run/{key}/progress")
    def progress(key: str) -> Response:
        run = run_or_404(key)
        ready = run.indexed(0) is not None
        share = 1.0 if ready else run.progress()
        return JSONResponse({"ready": ready, "share": share}, headers=_HEADERS)

    @app.get("/run/{key}", response_class=HTMLResponse)
    def run_page(key: str, request: Request, page: int = 1) -> Response:
        run = run_or_404(key)
        flt = EpisodeFilter.from_query(request.query_params)
        index = ready(run)
        alarms = run.alarms()
        shown = listing(run, index).page(flt, page, alarms=alarms)
        summary = run.summary()
        training = run.training()
        return render(
            "run.html",
            title=f"Run {run.key}",
            run=run,
            info=run.info(index),
            summary_rows=_summary_rows(summary) if summary is not None else [],
            component_rows=(
                [
                    (name, _num(mean))
                    for name, mean in itertools.islice(summary.metric_means.items(), COMPONENT_ROWS)
                ]
                if summary is not None
                else []
            ),
            component_rows_left=(
                max(len(summary.metric_means) - COMPONENT_ROWS, 0) if summary is not None else 0
            ),
            training=training,
            charts=training.charts() if training is not None else [],
            histograms=run_histograms(run, index),
            histograms_left=max(len(index.components) - HISTOGRAMS, 0),
            other_components=index.other_components,
            other_scores=index.other_scores,
            kept_names=COMPONENT_NAMES,
            alarms=alarms,
            flt=flt,
            page=shown,
            stepped=bool(len(index)) and index.steps[0] >= 0,  # a training run's episodes
            stops=[w for w in index.stops.words if w],
            failures=[w for w in index.failures.words if w],
            unreadable=index.unreadable,
            no_episodes=_no_episodes(run, training) if not len(index) else None,
        )

    @app.get("/run/{key}/episode/{episode_key}", response_class=HTMLResponse)
    def episode_page(key: str, episode_key: str) -> Response:
        run = run_or_404(key)
        index = ready(run)
        position = index.position(episode_key)
        if position is None:
            raise _NotFound(f"Run {key!r} has no episode {episode_key!r}.")
        try:
            trajectory = index.read(position)
        except ValidationError as exc:
            message = f"Episode {episode_key!r} of run {key!r} is not a readable trajectory: {exc}"
            return render("error.html", 500, title="Unreadable episode", message=message)
        group = index.group_of(position)
        at = group.index(position)
        previous = index.row(group[at - 1]) if at > 0 else None
        following = index.row(group[at + 1]) if at + 1 < len(group) else None
        return render(
            "episode.html",
            title=f"Episode {episode_key}",
            run=run,
            row=index.row(position),
            view=_checked_view(run, trajectory),
            previous=previous,
            following=following,
            group_size=len(group),
        )

    @app.get("/compare", response_class=HTMLResponse)
    def compare_page(a: str, b: str) -> Response:
        from rk_agent.runs.compare import compare_runs

        run_a, run_b = run_or_404(a), run_or_404(b)
        sizes = (_size(run_a.trajectories), _size(run_b.trajectories))
        kept = comparisons.get((a, b))
        if kept is not None and kept[0] == sizes:
            comparison = kept[1]
        else:  # both runs read through: kept until either file changes
            comparison = compare_runs(run_a.trajectories, run_b.trajectories)
            comparisons[(a, b)] = (sizes, comparison)
        return render("compare.html", title="Compare", a=run_a, b=run_b, comparison=comparison)

    @app.get("/compare/task", response_class=HTMLResponse)
    def compare_task_page(a: str, b: str, task: str) -> Response:
        run_a, run_b = run_or_404(a), run_or_404(b)
        sides = []
        for run in (run_a, run_b):
            index = ready(run)
            views = [episode_view(index.read(p)) for p in index.of_task(task)]
            sides.append((run, views))
        if not sides[0][1] and not sides[1][1]:
            raise _NotFound(f"Neither run holds task {task!r}.")
        return render("side_by_side.html", title=f"Task {task}", task=task, sides=sides)

    app.mount("/static", StaticFiles(packages=[("rk_agent.view", "static")]), name="static")
    return app


def _require_token(app: FastAPI, token: str) -> None:
    expected = token.encode()

    def allowed(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        given = header.removeprefix("Bearer ") if header.startswith("Bearer ") else None
        given = given or request.cookies.get(TOKEN_COOKIE) or ""
        return hmac.compare_digest(given.encode(), expected)

    @app.middleware("http")
    async def check_token(request: Request, call_next: Any) -> Response:
        offered = request.query_params.get("token")
        if offered is not None and hmac.compare_digest(offered.encode(), expected):
            rest = urlencode(
                [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            )
            target = request.url.path + (f"?{rest}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return redirect
        if not allowed(request):
            message = "This viewer needs its token: open it once with ?token=<token>."
            return Response(message, status_code=401, media_type="text/plain")
        response: Response = await call_next(request)
        return response


def _no_episodes(run: Run, training: Training | None) -> str | None:
    """Why a run whose trajectories file does not exist lists no episodes (``None``: it has
    one, or an episode may yet come: the page then lists none the usual way)."""
    if run.trajectories.is_file():
        return None
    if training is not None and training.kind == "sft":
        source = training.config.get("trajectories") or "another run"
        return (
            f"An SFT run writes no episodes of its own: it trains on those of {source}. Try "
            f"its model with `rk-agent rollout --model {run.path / FINAL_DIR}`."
        )
    return "No episodes yet: the run has no trajectories.jsonl."


def _checked_view(run: Run, trajectory: Trajectory) -> EpisodeView:
    """The episode's view, its token ids checked for drift with the run's tokenizer."""
    if not any(turn.token_ids for turn in trajectory.turns):
        return episode_view(trajectory)
    checker = run.token_checker()
    if isinstance(checker, str):
        return episode_view(trajectory, drift_note=f"Not checked for drift: {checker}")
    with _checking:  # one tokenizer per run, used by one request at a time
        drifts, checked = checker.check(trajectory)
    note = f"{checked} turn(s) checked for drift with the tokenizer of {checker.source}"
    if checker.note:
        note += f" (note: {checker.note})"
    return episode_view(trajectory, {d.turn: d for d in drifts}, note + ".")


_checking = threading.Lock()


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return -1


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _summary_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """The summary's figures, as ``rk-agent show`` prints them (a subset), as text rows."""
    er = summary.episode_reward
    return [
        ("episodes", f"{summary.episodes} ({summary.tasks} tasks x {summary.group_size})"),
        ("failed", str(summary.failed)),
        ("episode reward", f"mean {_num(er.mean)}  std {_num(er.std)}  (invalid {er.invalid})"),
        ("success rate", _num(summary.success_rate)),
        ("pass@k", ", ".join(f"{k}={v:.3f}" for k, v in summary.pass_at_k.items()) or "-"),
        ("turns per episode", _num(summary.turns_mean, 2)),
        ("tool calls", f"{summary.tool_calls} (success {_num(summary.tool_call_success_rate)})"),
        ("stop reasons", ", ".join(f"{k}={v}" for k, v in summary.stop_reasons.items()) or "-"),
        ("failures", ", ".join(f"{k}={v}" for k, v in summary.failures.items()) or "none"),
    ]
