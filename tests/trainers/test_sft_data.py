"""SFT data from real trajectories: loading, filtering, rows, the tool schemas, and the errors."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rk_agent.envs.registry import get_solver, make_env
from rk_agent.errors import ConfigError, DataError, EndpointError, UntrustedRunError
from rk_agent.policies.function_policy import FunctionPolicy, tool_call
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.provenance import EpisodeProvenance, template_sha256
from rk_agent.runs.run_dir import RunDir, trajectory_line
from rk_agent.runs.trajectory import Trajectory
from rk_agent.testing.scripted_policy import ScriptedPolicy
from rk_agent.testing.stub_server import StubServer, call_first_tool_then_answer
from rk_agent.trainers.sft_data import (
    DropReason,
    SFTFilter,
    build_sft_data,
    load_trajectories,
    select_trajectories,
    sft_dataset,
    training_messages,
)
from rk_agent.types import Message
from tests.rollouts.served import (
    API_KEY,
    SIX_SEVENS,
    as_server_renders,
    bare_tasks_file,
    last_request,
    mcp_servers_file,
    play_served,
    text_tool_model,
)

solve = get_solver("tools")


def _question(seed: int) -> str:
    observation, _ = make_env("tools").reset(seed=seed)
    return str(next(m["content"] for m in observation if m["role"] == "user"))


def _play(config: RolloutConfig, policy: Any, run_dir: RunDir | None = None, **env: Any) -> Any:
    return asyncio.run(
        run_rollouts(
            config,
            policy=policy,
            make_env=lambda: make_env("tools", **env),
            env_name="tools",
            run_dir=run_dir,
        )
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 tasks x 2 samples: tasks 0 and 3 solved, task 1 answered wrongly, task 2 failed."""
    wrong, broken = _question(1), _question(2)

    def policy(messages: list[Message], tools: Any) -> Any:
        question = next(m.text for m in messages if m.role == "user")
        if question == wrong:
            return "Answer: 0"
        if question == broken:
            raise EndpointError("model down", status=503)
        return solve(messages, tools)

    config = RolloutConfig(env="tools", n=4, group_size=2, concurrency=1, seed=0)
    path = tmp_path_factory.mktemp("sft") / "run"
    _play(config, FunctionPolicy(policy), RunDir.create(path, config))
    return path


def test_a_run_dir_and_its_file_read_the_same(run: Path) -> None:
    from_dir = load_trajectories(run)
    assert [t.id for t in from_dir] == [f"{i}-{s}" for i in range(4) for s in range(2)]
    assert from_dir == load_trajectories(run / "trajectories.jsonl")
    assert [t.success for t in from_dir] == [True, True, False, False, None, None, True, True]


def test_the_default_filter_keeps_the_solved_episodes(run: Path) -> None:
    data = build_sft_data(run)
    assert str(data.report) == "kept 4 of 8 trajectories (2 failed, 2 unsuccessful)"
    assert data.report.dropped == {DropReason.FAILED: 2, DropReason.UNSUCCESSFUL: 2}
    rows = data.dataset
    assert rows.column_names == [
        "messages", "tools", "task_id", "trajectory_id", "env", "episode_reward",
        "context_messages",
    ]  # fmt: skip
    assert rows["context_messages"] == [0] * 4  # no turn was copied from another episode
    assert rows["trajectory_id"] == ["0-0", "0-1", "3-0", "3-1"]
    assert rows["episode_reward"] == [1.0] * 4
    assert set(rows["env"]) == {"tools"}
    trajectories = {t.id: t for t in load_trajectories(run)}
    assert rows["task_id"] == [trajectories[i].task.id for i in rows["trajectory_id"]]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (SFTFilter(success_only=False), "kept 6 of 8 trajectories (2 failed)"),
        (
            SFTFilter(success_only=False, min_reward=0.5),
            "kept 4 of 8 trajectories (2 failed, 2 below min_reward)",
        ),
        (
            SFTFilter(success_only=False, drop_failed=False),
            "kept 6 of 8 trajectories (2 without an assistant turn)",
        ),
        (
            SFTFilter(success_only=False, drop_failed=False, min_reward=0.0),
            "kept 6 of 8 trajectories (2 without a valid reward)",
        ),
        (
            SFTFilter(max_per_task=1),
            "kept 2 of 8 trajectories (2 failed, 2 unsuccessful, 2 over max_per_task)",
        ),
        (
            SFTFilter(success_only=False, drop_failed=False, max_per_task=5),
            "kept 6 of 8 trajectories (2 without an assistant turn)",
        ),
    ],
)
def test_filter_counts(run: Path, rules: SFTFilter, expected: str) -> None:
    trajectories = load_trajectories(run)
    kept, report = select_trajectories(trajectories, rules)
    assert str(report) == expected
    assert (report.total, report.kept) == (8, len(kept))
    assert [t.id for t in kept] == [t.id for t in trajectories if t.id in {k.id for k in kept}]


