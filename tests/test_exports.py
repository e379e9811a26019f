"""The public API: pinned, importable, and cheap to import; listed one way in every package.

A package that re-exports names lists them in its ``__init__.pyi`` stub and loads them lazily
(`rk_agent._lazy.attach_stub`); a package that re-exports nothing has an ``__init__.py`` that
only says what its modules are for. The tests below hold every package to one of the two.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import rk_agent

EXPECTED = {
    "ChatEnv", "ContextOverflowError", "EnvError", "FireworksError", "FailureKind",
    "FunctionPolicy", "HFPolicy",
    "OpenAIPolicy", "Policy", "PolicyOutput", "RolloutConfig", "SamplingParams", "ScriptedPolicy",
    "StopReason", "StubServer", "Task", "Tool", "Trajectory", "check_env", "get_env_class",
    "list_envs", "make_env", "run_rollouts", "tool",
    "ConfigError", "DataError", "EndpointError", "EvaluateResult", "FunctionCall", "Message",
    "MetricResult", "MetricRewardOutput", "NotAvailableError", "RewardError", "RewardFunction",
    "RewardInputError", "RewardLoadError", "RewardOutput", "RewardStats", "RkAgentError",
    "SandboxError", "StepOutput", "ToolCall", "UnknownNameError", "__version__", "combine",
    "get_reward_function", "group_normalize", "is_reward_function", "list_reward_functions",
    "normalize_rewards", "register_reward_function", "reward_function", "reward_stats",
    "EpisodeRollout", "SFTFilter", "TrainConfig", "build_sft_data", "build_sft_trainer",
    "env_dataset", "grpo_trainer", "run_training", "sft_dataset",
    "TRLEnvSpec", "trl_environment", "trl_grpo_trainer", "VLLMPolicy",
    "EpisodeState", "ToolResult", "register_env", "RunLockedError", "FailurePolicy", "RunStatus",
    "RunDir", "prepare_run", "LoadError", "EnvLoadError", "TurnResult", "FailureSite",
    "EnvSetup", "check_reward", "Probe", "SoundnessReport", "AlarmOptions", "embedded_model_path",
    "UntrustedRunError", "EpisodeReturn", "ScoreFault",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(rk_agent.__all__) == EXPECTED


def test_the_stub_is_the_one_list_of_public_names() -> None:
    """``__init__.pyi`` lists the names (for type checkers too); ``__all__`` is read from it."""
    stub = Path(rk_agent.__file__).with_suffix(".pyi").read_text("utf-8")
    listed = {
        alias.asname or alias.name
        for node in ast.parse(stub).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert listed | {"__version__"} == set(rk_agent.__all__)
    assert sorted(dir(rk_agent)) == sorted(rk_agent.__all__)


def test_star_import_gives_every_public_name() -> None:
    code = "from rk_agent import *\nprint(reward_function.__name__, RunDir.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["reward_function", "RunDir"]


def test_every_exported_name_resolves() -> None:
    for name in rk_agent.__all__:
        assert getattr(rk_agent, name) is not None, name


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        rk_agent.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_import_pulls_in_no_heavy_dependency() -> None:
    code = (
        "import sys, rk_agent\n"
        "from rk_agent import reward_function, RewardFunction, combine, EvaluateResult\n"
        "heavy = ['torch', 'transformers', 'trl', 'wandb', 'httpx', 'openai', 'sympy',"
        " 'math_verify', 'jsonschema', 'typer', 'rich', 'datasets', 'gymnasium']\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_public_name_that_is_also_a_submodule_stays_the_public_object() -> None:
    """``rk_agent.envs.tool`` is a module and ``rk_agent.envs``'s ``tool`` the decorator."""
    code = (
        "import rk_agent.envs.tool, rk_agent.envs.tools_env\n"
        "from rk_agent.envs import tool\n"
        "print(callable(tool) and not isinstance(tool, type(rk_agent)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


ROOT = Path(rk_agent.__file__).parent
STUBS = sorted(ROOT.rglob("__init__.pyi"))
INITS = sorted(ROOT.rglob("__init__.py"))


def _package(init: Path) -> str:
    return ".".join(init.parent.relative_to(ROOT.parent).parts)


def _listed(stub: Path) -> dict[str, str]:
    """``{name: module}`` of the stub's ``from module import name as name`` lines."""
    listed: dict[str, str] = {}
    for node in ast.parse(stub.read_text("utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, f"{stub}: write `{alias.name} as {alias.name}`"
                assert node.module is not None
                listed[alias.name] = node.module
    return listed


@pytest.mark.parametrize("stub", STUBS, ids=[_package(s) for s in STUBS])
def test_each_stub_is_its_packages_list_and_every_name_is_what_its_module_defines(
    stub: Path,
) -> None:
    package = importlib.import_module(_package(stub))
    listed = _listed(stub)
    defined_here = {"__version__"} if package is rk_agent else set()
    assert set(package.__all__) == set(listed) | defined_here
    assert sorted(dir(package)) == sorted(package.__all__)
    for name, module in listed.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name


@pytest.mark.parametrize("init", INITS, ids=[_package(i) for i in INITS])
def test_every_package_lists_its_public_names_one_way(init: Path) -> None:
    """With a stub: ``__init__.py`` hands it to `attach_stub` and lists nothing itself. Without
    one: no ``__all__`` and no re-exports, only the docstring."""
    tree = ast.parse(init.read_text("utf-8"))
    code = ast.unparse(ast.Module(body=tree.body[1:], type_ignores=[]))  # past the docstring
    if init.with_suffix(".pyi").exists():
        assert "attach_stub(__name__, __file__" in code
        for node in ast.walk(tree):  # __all__ comes from the stub, nowhere else
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if "__all__" in {
                    n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)
                }:
                    assert isinstance(node.value, ast.Call)
                    assert ast.unparse(node.value.func) == "attach_stub"
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        allowed = {"rk_agent._lazy"}
        if _package(init) == "rk_agent.envs":  # its one import-time effect: Gymnasium's ids
            allowed.add("rk_agent.envs.registry")
        assert {n.module for n in imports if isinstance(n, ast.ImportFrom)} <= allowed
    else:
        assert code == "", (
            f"{_package(init)} re-exports nothing, so its __init__.py holds only a docstring"
        )
