"""The ``tools`` environment: failing tools never end an episode; rewards and metrics."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rk_agent.envs import Task, Tool, play_with_solver, tool
from rk_agent.envs.tool_rewards import (
    answer_given,
    answer_match,
    extract_final_answer,
    tool_efficiency,
)
from rk_agent.envs.tools_env import SYSTEM_PROMPT, ToolsEnv, solve
from rk_agent.types import Message

QUESTION = "How many people live in France and Japan together?"


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "function": function}]}  # fmt: skip


class ToolsEnvWithFlakyTools(ToolsEnv):
    """The tools env plus a tool that raises and one that hangs past its timeout."""

    def tools(self) -> list[Tool]:
        @tool
        def explode(reason: str) -> str:
            """Always fails.

            Args:
                reason: why.
            """
            raise RuntimeError(f"boom: {reason}")

        @tool(timeout_s=0.05)
        def hang() -> str:
            """Never answers in time."""
            time.sleep(0.5)
            return "late"

        return [*super().tools(), explode, hang]


@pytest.mark.parametrize(
    ("action", "error_kind", "content"),
    [
        (call("calculator", {"expr": "1+1"}), "bad_arguments",
         "Error: bad arguments for 'calculator'"),
        (call("calculator", "{not json"), "bad_arguments", "are not valid JSON"),
        (call("lookup", {"name": "Atlantis", "attribute": "capital"}), "exception",
         "Error: tool 'lookup' failed: ValueError: 'Atlantis' is not in the knowledge table."),
        (call("search_web", {}), "unknown_tool", "Error: there is no tool named 'search_web'."),
        (call("explode", {"reason": "test"}), "exception",
         "Error: tool 'explode' failed: RuntimeError: boom: test"),
        (call("hang", {}), "timeout", "Error: tool 'hang' timed out after 0.05 s."),
    ],
)  # fmt: skip
def test_a_failing_tool_is_an_error_message_and_a_metric_not_the_end(
    action: dict[str, Any], error_kind: str, content: str
) -> None:
    env = ToolsEnvWithFlakyTools()
    env.reset(options={"task": {"id": "t", "messages": [{"role": "user", "content": QUESTION}],
                                "ground_truth": 192670000,
                                "metadata": {"min_tool_calls": 3}}})  # fmt: skip
    observation, reward, terminated, truncated, info = env.step(action)
    assert not terminated and not truncated
    assert observation[-1]["role"] == "tool" and observation[-1]["content"].startswith("Error")
    assert content in observation[-1]["content"]
    assert info["tool_calls"][0].result.error_kind == error_kind
    assert info["step"].metrics["tool_success"].score == 0.0
    assert reward == pytest.approx(-0.1)  # the tool_use step penalty
    # The episode goes on: the reference solver can still finish it.
    while not (terminated or truncated):
        messages = Message.coerce_list(observation)
        observation, reward, terminated, truncated, info = env.step(solve(messages))
    assert terminated and info["episode"].metrics["answer"].score == 1.0
    assert info["episode"].metrics["efficiency.tool_calls_failed"].score == 1.0
    assert info["episode"].metrics["efficiency"].score == pytest.approx(3 / 4)


def test_rewards_of_a_solved_episode() -> None:
    env = ToolsEnv()
    played = play_with_solver(env, solve, seed=11)
    assert played.terminated and played.episode is not None
    steps = played.rewards[:-1]
    assert steps == [pytest.approx(0.05)] * len(steps)  # every tool call succeeded
    assert played.episode.score == 1.0
    assert played.episode.weights == {"answer": 1.0, "efficiency": 0.0}
    assert played.episode.metrics["efficiency"].score == 1.0
    assert played.total_reward == pytest.approx(1.0 + 0.05 * len(steps))


def test_a_wrong_or_missing_answer_scores_zero() -> None:
    env = ToolsEnv()
    env.reset(seed=11)
    *_, info = env.step({"role": "assistant", "content": "I think so.\nAnswer: -123456"})
    assert info["episode"].score == 0.0
    assert info["episode"].metrics["answer.format"].score == 1.0
    env.reset(seed=11)
    *_, info = env.step({"role": "assistant", "content": "Let me think about it.\nSoon."})
    assert info["episode"].metrics["answer.answer_found"].score == 0.0


def test_dataset_tasks_get_the_system_prompt() -> None:
    task = Task(id="q", messages=[Message(role="user", content=QUESTION)], ground_truth=1)
    env = ToolsEnv(tasks=[task])
    observation, _ = env.reset(seed=0)
    assert [m["role"] for m in observation] == ["system", "user"]


def test_fewer_tools_means_a_prompt_that_names_only_those() -> None:
    env = ToolsEnv(kinds=["population_ratio"], tool_names=["lookup", "calculator"])
    observation, info = env.reset(seed=0)
    system = observation[0]["content"]
    assert "`lookup` for facts" in system and "`calculator` for arithmetic" in system
    for absent in ("convert_units", "days_between", "add_days", "weekday"):
        assert absent not in system
    assert [schema["function"]["name"] for schema in info["tools"]] == ["lookup", "calculator"]
    dataset_env = ToolsEnv(
        tool_names=["weekday"],
        tasks=[Task(id="q", messages=[Message(role="user", content=QUESTION)], ground_truth=1)],
    )
    dataset_system = dataset_env.reset(seed=0)[0][0]["content"]
    assert "`weekday` for dates" in dataset_system and "lookup" not in dataset_system
    assert ToolsEnv().reset(seed=0)[0][0]["content"] == SYSTEM_PROMPT
    every = ["lookup", "calculator", "convert_units", "days_between", "add_days", "weekday"]
    assert all(f"`{name}`" in SYSTEM_PROMPT for name in every)


@pytest.mark.parametrize(
    ("text", "answer", "marked"),
    [
        ("Looked it up.\nAnswer: Paris", "Paris", True),
        ("**Final answer:** 1,234", "1,234", True),
        ("Answer: 1\nAnswer: 2", "2", True),
        ("Tuesday", "Tuesday", False),
        ("It is a long story\nwith no marker", None, False),
    ],
)
def test_extract_final_answer(text: str, answer: str | None, marked: bool) -> None:
    assert extract_final_answer(text) == (answer, marked)


@pytest.mark.parametrize(
    ("reply", "truth", "tolerance", "score"),
    [
        ("Answer: 192,670,000", 192670000, 0, 1.0),
        ("Answer: 192670001", 192670000, 0, 0.0),
        ("Answer: 0.8", 0.81, 0.01, 1.0),
        ("Answer: 0.79", 0.81, 0.01, 0.0),
        ("Answer: brasilia.", "Brasília", 0, 1.0),
        ("Answer: Washington, D.C.", "Washington, D.C.", 0, 1.0),
        ("Answer: Monday", "Tuesday", 0, 0.0),
        ("Answer: no idea", 12, 0, 0.0),
    ],
)
def test_answer_match(reply: str, truth: Any, tolerance: float, score: float) -> None:
    messages = [{"role": "assistant", "content": reply}]
    assert answer_match(messages, ground_truth=truth, metadata={"tolerance": tolerance}).score == (
        score
    )


def test_answer_match_without_ground_truth_is_invalid() -> None:
    result = answer_match([{"role": "assistant", "content": "Answer: 1"}])
    assert not result.is_score_valid


@pytest.mark.parametrize(
    ("messages", "score"),
    [
        ([{"role": "assistant", "content": "The sum is 31.\nAnswer: 31"}], 1.0),
        ([{"role": "assistant", "content": "Answer: a wrong value"}], 1.0),
        ([{"role": "assistant", "content": "31"}], 0.0),  # unmarked: not the asked format
        (
            [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "lookup", "arguments": "{}"}}]}],
            0.0,
        ),  # ran out of turns on a tool call
    ],
)  # fmt: skip
def test_answer_given_pays_any_marked_answer_and_nothing_else(
    messages: list[dict[str, Any]], score: float
) -> None:
    assert answer_given(messages).score == score


def test_answer_given_without_a_reply_is_invalid() -> None:
    assert not answer_given([{"role": "user", "content": "hi"}]).is_score_valid


def test_tool_efficiency_needs_min_tool_calls() -> None:
    result = tool_efficiency([{"role": "assistant", "content": "Answer: 1"}], metadata={})
    assert not result.is_score_valid and result.metrics["tool_calls_made"].score == 0.0


def test_tool_calls_beyond_what_the_task_needs_earn_no_step_bonus() -> None:
    # A policy that keeps looking things up instead of answering must not out-earn one that
    # answers wrongly after the needed calls: GRPO found and farmed exactly that gap.
    def play(actions: list[dict[str, Any]]) -> tuple[list[float], float]:
        env = ToolsEnv(max_turns=5)
        env.reset(options={"task": {"id": "t", "messages": [{"role": "user", "content": QUESTION}],
                                    "ground_truth": 192670000,
                                    "metadata": {"min_tool_calls": 3}}})  # fmt: skip
        rewards = []
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            rewards.append(reward)
            if terminated or truncated:
                return rewards, info["episode"].score
        raise AssertionError("the episode did not end")

    lookups = [call("lookup", {"name": country, "attribute": "population"}, f"c{i}")
               for i, country in enumerate(["France", "Japan", "France", "Japan"])]  # fmt: skip
    total = call("calculator", {"expression": "68170000 + 124500000"}, "c9")
    farming, farming_score = play([*lookups, total])  # five calls, never answers
    wrong, wrong_score = play([*lookups[:2], total, {"role": "assistant", "content": "Answer: 5"}])
    assert farming == pytest.approx([0.05, 0.05, 0.05, 0.0, 0.0])
    assert wrong == pytest.approx([0.05, 0.05, 0.05, 0.0])
    assert farming_score == wrong_score == 0.0
    assert sum(farming) <= sum(wrong)


def test_the_step_bonus_counts_calls_across_the_episode_and_in_one_step() -> None:
    env = ToolsEnv(max_turns=5)
    env.reset(options={"task": {"id": "t", "messages": [{"role": "user", "content": QUESTION}],
                                "ground_truth": 192670000,
                                "metadata": {"min_tool_calls": 3}}})  # fmt: skip
    two = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "function": {"name": "lookup",
                                 "arguments": {"name": "France", "attribute": "population"}}},
        {"id": "b", "function": {"name": "lookup",
                                 "arguments": {"name": "Japan", "attribute": "population"}}},
    ]}  # fmt: skip
    _, first, *_ = env.step(two)
    assert first == pytest.approx(0.05)  # both needed
    _, second, *_ = env.step(two)  # one more is needed, the other is not
    assert second == pytest.approx(0.025)
    env.step(two)
    step = env.state.steps[-1]
    assert step.reward == 0.0
    assert "2 beyond the 3 the task needs earn nothing" in (step.metrics["tool_use"].reason or "")
