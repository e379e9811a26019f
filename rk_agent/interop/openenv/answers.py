"""What ``rk-agent openenv serve`` answers, in OpenEnv 0.10.0's shapes: its ``/schema``, the
observation of a reset and of each turn, a tool's result, a session's state, errors.

Main names: `SCHEMA`, `opening`, `turn_answer`, `tools_of`, `tool_result_payload`,
`observation_frame`, `state_of`, `rpc_error`, `error_frame`.
"""

from __future__ import annotations

import json
from typing import Any

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.turn import TurnResult
from rk_agent.types import EvaluateResult

__all__ = [
    "SCHEMA",
    "error_frame",
    "observation_frame",
    "opening",
    "rpc_error",
    "state_of",
    "tool_result_payload",
    "tools_of",
    "turn_answer",
]


SCHEMA: dict[str, Any] = {
    "action": {
        "anyOf": [
            {"title": "MessageAction", "type": "object", "additionalProperties": False,
             "properties": {"message": {"type": "string", "description": "a reply without "
                                        "tool calls"}, "metadata": {"type": "object"}},
             "required": ["message"]},
            {"title": "CallToolAction", "type": "object", "additionalProperties": False,
             "properties": {"type": {"const": "call_tool", "default": "call_tool",
                                     "type": "string"},
                            "tool_name": {"type": "string"}, "arguments": {"type": "object"},
                            "metadata": {"type": "object"}},
             "required": ["tool_name"]},
            {"title": "ListToolsAction", "type": "object", "additionalProperties": False,
             "properties": {"type": {"const": "list_tools", "default": "list_tools",
                                     "type": "string"}, "metadata": {"type": "object"}}},
        ]
    },
    "observation": {
        "title": "RkObservation", "type": "object",
        "properties": {
            "done": {"type": "boolean"}, "reward": {"type": ["number", "null"]},
            "metadata": {"type": "object"},
            "messages": {"type": "array", "items": {"type": "object"}},
            "prompt": {"type": "string"}, "tools": {"type": "array"},
            "episode_tools": {"type": "array"},
            "tool_name": {"type": "string"}, "result": {}, "error": {},
        },
    },
    "state": {
        "title": "RkState", "type": "object",
        "properties": {"episode_id": {"type": ["string", "null"]},
                       "step_count": {"type": "integer", "minimum": 0},
                       "turn": {"type": "integer"}, "done": {"type": "boolean"},
                       "task_id": {"type": ["string", "null"]}},
    },
}  # fmt: skip
"""What ``GET /schema`` answers: the actions, the observation and the state."""


def tools_of(env: ChatEnv) -> list[dict[str, Any]]:
    """The tools offered now, as OpenEnv lists them (``input_schema``)."""
    return [
        {"name": f["name"], "description": f.get("description", ""),
         "input_schema": f.get("parameters") or {"type": "object", "properties": {}}}
        for f in (s["function"] for s in env.tool_schemas)
    ]  # fmt: skip


def opening(env: ChatEnv) -> dict[str, Any]:
    """The reset's answer: the opening as chat messages and as text, and the episode's tools
    as ``list_tools`` lists them, as ``episode_tools`` (so that a client need not ask with a
    step of its own; not ``tools``, which OpenEnv's ``MCPToolClient`` reads as the answer of a
    ``list_tools``)."""
    messages = env.conversation
    prompt = "\n\n".join(m.text for m in messages if m.role in ("system", "user"))
    task = env.task
    return {
        "observation": {"messages": [m.to_openai() for m in messages], "prompt": prompt,
                        "episode_tools": tools_of(env), "metadata": {"task_id": task.id}},
        "reward": None, "done": False, "metadata": {"task_id": task.id},
    }  # fmt: skip


def turn_answer(env: ChatEnv, turn: TurnResult, call_of: str | None = None) -> dict[str, Any]:
    """One turn's observation, reward and metadata (``call_of``: the tool it called)."""
    added = [m.to_openai() for m in turn.messages]
    observation: dict[str, Any] = {"messages": added, "metadata": {}}
    if call_of is not None:
        record = turn.tool_calls[0] if turn.tool_calls else None
        content = record.result.content if record is not None else ""
        ok = record is None or record.result.ok
        observation.update(tool_name=call_of, result=tool_result_payload(content, ok), error=None)
    step = turn.step
    metadata: dict[str, Any] = {
        "turn": env.state.turn,
        "step_reward": step.score if step.is_score_valid else None,
    }
    reward: float | None = turn.reward
    if turn.done and turn.episode is not None:
        metadata.update(episode=episode_summary(turn.episode), stop_reason=turn.stop_reason)
        if not turn.episode.is_score_valid:
            reward = None
            metadata.update(reward_valid=False, error=turn.episode.error or turn.episode.reason)
    return {"observation": observation, "reward": reward, "done": turn.done, "metadata": metadata}


def episode_summary(episode: EvaluateResult) -> dict[str, Any]:
    """The episode's score, reason and each reward's score (``None`` when invalid)."""
    return {
        "score": episode.score if episode.is_score_valid else None,
        "valid": episode.is_score_valid,
        "reason": episode.reason,
        "metrics": {k: m.score if m.is_score_valid else None for k, m in episode.metrics.items()},
    }


def tool_result_payload(text: str, ok: bool) -> dict[str, Any]:
    """A tool's result in the shape of FastMCP's ``CallToolResult`` (what OpenEnv sends)."""
    return {"content": [{"type": "text", "text": text}], "structured_content": None,
            "data": text, "is_error": not ok}  # fmt: skip


def observation_frame(data: dict[str, Any]) -> dict[str, Any]:
    """An ``observation`` message around ``data`` (no reward, not done, unless it says)."""
    data.setdefault("reward", None)
    data.setdefault("done", False)
    return {"type": "observation", "data": data}


def state_of(env: ChatEnv, episode_id: str | None, steps: int) -> dict[str, Any]:
    """A session's ``state`` answer."""
    state = env._state
    return {
        "episode_id": episode_id, "step_count": steps,
        "turn": state.turn if state is not None else 0,
        "done": state.done if state is not None else False,
        "task_id": state.task.id if state is not None else None,
    }  # fmt: skip


def rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answer."""
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def error_frame(code: str, message: str) -> str:
    """An ``error`` message (OpenEnv's codes: ``CAPACITY_REACHED``, ``VALIDATION_ERROR``, ...)."""
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})