def returning(t: Trajectory, value: float) -> Trajectory:
    """``t`` with its episode score set so that its return is ``value``."""
    assert t.episode is not None
    score = value - t.episode_return.steps
    return t.model_copy(update={"episode": t.episode.model_copy(update={"score": score})})


def test_max_per_task_keeps_the_best_returns(run: Path) -> None:
    solved = [t for t in load_trajectories(run) if t.success]
    rewards = {"0-0": 1.0, "0-1": 1.5, "3-0": 1.1, "3-1": 1.1}
    scored = [returning(t, rewards[t.id]) for t in solved]
    assert [t.total_reward for t in scored] == pytest.approx([rewards[t.id] for t in solved])
    kept, report = select_trajectories(scored, SFTFilter(max_per_task=1))
    assert [t.id for t in kept] == ["0-1", "3-0"]  # a tie keeps the first
    assert str(report) == "kept 2 of 4 trajectories (2 over max_per_task)"


def test_an_episode_without_a_return_ranks_last_not_as_zero(run: Path) -> None:
    solved = [t for t in load_trajectories(run) if t.success and t.task_index == 0]
    worse, invalid = returning(solved[0], -1.0), returning(solved[1], 1.0)
    step = invalid.turns[0].model_copy(update={"reward": 0.0, "reward_valid": False})
    invalid = invalid.model_copy(update={"turns": [step, *invalid.turns[1:]]})
    assert invalid.episode_return.value is None  # an invalid step: no return at all
    kept, _ = select_trajectories([invalid, worse], SFTFilter(max_per_task=1))
    assert [t.id for t in kept] == [worse.id]


def test_rows_hold_the_conversation_and_the_environments_tools(run: Path) -> None:
    trajectory = next(t for t in load_trajectories(run) if t.success)
    row = sft_dataset([trajectory])[0]
    assert row["tools"] == make_env("tools").tool_schemas
    assert row["messages"] == training_messages(trajectory)
    roles = [m["role"] for m in row["messages"]]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
    calls = [m for m in row["messages"] if m.get("tool_calls")]
    first_call = trajectory.turns[0].assistant.tool_calls
    assert first_call is not None
    assert calls[0]["tool_calls"][0]["function"] == {
        "name": first_call[0].function.name,
        "arguments": json.loads(first_call[0].function.arguments),
    }
    assert row["messages"][-1]["content"].startswith("Answer: ")


def test_each_message_keeps_exactly_its_own_keys() -> None:
    """Json columns: no key of one tool call leaks into another, and floats keep their digits."""
    config = RolloutConfig(env="tools", n=6, seed=0)
    trajectories = _play(config, FunctionPolicy(solve)).trajectories
    calls = [
        (m.tool_calls[0].function.name, m.tool_calls[0].function.parsed_arguments())  # type: ignore[index]
        for t in trajectories
        for m in _tool_call_turns(t)
    ]
    assert len({tuple(sorted(arguments)) for _, arguments in calls}) > 1  # keys differ
    rows = sft_dataset(trajectories)
    stored = [
        (m["tool_calls"][0]["function"]["name"], m["tool_calls"][0]["function"]["arguments"])
        for messages in rows["messages"]
        for m in messages
        if m.get("tool_calls")
    ]
    assert stored == calls
    precise = _conversation_with_call({"value": 1234.5678901234, "from_unit": "km"})
    [row] = sft_dataset([precise], tools=[])
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == {
        "value": 1234.5678901234,
        "from_unit": "km",
    }


