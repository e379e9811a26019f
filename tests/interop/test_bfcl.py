"""The bfcl source, against the real package (bfcl-eval 2026.3.23, its multi-turn categories)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.check import play_with_solver
from rk_agent.envs.offered_tools import ToolScope
from rk_agent.envs.registry import get_solver, make_env
from rk_agent.errors import ConfigError
from rk_agent.interop import bfcl, bfcl_package
from rk_agent.policies.function_policy import FunctionPolicy, tool_call
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig
from rk_agent.trainers.sft_data import build_sft_data, load_trajectories
from rk_agent.types import Message

ROOT = Path(__file__).resolve().parents[2]
SOLVE = get_solver("bfcl:multi_turn")


def rk_agent(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=240,
    )  # fmt: skip


def index_of(env: Any, entry_id: str) -> int:
    return [t.id for t in env.dataset].index(entry_id)


# ----------------------------------------------------------------------------- the solver


@pytest.mark.slow  # about 16 s on 2 cores: 800 episodes, each scored by the checker
def test_the_solver_passes_every_entry_of_the_four_categories_through_the_engine() -> None:
    # All 800 at once, 32 at a time: entries that open alike (multi_turn_base_0 and
    # multi_turn_miss_func_0 ask the same first question) run side by side.
    config = RolloutConfig(env="bfcl:multi_turn", n=800, concurrency=32)
    result = asyncio.run(
        run_rollouts(config, policy=FunctionPolicy(SOLVE), make_env=config.env.factory())
    )
    played = result.trajectories
    assert len(played) == 800
    assert {t.task.id for t in played} == {
        f"{c}_{i}" for c in bfcl_package.CATEGORIES for i in range(200)
    }
    failed = [(t.task.id, t.episode and t.episode.reason) for t in played if not t.success]
    assert failed == []
    for trajectory in played:
        episode = trajectory.episode
        assert episode is not None and episode.score == 1.0
        turns = trajectory.task.metadata["turns"]
        assert sorted(episode.metrics) == sorted(
            ["bfcl", *(f"bfcl.turn_{i}" for i in range(turns))]
        )
        assert all(m.score == 1.0 for m in episode.metrics.values())
    assert bfcl_package.held_instances() == []


def test_the_entries_are_the_packages_and_the_checker_is_its_own() -> None:
    package = bfcl_package.package()
    for category in bfcl_package.CATEGORIES:
        rows = package.utils.load_dataset_entry(category)
        env = make_env(f"bfcl:{category}")
        assert [t.id for t in env.dataset] == [row["id"] for row in rows]
        assert env.dataset[7].messages[0].text == rows[7]["question"][0][0]["content"]
    assert bfcl_package.run_checker.__module__ == "rk_agent.interop.bfcl_package"
    assert package.checker.multi_turn_checker.__module__ == (
        "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
    )


def skipping_the_last_turn(env: Any) -> Any:
    """The solver, except that it answers the episode's last user turn without a call."""
    entries = {e.id: e for e in bfcl_package.entries("multi_turn_base")}

    def policy(messages: list[Message], tools: Any) -> Any:
        entry = entries[env.task.id]
        groups = bfcl.split_turns(messages, entry)
        if groups is not None and len(groups) == len(entry.turns):
            return "I will leave that one."
        return env.reference_solver(messages, tools)

    return policy


def test_a_policy_that_skips_the_last_turn_fails() -> None:
    env = make_env("bfcl:multi_turn_base")
    policy = skipping_the_last_turn(env)
    failed: Counter[str] = Counter()
    passed = []
    for index in range(200):
        episode = play_with_solver(env, policy, options={"task_index": index}).episode
        assert episode is not None and episode.is_score_valid
        turns = env.task.metadata["turns"]
        assert all(episode.metrics[f"bfcl.turn_{i}"].score == 1.0 for i in range(turns - 1))
        if episode.score == 0.0:
            assert episode.metrics[f"bfcl.turn_{turns - 1}"].score == 0.0
            failed[str(episode.metrics["bfcl"].reason)] += 1
        else:
            passed.append(env.task.id)
    assert failed == {"multi_turn:empty_turn_model_response": 199}
    # The one that passes expects no call in its last turn (its ground truth is empty there).
    assert [bfcl_package.entries("multi_turn_base")[int(p.rsplit("_", 1)[1])].ground_truth[-1]
            for p in passed] == [()]  # fmt: skip
    skipped = play_with_solver(env, policy, options={"task_index": 0}).episode
    assert skipped is not None
    assert skipped.metrics["bfcl.turn_3"].reason == (
        "multi_turn:empty_turn_model_response: Model response list is empty for turn 3"
    )


