"""Training runs over plain HTTP: charts per step, histograms, alarms and the alarm filter, the
step filter, markup from a reward component's and a task's name; and the first open of a run,
which shows how far its index got."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rk_agent.view.app import make_app
from rk_agent.view.catalog import find_runs
from tests.view.conftest import MARKED
from tests.view.training import TrainingRun


@pytest.fixture(scope="module")
def client(runs_root: Path, training_root: Path) -> TestClient:
    return TestClient(make_app(find_runs([runs_root, training_root])))


def _count(page: str) -> str:
    found = re.search(r'id="count">([^<]*)<', page)
    assert found is not None
    return found.group(1).split(" · ")[0]


def test_the_training_run_page_draws_each_figure_per_step(client: TestClient) -> None:
    page = client.get("/run/train")
    assert page.status_code == 200
    for chart in ("chart-reward", "chart-success", "chart-zero-spread", "chart-length"):
        assert f'id="{chart}" data-steps="4"' in page.text
    assert page.text.count('<g class="alarm-marker">') == 4  # a chart's 3 alarms, at step 4
    assert page.text.count(">3 alarms</text>") == 4
    assert page.text.count("<polyline") >= 4
    assert "watched steps</th><td>4 (last: step 4)" in page.text
    assert "32 of 32 episodes" in page.text  # 4 steps of 8 episodes, ids repeating per step
    assert 'href="/run/train/episode/0-0%403"' in page.text


def test_histograms_of_the_reward_and_its_components(client: TestClient) -> None:
    page = client.get("/run/solver")
    assert "histogram of episode reward</title>" in page.text
    assert "histogram of answer</title>" in page.text
    assert '<details class="parts">' in page.text  # answer.format and the like, folded
    # Every episode solved: each histogram is one bar, all 8 episodes in it.
    assert page.text.count('<rect class="bar"') == page.text.count('class="chart histogram"')
    assert "<title>1: 8</title>" in page.text
    mixed = client.get("/run/train").text
    reward = mixed.split('id="hist-reward"', 1)[1].split("</figure>", 1)[0]
    assert reward.count('<rect class="bar"') == 20
    assert "<title>0 to 0.05: 14</title>" in reward and "<title>0.95 to 1: 18</title>" in reward


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("", "32 of 32 episodes"),
        ("alarm=zero_spread", "8 of 32 episodes"),  # step 4: every group failed twice
        ("alarm=answer_collapse", "8 of 32 episodes"),
        ("alarm=dominant_component", "8 of 32 episodes"),  # the whole step
        ("alarm=nan_reward", "0 of 32 episodes"),  # not raised
        ("step=2", "8 of 32 episodes"),
        ("step=2&outcome=success", "6 of 32 episodes"),
    ],
)
def test_a_training_run_filters_by_alarm_and_step(
    client: TestClient, query: str, count: str
) -> None:
    assert _count(client.get(f"/run/train?{query}").text) == count


def test_a_rollout_runs_alarm_filter_selects_the_groups_behind_it(client: TestClient) -> None:
    runs = client.get("/")
    assert 'href="/run/solver?alarm=zero_spread">zero_spread</a>' in runs.text
    assert 'href="/run/train?alarm=zero_spread">zero_spread (step 4)</a>' in runs.text
    assert _count(client.get("/run/solver?alarm=zero_spread").text) == "8 of 8 episodes"
    assert _count(client.get("/run/solver?alarm=answer_collapse").text) == "8 of 8 episodes"
    assert _count(client.get("/run/stub?alarm=zero_spread").text) == "0 of 4 episodes"


def test_an_episode_of_a_training_step_links_its_group(client: TestClient) -> None:
    page = client.get("/run/train/episode/0-0@2")
    assert page.status_code == 200
    assert "at step 2 (2 episodes)" in page.text
    assert 'id="next-episode" href="/run/train/episode/1-1%402"' in page.text


def test_markup_in_a_component_a_task_and_an_alarm_is_text(client: TestClient) -> None:
    page = client.get("/run/marked")
    assert page.status_code == 200
    assert "<img" not in page.text
    shown = MARKED.replace('"', "&#34;").replace("<", "&lt;").replace(">", "&gt;")
    assert f"histogram of {shown}</title>" in page.text  # a chart's label
    assert f"the component &#39;{shown}&#39; made up" in page.text  # the alarm, on the page
    assert f"<td>{shown}</td>" in page.text  # the task
    assert "<img" not in client.get("/").text
    assert "<img" not in client.get("/run/marked/episode/0-0@1").text


def test_the_first_open_shows_how_far_the_index_got(runs_root: Path) -> None:
    client = TestClient(make_app(find_runs([runs_root]), index_wait_s=0))
    first = client.get("/run/solver")
    assert first.status_code == 202
    assert 'id="indexing" data-progress="/run/solver/progress"' in first.text
    assert "<progress" in first.text
    while not (state := client.get("/run/solver/progress").json())["ready"]:
        assert 0 <= state["share"] < 1
    assert state == {"ready": True, "share": 1.0}
    assert client.get("/run/solver").status_code == 200


def test_the_runs_page_shows_a_run_being_read(runs_root: Path) -> None:
    client = TestClient(make_app(find_runs([runs_root]), index_wait_s=0))
    page = client.get("/")
    assert page.text.count("reading its episodes:") == 2
    assert 'data-refresh="2" data-swap="runs"' in page.text


def test_a_running_training_run_updates_itself(runs_root: Path, tmp_path: Path) -> None:
    from tests.view.conftest import mixed_steps

    steps = mixed_steps(runs_root)
    run = TrainingRun(tmp_path / "live")
    run.step(steps[0])
    client = TestClient(make_app(find_runs([tmp_path / "live"])))
    page = client.get("/run/live")
    assert 'data-refresh="3"' in page.text and 'data-steps="1"' in page.text
    run.step(steps[1])
    page = client.get("/run/live")
    assert 'id="chart-reward" data-steps="2"' in page.text
    assert "16 of 16 episodes" in page.text
    run.finish()
    assert "data-refresh" not in client.get("/run/live").text


def test_a_run_without_a_watch_says_so(runs_root: Path, tmp_path: Path) -> None:
    run = TrainingRun(tmp_path / "sft")
    (tmp_path / "sft" / "watch.jsonl").unlink(missing_ok=True)
    shutil.copy(runs_root / "solver" / "trajectories.jsonl", tmp_path / "sft")
    run.finish()
    page = TestClient(make_app(find_runs([tmp_path / "sft"]))).get("/run/sft")
    assert page.status_code == 200
    assert "No step watched yet." in page.text


@pytest.mark.slow
@pytest.mark.timeout(900)  # a process start and three steps: minutes on a loaded machine
def test_a_real_grpo_run_is_shown_step_by_step(tmp_path: Path, tiny_model_dir: Path) -> None:
    import os
    import subprocess
    import sys

    out = tmp_path / "grpo"
    command = [
        sys.executable, "-m", "rk_agent", "train", "grpo", "--model", str(tiny_model_dir),
        "--output-dir", str(out), "--env", "guess", "--n-tasks", "4", "--max-turns", "2",
        "--no-wandb", "--num_generations", "2", "--per_device_train_batch_size", "2",
        "--max_completion_length", "12", "--max_steps", "3", "--save_steps", "10",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=800,
                          env={**env, "HOME": str(tmp_path / "home")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    catalog = find_runs([out])
    assert catalog.runs["grpo"].kind == "training"
    index = catalog.runs["grpo"].index()
    assert sorted(set(index.steps)) == [1, 2, 3]  # each step's episodes, their ids its own
    client = TestClient(make_app(catalog))
    page = client.get("/run/grpo")
    assert page.status_code == 200
    assert 'id="chart-reward" data-steps="3"' in page.text
    assert "finished" in page.text
    assert _count(page.text) == f"{len(index)} of {len(index)} episodes"
    assert _count(client.get("/run/grpo?step=2").text) == f"2 of {len(index)} episodes"
    ids = [json.loads(line)["id"] for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(set(ids)) == len(ids) == len(index)
    second = next(i for i in ids if i.startswith("s2-"))
    assert client.get(f"/run/grpo/episode/{second}").status_code == 200


def _sft_run(folder: Path, trajectories: Path) -> None:
    """An SFT run's folder as ``rk-agent train sft`` leaves it, by its writers: its config, its
    record, TRL's checkpoints (``trainer_state.json`` with the logged loss) and the final model."""
    from transformers import TrainerState

    from rk_agent.runs.run_record import RunKind, RunRecord
    from rk_agent.trainers.callbacks import RunRecordCallback
    from rk_agent.trainers.config import TrainConfig, save_train_config
    from rk_agent.types import RunStatus

    config = TrainConfig(kind="sft", trajectories=str(trajectories), model="my-model",
                         output_dir=str(folder))  # fmt: skip
    save_train_config(config, folder)
    record = RunRecordCallback(folder, RunRecord.start(RunKind.TRAINING, global_step=0))
    history: list[dict[str, float]] = []
    for step in (1, 2, 3):
        history.append({"loss": 2.0 / step, "learning_rate": 1e-5, "step": step})
        if step > 1:  # checkpoints at steps 2 and 3 (the last)
            state = TrainerState(global_step=step, log_history=list(history))
            (folder / f"checkpoint-{step}").mkdir()
            state.save_to_json(str(folder / f"checkpoint-{step}" / "trainer_state.json"))
    (folder / "final").mkdir()
    record.finish(RunStatus.FINISHED, 3)


