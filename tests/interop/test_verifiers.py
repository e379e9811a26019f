"""The verifiers source, against the real package (verifiers 0.4.0) and real tool servers.

The tasksets are this folder's `verifiers_tasksets` packages (Hub tasksets come from Prime's
own index, which cannot be installed here), imported by module name as verifiers imports them.
Every score is checked against the package's own ``Task.score`` of the same transcript, on a
``Trace`` built here from verifiers' types.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.check import play_with_solver
from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.registry import get_env_class, get_solver, make_env
from rk_agent.envs.sources import get_source
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, EnvError
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_wants import env_wants
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.types import Message

TASKSETS = Path(__file__).parent / "verifiers_tasksets"


@pytest.fixture(autouse=True, scope="module")
def tasksets_on_the_path() -> Iterator[None]:
    """The fixture packages importable here and in the processes started (tool servers)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TASKSETS))
        path = os.pathsep.join(p for p in [str(TASKSETS), os.environ.get("PYTHONPATH")] if p)
        patch.setenv("PYTHONPATH", path)
        yield


def package_score(
    module: str,
    index: int,
    conversation: list[Message],
    config: dict[str, Any] | None = None,
    **state: Any,
) -> Any:
    """The package's own score of a transcript: task ``index`` of the taskset as verifiers
    loads it (under ``config``), a Trace of the conversation built from verifiers' types,
    ``Task.score``."""
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import AgentInfo, TraceTask

    parsed = vf.taskset_config_type(module).model_validate({"id": module, **(config or {})})
    task = list(vf.load_taskset(parsed))[index]
    nodes = []
    for i, message in enumerate(conversation):
        if message.role == "assistant":
            calls = [
                vf.ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
                for c in message.tool_calls or []
            ]
            vf_message: Any = vf.AssistantMessage(content=message.text, tool_calls=calls or None)
        elif message.role == "tool":
            vf_message = vf.ToolMessage(tool_call_id=message.tool_call_id, content=message.text)
        else:
            vf_message = {"system": vf.SystemMessage, "user": vf.UserMessage}[message.role](
                content=message.text
            )
        nodes.append(
            MessageNode(
                parent=i - 1 if i else None, message=vf_message,
                sampled=message.role == "assistant",
            )
        )  # fmt: skip
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key),
        agent=AgentInfo(config=vf.AgentConfig()),
        nodes=nodes,
        state=state_cls(type(task))(**state),
    )
    asyncio.run(task.score(trace))
    return trace


def rollouts(env: str, replies: list[Any], n: int, **env_kwargs: Any) -> list[Any]:
    config = RolloutConfig(env=env, n=n, env_kwargs=env_kwargs, max_turns=4)
    result = asyncio.run(
        run_rollouts(config, policy=ScriptedPolicy(replies), make_env=config.env.factory())
    )
    return sorted(result.trajectories, key=lambda t: t.task_index)


def components(episode: Any) -> dict[str, float]:
    return {
        name.removeprefix("verifiers."): metric.score
        for name, metric in episode.metrics.items()
        if name.startswith("verifiers.")
    }


# ---------------------------------------------------------------- scored from the transcript


def test_weighted_rewards_and_metrics_score_as_the_package_scores() -> None:
    # "15" is right for task 1 only (11 + 4); every reply is short, so brevity is 1.
    trajectories = rollouts("verifiers:vf_scored", ["15"], n=4)
    assert [t.task.id for t in trajectories] == ["sum-0", "sum-1", "sum-2", "sum-3"]
    for trajectory in trajectories:
        episode = trajectory.episode
        assert trajectory.failure is None and episode.is_score_valid
        trace = package_score("vf_scored", trajectory.task_index, trajectory.conversation)
        assert episode.score == pytest.approx(trace.reward)
        expected = {**{n: r.score for n, r in trace.rewards.items()}, **trace.metrics}
        assert components(episode) == expected
        weights = {n: episode.metrics[f"verifiers.{n}"].reason for n in trace.rewards}
        assert weights == {"correct": "reward, weight 0.75", "brevity": "reward, weight 0.25"}
    assert [t.episode.score for t in trajectories] == [0.25, 1.0, 0.25, 0.25]
    opening = trajectories[1].conversation[:2]
    assert [(m.role, m.text) for m in opening] == [
        ("system", "Answer with the number only."),
        ("user", "What is 11 + 4?"),
    ]


