"""`check_env(adversarial=True)`: every built-in environment passes its own check; the
memorisation the ``code`` env paid for and a farmable step bonus are flagged (real envs, the
real sandbox)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rk_agent import check_env, reward_function
from rk_agent.envs.code_env import CodeEnv
from rk_agent.envs.guess_env import GuessEnv
from rk_agent.envs.registry import _BUILTINS
from rk_agent.envs.tools_env import ToolsEnv
from rk_agent.envs.turn import ToolCallRecord
from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin.code_execution import code_execution_reward
from rk_agent.soundness.report import FlagKind
from rk_agent.types import EvaluateResult, Message
from tests.sandbox.support import needs_bwrap

ENVS = sorted(_BUILTINS)
MARKS = {"mcp_tools": pytest.mark.slow, "code": needs_bwrap}  # mcp_tools: a server process
EPISODES = {"code": 4}  # each code episode runs the sandbox up to 4 times


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, ())) for n in ENVS])
def test_every_builtin_env_passes_its_own_check(name: str) -> None:
    report = check_env(name, adversarial=True, episodes=EPISODES.get(name, 6))
    assert report.flags == []
    assert report.row("reference").outcome == 1.0
    assert report.row("reference").invalid == 0
    assert report.checked == "env" and report.target == name


@needs_bwrap
def test_the_lookup_table_earns_no_more_than_an_honest_wrong_answer_in_the_code_env() -> None:
    report = check_env("code", adversarial=True, episodes=4)
    wrong = report.row("wrong").mean
    assert wrong is not None
    for name in ("lookup_table", "print_expected", "catch_everything", "always_equal"):
        mean = report.row(name).mean
        assert mean is not None and mean <= wrong, name


class _RevealingCodeEnv(CodeEnv):
    """The code env as it was: failure feedback names the expected value."""

    def _check(self, messages: list[Message], ground_truth: Any) -> EvaluateResult:
        return code_execution_reward(
            messages, ground_truth=ground_truth, limits=self.limits, sandbox=self.sandbox
        )


@needs_bwrap
def test_feedback_that_reveals_expected_values_is_flagged() -> None:
    report = check_env(_RevealingCodeEnv(), adversarial=True, episodes=4)
    assert "lookup_table" in {f.probe for f in report.flags}
    lookup = report.row("lookup_table").mean
    assert lookup is not None and lookup >= 0.3  # up to 3 of 6 tests revealed in 4 turns


@reward_function(name="uncapped_tool_use")
def uncapped_tool_use(tool_calls: list[ToolCallRecord] | None = None, **kw: Any) -> float:
    """+0.05 for every successful call: the step bonus GRPO learnt to farm."""
    return 0.05 * sum(1 for record in tool_calls or [] if record.result.ok)


def test_a_farmable_step_bonus_is_flagged_by_farm_calls() -> None:
    env = ToolsEnv(step_rewards={"tool_use": uncapped_tool_use})
    report = check_env(env, adversarial=True, episodes=4)
    assert [(f.kind, f.probe) for f in report.flags] == [(FlagKind.PROBE_ABOVE_WRONG, "farm_calls")]
    farm, wrong = report.row("farm_calls"), report.row("wrong")
    assert farm.outcome == 0.0 and (farm.mean or 0) > (wrong.mean or 0)
    env.close()


def test_without_adversarial_it_is_the_contract_check() -> None:
    assert check_env("guess") is None
    assert check_env(GuessEnv(high=100), seeds=(0,)) is None


def test_an_env_without_a_reference_solver_cannot_be_probed() -> None:
    class NoSolver(GuessEnv):
        reference_solver = None

    with pytest.raises(ConfigError, match=re.escape(
        "check_env(adversarial=True) needs the environment's reference solver for its "
        "baselines; NoSolver has none. Give the class one with "
        "`reference_solver = staticmethod(solve)`."
    )):  # fmt: skip
        check_env(NoSolver(), adversarial=True, use_solver=False)
    with pytest.raises(ConfigError, match=re.escape("episodes must be at least 2")):
        check_env("guess", adversarial=True, episodes=1)


def test_an_env_whose_replay_differs_fails_the_check_naming_the_first_difference() -> None:
    from rk_agent.errors import EnvError
    from tests.runs.test_replay import NoisyEnv, noisy_solver

    class UnseededEnv(NoisyEnv):
        reference_solver = staticmethod(noisy_solver)

    with pytest.raises(EnvError, match=re.escape(
        "check_env: UnseededEnv is not deterministic: replaying the reference solver's episode "
        "(seed 0) differs at turn 0: environment[0].content: recorded "
    )) as info:  # fmt: skip
        check_env(UnseededEnv())
    assert str(info.value).endswith(
        "Seed every source of randomness from reset(seed=...) (self.np_random), and keep the "
        "clock and outside services out of observations and rewards."
    )
    check_env(UnseededEnv(), use_solver=False)  # without the solver: the contract alone


def test_an_env_that_plays_a_dataset_is_replayed_on_the_task_it_played() -> None:
    # The engine resets a dataset env with its task index; the replay does too, so the solver's
    # episode must be played that way (not on the task its seed alone picks).
    tasks = [ToolsEnv().reset(seed=seed)[1]["task"] for seed in range(6)]
    check_env(ToolsEnv(tasks=tasks))


def test_an_imported_env_without_tools_gets_another_tasks_answer_as_its_wrong_one() -> None:
    # Its solver answers only the episodes open now (the answer lives with the session), so
    # the other task's question shown in this episode has none: its own reference reply is
    # the honest wrong answer (it was an error, and `rk-agent check env` stopped).
    report = check_env("reasoning-gym:chain_sum", adversarial=True, episodes=3)
    assert report.row("reference").outcome == 1.0
    assert report.row("wrong").outcome == 0.0 and report.row("wrong").invalid == 0
    # reasoning-gym's scorer gives partial credit to an answer that holds the right one.
    assert {f.probe for f in report.flags} == {"two_answers"}