def test_check_env_uses_the_solver_as_its_reference() -> None:
    out = rk_agent("check", "env", "bfcl:multi_turn_base", "--episodes", "4", cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert re.search(r"reference\s+│ 1\.000", out.stdout)
    assert re.search(r"call_every_tool\s+│ 0\.000", out.stdout)
    assert "nothing flagged" in out.stdout


# ---------------------------------------------------------------------- tools and turns


def test_tools_are_openai_schemas_per_task_and_miss_func_adds_its_function_at_its_turn() -> None:
    base = make_env("bfcl:multi_turn_base")
    assert base.tool_scope is ToolScope.TASK
    _, info = base.reset(options={"task_index": 0})
    names = [t["function"]["name"] for t in info["tools"]]
    assert "mv" in names and "post_tweet" in names  # GorillaFileSystem and TwitterAPI
    mkdir = next(t for t in info["tools"] if t["function"]["name"] == "mkdir")
    assert mkdir["type"] == "function" and mkdir["function"]["parameters"]["type"] == "object"
    assert "response" not in mkdir["function"]
    sizes = {len(base.reset(options={"task_index": i})[1]["tools"]) for i in range(200)}
    assert min(sizes) >= 18 and max(sizes) <= 39
    kinds = {json.dumps(sorted(t["function"]["name"] for t in base.reset(
        options={"task_index": i})[1]["tools"])) for i in range(200)}  # fmt: skip
    assert len(kinds) == 20

    missing = make_env("bfcl:multi_turn_miss_func")
    assert missing.tool_scope is ToolScope.TURN
    entry = bfcl_package.entries("multi_turn_miss_func")[0]
    (turn, added), = entry.added.items()  # fmt: skip
    assert (turn, added) == (3, ("sort",))
    config = RolloutConfig(env="bfcl:multi_turn_miss_func", n=1)
    solve = get_solver("bfcl:multi_turn_miss_func")
    result = asyncio.run(
        run_rollouts(config, policy=FunctionPolicy(solve), make_env=config.env.factory())
    )
    trajectory = result.trajectories[0]
    assert trajectory.success
    first = [t["function"]["name"] for t in trajectory.offered_tools(0, [])]
    assert "sort" not in first
    prompt = bfcl_package.package().prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    # The first reply after the package's prompt for the added function is offered it.
    added_at = next(t.index + 1 for t in trajectory.turns if any(
        m.text == prompt for m in t.environment))  # fmt: skip
    assert trajectory.provenance is not None and trajectory.provenance.tool_changes is not None
    assert [c.turn for c in trajectory.provenance.tool_changes] == [added_at]
    assert "sort" not in [t["function"]["name"] for t in trajectory.offered_tools(added_at - 1, [])]
    assert "sort" in [t["function"]["name"] for t in trajectory.offered_tools(added_at, [])]


def test_a_reply_without_calls_ends_the_user_turn_and_the_last_one_the_episode() -> None:
    env = make_env("bfcl:multi_turn_base")
    env.reset(options={"task_index": 0})
    entry = bfcl_package.entries("multi_turn_base")[0]
    for turn in range(1, len(entry.turns)):
        result = env.play_turn({"role": "assistant", "content": "ok"})
        assert not result.done
        assert [m.text for m in result.messages] == [m.text for m in entry.turns[turn]]
    last = env.play_turn({"role": "assistant", "content": "ok"})
    assert last.terminated and last.episode is not None
    assert last.episode.score == 0.0
    assert last.episode.metrics["bfcl"].reason == "multi_turn:empty_turn_model_response"


def test_bad_calls_are_tool_errors_not_crashes() -> None:
    env = make_env("bfcl:multi_turn_base")
    env.reset(options={"task_index": 0})
    for call, expected in [
        (tool_call("rm_rf", {"path": "/"}), "Error: there is no tool named 'rm_rf'."),
        (tool_call("mkdir", {"name": "x"}),
         "Error: bad arguments for 'mkdir': no argument named 'name' (it takes dir_name)."),
        (tool_call("mkdir", {}),
         "Error: bad arguments for 'mkdir': 'dir_name' is required (required: dir_name)."),
        (tool_call("mkdir", "{not json"),
         "Error: the arguments for 'mkdir' are not valid JSON (Expecting property name enclosed "
         "in double quotes). Send a JSON object."),
        (tool_call("mkdir", '{"dir_name": NaN}'),
         "Error: bad arguments for 'mkdir': numbers must be finite."),
    ]:  # fmt: skip
        result = env.play_turn(call)
        record = result.tool_calls[0]
        assert not record.result.ok and record.result.content.startswith(expected)
    # Text that would be code if it reached eval() is only ever an argument's value.
    text = "x'); __import__('os').system('touch /tmp/rk-bfcl-pwned'); ('\\'\")"
    env.play_turn(tool_call("touch", {"file_name": "notes.txt"}))
    written = env.play_turn(tool_call("echo", {"content": text, "file_name": "notes.txt"}))
    assert written.tool_calls[0].result.ok
    read = env.play_turn(tool_call("cat", {"file_name": "notes.txt"}))
    assert json.loads(read.tool_calls[0].result.content) == {"file_content": text}
    assert not Path("/tmp/rk-bfcl-pwned").exists()
    env.close()


def test_a_checker_that_raises_gives_an_invalid_score_not_a_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> dict:
        raise KeyError("initial_config")

    monkeypatch.setattr(bfcl_package.package().checker, "multi_turn_checker", broken)
    env = make_env("bfcl:multi_turn_base")
    played = play_with_solver(env, env.reference_solver, options={"task_index": 3})
    env.close()
    assert played.episode is not None and not played.episode.is_score_valid
    assert played.episode.error == (
        "bfcl: bfcl's multi_turn_checker raised KeyError: 'initial_config'"
    )


# ------------------------------------------------------------------------ instances


def test_32_concurrent_episodes_of_one_entry_keep_separate_state() -> None:
    assert bfcl_package.held_instances() == []
    envs = [make_env("bfcl:multi_turn_base") for _ in range(32)]
    start = threading.Barrier(32)

    def episode(index: int) -> tuple[str, int]:
        env = envs[index]
        env.reset(options={"task_index": 0})  # the file system of multi_turn_base_0
        start.wait()
        env.play_turn(tool_call("cd", {"folder": "document"}))
        env.play_turn(tool_call("mkdir", {"dir_name": f"mine_{index}"}))
        start.wait()  # every episode has made its folder before any lists
        listing = env.play_turn(tool_call("ls", {})).tool_calls[0].result.content
        held = len(bfcl_package.held_instances())
        start.wait()
        env.close()
        return listing, held

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(episode, range(32)))
    for index, (listing, held) in enumerate(results):
        folders = json.loads(listing)["current_directory_content"]
        assert [f for f in folders if f.startswith("mine_")] == [f"mine_{index}"]
        assert held == 32 * 2  # GorillaFileSystem and TwitterAPI, in every episode
    assert bfcl_package.held_instances() == []


