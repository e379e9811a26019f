"""`check_tokens` on real runs: token ids from the real embedded tokenizer (and, slow, the model).

`TokenizingPolicy` is `HFPolicy` without its model: it renders and encodes the prompt with the
embedded tokenizer's chat template exactly as `HFPolicy` does, writes the tools env's reference
solver's reply as the model writes it (Hermes ``<tool_call>`` blocks), reads it back with
`read_reply` and records the reply's ids with the end-of-turn token, as `HFPolicy` returns them.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.envs.registry import get_solver
from rk_agent.errors import ConfigError
from rk_agent.policies.chat_template import ChatTemplate, read_reply
from rk_agent.policies.policy import PolicyOutput, SamplingParams, Usage
from rk_agent.rollouts.runner import prepare_run
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunStatus, read_trajectories
from rk_agent.runs.token_drift import TokenChecker, check_tokens
from rk_agent.types import Message

SPACED = (", ", ": ")  # how the chat template's `tojson` writes a tool call's JSON
COMPACT = (",", ":")  # a model that writes it without spaces


class TokenizingPolicy(ChatTemplate):
    """The tools env's solver, tokenized as `HFPolicy` records a reply (see the module doc)."""

    def __init__(self, tokenizer: Any, folder: Path, separators: tuple[str, str]) -> None:
        self.tokenizer = tokenizer
        self.native_tools = True
        self.model = str(folder)  # what provenance.json records as the model folder
        self.name = "tokenizing"
        self.separators = separators
        self.solver = get_solver("tools")
        self.im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def written(self, reply: Message) -> str:
        blocks = [
            "<tool_call>\n"
            + json.dumps(
                {"name": call.function.name, "arguments": json.loads(call.function.arguments)},
                separators=self.separators,
            )
            + "\n</tool_call>"
            for call in reply.tool_calls or []
        ]
        return "\n".join(blocks) or reply.text

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, sampling: SamplingParams
    ) -> PolicyOutput:
        text = self.written(Message.coerce(self.solver(messages, tools)))
        reply, finish = read_reply(text, tools, "stop")
        prompt = self.encode(messages, tools)
        ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.im_end]
        return PolicyOutput(
            message=reply.message,
            prompt_token_ids=prompt,
            token_ids=ids,
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(ids)),
            finish_reason=finish,
        )

    async def aclose(self) -> None:
        """Nothing to release."""


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory, embedded_tok: Any) -> Path:
    """The embedded tokenizer saved as a model folder (what a run's provenance names)."""
    folder = tmp_path_factory.mktemp("embedded-tokenizer")
    embedded_tok.save_pretrained(folder)
    return folder


def play(path: Path, tokenizer: Any, folder: Path, separators: tuple[str, str] = SPACED) -> Path:
    """Three episodes of the tools env (three turns each: two tool calls, then the answer)."""
    config = RolloutConfig.model_validate(
        {"env": "tools", "n": 3, "concurrency": 3, "output": str(path)}
    )
    policy = TokenizingPolicy(tokenizer, folder, separators)
    with prepare_run(config, policy=policy) as run:
        asyncio.run(run.play())
        run.summarize()
        run.finish(RunStatus.FINISHED)
    return path


def test_a_run_whose_ids_are_the_templates_has_no_drift(
    tmp_path: Path, embedded_tok: Any, tok_dir: Path
) -> None:
    run = play(tmp_path / "run", embedded_tok, tok_dir)
    assert [len(t.turns) for t in read_trajectories(run)] == [3, 3, 3]
    report = check_tokens(run)
    assert (report.tokenizer, report.note) == (str(tok_dir), None)
    assert (report.episodes, report.episodes_checked, report.turns_checked) == (3, 3, 9)
    assert (report.drifts, report.turns_affected, report.drift_rate) == ([], 0, 0.0)


