"""Packaging a reward: a reproducible archive whose main.py runs the reward on its own."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.fireworks.packaging import ENTRY_POINT, package_reward
from rk_agent.rewards.decorator import reward_function

RUN_MAIN = """
import json, sys
import main, rk_agent
samples = json.load(sys.stdin)
print(json.dumps({
    "rk_agent": rk_agent.__file__,
    "results": [main.evaluate(**s) for s in samples],
    "row": main.evaluate_row(dict(samples[0]))["evaluation_result"],
}))
"""
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def extract(archive: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(into, filter="data")


def run_main(folder: Path, samples: list[dict]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN_MAIN], cwd=folder, input=json.dumps(samples),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_archive_runs_the_reward_with_its_own_copy_of_rk_agent(
    reward_file: Path, tmp_path: Path
) -> None:
    package = package_reward(f"{reward_file}::exact", directory="exact-ev")
    assert package.entry_point == ENTRY_POINT == "main.py::evaluate"
    assert package.requirements == ("pydantic>=2.7", "regex>=2024.1")
    assert package.files["requirements.txt"] == "pydantic>=2.7\nregex>=2024.1\n"
    members = package.archive_members()
    assert all(m.startswith("exact-ev/") for m in members)
    for name in ("main.py", "my_rewards.py", "requirements.txt", "rk_agent/__init__.py",
                 "rk_agent/rewards/decorator.py", "rk_agent/types.py"):  # fmt: skip
        assert f"exact-ev/{name}" in members
    assert not any("/cli/" in m or "/rollouts/" in m or "__pycache__" in m for m in members)
    assert sorted(package.user_files()) == ["main.py", "my_rewards.py", "requirements.txt"]

    extract(package.archive, tmp_path / "out")
    out = run_main(tmp_path / "out" / "exact-ev", [
        {"messages": CHAT, "ground_truth": "4", "tools": [], "metadata": {"k": 1}},
        {"messages": CHAT, "ground_truth": "5"},
    ])  # fmt: skip
    assert out["rk_agent"].startswith(str(tmp_path / "out" / "exact-ev"))
    assert [r["score"] for r in out["results"]] == [1.0, 0.0]
    assert out["results"][0] == {"score": 1.0, "metrics": {}, "is_score_valid": True}
    assert out["row"] == {"score": 1.0, "reason": None, "is_score_valid": True, "metrics": {}}


def test_the_archive_is_reproducible(reward_file: Path) -> None:
    first = package_reward(f"{reward_file}::exact", directory="a")
    again = package_reward(f"{reward_file}::exact", directory="a")
    assert first.archive == again.archive and first.digest == again.digest
    assert len(first.digest) == 64
    reward_file.write_text(reward_file.read_text() + "\n# changed\n")
    assert package_reward(f"{reward_file}::exact", directory="a").digest != first.digest


def test_an_async_reward_and_included_helpers(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def norm(text):\n    return text.strip().lower()\n")
    (tmp_path / "judge.py").write_text(
        "import asyncio\nfrom helpers import norm\nfrom rk_agent import reward_function\n\n"
        "@reward_function(name='polite')\nasync def judge(response: str) -> dict:\n"
        "    await asyncio.sleep(0)\n"
        "    return {'score': 0.5, 'reason': norm(' OK '), 'metrics': {'tone': 1.0}}\n"
    )
    package = package_reward(
        f"{tmp_path / 'judge.py'}::judge", directory="j", include=[tmp_path / "helpers.py"]
    )
    assert package.reward_name == "polite"
    assert {"helpers.py", "judge.py"} <= set(package.user_files())
    extract(package.archive, tmp_path / "out")
    out = run_main(tmp_path / "out" / "j", [{"messages": CHAT}])
    assert out["results"][0]["reason"] == "ok"
    assert out["row"]["metrics"] == {"tone": {"score": 1.0, "is_score_valid": True,
                                              "reason": None}}  # fmt: skip


def test_a_builtin_reward_is_imported_from_the_vendored_package(tmp_path: Path) -> None:
    package = package_reward("repetition", directory="rep")
    assert sorted(package.user_files()) == ["main.py", "requirements.txt"]
    assert "_MODULE = 'rk_agent.rewards.builtin.repetition'" in package.files["main.py"]
    assert package_reward("math").requirements == ("pydantic>=2.7", "math-verify")
    extract(package.archive, tmp_path)
    out = run_main(tmp_path / "rep", [{"messages": CHAT, "ngram_size": 1}])
    assert out["results"][0]["is_score_valid"] is True


def test_a_reward_defined_in_a_function_cannot_be_packaged() -> None:
    @reward_function
    def inner(response: str) -> float:
        return 1.0

    message = "cannot package reward 'inner': it is not defined at the top level of a module"
    with pytest.raises(ConfigError, match=re.escape(message)):
        package_reward(inner)


def test_a_reward_without_a_source_file_cannot_be_packaged() -> None:
    namespace: dict = {}
    exec(  # a reward typed at the prompt has no file
        "from rk_agent import reward_function\n@reward_function\ndef typed(response):\n"
        "    return 1.0\n", namespace,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=re.escape("its source is not in a .py file")):
        package_reward(namespace["typed"])


def test_a_missing_include_is_named(reward_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("it does not exist")):
        package_reward(f"{reward_file}::exact", include=[tmp_path / "nope.py"])


METRIC_MAIN = """from rk_agent import reward_function
from relevance_helpers import overlap