def test_the_reference_solver_gives_the_answer_field_and_scores_the_maximum() -> None:
    config = {"num_tasks": 3, "offset": 5}
    env = make_env("verifiers:vf_scored", config=config)
    try:
        for index in range(3):
            played = play_with_solver(env, env.reference_solver, options={"task_index": index})  # type: ignore[arg-type]
            assert played.messages[-1].text == played.task.ground_truth
            trace = package_score("vf_scored", index, played.messages, config)
            assert played.episode.score == trace.reward == 1.0
        assert env.dataset is not None and len(env.dataset) == 3
        assert env.dataset[0].messages[1].text == "What is 15 + 1?"  # the config reached load()
    finally:
        env.close()


def test_a_taskset_without_an_answer_has_no_solver_and_says_why() -> None:
    message = (
        "environment 'verifiers:vf_failing' has no reference solver: its task data (TaskData) "
        "has no 'answer' field to answer with; its rewards score the transcript"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_solver("verifiers:vf_failing")


# ---------------------------------------------------------------- tools from MCP toolsets


def calling(tool: str, **arguments: Any) -> dict[str, Any]:
    call = {"id": f"call-{tool}", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(arguments)}}  # fmt: skip
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def test_toolsets_are_offered_per_task_and_their_state_reaches_the_rewards() -> None:
    lookup = calling("notebook_lookup", key="colour")
    shout = calling("shout", text="hi")
    trajectories = rollouts("verifiers:vf_toolbox", [lookup, shout, "green"], n=2)
    offered = [sorted(s["function"]["name"] for s in t.provenance.tools) for t in trajectories]
    # The taskset's shared shouter (bare name), each task's notebook; task 1 adds a calculator.
    assert offered == [
        ["notebook_lookup", "shout"],
        ["calc_add", "notebook_lookup", "shout"],
    ]
    for trajectory, colour in zip(trajectories, ["red", "green"], strict=True):
        results = [m.text for m in trajectory.conversation if m.role == "tool"]
        assert results == [colour, "HI!"]  # setup_task gave each server its task's facts
        trace = package_score(
            "vf_toolbox", trajectory.task_index, trajectory.conversation, lookups=["colour"]
        )
        episode = trajectory.episode
        assert components(episode) == {"found": trace.rewards["found"].score, **trace.metrics}
        assert components(episode)["lookups"] == 1.0  # the tool wrote the rollout's state
        assert episode.score == trace.reward
    assert [t.episode.score for t in trajectories] == [0.0, 1.0]


@pytest.mark.slow  # each server imports verifiers afresh: seconds each, tens here on 2 cores
def test_tool_servers_started_as_verifiers_starts_them_serve_the_same() -> None:
    env = make_env("verifiers:vf_toolbox", tool_launch="exec")
    try:
        env.reset(options={"task_index": 2})
        turn = env.play_turn(calling("notebook_lookup", key="number"))
        assert [m.text for m in turn.messages] == ["14"]
        episode = env.play_turn({"role": "assistant", "content": "blue"}).episode
        assert episode is not None and episode.score == 1.0
        assert episode.metrics["verifiers.lookups"].score == 1.0
    finally:
        env.close()


def test_a_tool_server_that_cannot_start_fails_the_episode_with_its_log() -> None:
    env = make_env("verifiers:vf_toolbox", config={"task": {"broken": {}}})
    try:
        with pytest.raises(EnvError) as caught:
            env.reset(options={"task_index": 0})
        message = str(caught.value)
        assert message.startswith(
            "verifiers:vf_toolbox: tool server 'broken' exited (status ?) before serving: "
        )
        assert message.endswith("RuntimeError: the database is not there")
    finally:
        env.close()
    docker = {"task": {"notebook": {"runtime": {"type": "docker"}}}}
    env = make_env("verifiers:vf_toolbox", config=docker)
    try:
        message = (
            "verifiers:vf_toolbox: tool server 'notebook' (Notebook) asks for a 'docker' "
            "runtime; rk-agent starts verifiers' tool servers as local processes only"
        )
        with pytest.raises(EnvError, match=re.escape(message)):
            env.reset(options={"task_index": 0})
    finally:
        env.close()


