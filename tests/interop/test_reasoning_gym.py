"""The reasoning-gym source, against the real package (reasoning-gym 0.1.25)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from typing import Any

import pytest

from rk_agent.envs.check import play_with_solver
from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.registry import get_solver, make_env
from rk_agent.errors import ConfigError
from rk_agent.types import Message

GENERATORS = ["chain_sum", "basic_arithmetic", "knights_knaves", "word_sorting", "sudoku"]


def package_entry(task: Any) -> tuple[Any, dict[str, Any]]:
    """The dataset and entry the package itself makes for a task's generator and seed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        import reasoning_gym
    meta = task.metadata
    dataset = reasoning_gym.create_dataset(meta["generator"], seed=meta["seed"], size=1,
                                           **meta["options"])  # fmt: skip
    return dataset, dataset[0]


def play(env: Any, seed: int, text: str) -> Any:
    env.reset(seed=seed)
    return env.play_turn({"role": "assistant", "content": text}).episode


@pytest.mark.parametrize("name", GENERATORS)
def test_the_solver_scores_1_as_the_package_scores_its_answer(name: str) -> None:
    env = make_env(f"reasoning-gym:{name}")
    for seed in range(3):
        played = play_with_solver(env, env.reference_solver, seed=seed)  # type: ignore[arg-type]
        dataset, entry = package_entry(played.task)
        assert played.task.messages[1].text == entry["question"]
        assert played.task.ground_truth == entry["answer"]
        assert played.messages[-1].text == f"<answer>{entry['answer']}</answer>"
        assert played.terminated and played.episode is not None
        assert played.episode.score == 1.0 == dataset.score_answer(entry["answer"], entry)
        assert played.episode.metrics["reasoning_gym.answer_format"].score == 1.0


def test_a_wrong_answer_scores_what_the_package_says() -> None:
    env = make_env("reasoning-gym:chain_sum")
    env.reset(seed=4)
    dataset, entry = package_entry(env.task)
    answer = entry["answer"]
    for reply, extracted in [
        ("<answer>0</answer>", "0"),
        (f"it is <answer>{answer} or {int(answer) + 1}</answer>", f"{answer} or {int(answer) + 1}"),
        ("no tags here", None),
    ]:
        episode = play(env, 4, reply)
        expected = dataset.score_answer(extracted, entry)
        assert episode.is_score_valid and episode.score == expected
        assert episode.metrics["reasoning_gym.answer_format"].score == float(extracted is not None)
    assert 0 < dataset.score_answer(f"{answer} or {int(answer) + 1}", entry) < 1  # partial


def test_score_answer_scores_a_recorded_episode_as_the_session_did() -> None:
    """`rk-agent rescore --reward rk_agent.interop.reasoning_gym:score_answer`: the entry is
    made again from the task's metadata, so a recorded transcript scores as it was played."""
    from rk_agent.interop.reasoning_gym import score_answer

    for env, reply in [
        (make_env("reasoning-gym:chain_sum"), "<answer>0</answer>"),
        (make_env("reasoning-gym:chain_sum,word_sorting"), "no tags"),
        (make_env("reasoning-gym:chain_sum", answer_format="line"), "x\nAnswer: 3"),
    ]:
        for seed in range(3):
            env.reset(seed=seed)
            task = env.task
            played = [*task.messages, Message(role="assistant", content=reply)]
            episode = play(env, seed, reply)
            again = score_answer(played, metadata=task.metadata, answer_format=env.answer_format)
            recorded = episode.metrics["reasoning_gym"]
            assert (again.score, again.reason) == (recorded.score, recorded.reason)
            assert again.metrics["answer_format"].score == float(reply != "no tags")
        solved = play_with_solver(env, env.reference_solver, seed=5)  # type: ignore[arg-type]
        again = score_answer(solved.messages, metadata=solved.task.metadata,
                             answer_format=env.answer_format)  # fmt: skip
        assert again.score == 1.0
    nothing = score_answer([Message(role="assistant", content="<answer>1</answer>")])
    assert nothing.error == (
        "the task's metadata names no reasoning-gym entry ('generator' and 'seed'): score "
        "episodes played by a reasoning-gym environment"
    )
    unknown = score_answer([], metadata={"generator": "chain_summ", "seed": 1})
    assert unknown.error is not None and "reasoning-gym has no generator 'chain_summ'" in (
        unknown.error
    )
    bad_format = score_answer([], metadata={"generator": "chain_sum", "seed": 1},
                              answer_format="json")  # fmt: skip
    assert bad_format.error == "answer_format 'json' is not one of tags, line."


@pytest.mark.parametrize("answer_format", ["tags", "line"])
def test_single_turn_grpos_rewards_score_each_task_by_its_own_entry(answer_format: str) -> None:
    # `train grpo --single-turn`: TRL generates and the environment's rewards score each
    # completion, no episode played; every completion was scored against the last task the
    # environment opened.
    from rk_agent.trainers.rewards import single_turn_reward_funcs
    from rk_agent.trainers.tasks import env_dataset

    env = make_env("reasoning-gym:chain_sum", answer_format=answer_format)
    dataset = env_dataset(env, n=4, seed=0)
    [reward], weights = single_turn_reward_funcs(env)
    prompts, rows = list(dataset["prompt"]), list(dataset["task"])  # as TRL passes columns
    tasks = [json.loads(t) if isinstance(t, str) else t for t in rows]
    answers = [str(t["ground_truth"]) for t in tasks]
    assert len(set(answers)) == 4 and weights == [1.0]
    right = [f"<answer>{a}</answer>" if answer_format == "tags" else f"Answer: {a}"
             for a in answers]  # fmt: skip
    completions = [[{"role": "assistant", "content": text}] for text in right]
    assert reward(prompts=prompts, completions=completions, task=rows) == [1.0] * 4
    wrong = [[{"role": "assistant", "content": "<answer>x</answer>"}]] * 4
    assert reward(prompts=prompts, completions=wrong, task=rows) == [0.0] * 4