def test_compact_tool_call_json_drifts_in_the_reply_at_the_first_space(
    tmp_path: Path, embedded_tok: Any, tok_dir: Path
) -> None:
    run = play(tmp_path / "run", embedded_tok, tok_dir, COMPACT)
    report = check_tokens(run)  # drifts by task, sample and turn, whatever the file's order
    # The two tool-call turns of each episode drift; the answers (plain text) do not.
    assert [(d.episode, d.turn, d.part) for d in report.drifts] == [
        (episode, turn, "reply") for episode in ("0-0", "1-0", "2-0") for turn in (0, 1)
    ]
    assert (report.episodes_affected, report.turns_affected, report.drift_rate) == (3, 6, 6 / 9)
    # Where the compact text's ids first differ from the spaced text's: right after `{"name":`.
    turn = next(t for t in read_trajectories(run) if t.id == "0-0").turns[0]
    call = turn.assistant.tool_calls[0].function  # type: ignore[index]
    body = {"name": call.name, "arguments": json.loads(call.arguments)}
    ids = {
        seps: embedded_tok(f"<tool_call>\n{json.dumps(body, separators=seps)}\n</tool_call>")[
            "input_ids"
        ]
        for seps in (COMPACT, SPACED)
    }
    expected = next(i for i, (a, b) in enumerate(zip(*ids.values(), strict=False)) if a != b)
    first = report.drifts[0]
    assert first.position == expected
    assert first.generated == turn.token_ids[max(0, expected - 4) : expected + 6]  # type: ignore[index]
    assert '{"name":"' in first.generated_text
    assert '{"name": "' in first.retokenized_text


def test_a_template_that_renders_tool_results_otherwise_drifts_in_the_prompt(
    tmp_path: Path, embedded_tok: Any, tok_dir: Path
) -> None:
    run = play(tmp_path / "run", embedded_tok, tok_dir)
    other = tmp_path / "other-template"
    embedded_tok.save_pretrained(other)
    config_file = other / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    template = other / "chat_template.jinja"
    source = template.read_text() if template.is_file() else config["chat_template"]
    assert source.count("<tool_response>") >= 1
    changed = source.replace("<tool_response>", "<tool_result>")
    if template.is_file():
        template.write_text(changed)
    else:
        config["chat_template"] = changed
        config_file.write_text(json.dumps(config))
    report = check_tokens(run, other)
    assert report.note is not None and report.note.startswith("the tokenizer's chat template")
    # Turn 0's prompt holds no tool result; turns 1 and 2 follow one.
    assert [(d.episode, d.turn, d.part) for d in report.drifts] == [
        (episode, turn, "prompt") for episode in ("0-0", "1-0", "2-0") for turn in (1, 2)
    ]
    trajectory = next(t for t in read_trajectories(run) if t.id == "0-0")
    drift = report.drifts[0]
    prompt = trajectory.turns[1].prompt_token_ids
    assert prompt is not None
    # The tool result follows a user header; `<tool_` is one token in both templates.
    assert embedded_tok.decode(prompt[: drift.position]).endswith("<|im_start|>user\n<tool_")
    assert "<tool_response>" in drift.generated_text
    assert "<tool_result>" in drift.retokenized_text


def play_bare_task(folder: Path, tokenizer: Any) -> tuple[Path, list[list[int]]]:
    """Two episodes of a `tools` task without a system prompt (the env adds its own at reset),
    played with `VLLMPolicy` against the stub server: the run, and the prompts it was sent."""
    from rk_agent.testing.stub_server import StubServer
    from tests.rollouts.served import SIX_SEVENS, bare_tasks_file, play_token_ids

    tasks = bare_tasks_file(folder / "tasks.jsonl")
    with StubServer(SIX_SEVENS, tokenizer=tokenizer) as server:
        run = play_token_ids(
            folder / "run", server, tokenizer, env="tools", tasks=str(tasks), n=1, group_size=2
        )
        return run, [request.body["prompt"] for request in server.completion_requests]