def test_no_instance_survives_its_episode() -> None:
    import gc

    dropped = make_env("bfcl:multi_turn_base")
    dropped.reset(options={"task_index": 9})
    dropped.play_turn(tool_call("ls", {}))
    assert len(bfcl_package.held_instances()) == 1  # multi_turn_base_9: GorillaFileSystem
    del dropped  # never closed: its session's instances go with it
    gc.collect()
    assert bfcl_package.held_instances() == []
    env = make_env("bfcl:multi_turn_long_context")
    play_with_solver(env, env.reference_solver, options={"task_index": 2})
    assert bfcl_package.held_instances() == []  # ended: deleted as it was scored
    env.reset(options={"task_index": 2})
    env.play_turn(tool_call("ls", {}))
    assert len(bfcl_package.held_instances()) == 2
    env.reset(options={"task_index": 5})  # the unfinished one is closed by the next reset
    assert bfcl_package.held_instances() == []
    env.play_turn(tool_call("ls", {}))
    env.close()
    assert bfcl_package.held_instances() == []


def test_the_package_writes_nothing_under_the_cwd_or_site_packages(tmp_path: Path) -> None:
    code = (
        "import os, sys, bfcl_eval\n"
        "from pathlib import Path\n"
        "site = Path(bfcl_eval.__file__).parents[1]\n"
        "before = sorted(p.name for p in site.iterdir())\n"
        "from rk_agent.envs.registry import make_env, get_solver\n"
        "from rk_agent.envs.check import play_with_solver\n"
        "env = make_env('bfcl:multi_turn_miss_param')\n"
        "print(play_with_solver(env, get_solver('bfcl:multi_turn_miss_param')).episode.score)\n"
        "print(sorted(p.name for p in site.iterdir()) == before)\n"
        "print(os.environ.get('BFCL_PROJECT_ROOT'))\n"
        "import bfcl_eval.constants.eval_config as c\n"
        "print(c.PROJECT_ROOT.name.startswith('rk-agent-bfcl-'), c.PROJECT_ROOT.is_dir())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "BFCL_PROJECT_ROOT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == ["1.0", "True", "None", "True True"]
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- names and runs


def test_mcp_serve_refuses_it_in_one_line(tmp_path: Path) -> None:
    out = rk_agent("mcp", "serve", "--env", "bfcl:multi_turn_base", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: bfcl:multi_turn_base cannot be served over MCP: its tools differ per task "
        "(tool_scope 'task'), and an MCP server offers one list of tools that its clients read "
        "once; play it with rk-agent rollout, whose policies are given each episode's tools."
    )


def test_categories_and_limits() -> None:
    message = "bfcl has no multi-turn category 'multi_turn_bass'. Did you mean 'multi_turn_base'?"
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_env("bfcl:multi_turn_bass")
    with pytest.raises(ConfigError, match=re.escape("tasks= cannot replace them")):
        make_env("bfcl:multi_turn_base", tasks=[])
    assert len(make_env("bfcl:multi_turn").dataset) == 800
    assert len(make_env("bfcl:multi_turn_long_context").dataset) == 200
    assert make_env("bfcl:multi_turn").tool_scope is ToolScope.TURN
    assert bfcl.SOURCE.wants("multi_turn") == []  # a run from elsewhere may build it


@pytest.fixture(scope="module")
def solver_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("cwd")
    out = rk_agent("rollout", "--env", "bfcl:multi_turn_base", "--policy", "solver", "-n", "16",
                   "--output", str(cwd.parent / "bfcl-run"), cwd=cwd)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert list(cwd.iterdir()) == []
    return cwd.parent / "bfcl-run"


def test_rollout_with_the_solver_through_the_cli(solver_run: Path) -> None:
    played = sorted(load_trajectories(solver_run), key=lambda t: t.task_index)
    assert len(played) == 16 and all(t.success for t in played)
    assert [t.task.id for t in played] == [f"multi_turn_base_{i}" for i in range(16)]


def test_rescore_with_the_checker_scores_as_the_run_did(solver_run: Path, tmp_path: Path) -> None:
    out = rk_agent("rescore", str(solver_run), "--reward", "rk_agent.interop.bfcl:checker",
                   "--output", str(tmp_path / "again"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    again = load_trajectories(tmp_path / "again")
    assert [t.episode.score for t in again if t.episode] == [1.0] * 16


def test_an_sft_dataset_renders_each_episodes_own_tools(solver_run: Path) -> None:
    rows = build_sft_data(solver_run).dataset
    assert rows["task_id"] == [f"multi_turn_base_{i}" for i in range(16)]
    entries = {e.id: e for e in bfcl_package.entries("multi_turn_base")}
    seen = set()
    for task_id, tools in zip(rows["task_id"], rows["tools"], strict=True):
        tools = json.loads(tools) if isinstance(tools, str) else tools
        names = [t["function"]["name"] for t in tools]
        assert names == [s.name for s in entries[task_id].tools_at(0)]
        seen.add(tuple(names))
    assert len(seen) > 1


def without_the_package(*args: str, cwd: Path) -> Any:
    code = (
        "import sys; sys.modules['bfcl_eval'] = None  # as if it were not installed\n"
        "from rk_agent.cli import main\n"
        f"sys.argv = ['rk-agent', *{list(args)!r}]\n"
        "main()\n"
    )
    shell = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=shell, timeout=120)  # fmt: skip


def test_without_the_package_a_run_fails_in_one_line_naming_both_installs(tmp_path: Path) -> None:
    out = without_the_package("rollout", "--env", "bfcl:multi_turn_base", "--policy", "solver",
                              cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: environment source 'bfcl' needs bfcl_eval, which is not installed: pip install "
        "'rk-agent[bfcl]' && pip install --no-deps bfcl-eval==2026.3.23 (bfcl-eval declares "
        "5.9 GB of dependencies and pins numpy 1.26.4; its multi-turn code needs none of them; "
        "uv: uv pip install the same; in a checkout of rk-agent: uv sync --extra bfcl)."
    ]
    listed = without_the_package("envs", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "bfcl:CATEGORY                │ no: pip install 'rk-agent[bfcl]' && pip install " in (
        listed.stdout
    )


def test_the_docstring_examples_run() -> None:
    import doctest

    assert doctest.testmod(bfcl_package).failed == 0
    assert doctest.testmod(bfcl).failed == 0