def _tool_call_turns(trajectory: Trajectory) -> list[Message]:
    return [turn.assistant for turn in trajectory.turns if turn.assistant.tool_calls]


def _conversation_with_call(arguments: dict[str, Any]) -> Trajectory:
    policy = ScriptedPolicy([tool_call("convert_units", arguments), "Answer: 1"])
    config = RolloutConfig(env="tools", n=1, seed=0)
    [trajectory] = _play(config, policy).trajectories
    return trajectory.model_copy(update={"success": True})


def test_the_dataset_survives_save_and_load(run: Path, tmp_path: Path) -> None:
    from datasets import load_from_disk

    rows = sft_dataset(run)
    rows.save_to_disk(str(tmp_path / "sft"))
    again = load_from_disk(str(tmp_path / "sft"))
    assert again["messages"] == rows["messages"] and again["tools"] == rows["tools"]


def test_messages_after_the_last_reply_are_cut() -> None:
    config = RolloutConfig(env="tools", n=1, seed=0)
    [trajectory] = _play(config, FunctionPolicy(solve), max_turns=1).trajectories
    assert trajectory.conversation[-1].role == "tool"  # the turn limit came after a call
    messages = training_messages(trajectory)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]


def test_tools_come_from_the_trajectory_env_or_the_override(run: Path, tmp_path: Path) -> None:
    bare = tmp_path / "copied.jsonl"  # no config.yaml next to it
    shutil.copy(run / "trajectories.jsonl", bare)
    assert sft_dataset(bare)[0]["tools"] == make_env("tools").tool_schemas
    assert sft_dataset(bare, tools=[])[0]["tools"] == []
    strange = [t.model_copy(update={"env": "nowhere"}) for t in load_trajectories(run)]
    with pytest.raises(ConfigError, match=re.escape("cannot build environment 'nowhere' to read")):
        sft_dataset(strange)
    with pytest.raises(ConfigError, match=re.escape("Pass tools= with the schemas the episodes")):
        sft_dataset(strange)
    assert len(sft_dataset(strange, tools=[])) == 4


def test_the_tools_of_a_run_from_elsewhere_naming_code_need_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "cache"))
    marker, evil = tmp_path / "IMPORTED", tmp_path / "evil.py"
    evil.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
        "from rk_agent.envs.tools_env import ToolsEnv as Env\n"
    )
    config = RolloutConfig(env=f"{evil}::Env", n=2, concurrency=1)
    mine = tmp_path / "mine"
    _play(config, FunctionPolicy(solve), RunDir.create(mine, config))
    theirs = tmp_path / "theirs"
    shutil.copytree(mine, theirs)  # a copy is not the run that was signed
    wants = f"reading its environment's tools would import {evil} (environment {evil}::Env)."
    with pytest.raises(UntrustedRunError, match=re.escape(wants)):
        build_sft_data(theirs)
    assert not marker.exists()
    assert sft_dataset(theirs, tools=[])[0]["tools"] == []  # nothing to build
    assert sft_dataset(theirs, trust_run=True)[0]["tools"] == make_env("tools").tool_schemas
    assert marker.exists()
    assert len(sft_dataset(mine)) == 2  # this user's own run


def test_the_text_rendered_for_training_shows_the_tools(run: Path, embedded_tok: Any) -> None:
    row = sft_dataset(run)[0]
    text = embedded_tok.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    tools_block = text[text.index("<tools>\n") : text.index("\n</tools>")]
    for schema in make_env("tools").tool_schemas:
        assert json.dumps(schema, ensure_ascii=False) in tools_block
    assert '<tool_call>\n{"name": ' in text and "<tool_response>" in text


