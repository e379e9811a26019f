"""`rescore`: stored episodes scored again into a new run, on real runs of the real engine."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs import get_solver
from rk_agent.errors import ConfigError, EndpointError, RewardInputError, UnknownNameError
from rk_agent.runs.rescore import RESCORE_FILE, RescoreRecord, rescore
from rk_agent.runs.run_dir import RunDir, read_trajectories
from tests.rollouts.runs import answering, arithmetic_tasks, file_hashes, play_run

REWARDS = '''
from rk_agent import EvaluateResult


def short_answer(messages, ground_truth):
    """1.0 for a final reply of at most 12 characters that holds the ground truth, 0.5 for a
    longer one that holds it, 0 otherwise."""
    text = messages[-1].text if hasattr(messages[-1], "text") else messages[-1]["content"]
    holds = str(ground_truth) in (text or "")
    short = len(text or "") <= 12
    return EvaluateResult(
        score=(1.0 if short else 0.5) if holds else 0.0,
        metrics={"holds": float(holds), "short": float(short)},
    )


def per_call(messages, tool_calls):
    """0.1 per tool call that succeeded in the step."""
    return 0.1 * sum(record.result.ok for record in tool_calls)


def picky(messages, ground_truth):
    """Raises on the task whose answer is 4 (t2 of the arithmetic tasks)."""
    if str(ground_truth) == "4":
        raise ValueError("no fours")
    return 1.0


def needs_reference(messages, reference):
    return 1.0
'''


@pytest.fixture
def rewards_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_rewards.py"
    path.write_text(REWARDS)
    return path


@pytest.mark.parametrize("env", ["tools", "code"])
def test_rescore_gives_what_a_rollout_with_that_reward_gives(
    tmp_path: Path, rewards_file: Path, env: str
) -> None:
    reward = f"{rewards_file}::short_answer"
    solver = get_solver(env)
    source = play_run(tmp_path / "source", solver, env=env, n=3, group_size=2)
    direct = play_run(tmp_path / "direct", solver, env=env, n=3, group_size=2, rewards=[reward])
    before = file_hashes(source)

    result = rescore(source, reward)

    assert file_hashes(source) == before  # the source is only read
    out = tmp_path / "source-rescored-short_answer"
    assert result.output == str(out)
    old = {t.id: t for t in read_trajectories(source)}
    expected = {t.id: t for t in read_trajectories(direct)}
    new = {t.id: t for t in read_trajectories(out)}
    assert new.keys() == expected.keys() == old.keys()
    for key, t in new.items():
        assert t.episode is not None and expected[key].episode is not None
        assert t.episode == expected[key].episode
        assert (t.success, t.total_reward) == (expected[key].success, expected[key].total_reward)
        assert t.turns == old[key].turns  # the steps are kept as recorded
    record = RescoreRecord.model_validate_json((out / RESCORE_FILE).read_text())
    assert (record.source, record.reward, record.reward_name) == (
        str(source.resolve()),
        reward,
        "short_answer",
    )
    assert record.reward_sha256 is not None and len(record.reward_sha256) == 64
    assert (record.episodes, record.rescored, record.invalid) == (6, 6, 0)
    assert record.success_rule == f"the {env!r} environment's is_success"
    assert RunDir.open(out).config.env.rewards == [reward]
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
    # What the model saw is the source's: its record comes along with the episodes.
    assert (out / "provenance.json").read_bytes() == (source / "provenance.json").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metric_means"] == result.summary.metric_means
    assert set(summary["metric_means"]) == {
        "short_answer",
        "short_answer.holds",
        "short_answer.short",
    }
    assert result.success_rate.before == 1.0
    assert result.components["short_answer"].before is None


def test_a_step_reward_rescores_every_turn_as_the_env_would(
    tmp_path: Path, rewards_file: Path
) -> None:
    step = f"{rewards_file}::per_call"
    solver = get_solver("tools")
    source = play_run(tmp_path / "source", solver, env="tools", n=3)
    direct = play_run(
        tmp_path / "direct", solver, env="tools", n=3,
        env_kwargs={"step_rewards": {"per_call": step}},
    )  # fmt: skip

    result = rescore(source, "math", step_reward=step)

    expected = {t.id: t for t in read_trajectories(direct)}
    for t in read_trajectories(result.output):
        want = expected[t.id]
        assert [turn.reward for turn in t.turns] == [turn.reward for turn in want.turns]
        assert [turn.metrics for turn in t.turns] == [turn.metrics for turn in want.turns]
        assert t.episode is not None and want.episode is not None
        assert t.episode.step_outputs == want.episode.step_outputs
        assert t.total_reward == pytest.approx(sum(x.reward for x in t.turns) + t.episode.score)
    assert result.record.step_reward == step


def test_a_reward_that_raises_on_one_episode_makes_only_that_one_invalid(
    tmp_path: Path, rewards_file: Path
) -> None:
    tasks = arithmetic_tasks(tmp_path / "tasks.jsonl", range(4))
    source = play_run(
        tmp_path / "source", answering({0, 1, 2, 3}), env="math", tasks=str(tasks), n=4
    )

    result = rescore(source, f"{rewards_file}::picky", output=tmp_path / "out")

    by_task = {t.task.id: t for t in read_trajectories(tmp_path / "out")}
    bad = by_task["t2"].episode
    assert bad is not None and not bad.is_score_valid
    assert bad.error is not None and "ValueError: no fours" in bad.error
    assert by_task["t2"].success is False
    assert all(by_task[t].episode_reward == 1.0 for t in ("t0", "t1", "t3"))
    assert (result.record.rescored, result.record.invalid) == (4, 1)
    assert result.summary.episode_reward.invalid == 1
    assert result.reward_mean == type(result.reward_mean)(before=1.0, after=1.0)


def test_episodes_that_failed_before_scoring_are_copied_as_they_were(tmp_path: Path) -> None:
    tasks = arithmetic_tasks(tmp_path / "tasks.jsonl", range(3))

    def flaky(messages: list, tools: object) -> str:
        if "1 + 1" in messages[-1].text:
            raise EndpointError("the model is down")
        return answering({0, 2})(messages, tools)

    source = play_run(tmp_path / "source", flaky, env="math", tasks=str(tasks), n=3)
    result = rescore(source / "trajectories.jsonl", "format", output=tmp_path / "out")

    old = {t.id: t for t in read_trajectories(source)}
    new = {t.id: t for t in read_trajectories(tmp_path / "out")}
    failed = [key for key, t in old.items() if t.failure is not None]
    assert len(failed) == 1 and new[failed[0]] == old[failed[0]]
    assert (result.record.episodes, result.record.rescored, result.record.unscored) == (3, 2, 1)
    assert RunDir.open(tmp_path / "out").config.env.name == "math"  # named by the episodes


def test_ctrl_c_leaves_no_output_and_the_source_untouched(tmp_path: Path) -> None:
    tasks = arithmetic_tasks(tmp_path / "tasks.jsonl", range(6))
    source = play_run(tmp_path / "source", answering({0}), env="math", tasks=str(tasks), n=6)
    before = file_hashes(source)
    seen = []

    def interrupt(trajectory: object) -> None:
        seen.append(trajectory)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rescore(source, "format", output=tmp_path / "out", on_episode=interrupt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source", "tasks.jsonl"]
    assert file_hashes(source) == before


def _math_run(tmp_path: Path) -> Path:
    tasks = arithmetic_tasks(tmp_path / "tasks.jsonl", range(2))
    return play_run(tmp_path / "source", answering({0}), env="math", tasks=str(tasks), n=2)


def test_bad_inputs_say_what_came_and_how_to_fix_it(tmp_path: Path, rewards_file: Path) -> None:
    source = _math_run(tmp_path)
    missing, empty, taken, inner = (tmp_path / "nope", tmp_path / "empty", tmp_path / "taken",
                                    source / "inner")  # fmt: skip
    empty.mkdir()
    taken.mkdir()
    cases: list[tuple[Path, str, dict[str, Any], type[Exception], str]] = [
        (missing, "format", {}, ConfigError,
         f"no run at {missing}: expected a run directory made by `rk-agent rollout`, a training "
         "run's folder or a trajectories JSONL file."),
        (empty, "format", {}, ConfigError,
         f"{empty} holds no trajectories.jsonl: expected a run directory made by `rk-agent "
         "rollout`, or a trajectories JSONL file."),
        (source, "fromat", {}, UnknownNameError, "unknown reward 'fromat'. Did you mean 'format'?"),
        (source, "format", {"kwargs": {"tagz": 1}}, ConfigError,
         "reward 'format' has no option 'tagz'."),
        (source, "format", {"output": taken}, ConfigError,
         f"{taken} already exists; rescore writes a new run and never overwrites one. Choose "
         "another -o/--output, or delete it first."),
        (source, "format", {"output": inner}, ConfigError,
         f"the output {inner} is inside the source run {source}; rescore never writes into its "
         "source. Choose an -o/--output outside it."),
        (source, f"{rewards_file}::needs_reference", {"output": tmp_path / "out"},
         RewardInputError, "reward 'needs_reference' cannot be called"),
    ]  # fmt: skip
    for run, reward, options, error, message in cases:
        with pytest.raises(error, match=re.escape(message)):
            rescore(run, reward, **options)
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.partial").exists()


def test_a_partial_folder_left_by_a_killed_rescore_is_named(tmp_path: Path) -> None:
    source = _math_run(tmp_path)
    (tmp_path / ".out.partial").mkdir()
    with pytest.raises(ConfigError, match=re.escape(
        f"{tmp_path / '.out.partial'} is left from a rescore that was killed; delete it, then "
        "run again."
    )):  # fmt: skip
        rescore(source, "format", output=tmp_path / "out")


def test_success_is_the_envs_only_for_a_source_this_user_vouches_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training run's folder (no rollout config: its episodes name the env) is vouched for by
    its signed config; the rescored run is signed only when its source was."""
    from rk_agent.runs.run_trust import is_signed, sign_config
    from tests.rollouts.toy import solver

    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "cache"))
    env = f"{Path(__file__).parent.parent / 'rollouts' / 'toy.py'}::AddEnv"
    played = play_run(tmp_path / "played", solver, env=env, n=2)
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / "trajectories.jsonl").write_text((played / "trajectories.jsonl").read_text())
    config = folder / "rk_agent_config.yaml"
    config.write_text(f"kind: grpo\nenv: {env}\n")

    refused = rescore(folder, "math", output=tmp_path / "a").record.success_rule
    assert refused.startswith("the default rule (a valid score of at least 1.0): the source is")
    toy = Path(__file__).parent.parent / "rollouts" / "toy.py"
    assert f"would import {toy} (environment {env})" in refused
    assert not is_signed(tmp_path / "a" / "config.yaml")
    trusted = rescore(folder, "math", output=tmp_path / "b", trust_run=True)
    assert trusted.record.success_rule == f"the {env!r} environment's is_success"
    assert not is_signed(tmp_path / "b" / "config.yaml")  # --trust-run does not carry over
    sign_config(config)
    vouched = rescore(folder, "math", output=tmp_path / "c")
    assert vouched.record.success_rule == f"the {env!r} environment's is_success"
    assert is_signed(tmp_path / "c" / "config.yaml")
    own = rescore(played, "math", output=tmp_path / "d")  # a rollout run written here
    assert own.record.success_rule == f"the {env!r} environment's is_success"
