"""Every built-in environment: Gymnasium's checks and ours, seeds, solvers, JSONL tasks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gymnasium
import pytest

from rk_agent.envs import (
    GYMNASIUM_IDS,
    check_env,
    get_env_class,
    get_solver,
    make_env,
    play_with_solver,
)
from rk_agent.envs.registry import _BUILTINS
from rk_agent.errors import DataError, EnvError
from rk_agent.types import Message

ENVS = sorted(_BUILTINS)
# mcp_tools starts an MCP server process for each environment: seconds a test.
PARAMS = [pytest.param(n, marks=pytest.mark.slow) if n == "mcp_tools" else n for n in ENVS]


def test_every_builtin_is_parametrised() -> None:
    assert ENVS == ["code", "guess", "math", "mcp_tools", "tools"]


@pytest.mark.parametrize("name", PARAMS)
def test_check_env_passes(name: str) -> None:
    check_env(name)  # warnings are errors (pyproject), so Gymnasium's warnings fail this too


@pytest.mark.parametrize("name", PARAMS)
def test_gymnasium_make(name: str) -> None:
    env = gymnasium.make(GYMNASIUM_IDS[name])
    observation, info = env.reset(seed=7)
    assert isinstance(env.unwrapped, get_env_class(name))
    assert observation[-1]["role"] == "user"
    assert info["task"].messages[-1].content == observation[-1]["content"]
    env.close()


@pytest.mark.parametrize("name", PARAMS)
def test_seeds_are_deterministic_and_distinct(name: str) -> None:
    env, fresh = make_env(name), make_env(name)
    tasks = [env.reset(seed=seed)[1]["task"] for seed in range(1000)]
    assert env.reset(seed=17)[1]["task"] == tasks[17]
    assert fresh.reset(seed=17)[1]["task"] == tasks[17]  # a fresh env agrees
    env.close()
    fresh.close()
    prompts = {t.messages[-1].text for t in tasks}
    assert len({t.id for t in tasks}) == len({(t.id, json.dumps(t.ground_truth)) for t in tasks})
    assert len(prompts) >= 300, f"only {len(prompts)} distinct prompts in 1000 seeds"
    assert all(t.ground_truth is not None for t in tasks)


@pytest.mark.parametrize("name", PARAMS)
def test_reference_solver_solves_seeded_tasks(name: str) -> None:
    env, solver = make_env(name), get_solver(name)
    played = [play_with_solver(env, solver, seed=1000 + seed) for seed in range(30)]
    solved = [p for p in played if p.terminated and p.episode and p.episode.score > 0.99]
    env.close()
    assert len(solved) >= 29, [p.episode.reason for p in played if p not in solved]


@pytest.mark.parametrize("name", ["tools", "math", "code"])
def test_a_reference_solver_refuses_a_question_it_does_not_recognise(name: str) -> None:
    """Rather than answer it wrongly in silence (issue 40 item 11): `--policy solver` checks
    dataset tasks with this before a run."""
    question = [Message(role="user", content="Who wrote Hamlet?")]
    with pytest.raises(EnvError, match=re.escape(f"the {name} environment's reference solver "
                                                 "does not recognise this")):  # fmt: skip
        get_solver(name)(question, None)


@pytest.mark.parametrize("name", PARAMS)
def test_tasks_from_jsonl(name: str, tmp_path: Path) -> None:
    first = make_env(name)
    generated = [first.reset(seed=seed)[1]["task"] for seed in range(3)]
    first.close()
    path = tmp_path / "tasks.jsonl"
    rows = []
    for task in generated:
        # A dataset row: the question as a prompt (the env adds its system prompt).
        rows.append({"id": task.id, "prompt": task.messages[-1].text,
                     "ground_truth": task.ground_truth, **task.metadata})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = make_env(name, tasks=path)
    assert env.dataset is not None and [t.id for t in env.dataset] == [t.id for t in generated]
    for index, task in enumerate(generated):
        played = play_with_solver(env, get_solver(name), options={"task_index": index})
        assert played.task.id == task.id
        assert played.messages[0].role == "system"
        assert played.terminated and played.episode is not None and played.episode.score > 0.99
    env.close()


@pytest.mark.parametrize("name", PARAMS)
def test_malformed_dataset_line_names_file_and_line(name: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "fine", "ground_truth": 1}\n{"ground_truth": 2}\n')
    with pytest.raises(DataError, match=re.escape(f"{path}:2: not a valid task: expected")):
        make_env(name, tasks=path)