# ---------------------------------------------------------------- failures are invalid scores


def play_once(name: str, reply: str = "0", **kwargs: Any) -> Any:
    env = make_env(name, **kwargs)
    try:
        env.reset(options={"task_index": 0})
        return env.play_turn({"role": "assistant", "content": reply}).episode
    finally:
        env.close()


def test_a_reward_that_raises_is_an_invalid_score_with_the_reason_not_a_0() -> None:
    episode = play_once("verifiers:vf_failing", config={"task": {"mode": "raises"}})
    assert not episode.is_score_valid
    assert episode.error == ("verifiers: task FailingTask scoring: ValueError: cannot parse '0'")
    with pytest.raises(Exception, match=re.escape("cannot parse '0'")):
        package_score_with_config("vf_failing", {"task": {"mode": "raises"}})
    fine = play_once("verifiers:vf_failing")
    assert fine.is_score_valid and fine.score == 1.0


def package_score_with_config(module: str, config: dict[str, Any]) -> Any:
    import verifiers.v1 as vf

    parsed = vf.taskset_config_type(module).model_validate({"id": module, **config})
    task = next(iter(vf.load_taskset(parsed)))
    trace = vf.Trace(
        task=vf.TraceTask(type="FailingTask", data=task.data),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        nodes=[vf.MessageNode(message=vf.AssistantMessage(content="0"), sampled=True)],
    )
    asyncio.run(task.score(trace))
    return trace


def test_a_reward_that_needs_a_runtime_is_an_invalid_score_not_left_out() -> None:
    plugged = {"task": {"rewards": {"in_box": {"fn": "vf_failing:needs_runtime", "weight": 0.5}}}}
    episode = play_once("verifiers:vf_failing", config=plugged)
    assert not episode.is_score_valid
    assert episode.error == (
        "verifiers: reward 'in_box' needs a runtime (the box a verifiers harness runs the agent "
        "in), which rk-agent's episodes do not have; verifiers would leave it out of the score"
    )
    # The package itself, scoring without a runtime, leaves it out: 1.0 from the other two.
    assert package_score_with_config("vf_failing", plugged).reward == 1.0
    nan = {"task": {"rewards": {"nan": {"fn": "vf_failing:not_a_number"}}}}
    episode = play_once("verifiers:vf_failing", config=nan)
    assert not episode.is_score_valid and episode.error == (
        "verifiers: reward 'nan' recorded nan (weight 1.0)"
    )


def test_a_metric_that_needs_a_runtime_is_an_invalid_metric_and_the_score_stands() -> None:
    plugged = {"task": {"metrics": {"in_box": {"fn": "vf_failing:needs_runtime"}}}}
    episode = play_once("verifiers:vf_failing", config=plugged)
    assert episode.is_score_valid and episode.score == 1.0
    metric = episode.metrics["verifiers.in_box"]
    assert not metric.is_score_valid and metric.reason.startswith("needs a runtime")