@reward_function
def evaluate(messages, ground_truth=None, **kwargs):
    return overlap(messages[-1]["content"], ground_truth or "")
"""


def test_a_reward_file_called_main_py_moves_under_user_and_runs(tmp_path: Path) -> None:
    folder = tmp_path / "metrics" / "relevance"
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(METRIC_MAIN)
    (folder / "relevance_helpers.py").write_text(
        "def overlap(a, b):\n    return float(bool(set(a.split()) & set(b.split())))\n"
    )
    package = package_reward(
        f"{folder / 'main.py'}::evaluate", directory="relevance",
        include=[folder / "relevance_helpers.py"],
    )  # fmt: skip
    assert package.user_dir == "user"
    assert {"user/main.py", "user/relevance_helpers.py", "main.py"} <= set(package.files)
    assert package.files["user/main.py"] == METRIC_MAIN  # the user's file, untouched
    assert package.files["main.py"].startswith('"""Fireworks evaluator entry point')
    package.check_imports()
    extract(package.archive, tmp_path / "out")
    out = run_main(tmp_path / "out" / "relevance", [
        {"messages": CHAT, "ground_truth": "4"}, {"messages": CHAT, "ground_truth": "five"},
    ])  # fmt: skip
    assert [r["score"] for r in out["results"]] == [1.0, 0.0]  # no recursion, the real reward


def test_secret_looking_files_of_an_included_folder_are_left_out(
    reward_file: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "lexicon.txt").write_text("words\n")
    for secret in (".env", ".env.local", "server.pem", "deploy.key", "auth.ini",
                   "credentials.json"):  # fmt: skip
        (data / secret).write_text("FIREWORKS_API_KEY=fw-live-secret\n")
    package = package_reward(f"{reward_file}::exact", directory="e", include=[data])
    assert "data/lexicon.txt" in package.files
    assert not any("fw-live-secret" in text for text in package.files.values())
    assert sorted(Path(p.path).name for p in package.left_out) == sorted(
        [".env", ".env.local", "server.pem", "deploy.key", "auth.ini", "credentials.json"]
    )
    own = tmp_path / "own"  # a .env named on purpose is packed, when it holds no key
    own.mkdir()
    (own / ".env").write_text("REWARD_MODE=strict\n")
    named = package_reward(f"{reward_file}::exact", directory="e", include=[own / ".env"])
    assert named.left_out == () and any(k.endswith(".env") for k in named.files)


def test_a_package_that_cannot_be_imported_is_refused(tmp_path: Path) -> None:
    (tmp_path / "scoring_helpers.py").write_text("def clean(t):\n    return t.strip()\n")
    (tmp_path / "uses_helpers.py").write_text(
        "from scoring_helpers import clean\nfrom rk_agent import reward_function\n\n"
        "@reward_function\ndef tidy(response: str) -> float:\n"
        "    return float(clean(response) == response)\n"
    )
    sys.path.insert(0, str(tmp_path))  # importable here, as the user's own machine has it
    try:
        package = package_reward(f"{tmp_path / 'uses_helpers.py'}::tidy", directory="t")
    finally:
        sys.path.remove(str(tmp_path))
    message = (
        "the evaluator package for reward 'tidy' cannot be imported: ModuleNotFoundError: No "
        "module named 'scoring_helpers'. Fix the reward's file (or --include what it imports) "
        "before deploying."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        package.check_imports()
    fixed = package_reward(
        f"{tmp_path / 'uses_helpers.py'}::tidy", directory="t",
        include=[tmp_path / "scoring_helpers.py"],
    )  # fmt: skip
    fixed.check_imports()
    # A module the service installs from the requirements is not needed here.
    (tmp_path / "needs_lib.py").write_text(
        "import not_installed_here_lib\nfrom rk_agent import reward_function\n\n"
        "@reward_function(requirements=['not-installed-here-lib>=1'])\n"
        "def lib(response: str) -> float:\n    return 1.0\n"
    )
    sys.modules["not_installed_here_lib"] = type(sys)("not_installed_here_lib")
    try:
        remote_only = package_reward(f"{tmp_path / 'needs_lib.py'}::lib", directory="l")
    finally:
        del sys.modules["not_installed_here_lib"]
    remote_only.check_imports()