def test_a_malformed_line_is_named_by_file_and_line(run: Path, tmp_path: Path) -> None:
    good = (run / "trajectories.jsonl").read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(f"{good[0]}\n\nnot json\n{good[1]}\n")
    with pytest.raises(DataError) as error:
        load_trajectories(broken)
    assert str(error.value) == (
        f"{broken}:3: invalid JSON (Expecting value at column 1): 'not json'"
    )
    assert (error.value.path, error.value.line) == (str(broken), 3)
    broken.write_text(f'{good[0]}\n{{"id": "x"}}\n')
    with pytest.raises(DataError, match=re.escape(f"{broken}:2: not a trajectory: task_index:")):
        load_trajectories(broken)


def test_a_torn_last_line_is_skipped(run: Path, tmp_path: Path) -> None:
    good = (run / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(good[0] + good[1] + good[2][:40])
    assert [t.id for t in load_trajectories(torn)] == ["0-0", "0-1"]
    torn.write_bytes(good[0] + '{"id": "S\u00e3o'.encode()[:-1])  # cut inside a character
    assert [t.id for t in load_trajectories(torn)] == ["0-0"]
    torn.write_bytes(good[0] + good[1].rstrip(b"\n"))  # a whole last line without its newline
    assert [t.id for t in load_trajectories(torn)] == ["0-0", "0-1"]


def test_paths_that_hold_no_trajectories(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_trajectories(tmp_path / "missing")
    assert str(error.value) == (
        f"{tmp_path / 'missing'} does not exist: expected a run directory made by "
        "`rk-agent rollout`, or a trajectories JSONL file."
    )
    with pytest.raises(ConfigError) as error:
        load_trajectories(tmp_path)
    assert str(error.value) == (
        f"{tmp_path} holds no trajectories.jsonl: expected a run directory made by "
        "`rk-agent rollout`, or a trajectories JSONL file."
    )
    empty = RunDir.create(tmp_path / "empty", RolloutConfig(env="tools"))
    with pytest.raises(DataError, match=re.escape("no trajectories to train on (the run is")):
        build_sft_data(empty.path)


def test_a_filter_that_keeps_nothing_says_why(run: Path) -> None:
    with pytest.raises(DataError) as error:
        build_sft_data(run, filter=SFTFilter(min_reward=2.0))
    assert str(error.value) == (
        f"{run}: 0 of 8 trajectories passed the filter (success_only=True, min_reward=2.0, "
        "drop_failed=True, max_per_task=None): 2 failed, 2 unsuccessful, 4 below min_reward. "
        "To keep more: sft_filter: {drop_failed: false} in a --config keeps episodes that "
        "recorded a failure; --include-unsuccessful (sft_filter.success_only: false) keeps "
        "unsolved episodes; a --min-reward below 2.0 keeps lower-scoring episodes; collect more "
        "episodes (solved ones: `rk-agent rollout --provider solver`)."
    )


def test_the_filter_rejects_unknown_settings() -> None:
    with pytest.raises(ValidationError, match="min_rewrd"):
        SFTFilter.model_validate({"min_rewrd": 0.5})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        SFTFilter(max_per_task=0)


def test_docstring_examples() -> None:
    import doctest

    from rk_agent.trainers import sft_data

    failures, tried = doctest.testmod(sft_data)
    assert tried > 0 and failures == 0


# ---------------------------------------------------------------------------- what was sent


def _prompt(tok: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The text a model is prompted with (the chat template, the generation prompt added)."""
    text: str = tok.apply_chat_template(
        messages, tools=tools or None, add_generation_prompt=True, tokenize=False
    )
    return text


def _rendered_equals_sent(run: Path, server_request: dict[str, Any], tok: Any) -> dict[str, Any]:
    """The SFT row of a one-episode run, checked against the last request the server got: the
    same prompt through the embedded model's chat template (the row then adds the reply)."""
    (row,) = sft_dataset(run, filter=SFTFilter(success_only=False))
    sent = _prompt(tok, as_server_renders(server_request["messages"]), server_request.get("tools"))
    assert _prompt(tok, row["messages"][:-1], row["tools"]) == sent
    assert row["messages"][-1]["role"] == "assistant"
    return dict(row)


def test_sft_renders_what_the_policy_was_sent(tmp_path: Path, embedded_tok: Any) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=1)
        row = _rendered_equals_sent(run, last_request(server), embedded_tok)
    assert row["tools"] == make_env("tools").tool_schemas
    assert [m["role"] for m in row["messages"]][-3:] == ["assistant", "tool", "assistant"]


def test_sft_renders_the_system_prompt_the_environment_added(
    tmp_path: Path, embedded_tok: Any
) -> None:
    from rk_agent.envs.tools_env import SYSTEM_PROMPT

    tasks = bare_tasks_file(tmp_path / "tasks.jsonl")  # no system prompt: the env adds its own
    with StubServer(SIX_SEVENS, api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", tasks=str(tasks), n=1)
        request = last_request(server)
    row = _rendered_equals_sent(run, request, embedded_tok)
    assert row["messages"][0] == request["messages"][0] == {
        "role": "system", "content": SYSTEM_PROMPT
    }  # fmt: skip


def test_sft_tokenizes_to_the_ids_the_policy_was_sent(tmp_path: Path, embedded_tok: Any) -> None:
    from tests.runs.test_token_drift import play_bare_task

    run, sent = play_bare_task(tmp_path, embedded_tok)
    rows = sft_dataset(run, filter=SFTFilter(success_only=False))
    assert len(rows) == 2
    for row in rows:
        prompt = _prompt(embedded_tok, row["messages"][:-1], row["tools"])
        assert embedded_tok(prompt, add_special_tokens=False)["input_ids"] == sent[-1]


def test_sft_renders_the_mcp_tools_the_policy_was_offered(
    tmp_path: Path, embedded_tok: Any
) -> None:
    servers = mcp_servers_file(tmp_path / "servers.json", tools=["echo", "add"])
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", mcp=str(servers), n=1)
        row = _rendered_equals_sent(run, last_request(server), embedded_tok)
    assert [s["function"]["name"] for s in row["tools"]][-2:] == ["echo", "add"]
    # Rebuilding the environment, as before runs recorded what was offered, misses them.
    (run / "provenance.json").unlink()
    (rebuilt,) = sft_dataset(run, filter=SFTFilter(success_only=False))
    assert rebuilt["tools"] == make_env("tools").tool_schemas


def test_sft_renders_a_text_tool_call_format_as_it_was_sent(
    tmp_path: Path, embedded_tok: Any
) -> None:
    with StubServer(text_tool_model, api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=1)
        request = last_request(server)
        row = _rendered_equals_sent(run, request, embedded_tok)
    assert "tools" not in request and row["tools"] == []
    assert row["messages"][:-1] == request["messages"]
    assert "<tool_call>" in row["messages"][-3]["content"]  # the call, written as text


def test_sft_renders_an_episode_whose_tools_differed(tmp_path: Path, embedded_tok: Any) -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1"), api_key=API_KEY) as server:
        run = play_served(tmp_path / "run", server, env="tools", n=1)
        request = last_request(server)
    (episode,) = load_trajectories(run)
    fewer = request["tools"][:2]
    episode.provenance = EpisodeProvenance(tools=fewer)
    (run / "trajectories.jsonl").write_text(trajectory_line(episode) + "\n")
    (row,) = sft_dataset(run, filter=SFTFilter(success_only=False))
    assert row["tools"] == fewer


@pytest.mark.slow
def test_sft_renders_what_the_local_model_was_prompted_with(tmp_path: Path) -> None:
    from rk_agent.policies.hf_policy import HFPolicy
    from rk_agent.policies.policy import PolicyOutput, SamplingParams
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.run_dir import RunStatus

    class Recording(HFPolicy):
        prompts: list[str]

        async def generate(
            self, messages: list[Message], tools: Any, sampling: SamplingParams
        ) -> PolicyOutput:
            self.prompts.append(self.render(messages, tools))
            return await super().generate(messages, tools, sampling)

    policy = Recording(device="cpu")
    policy.prompts = []
    config = RolloutConfig.model_validate(
        {"env": "tools", "n": 1, "max_turns": 2, "output": str(tmp_path / "run"),
         "sampling": {"temperature": 0, "max_tokens": 48}}
    )  # fmt: skip
    with prepare_run(config, policy=policy) as prepared:
        asyncio.run(prepared.play())
        prepared.finish(RunStatus.FINISHED)
    (row,) = sft_dataset(tmp_path / "run", filter=SFTFilter(success_only=False))
    assert _prompt(policy.tokenizer, row["messages"][:-1], row["tools"]) == policy.prompts[-1]
    provenance = RunDir.open(tmp_path / "run").read_provenance()
    assert provenance is not None and provenance.tool_call_format == "native"
    assert provenance.model.weights_sha256 is not None
    assert provenance.model.chat_template_sha256 == template_sha256(policy.tokenizer.chat_template)


def test_each_turn_is_rendered_after_the_tools_it_was_offered(
    tmp_path: Path, embedded_tok: Any
) -> None:
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.run_dir import RunStatus
    from tests.envs import varying_tools

    config = RolloutConfig.model_validate(
        {"env": "tests/envs/varying_tools.py::ShopEnv", "n": 3, "concurrency": 1,
         "output": str(tmp_path / "run")}
    )  # fmt: skip
    with prepare_run(config, policy=FunctionPolicy(varying_tools.solve)) as played:
        asyncio.run(played.play())
        played.finish(RunStatus.FINISHED)
    data = build_sft_data(tmp_path / "run")
    assert str(data.report) == "kept 3 of 3 trajectories"
    rows = list(data.dataset)
    assert len(rows) == 6  # two per episode: the tools grew on turn 2
    for first, second in zip(rows[::2], rows[1::2], strict=True):
        assert first["trajectory_id"] == second["trajectory_id"]
        own = "price" if "price" in first["messages"][0]["content"] else "stock"
        assert [t["function"]["name"] for t in first["tools"]] == [own]
        assert [t["function"]["name"] for t in second["tools"]] == [own, "order"]
        assert sum(m["role"] == "assistant" for m in first["messages"]) == 2  # turns 0 and 1
        assert sum(m["role"] == "assistant" for m in second["messages"]) == 4
        texts = [
            embedded_tok.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
            for row in (first, second)
        ]
        blocks = [text[text.index("<tools>\n") : text.index("\n</tools>")] for text in texts]
        assert f'"name": "{own}"' in blocks[0] and '"name": "order"' not in blocks[0]
        assert f'"name": "{own}"' in blocks[1] and '"name": "order"' in blocks[1]
        assert '<tool_call>\n{"name": "order"' in texts[1]


def forked_run(tmp_path: Path) -> Path:
    """A fork of a solved tools episode from its turn 1 (its first reply copied), continued by
    the reference solver: a real run of `rollout --fork`."""
    from tests.rollouts.runs import play_run

    source = play_run(tmp_path / "source", solve, env="tools", n=1)
    return play_run(tmp_path / "fork", solve, fork=f"{source}::0-0@1", group_size=2)


def test_a_forks_copied_turns_are_context_not_training(tmp_path: Path) -> None:
    """Issue 40 item 8: the rows say how many leading messages another policy played."""
    fork = forked_run(tmp_path)
    played = load_trajectories(fork)
    assert [[u.copied_from is not None for u in t.turns][:2] for t in played] == [[True, False]] * 2
    rows = build_sft_data(fork).dataset
    assert len(rows) == 2
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        context = row["context_messages"]
        # system, user, then the copied reply: the context ends on the copied reply.
        assert roles[:context] == ["system", "user", "assistant"]
        assert roles[context:].count("assistant") >= 1  # the fork's own replies are trained

    # A fork that played no turn of its own has nothing to train on.
    only_copied = [
        t.model_copy(update={"turns": t.turns[:1]}) for t in played
    ]  # fmt: skip
    kept, report = select_trajectories(only_copied, SFTFilter(success_only=False))
    assert (kept, report.dropped) == ([], {DropReason.NO_ASSISTANT: 2})