def test_an_sft_run_has_a_page_its_record_config_loss_and_checkpoints(
    runs_root: Path, tmp_path: Path
) -> None:
    _sft_run(tmp_path / "sft", runs_root / "solver")
    client = TestClient(make_app(find_runs([tmp_path / "sft"])))
    runs = client.get("/")
    assert runs.status_code == 200
    # Its env: the one its trajectories were played in; its model: the config's.
    assert "<td>tools</td>\n<td>my-model</td>" in runs.text
    page = client.get("/run/sft")
    assert page.status_code == 200
    for row in ("<th>status</th><td>finished</td>", "<th>step</th><td>3</td>",
                "<th>training</th><td>SFT</td>",
                f"<th>trained on</th><td>{runs_root / 'solver'}</td>",
                "<th>loss</th><td>2.0000 at step 1, 0.6667 at step 3</td>",
                "<th>checkpoints</th><td>checkpoint-2, checkpoint-3</td>",
                "<th>final model</th><td>final</td>"):  # fmt: skip
        assert row in page.text, row
    assert 'id="chart-loss" data-steps="3"' in page.text
    assert "No step watched yet" not in page.text and "<th>episodes</th>" not in page.text
    assert (
        f"An SFT run writes no episodes of its own: it trains on those of {runs_root / 'solver'}"
        in page.text
    )
    assert 'id="episodes"' not in page.text


def test_a_grpo_run_before_its_first_episode_has_a_page(tmp_path: Path) -> None:
    from rk_agent.trainers.config import TrainConfig, save_train_config

    TrainingRun(tmp_path / "grpo")
    save_train_config(TrainConfig(kind="grpo", env="guess"), tmp_path / "grpo")
    client = TestClient(make_app(find_runs([tmp_path / "grpo"])))
    assert "<td>guess</td>\n<td>smollm2-135m</td>" in client.get("/").text
    page = client.get("/run/grpo")
    assert page.status_code == 200
    assert "No episodes yet: the run has no trajectories.jsonl." in page.text
