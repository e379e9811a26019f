"""OpenEnv's own clients playing a served rk-agent environment (``rk-agent openenv serve``).

Run in the environment that has ``openenv==0.10.0`` (never imported by the tests). Reads a plan
as JSON on stdin, plays it, and prints one JSON line per answer:

    {"url": "http://127.0.0.1:PORT", "client": "generic" | "mcp", "seed": 3, "token": null,
     "actions": [{"type": "call_tool", "tool_name": ..., "arguments": {...}} | {"message": ...}]}

- ``generic``: ``GenericEnvClient`` (``/ws``): reset, the ``list_tools`` step, then every action
  as a step; each line holds the observation, the reward and done.
- ``mcp``: ``MCPToolClient`` in its default (production) mode: an HTTP MCP session
  (``openenv/session/create``), the WebSocket attached to it for the reset, ``list_tools`` and
  ``call_tool`` over ``POST /mcp``, then ``close`` (``openenv/session/close``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient


def emit(**line: Any) -> None:
    print(json.dumps(line, default=str), flush=True)


async def generic(plan: dict[str, Any], headers: dict[str, str] | None) -> None:
    async with GenericEnvClient(base_url=plan["url"], headers=headers) as env:
        result = await env.reset(seed=plan["seed"])
        emit(kind="reset", observation=result.observation, reward=result.reward, done=result.done)
        result = await env.step({"type": "list_tools"})
        emit(kind="list_tools", observation=result.observation)
        for action in plan["actions"]:
            result = await env.step(action)
            emit(kind="step", observation=result.observation, reward=result.reward,
                 done=result.done, metadata=result.metadata)  # fmt: skip
        emit(kind="state", state=await env.state())


async def mcp(plan: dict[str, Any], headers: dict[str, str] | None) -> None:
    async with MCPToolClient(base_url=plan["url"], headers=headers) as env:
        result = await env.reset(seed=plan["seed"])
        emit(kind="reset", observation=result.observation.model_dump())
        tools = await env.list_tools()
        emit(kind="list_tools", names=[t.name for t in tools])
        for action in plan["actions"]:
            if action.get("type") == "call_tool":
                value = await env.call_tool(action["tool_name"], **action["arguments"])
                emit(kind="call_tool", result=value)


def main() -> None:
    plan = json.load(sys.stdin)
    headers = {"Authorization": f"Bearer {plan['token']}"} if plan.get("token") else None
    asyncio.run((generic if plan["client"] == "generic" else mcp)(plan, headers))


if __name__ == "__main__":
    main()