def test_the_system_prompt_the_environment_added_is_checked_as_it_was_sent(
    tmp_path: Path, embedded_tok: Any, tok_dir: Path
) -> None:
    # Re-rendering the task alone would miss the system prompt: every turn would drift.
    from rk_agent.envs.tools_env import SYSTEM_PROMPT

    run, sent = play_bare_task(tmp_path, embedded_tok)
    episodes = read_trajectories(run)
    assert [len(t.turns) for t in episodes] == [2, 2]
    for trajectory in episodes:
        assert [m.role for m in trajectory.task.messages] == ["user"]
        assert trajectory.opening == [Message(role="system", content=SYSTEM_PROMPT),
                                      *trajectory.task.messages]  # fmt: skip
        assert [turn.prompt_token_ids for turn in trajectory.turns] == sent[:2]  # the same task
    report = check_tokens(run, tok_dir)
    assert (report.episodes_checked, report.turns_checked, report.drifts) == (2, 4, [])


def test_a_run_without_token_ids_says_which_policies_record_them(tmp_path: Path) -> None:
    from tests.rollouts.runs import play_run

    run = play_run(tmp_path / "run", get_solver("math"), env="math", n=2)
    with pytest.raises(ConfigError, match=re.escape(
        f"{run} has no generated token ids in its 2 episodes: only HFPolicy (the local model, "
        "--provider local), VLLMPolicy, and OpenAIPolicy with return_token_ids against a vLLM "
        "server record them. Play the run with one of those."
    )):  # fmt: skip
        check_tokens(run, "embedded")


def test_a_run_that_names_no_model_folder_asks_for_a_tokenizer(tmp_path: Path) -> None:
    from tests.rollouts.runs import play_run

    # (check_tokens says first that this run has no ids: the checker alone asks.)
    run = play_run(tmp_path / "run", get_solver("math"), env="math", n=1)
    with pytest.raises(ConfigError, match=re.escape(
        f"{run} names no model: no tokenizer to re-render its episodes with. Give one with "
        "--tokenizer PATH (a model folder with the tokenizer and chat template the run used) or "
        "--tokenizer embedded."
    )):  # fmt: skip
        TokenChecker(run)


@pytest.mark.slow
def test_a_real_run_of_the_embedded_model_has_no_drift(tmp_path: Path) -> None:
    from rk_agent.policies.hf_policy import HFPolicy

    config = RolloutConfig.model_validate(
        {"env": "tools", "n": 2, "max_turns": 2, "output": str(tmp_path / "run"),
         "sampling": {"temperature": 0, "max_tokens": 24}}
    )  # fmt: skip
    with prepare_run(config, policy=HFPolicy()) as run:
        asyncio.run(run.play())
        run.finish(RunStatus.FINISHED)
    report = check_tokens(tmp_path / "run")
    assert report.episodes_checked == 2
    assert report.turns_checked >= 2
    assert report.drifts == []


def test_each_turn_is_checked_with_the_tools_it_offered(
    tmp_path: Path, embedded_tok: Any, tok_dir: Path
) -> None:
    from rk_agent.runs.token_drift import TemplateRenderer, episode_drift
    from tests.envs import varying_tools

    policy = TokenizingPolicy(embedded_tok, tok_dir, SPACED)
    policy.solver = varying_tools.solve  # tools per task, one more from turn 2 on
    config = RolloutConfig.model_validate(
        {"env": "tests/envs/varying_tools.py::ShopEnv", "n": 2, "concurrency": 2,
         "output": str(tmp_path / "run")}
    )  # fmt: skip
    with prepare_run(config, policy=policy) as run:
        asyncio.run(run.play())
        run.finish(RunStatus.FINISHED)
    report = check_tokens(tmp_path / "run")
    assert (report.episodes_checked, report.turns_checked, report.drifts) == (2, 8, [])
    # Checked with the first turn's tools throughout, turn 2's prompt would drift: it was
    # rendered with the tool added there.
    trajectory = read_trajectories(tmp_path / "run")[0]
    assert trajectory.provenance is not None
    stale = trajectory.model_copy(
        update={"provenance": trajectory.provenance.model_copy(update={"tool_changes": None})}
    )
    first = trajectory.offered_tools(0, [])
    drifts, checked = episode_drift(stale, TemplateRenderer(embedded_tok), first)
    assert checked == 4 and [(d.turn, d.part) for d in drifts] == [(2, "prompt"), (3, "prompt")]