# ---------------------------------------------------------------- what is refused


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("verifiers:vf_owns_loop", "verifiers:vf_owns_loop exports an Env (LoopEnv), which owns "
         "the episode's loop: rk-agent plays tasksets scored from the transcript, not Envs, "
         "harnesses, runtimes or multi-agent episodes."),
        ("verifiers:vf_harnessed", "verifiers:vf_harnessed exports a Harness (HarnessedHarness), "
         "which owns the episode's loop"),
        ("verifiers:openenv", "verifiers:openenv exports an Env (OpenEnvEnv), which owns the "
         "episode's loop"),  # verifiers' own OpenEnv taskset
        ("verifiers:vf_failing.needs_box", "verifiers:vf_failing.needs_box: its task "
         "BoxTask.setup takes a runtime (the box a verifiers harness runs the agent in), which "
         "rk-agent's episodes do not have (give it runtime=None if it does not use it)."),
        ("verifiers:no_such_taskset", "verifiers:no_such_taskset: there is no module "
         "'no_such_taskset'; install the taskset's package"),
    ],
)  # fmt: skip
def test_what_rk_agent_cannot_play_is_refused_in_one_line(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        get_env_class(name)
    assert "\n" not in str(caught.value)


def test_an_infinite_taskset_needs_a_limit() -> None:
    with pytest.raises(ConfigError, match=re.escape("give limit=N to play its first N tasks")):
        make_env("verifiers:vf_scored.endless")
    env = make_env("verifiers:vf_scored.endless", limit=5)
    try:
        assert env.dataset is not None and [t.id for t in env.dataset] == [str(i) for i in range(5)]
    finally:
        env.close()


def test_a_config_that_does_not_fit_is_refused_naming_the_field() -> None:
    message = (
        "verifiers:vf_scored: config does not fit the taskset's ScoredConfig: num_taskz: Extra "
        "inputs are not permitted."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_env("verifiers:vf_scored", config={"num_taskz": 2})


def test_recorded_tasks_play_again_and_foreign_tasks_are_refused() -> None:
    env = make_env("verifiers:vf_scored")
    try:
        recorded = Task.model_validate_json(env.dataset[4].model_dump_json())  # type: ignore[index]
        env.reset(options={"task": recorded})
        answer = recorded.ground_truth
        episode = env.play_turn({"role": "assistant", "content": answer}).episode
        assert episode is not None and episode.score == 1.0
        foreign = Task(id="x", messages=[Message(role="user", content="hi")])
        with pytest.raises(EnvError, match=re.escape("task 'x' is not a task of verifiers:")):
            env.reset(options={"task": foreign})
    finally:
        env.close()


# ---------------------------------------------------------------- names, trust, imports


def test_a_hub_id_names_its_module_as_verifiers_names_it() -> None:
    env_class = get_env_class("verifiers:someone/VF-Scored@0.3.0")
    assert env_class.module == "vf_scored"  # type: ignore[attr-defined]
    assert get_source("verifiers").wants("someone/VF-Scored@0.3.0") == [
        "import the module vf_scored (a verifiers taskset; it may start tool servers)"
    ]


def test_neither_rk_agent_nor_a_run_from_elsewhere_imports_verifiers() -> None:
    code = (
        "import sys, rk_agent\n"
        "from rk_agent.envs.env_setup import EnvSetup\n"
        "from rk_agent.envs.sources import list_sources\n"
        "from rk_agent.runs.run_wants import env_wants\n"
        "assert [s.scheme for s in list_sources() if s.scheme == 'verifiers']\n"
        "print(env_wants(EnvSetup(name='verifiers:vf_scored')))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('verifiers', 'vf_'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    wants, imported = out.stdout.splitlines()
    assert wants == str([
        "import the module vf_scored (a verifiers taskset; it may start tool servers) "
        "(environment verifiers:vf_scored)"
    ])  # fmt: skip
    assert imported == "[]"
    assert env_wants(EnvSetup(name="verifiers:openenv")) == []  # verifiers' own


def test_an_env_setup_records_the_name_and_a_taskset_without_tools_is_env_scoped() -> None:
    factory = EnvSetup(name="verifiers:vf_scored", kwargs={"config": {"num_tasks": 2}}).factory()
    try:
        assert factory.name == "verifiers:vf_scored"
        env = factory()
        assert env.tool_scope.value == "env" and env.tool_schemas == []
        assert json.loads(env.dataset[0].model_dump_json())["metadata"]["verifiers"]["idx"] == 0  # type: ignore[index]
        env.close()
    finally:
        factory.close()


def test_the_solver_pickles_by_name_for_a_runs_ray_workers() -> None:
    import pickle

    solve = pickle.loads(pickle.dumps(get_solver("verifiers:vf_scored")))
    env = make_env("verifiers:vf_scored")
    try:
        observation, info = env.reset(options={"task_index": 3})
        reply = solve([Message.model_validate(m) for m in observation], None)
        assert reply.text == info["task"].ground_truth == "23"
    finally:
        env.close()
