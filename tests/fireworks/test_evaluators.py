"""Evaluators against the fake API: deploy, reuse, replace, build failures, preview, .deploy()."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError, FireworksError
from rk_agent.fireworks.client import FireworksClient
from rk_agent.fireworks.evaluators import (
    deploy_reward,
    evaluator_id_for,
    get_evaluator,
    preview_evaluator,
    validate_resource_id,
    wait_for_evaluator,
)
from rk_agent.loading import load_object
from rk_agent.testing.fake_fireworks import FakeFireworks
from tests.fireworks.conftest import ACCOUNT, SECRET

CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def test_deploy_creates_uploads_and_waits(
    fake: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    deployment = deploy_reward(f"{reward_file}::exact", client=client, poll_s=0.01)
    assert deployment.action == "created"
    assert (deployment.evaluator.name, deployment.evaluator.state) == (
        "accounts/acme/evaluators/exact", "ACTIVE",
    )  # fmt: skip
    assert fake.calls() == [
        "GET /v1/accounts/acme/evaluators/exact",
        "POST /v1/accounts/acme/evaluatorsV2",
        "POST /v1/accounts/acme/evaluators/exact:getUploadEndpoint",
        "PUT /_signed/…",
        "POST /v1/accounts/acme/evaluators/exact:validateUpload",
        "GET /v1/accounts/acme/evaluators/exact",  # BUILDING
        "GET /v1/accounts/acme/evaluators/exact",  # ACTIVE
    ]
    package = deployment.package
    create, endpoint, put, validate = fake.requests[1:5]
    assert create.json == {
        "evaluatorId": "exact",
        "evaluator": {
            "displayName": "exact",
            "description": "1.0 when the answer is exactly the ground truth.",
            "entryPoint": "main.py::evaluate",
            "requirements": "pydantic>=2.7\nregex>=2024.1\n",
            "commitHash": package.digest,
        },
    }
    assert endpoint.json == {"filenameToSize": {"exact.tar.gz": str(len(package.archive))}}
    assert put.body == package.archive and "authorization" not in put.headers
    assert put.headers["content-type"] == "application/octet-stream"
    assert validate.json == {}
    with tarfile.open(fileobj=io.BytesIO(fake.files["evaluators/exact"]), mode="r:gz") as tar:
        assert "exact/main.py" in tar.getnames()


def test_the_same_code_is_reused_and_other_code_needs_force(
    fake: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    spec = f"{reward_file}::exact"
    deploy_reward(spec, evaluator_id="ev", client=client, poll_s=0.01)
    before = len(fake.requests)
    again = deploy_reward(spec, evaluator_id="ev", client=client, poll_s=0.01)
    assert again.action == "unchanged" and fake.calls()[before:] == [
        "GET /v1/accounts/acme/evaluators/ev"
    ]
    reward_file.write_text(reward_file.read_text().replace("1.0 when", "One when"))
    message = (
        "evaluator 'ev' already exists with other code (state ACTIVE). Pass force=True "
        "(--force) to replace it, or choose another id."
    )
    with pytest.raises(FireworksError, match=re.escape(message)) as caught:
        deploy_reward(spec, evaluator_id="ev", client=client, poll_s=0.01)
    assert caught.value.status == 409
    before = len(fake.requests)
    replaced = deploy_reward(spec, evaluator_id="ev", force=True, client=client, poll_s=0.01)
    assert replaced.action == "replaced"
    assert replaced.replaced is not None and replaced.replaced.id == "ev"
    assert replaced.replaced.commit_hash == again.package.digest  # what --force deleted
    assert fake.calls()[before : before + 4] == [
        "GET /v1/accounts/acme/evaluators/ev",
        "DELETE /v1/accounts/acme/evaluators/ev",
        "GET /v1/accounts/acme/evaluators/ev",  # gone (404)
        "POST /v1/accounts/acme/evaluatorsV2",
    ]
    with tarfile.open(fileobj=io.BytesIO(fake.files["evaluators/ev"]), mode="r:gz") as tar:
        source = tar.extractfile("ev/my_rewards.py").read()  # type: ignore[union-attr]
    assert b"One when" in source


def test_a_failed_build_shows_its_log(
    fake: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    fake.fail_build(
        "Step 2/3 : pip install -r requirements.txt\n"
        "ERROR: No matching distribution found for regex>=2024.1"
    )
    with pytest.raises(FireworksError) as caught:
        deploy_reward(f"{reward_file}::exact", client=client, poll_s=0.01)
    error = caught.value
    assert str(error) == (
        "evaluator 'exact' failed to build: build failed: ERROR: No matching distribution found "
        "for regex>=2024.1\n--- build log (tail) ---\n"
        "Step 2/3 : pip install -r requirements.txt\n"
        "ERROR: No matching distribution found for regex>=2024.1"
    )
    assert error.logs is not None and error.logs.startswith("Step 2/3")
    assert fake.calls()[-2:] == [
        "GET /v1/accounts/acme/evaluators/exact:getBuildLogEndpoint", "GET /_signed/…",
    ]  # fmt: skip
    assert "authorization" not in fake.requests[-1].headers
    # A failed evaluator is not "unchanged": deploying again needs --force.
    with pytest.raises(FireworksError, match=re.escape("already exists with other code")):
        deploy_reward(f"{reward_file}::exact", client=client, poll_s=0.01)


def test_waiting_for_a_build_gives_up(fake: FakeFireworks, client: FireworksClient,
                                      reward_file: Path) -> None:  # fmt: skip
    fake.build_polls = 1000
    deploy_reward(f"{reward_file}::exact", client=client, wait=False)
    message = "evaluator 'exact' is still BUILDING after 0.05s."
    with pytest.raises(FireworksError, match=re.escape(message)):
        wait_for_evaluator(client, "exact", poll_s=0.01, timeout_s=0.05)


def test_preview_runs_on_the_service(fake: FakeFireworks, client: FireworksClient,
                                     reward_file: Path) -> None:  # fmt: skip
    samples = [{"messages": CHAT, "ground_truth": "4"}, {"messages": CHAT, "ground_truth": "5"}]
    result = preview_evaluator(f"{reward_file}::exact", samples, max_samples=5, client=client)
    assert [(r.success, r.score) for r in result.results] == [(True, 1.0), (True, 0.0)]
    assert result.total_samples == 2 and isinstance(result.total_runtime_ms, int)
    [request] = fake.requests
    assert request.path == "/v1/accounts/acme/evaluators:previewEvaluator"
    body = request.json
    assert body["sampleData"] == [
        '{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": '
        '"4"}], "ground_truth": "4"}',
        '{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": '
        '"4"}], "ground_truth": "5"}',
    ]
    assert body["maxSamples"] == 5
    criterion = body["evaluator"]["criteria"][0]
    assert criterion["type"] == "CODE_SNIPPETS" and criterion["name"] == "exact"
    snippets = criterion["codeSnippets"]
    assert (snippets["language"], snippets["entryFile"], snippets["entryFunc"]) == (
        "python", "main.py", "evaluate",
    )  # fmt: skip
    assert {"main.py", "my_rewards.py", "requirements.txt"} <= set(snippets["fileContents"])


def test_the_decorator_deploys_with_credentials_from_the_environment(
    fake: FakeFireworks, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", SECRET)
    monkeypatch.setenv("FIREWORKS_API_BASE", fake.url)
    exact = load_object(f"{reward_file}::exact", kind="reward")
    deployment = exact.deploy(name="exact-v1", description="Exact match.", poll_s=0.01)
    assert deployment.evaluator.name == f"accounts/{ACCOUNT}/evaluators/exact-v1"
    assert fake.calls()[0] == "GET /verifyApiKey"  # the account came from the key
    assert fake.evaluators["exact-v1"]["description"] == "Exact match."
    assert exact.deploy(name="exact-v1", poll_s=0.01).action == "unchanged"


def test_the_decorator_says_when_no_key_is_configured(reward_file: Path) -> None:
    exact = load_object(f"{reward_file}::exact", kind="reward")
    with pytest.raises(ConfigError, match=re.escape("no Fireworks API key: set FIREWORKS_API_KEY")):
        exact.deploy()


def test_ids() -> None:
    assert evaluator_id_for("Exact_Match v2") == "exact-match-v2"
    assert validate_resource_id("my-eval-2", "evaluator") == "my-eval-2"
    message = (
        "evaluator id 'My_Eval' is not valid: use 1 to 63 lowercase letters, digits and "
        "hyphens, starting and ending with a letter or digit (e.g. 'my-eval')."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_resource_id("My_Eval", "evaluator")


def test_get_evaluator_of_an_unknown_id(client: FireworksClient) -> None:
    assert get_evaluator(client, "none") is None


def test_a_create_whose_reply_was_lost_goes_on(
    fake: FakeFireworks, client: FireworksClient, reward_file: Path
) -> None:
    fake.fail_next(502, "reply lost", path="evaluatorsV2", lost_reply=True)
    deployment = deploy_reward(f"{reward_file}::exact", client=client, poll_s=0.01)
    assert deployment.evaluator.state == "ACTIVE"
    assert fake.calls()[1:4] == [
        "POST /v1/accounts/acme/evaluatorsV2",
        "POST /v1/accounts/acme/evaluatorsV2",
        "GET /v1/accounts/acme/evaluators/exact",
    ]


def test_reward_kit_evaluate_rewards_get_ids_from_their_folders(
    fake: FakeFireworks, client: FireworksClient, tmp_path: Path
) -> None:
    for metric in ("relevance", "fluency"):
        folder = tmp_path / "metrics" / metric
        folder.mkdir(parents=True)
        (folder / "main.py").write_text(
            "from rk_agent import reward_function\n\n@reward_function\n"
            f"def evaluate(response: str) -> float:\n    return {len(metric)}.0\n"
        )
    made = [
        deploy_reward(f"{tmp_path / 'metrics' / m / 'main.py'}::evaluate", client=client,
                      poll_s=0.01).evaluator.id
        for m in ("relevance", "fluency")
    ]  # fmt: skip
    assert made == ["relevance", "fluency"]  # not both "evaluate": no collision
    assert "evaluators/relevance" in fake.files and "evaluators/fluency" in fake.files
