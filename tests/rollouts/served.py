"""Real runs against the stub server, for the provenance and SFT tests.

`play_served` plays an environment with `OpenAIPolicy` against a `StubServer` into a run
directory, as ``rk-agent rollout --base-url ... --api-key ...`` does; `mcp_servers_file` writes
an ``mcpServers`` file starting the MCP tests' fixture server (tests/mcp/fixture_server.py)
over stdio, with a secret in its ``env``; `text_tool_model` is a server reply that refuses
native tools and writes its calls as Hermes text; `play_token_ids` plays with `VLLMPolicy`
against the stub's token-id endpoint, the ids from a real tokenizer; `bare_tasks_file` writes a
`tools` task without a system prompt (the environment adds its own at reset), which
`SIX_SEVENS` solves.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from rk_agent.rollouts.runner import prepare_run
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunStatus
from rk_agent.testing.stub_server import Fault, StubServer

API_KEY = "sk-provenance-test-0123456789abcdef"
"""The key the stub server demands; no file of a run may hold it."""

MCP_SECRET = "mcp-secret-value-9876543210"
"""A secret in the MCP server's ``env``; no file of a run may hold it."""

FIXTURE_SERVER = Path(__file__).parents[1] / "mcp" / "fixture_server.py"


def play_served(path: Path, server: StubServer, **config: Any) -> Path:
    """Play a run against ``server`` with `API_KEY` (config: `RolloutConfig` fields)."""
    run_config = RolloutConfig.model_validate(
        {
            "model": "stub-model",
            "base_url": server.base_url,
            "concurrency": 1,
            "max_turns": 4,
            **config,
            "output": str(path),
        }
    )
    with prepare_run(run_config, api_key=API_KEY) as run:
        asyncio.run(run.play())
        run.summarize()
        run.finish(RunStatus.FINISHED)
    return path


def play_token_ids(path: Path, server: StubServer, tokenizer: Any, **config: Any) -> Path:
    """Play a run with `VLLMPolicy` against ``server``, which needs ``tokenizer`` too: prompts
    rendered with its chat template go out as ids, replies come back as its ids."""
    from rk_agent.policies.vllm_policy import VLLMPolicy

    run_config = RolloutConfig.model_validate(
        {"concurrency": 1, "max_turns": 4, **config, "output": str(path)}
    )
    with prepare_run(run_config, policy=VLLMPolicy(server.url, tokenizer)) as run:
        asyncio.run(run.play())
        run.summarize()
        run.finish(RunStatus.FINISHED)
    return path


BARE_TASK = {
    "id": "six-sevens",
    "messages": [{"role": "user", "content": "What is 6 times 7?"}],
    "ground_truth": 42,
    "metadata": {"min_tool_calls": 1},
}
"""A `tools` task with no system prompt: the environment adds its own at reset."""

SIX_SEVENS: list[Any] = [
    {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
    "Answer: 42",
]
"""Server replies that solve `BARE_TASK`: a calculator call, then the answer."""


def bare_tasks_file(path: Path) -> Path:
    """A JSONL file holding `BARE_TASK`."""
    path.write_text(json.dumps(BARE_TASK) + "\n")
    return path


def mcp_servers_file(path: Path, **server: Any) -> Path:
    """An ``mcpServers`` file with the fixture server as ``fixture`` (``server``: more keys)."""
    entry = {
        "command": sys.executable,
        "args": [str(FIXTURE_SERVER)],
        "env": {"FIXTURE_API_TOKEN": MCP_SECRET},
        **server,
    }
    path.write_text(json.dumps({"mcpServers": {"fixture": entry}}))
    return path


def text_tool_model(request: dict[str, Any]) -> Any:
    """A model whose server refuses ``tools``: it calls the calculator once in Hermes text,
    then answers."""
    if request.get("tools"):
        return Fault.http(400, "this model does not support tools")
    messages = request["messages"]
    if sum(m["role"] == "assistant" for m in messages) == 0:
        call = {"name": "calculator", "arguments": {"expression": "2 + 3"}}
        return f"Let me compute.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return "Answer: 5"


def last_request(server: StubServer) -> dict[str, Any]:
    """The body of the last chat request the server answered."""
    body: dict[str, Any] = server.chat_requests[-1].body
    return body


def as_server_renders(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as an OpenAI-compatible server hands them to its chat template: the
    arguments of tool calls decoded from their JSON strings (vLLM, SGLang and transformers
    serve all do)."""
    out = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in message["tool_calls"]
            ]
        out.append(message)
    return out
