"""``--target aws-lambda``: the handler called in-process with recorded events, and the SAM CLI.

The events in ``events/`` follow AWS's documented payload format 2.0, for an HTTP API (API
Gateway v2) and for a function URL (whose body arrives base64-encoded). The handler is the
generated ``lambda_handler.py``, loaded from the generated folder as Lambda loads it. ``sam``
is the recording stand-in of the conftest (contract only: AWS cannot be reached here).
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rk_agent import __version__
from rk_agent.errors import ConfigError
from rk_agent.selfhost.aws_lambda import lambda_context
from tests.selfhost.conftest import StandIns

EVENTS = Path(__file__).parent / "events"
KEY = "lambda-test-key-0123"  # the recorded events carry "authorization: Bearer <KEY>"
RK_AGENT = [sys.executable, "-m", "rk_agent"]


def event(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / name).read_text()))


@pytest.fixture
def load_handler(
    rewards_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], Any]]:
    """Write the function's folder; return a loader of its ``handler`` (as Lambda imports it)."""
    folder = lambda_context(f"{rewards_file}::exact").write(tmp_path / "function")
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])  # restored after the test
    before = set(sys.modules)
    # Mangum runs requests on the thread's event loop and keeps it for the life of the process
    # (as a Lambda worker does): give it one, and close it after the test.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def load() -> Any:
        spec = importlib.util.spec_from_file_location(
            "lambda_handler", folder / "lambda_handler.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.handler

    yield load
    asyncio.set_event_loop(None)
    loop.close()
    for name in set(sys.modules) - before:  # main.py's and the reward file's modules
        if str(getattr(sys.modules[name], "__file__", "")).startswith(str(folder)):
            del sys.modules[name]


@pytest.mark.parametrize("name", ["apigw-http-api-v2-evaluate.json", "function-url-evaluate.json"])
def test_the_handler_scores_an_api_gateway_and_a_function_url_event(
    load_handler: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("RK_AGENT_SERVER_API_KEY", KEY)
    handler = load_handler()
    answer = handler(event(name), None)
    assert answer["statusCode"] == 200
    assert answer["headers"]["content-type"] == "application/json"
    result = json.loads(answer["body"])
    assert (result["score"], result["is_score_valid"]) == (1.0, True)

    unkeyed = event(name)
    del unkeyed["headers"]["authorization"]
    assert handler(unkeyed, None)["statusCode"] == 401

    health = copy.deepcopy(event(name))
    health.update(rawPath="/health", body="", isBase64Encoded=False)
    health["requestContext"]["http"].update(method="GET", path="/health")
    answer = handler(health, None)
    assert (answer["statusCode"], json.loads(answer["body"])) == (
        200, {"status": "ok", "reward": "exact"},
    )  # fmt: skip


def test_the_handler_refuses_to_start_without_a_key(
    load_handler: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RK_AGENT_SERVER_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=re.escape("refusing to serve on 0.0.0.0 without")):
        load_handler()
    monkeypatch.setenv("RK_AGENT_ALLOW_PUBLIC", "1")  # the explicit way out
    assert load_handler()(event("function-url-evaluate.json"), None)["statusCode"] == 200


def test_the_template_reads_the_key_from_a_parameter_or_a_secret(rewards_file: Path) -> None:
    context = lambda_context(f"{rewards_file}::exact")
    files, wheel = context.files, f"wheels/rk_agent-{__version__}-py3-none-any.whl"
    assert context.names == (
        ".dockerignore", "Dockerfile", "lambda_handler.py", "main.py", "my_rewards.py",
        "overrides.txt", "requirements.txt", "template.yaml", wheel,
    )  # fmt: skip
    # this checkout is no package index's rk-agent: the image installs a wheel of it
    assert files["requirements.txt"] == f"./{wheel}[lambda]\n"
    assert files["Dockerfile"].splitlines()[1:6] == [
        "FROM public.ecr.aws/lambda/python:3.11",
        "WORKDIR ${LAMBDA_TASK_ROOT}",
        "COPY requirements.txt overrides.txt ./",
        "COPY wheels/ ./wheels/",
        "RUN pip install --no-cache-dir uv && uv pip install --system --no-cache -r "
        "requirements.txt --overrides overrides.txt",
    ]
    assert "**/.env\n" in files[".dockerignore"]  # `COPY . ./` never takes a .env
    assert "          RK_AGENT_SERVER_API_KEY: !Ref ApiKey\n" in files["template.yaml"]
    secret = lambda_context(f"{rewards_file}::exact", api_key_secret="prod/reward-key").files
    assert (
        "          RK_AGENT_SERVER_API_KEY: '{{resolve:secretsmanager:prod/reward-key}}'\n"
        in secret["template.yaml"]
    )


def test_deploy_runs_sam_build_and_deploy_in_the_folder(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("sam")
    out = tmp_path / "fn"
    done = subprocess.run(
        [*RK_AGENT, "deploy", f"{rewards_file}::exact", "--target", "aws-lambda", "-o", str(out),
         "--function", "my-reward", "--region", "eu-west-1"],
        capture_output=True, text=True, timeout=120,
        env=stand_ins.env(RK_AGENT_SERVER_API_KEY=KEY),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stand_ins.calls() == [
        {"argv": ["sam", "build", "--template-file", "template.yaml"], "cwd": str(out)},
        {"argv": ["sam", "deploy", "--stack-name", "my-reward", "--resolve-s3",
                  "--resolve-image-repos", "--capabilities", "CAPABILITY_IAM",
                  "--no-confirm-changeset", "--no-fail-on-empty-changeset", "--region",
                  "eu-west-1", "--parameter-overrides", f"ApiKey={KEY}"], "cwd": str(out)},
    ]  # fmt: skip
    assert "FunctionName: my-reward\n" in (out / "template.yaml").read_text()
    assert "--parameter-overrides ApiKey=***\n" in done.stdout
    assert KEY not in done.stdout + done.stderr


def test_dry_run_shows_the_commands_with_the_key_redacted(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns
) -> None:
    stand_ins.add("sam")
    out = tmp_path / "fn"
    done = subprocess.run(
        [*RK_AGENT, "deploy", f"{rewards_file}::exact", "--target", "aws-lambda", "-o", str(out),
         "--dry-run", "--api-key", KEY],
        capture_output=True, text=True, timeout=120, env=stand_ins.env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stand_ins.calls() == [] and not out.exists()
    assert re.search(r"^  lambda_handler\.py  [\d,]+ bytes  sha256:[0-9a-f]{16}$", done.stdout,
                     re.MULTILINE)  # fmt: skip
    assert "from mangum import Mangum" not in done.stdout  # names, sizes, hashes: no contents
    assert done.stdout.splitlines()[-3:] == [
        f"$ cd {out} && sam build --template-file template.yaml",
        f"$ cd {out} && sam deploy --stack-name rk-reward-exact --resolve-s3 "
        "--resolve-image-repos --capabilities CAPABILITY_IAM --no-confirm-changeset "
        "--no-fail-on-empty-changeset --parameter-overrides ApiKey=***",
        f"Dry run: nothing was written to {out}/ and nothing was run (keys show as ***).",
    ]
    assert KEY not in done.stdout + done.stderr