def test_the_line_answer_format_is_stated_and_read() -> None:
    env = make_env("reasoning-gym:chain_sum", answer_format="line")
    observation, info = env.reset(seed=1)
    assert "Answer: <your answer>" in observation[0]["content"]
    reply = f"57\nAnswer: {info['task'].ground_truth}"
    episode = env.play_turn({"role": "assistant", "content": reply}).episode
    assert episode is not None and episode.score == 1.0


def test_a_scorer_that_raises_gives_an_invalid_score_not_a_0() -> None:
    # prime_factorization's score_answer parses the answer's factors with int().
    env = make_env("reasoning-gym:prime_factorization")
    episode = play(env, 1, "<answer><<garbage>></answer>")
    assert not episode.is_score_valid
    assert episode.error == (
        "reasoning_gym: score_answer raised ValueError: invalid literal for int() with base 10: "
        "'<<garbage>>'"
    )


def test_several_generators_mix_by_seed() -> None:
    env = make_env("reasoning-gym:chain_sum,basic_arithmetic")
    picked = [env.reset(seed=seed)[1]["task"].metadata["generator"] for seed in range(24)]
    again = [env.reset(seed=seed)[1]["task"].metadata["generator"] for seed in range(24)]
    assert picked == again and set(picked) == {"chain_sum", "basic_arithmetic"}
    only = make_env("reasoning-gym:chain_sum,basic_arithmetic", weights={"chain_sum": 1})
    assert {only.reset(seed=s)[1]["task"].metadata["generator"] for s in range(12)} == {"chain_sum"}


def test_options_reach_the_generator() -> None:
    env = make_env("reasoning-gym:chain_sum", options={"min_terms": 5, "max_terms": 5})
    for seed in range(3):
        _, entry = package_entry(env.reset(seed=seed)[1]["task"])
        assert entry["metadata"]["num_terms"] == 5
    mixed = make_env("reasoning-gym:chain_sum,basic_arithmetic",
                     options={"chain_sum": {"min_terms": 6, "max_terms": 6}})  # fmt: skip
    tasks = [mixed.reset(seed=s)[1]["task"] for s in range(12)]
    assert {t.metadata["options"].get("min_terms") for t in tasks} == {6, None}
    message = "reasoning-gym's 'chain_sum' has no option 'min_term'. Did you mean 'min_terms'?"
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_env("reasoning-gym:chain_sum", options={"min_term": 2})
    with pytest.raises(ConfigError, match=re.escape("reasoning-gym's 'chain_sum' refused")):
        make_env("reasoning-gym:chain_sum", options={"min_terms": 0})


def test_unknown_generators_and_composite_are_refused() -> None:
    message = "reasoning-gym has no generator 'chain_summ'. Did you mean 'chain_sum'?"
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_env("reasoning-gym:chain_summ")
    with pytest.raises(ConfigError, match=re.escape("reasoning-gym:composite is not offered")):
        make_env("reasoning-gym:composite")


def test_generators_that_store_no_answer_have_no_solver() -> None:
    env = make_env("reasoning-gym:rubiks_cube")
    assert env.reference_solver is None
    message = (
        "environment 'reasoning-gym:chain_sum,rubiks_cube' has no reference solver: "
        "reasoning-gym's rubiks_cube stores no answer (answer=None) to answer with"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_solver("reasoning-gym:chain_sum,rubiks_cube")


def test_the_solver_answers_only_tasks_it_has_seen() -> None:
    solve = get_solver("reasoning-gym:basic_arithmetic")
    with pytest.raises(Exception, match="knows no answer to this conversation"):
        solve([Message(role="user", content="What is 1 + 1 in a task never opened?")], None)


def test_an_env_setup_records_the_name_as_written() -> None:
    setup = EnvSetup(name="reasoning-gym:chain_sum", kwargs={"options": {"max_terms": 3}})
    factory = setup.factory()
    try:
        assert factory.name == "reasoning-gym:chain_sum"
        assert factory.tool_schemas == [] and factory.max_turns == 1
    finally:
        factory.close()


BLOCKED = (
    "import sys; sys.modules['reasoning_gym'] = None  # as if it were not installed\n"
    "from rk_agent.cli import main\n"
    "sys.argv = ['rk-agent', *{args}]\n"
    "main()\n"
)


def without_the_package(*args: str) -> subprocess.CompletedProcess[str]:
    """rk-agent with reasoning-gym unimportable (the import system itself says it is absent)."""
    env = {**os.environ, "COLUMNS": "200"}
    code = BLOCKED.format(args=json.dumps(list(args)))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip


def test_without_the_extra_a_run_fails_in_one_line_naming_the_install() -> None:
    out = without_the_package("rollout", "--env", "reasoning-gym:chain_sum", "--policy", "solver")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: environment source 'reasoning-gym' needs reasoning_gym, which is not installed: "
        "pip install 'rk-agent[reasoning-gym]' (uv add 'rk-agent[reasoning-gym]'; in a checkout "
        "of rk-agent: uv sync --extra reasoning-gym)."
    ]
    listed = without_the_package("envs", "list")
    assert listed.returncode == 0, listed.stderr
    shown = "reasoning-gym:NAME[,NAME...] │ no: pip install 'rk-agent[reasoning-gym]'"
    assert shown in listed.stdout
