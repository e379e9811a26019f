"""What the model saw: provenance.json on real runs against the stub server, with MCP tools,
without secrets, kept and checked on resume, and per episode where an episode saw otherwise."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.env_setup import EnvSetup
from rk_agent.errors import ConfigError
from rk_agent.rollouts.runner import prepare_run
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.provenance import (
    EpisodeProvenance,
    package_versions,
    template_sha256,
    weights_fingerprint,
)
from rk_agent.runs.run_dir import read_provenance, read_trajectories
from rk_agent.testing.stub_server import StubServer, call_first_tool_then_answer
from tests.rollouts.served import (
    API_KEY,
    MCP_SECRET,
    mcp_servers_file,
    play_served,
    text_tool_model,
)


def _tools_env_schemas() -> list[dict[str, Any]]:
    env = EnvSetup(name="tools").make()
    try:
        return env.tool_schemas
    finally:
        env.close()


def _no_secret_in(folder: Path, *secrets: str) -> None:
    for file in folder.rglob("*"):
        if file.is_file():
            text = file.read_bytes()
            for secret in secrets:
                assert secret.encode() not in text, f"{secret} found in {file.name}"


def test_a_run_records_what_the_model_saw_once(tmp_path: Path) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=3, seed=7)
        sent = server.chat_requests[0].body
    provenance = read_provenance(run)
    assert provenance is not None
    assert provenance.model.model_dump() == {
        "name": "stub-model",
        "policy": "OpenAIPolicy",
        "model": "stub-model",
        "base_url": server.base_url,
        "served_model": "stub-model",
        "weights_sha256": None,
        "chat_template_sha256": None,
    }
    assert provenance.tools == sent["tools"] == _tools_env_schemas()
    assert provenance.tool_call_format == "native"
    assert provenance.tool_origins == {}
    assert provenance.env.model_dump() == {
        "name": "tools",
        "env_class": "rk_agent.envs.tools_env:ToolsEnv",
        "version": None,
        "kwargs": {},
        "tasks": None,
        "rewards": [],
        "max_turns": 4,
        "mcp_servers": None,
        "tool_scope": None,  # the same tools in every episode
    }
    assert provenance.seed == 7
    assert provenance.sampling == RolloutConfig().sampling.model_dump(mode="json")
    assert provenance.sampling["temperature"] == sent["temperature"]
    assert set(provenance.versions) >= {"python", "rk-agent", "trl", "transformers", "torch"}
    assert provenance.episodes_before == 0 and provenance.resumed == []
    # Every episode saw what the run recorded: no trajectory repeats it.
    trajectories = read_trajectories(run)
    assert len(trajectories) == 3
    assert all(t.provenance is None for t in trajectories)
    assert '"provenance"' not in (run / "trajectories.jsonl").read_text()
    _no_secret_in(run, API_KEY)


def test_a_server_that_refuses_tools_records_the_text_format(tmp_path: Path) -> None:
    with StubServer(text_tool_model, api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=2)
    provenance = read_provenance(run)
    assert provenance is not None
    assert provenance.tool_call_format == "hermes"
    assert all(t.provenance is None for t in read_trajectories(run))


def test_an_episode_answered_by_another_model_records_it(tmp_path: Path) -> None:
    def reply(request: dict[str, Any]) -> Any:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        model = "deployment-b" if "#1" in user else "deployment-a"
        message = {"role": "assistant", "content": "Answer: 3"}
        return {"model": model, "choices": [{"index": 0, "message": message}]}

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"#{i} What is 1 + 2?", "ground_truth": "3"})
            + "\n"
            for i in range(3)
        )
    )
    with StubServer(reply, api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="math", tasks=str(tasks), n=3)
    provenance = read_provenance(run)
    assert provenance is not None
    assert provenance.model.served_model == "deployment-a"
    assert provenance.tool_call_format is None and provenance.tools == []
    seen = {t.task.id: t.provenance for t in read_trajectories(run)}
    assert seen == {"t0": None, "t1": EpisodeProvenance(served_model="deployment-b"), "t2": None}


def test_mcp_tools_are_recorded_and_their_secrets_are_not(tmp_path: Path) -> None:
    servers = mcp_servers_file(tmp_path / "servers.json", tools=["echo", "add"])
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", mcp=str(servers), n=2)
        sent = server.chat_requests[0].body
    provenance = read_provenance(run)
    assert provenance is not None
    names = [t["function"]["name"] for t in provenance.tools]
    assert names == [*(t["function"]["name"] for t in _tools_env_schemas()), "echo", "add"]
    assert provenance.tools == sent["tools"]
    assert provenance.tool_origins == {
        "echo": "MCP server 'fixture'",
        "add": "MCP server 'fixture'",
    }
    fixture = provenance.env.mcp_servers and provenance.env.mcp_servers["fixture"]
    assert fixture is not None
    assert fixture["transport"] == "stdio"
    assert fixture["env"] == ["FIXTURE_API_TOKEN"]
    assert fixture["tools"] == ["echo", "add"]
    _no_secret_in(run, API_KEY, MCP_SECRET)


def test_resuming_keeps_the_record_and_notes_the_resume(tmp_path: Path) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=2)
        before = read_provenance(run)
        with prepare_run(RolloutConfig(), api_key=API_KEY, resume=run) as resumed:
            assert resumed.run_dir.provenance is not None
    after = read_provenance(run)
    assert before is not None and after is not None
    assert after.recorded_at == before.recorded_at and after.tools == before.tools
    assert [(r.episodes_before, r.versions) for r in after.resumed] == [(2, {})]


def _resume_refused(run: Path, problems: str) -> None:
    message = (
        f"cannot resume {run}: the rest of its episodes would see {problems} (against its "
        "provenance.json). The episodes of one run must all see the same; restore what "
        "changed, or play the rest as a new run (--output)."
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        prepare_run(RolloutConfig(), api_key=API_KEY, resume=run)


def test_a_resume_whose_tools_or_model_changed_is_refused(tmp_path: Path) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=1)
        file = run / "provenance.json"
        original = file.read_text()
        edited = json.loads(original)
        edited["tools"][0]["function"]["description"] = "An older calculator."
        retired = {"type": "function", "function": {"name": "retired", "parameters": {}}}
        edited["tools"] = [*edited["tools"][:3], retired]
        edited["model"]["name"] = "another-model"
        file.write_text(json.dumps(edited))
        _resume_refused(
            run,
            "other tools (added: add_days, weekday, lookup; removed: retired; changed: "
            "calculator); "
            "another model: 'another-model' then, 'stub-model' now",
        )
        file.write_text(original)
        with prepare_run(RolloutConfig(), api_key=API_KEY, resume=run):
            pass  # restored: the run resumes


def test_a_resume_whose_mcp_server_offers_other_tools_is_refused(tmp_path: Path) -> None:
    servers = mcp_servers_file(tmp_path / "servers.json", tools=["echo", "add"])
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", mcp=str(servers), n=1)
        mcp_servers_file(tmp_path / "servers.json", tools=["echo"])
        _resume_refused(run, "other tools (removed: add)")


def test_a_run_made_before_provenance_gets_it_on_resume(tmp_path: Path) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=2)
        (run / "provenance.json").unlink()
        with prepare_run(RolloutConfig(), api_key=API_KEY, resume=run):
            pass
    provenance = read_provenance(run)
    assert provenance is not None
    assert provenance.episodes_before == 2 and provenance.resumed == []
    assert provenance.describe()[-1] == (
        "note         recorded on a resume: the first 2 episodes were played before rk-agent "
        "recorded this"
    )


def test_show_prints_what_the_model_saw(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rk_agent.cli.app import app

    servers = mcp_servers_file(tmp_path / "servers.json", tools=["echo"])
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", mcp=str(servers), n=1)
    result = CliRunner().invoke(app, ["show", str(run), "--limit", "0"], terminal_width=200)
    assert result.exit_code == 0, result.output
    block = result.output[result.output.index("What the model saw") :].splitlines()
    versions = ", ".join(
        f"{k} {v}" for k, v in {"python": platform.python_version(), **package_versions()}.items()
    )
    assert [line.rstrip() for line in block[:9]] == [
        "What the model saw (provenance.json)",
        f"  model        stub-model (OpenAIPolicy at {server.base_url})",
        "  served as    stub-model",
        "  weights      - (fingerprint); chat template - (sha256)",
        "  tool calls   native",
        "  tools        7 (echo from MCP server 'fixture'): calculator, convert_units, "
        "days_between, add_days, weekday, lookup, echo",
        "  sampling     temperature 0.7, top_p 1.0, max_tokens 256; seed 0 (task i: seed + i)",
        "  env          tools (rk_agent.envs.tools_env:ToolsEnv)",
        f"  versions     {versions}",
    ]


def test_a_local_models_weights_and_template_are_fingerprinted(
    tmp_path: Path, embedded_tok: Any
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    assert weights_fingerprint(folder) is None  # no weight files
    weights = folder / "model.safetensors"
    weights.write_bytes(bytes(3 << 20))
    first = weights_fingerprint(folder)
    with weights.open("r+b") as handle:  # a byte in the middle: not seen (it is cheap)
        handle.seek(3 << 19)
        handle.write(b"\x01")
    assert weights_fingerprint(folder) == first
    with weights.open("r+b") as handle:  # the last MiB is read
        handle.seek((3 << 20) - 1)
        handle.write(b"\x01")
    assert weights_fingerprint(folder) not in (first, None)
    assert template_sha256(embedded_tok.chat_template) == template_sha256(
        str(embedded_tok.chat_template)
    )
    assert template_sha256(None) is None


def test_docstring_examples_run() -> None:
    import doctest

    from rk_agent.runs import provenance

    result = doctest.testmod(provenance)
    assert result.attempted > 0 and result.failed == 0


SHOP = "tests/envs/varying_tools.py::ShopEnv"


def _names(tools: list[dict[str, Any]] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or []]


def test_tools_that_vary_are_sent_and_recorded_turn_by_turn(tmp_path: Path) -> None:
    from rk_agent.runs.provenance import ToolChange

    reply = call_first_tool_then_answer("done", tool_turns=3)
    with StubServer(reply, api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env=SHOP, n=4, max_turns=5)
        sent = [_names(request.body.get("tools")) for request in server.chat_requests]
    provenance = read_provenance(run)
    assert provenance is not None
    assert (provenance.env.tool_scope, provenance.tools) == ("turn", [])
    assert any("they differ per turn: each episode records its own" in line
               for line in provenance.describe())  # fmt: skip
    episodes = sorted(read_trajectories(run), key=lambda t: t.task_index)
    assert len(sent) == 4 * len(episodes)  # one request per turn, episodes one after the other
    for index, trajectory in enumerate(episodes):
        own = trajectory.task.metadata["kind"]
        assert sent[4 * index : 4 * index + 4] == [[own], [own], [own, "order"], [own, "order"]]
        seen = trajectory.provenance
        assert seen is not None and _names(seen.tools) == [own]
        assert seen.tool_changes is not None and len(seen.tool_changes) == 1
        assert seen.tool_changes[0].turn == 2 and _names(seen.tool_changes[0].tools) == [
            own, "order",
        ]  # fmt: skip
        offered = [_names(trajectory.offered_tools(t.index, provenance.tools))
                   for t in trajectory.turns]  # fmt: skip
        assert offered == sent[4 * index : 4 * index + 4]
        assert isinstance(seen.tool_changes[0], ToolChange)


def test_an_episode_record_without_tool_changes_still_loads() -> None:
    old = EpisodeProvenance.model_validate({"tools": [{"type": "function", "function": {
        "name": "a"}}], "tool_call_format": "native"})  # fmt: skip
    assert old.tool_changes is None
    assert _names(old.tools_at(3, [])) == ["a"]
    assert EpisodeProvenance().tools_at(2, [{"function": {"name": "b"}}]) == [
        {"function": {"name": "b"}}
    ]
