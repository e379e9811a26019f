"""OpenEnv's wire format, as openenv 0.10.0 serves it, read and written for rk-agent.

What the protocol is (from openenv 0.10.0's ``core/env_server/http_server.py``, ``types.py``,
``mcp_types.py``, ``serialization.py`` and ``core/env_client.py``):

- ``/ws`` is one session per WebSocket: the server builds an environment when the socket opens
  and closes it when the socket closes. The client sends ``{"type": "reset", "data": {"seed":
  ..., ...}}``, ``{"type": "step", "data": ACTION}``, ``{"type": "state"}``, ``{"type":
  "mcp", "data": JSON-RPC}`` and ``{"type": "close"}`` (not answered); the server answers
  ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d,
  "metadata": {...}}}``, ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data":
  {"message": ..., "code": ...}}`` (``CAPACITY_REACHED``, ``VALIDATION_ERROR``,
  ``EXECUTION_ERROR``, ...).
- MCP environments take ``{"type": "list_tools"}`` (an observation ``{"tools": [{name,
  description, input_schema}]}``) and ``{"type": "call_tool", "tool_name": ..., "arguments":
  {...}}`` (``{"tool_name", "result": {content: [{type: "text", text}], data, is_error, ...},
  "error": {error_type, message} | null}``) as steps; other environments take their own action
  (TextArena's ``{"message": "[crane]"}``), which ``GET /schema`` describes.
- ``POST /reset`` and ``POST /step`` build a fresh environment per request: an episode lives
  only in a WebSocket session.

What rk-agent reads from it: `endpoints` (the URLs of a server), `read_action_schema` (whether
it takes tool calls, and which string field is its text action), `observation_messages` (an
observation as the messages a model reads), `tool_schemas`, `listed_tools` (the tools a reset
answer lists, as ``rk-agent openenv serve``'s do: no ``list_tools`` step needed) and
`tool_result`.

Main names: `Endpoints`, `endpoints`, `ActionSchema`, `read_action_schema`,
`observation_messages`, `tool_schemas`, `listed_tools`, `tool_result`, `reward_of`.

Example:
    >>> endpoints("http://127.0.0.1:8000/").ws
    'ws://127.0.0.1:8000/ws'
    >>> read_action_schema({"properties": {"message": {"type": "string"},
    ...                     "metadata": {"type": "object"}}, "required": ["message"]})
    ActionSchema(text_field='message', tools=False)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rk_agent.envs.tool import ToolResult
from rk_agent.errors import ConfigError
from rk_agent.types import Message

__all__ = [
    "ActionSchema",
    "Endpoints",
    "endpoints",
    "listed_tools",
    "observation_messages",
    "read_action_schema",
    "reward_of",
    "tool_result",
    "tool_schemas",
]

_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}
_BASE_FIELDS = frozenset({"metadata", "type"})  # every action has them; neither is the text
_TOOL_ERRORS = {
    "tool_not_found": "unknown_tool",
    "invalid_args": "bad_arguments",
    "timeout": "timeout",
}
_NO_TEXT = "(the environment sent no text)"


@dataclass(frozen=True)
class Endpoints:
    """Where an OpenEnv server answers.

    Attributes:
        url: the server's base URL as written (``ws://host:8000``).
        ws: its WebSocket sessions (``ws://host:8000/ws``).
        http: its HTTP base (``http://host:8000``), for ``/schema`` and ``/health``.
        host: the host name, for messages.
    """

    url: str
    ws: str
    http: str
    host: str


def endpoints(url: str) -> Endpoints:
    """The endpoints of the OpenEnv server at ``url`` (``ws(s)://`` or ``http(s)://``, any
    path prefix; a trailing ``/ws`` is the session endpoint itself and is dropped).

    Raises:
        ConfigError: not such a URL.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ConfigError(
            f"openenv:{url} is not an OpenEnv server's URL: write openenv:ws://HOST:PORT "
            "(or wss://, http://, https://), e.g. openenv:ws://127.0.0.1:8000."
        )
    path = parts.path.rstrip("/")
    if path.endswith("/ws"):
        path = path[: -len("/ws")]
    http = urlunsplit((_SCHEMES[parts.scheme], parts.netloc, path, "", ""))
    ws_scheme = "wss" if _SCHEMES[parts.scheme] == "https" else "ws"
    ws = urlunsplit((ws_scheme, parts.netloc, path + "/ws", parts.query, ""))
    return Endpoints(url=url, ws=ws, http=http, host=parts.hostname)


@dataclass(frozen=True)
class ActionSchema:
    """What a server's actions are, read from its ``/schema``.

    Attributes:
        text_field: the string field of its text action (TextArena's ``message``): a reply
            without tool calls is sent as ``{text_field: reply}``; ``None``: it takes none.
        tools: whether it takes MCP tool calls as steps (``list_tools``, ``call_tool``).
    """

    text_field: str | None
    tools: bool


def read_action_schema(schema: Mapping[str, Any], text_field: str | None = None) -> ActionSchema:
    """What the action JSON schema ``schema`` (``/schema``'s ``action``) accepts.

    It takes tool calls when it is MCP's ``CallToolAction`` or ``ListToolsAction`` (a ``type``
    whose value is ``call_tool`` or ``list_tools``) or the bare ``Action`` (no field but
    ``metadata``), which openenv's server reads MCP actions into. Its text field is the one
    string field of an action (``metadata`` and ``type`` aside), or the one required string
    field where an action has several; a schema of several actions (``anyOf``, ``oneOf``) is
    read action by action. ``text_field`` names it instead (checked against the schema).

    Raises:
        ConfigError: ``text_field`` is not a string field of the schema.
    """
    tools, found, strings = False, [], set()
    for variant in _variants(schema):
        properties = variant.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        kind = properties.get("type")
        if isinstance(kind, Mapping) and {"call_tool", "list_tools"} & _values(kind):
            tools = True
            continue
        names = [name for name in properties if name not in _BASE_FIELDS]
        if not names:
            tools = True  # openenv's bare Action: it reads MCP actions into it
            continue
        text = [n for n in names if _is_string(properties[n])]
        strings.update(text)
        required = set(variant.get("required") or ())
        if len(text) > 1:
            text = [n for n in text if n in required]
        if len(text) == 1:
            found.append(text[0])
    if text_field is not None:
        if text_field not in strings:
            raise ConfigError(
                f"action_field {text_field!r} is not a string field of the server's action "
                f"(its string fields: {', '.join(sorted(strings)) or 'none'})."
            )
        return ActionSchema(text_field=text_field, tools=tools)
    return ActionSchema(text_field=found[0] if len(set(found)) == 1 else None, tools=tools)


def _variants(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The actions a schema allows: itself, or each of its ``anyOf``/``oneOf`` (``$ref``s to
    its ``$defs`` followed)."""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    out = []
    for item in schema.get("anyOf") or schema.get("oneOf") or [schema]:
        if isinstance(item, Mapping) and isinstance(item.get("$ref"), str):
            item = defs.get(item["$ref"].rpartition("/")[2], {})
        if isinstance(item, Mapping):
            out.append(item)
    return out


def _values(prop: Mapping[str, Any]) -> set[Any]:
    values = set(prop.get("enum") or ())
    for key in ("const", "default"):
        if key in prop:
            values.add(prop[key])
    return {v for v in values if isinstance(v, str)}


def _is_string(prop: Any) -> bool:
    if not isinstance(prop, Mapping):
        return False
    kind = prop.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def reward_of(data: Mapping[str, Any]) -> float | None:
    """The reward of an answer's ``data`` (``None``: it carried none). OpenEnv's reward may be
    a bool, an int or a float; anything else counts as none."""
    reward = data.get("reward")
    if isinstance(reward, bool):
        return float(reward)
    if isinstance(reward, (int, float)):
        return float(reward)
    return None


def observation_messages(data: Mapping[str, Any], field: str | None = None) -> list[Message]:
    """An answer's observation as the messages the model reads next.

    In order: ``field`` when given (its text, or its JSON); chat messages, a ``messages`` list
    whose items have a ``role`` and a ``content`` (what ``rk-agent openenv serve`` sends: system
    and user messages are kept, others become user messages); TextArena's messages, a
    ``messages`` list of ``{content}`` (after its ``prompt`` when no message repeats it); else
    the observation's one string field, or its fields as JSON (``metadata``'s when it has no
    other).
    """
    observation = data.get("observation")
    observation = observation if isinstance(observation, Mapping) else {}
    if field is not None:
        value = observation.get(field, (observation.get("metadata") or {}).get(field))
        return [Message(role="user", content=_text(value) or _NO_TEXT)]
    messages = observation.get("messages")
    if isinstance(messages, list) and messages and all(isinstance(m, Mapping) for m in messages):
        if all(isinstance(m.get("role"), str) and "content" in m for m in messages):
            return [_chat_message(m) for m in messages]
        contents = [_text(m.get("content")) for m in messages if "content" in m]
        prompt = observation.get("prompt")
        if isinstance(prompt, str) and prompt.strip() and prompt not in contents:
            contents.insert(0, prompt)
        text = "\n".join(c for c in contents if c)
        if text:
            return [Message(role="user", content=text)]
    return [Message(role="user", content=_fields_text(observation) or _NO_TEXT)]


def _chat_message(item: Mapping[str, Any]) -> Message:
    if item["role"] == "system":
        return Message(role="system", content=_text(item.get("content")))
    return Message(role="user", content=_text(item.get("content")))


def _fields_text(observation: Mapping[str, Any]) -> str:
    fields = {
        k: v
        for k, v in observation.items()
        if k not in ("metadata", "done", "reward") and v not in (None, "", [], {})
    }
    if not fields:
        metadata = observation.get("metadata")
        fields = dict(metadata) if isinstance(metadata, Mapping) else {}
    if len(fields) == 1:
        return _text(next(iter(fields.values())))
    return json.dumps(fields, ensure_ascii=False, sort_keys=True, default=str) if fields else ""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def tool_schemas(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI tool schemas of a ``list_tools`` answer (MCP's ``inputSchema`` or OpenEnv's
    ``input_schema`` as the parameters); ``[]`` when it lists none."""
    observation = data.get("observation")
    tools = observation.get("tools") if isinstance(observation, Mapping) else None
    out = []
    for item in tools if isinstance(tools, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        parameters = item.get("input_schema", item.get("inputSchema"))
        if not isinstance(parameters, Mapping) or not parameters:
            parameters = {"type": "object", "properties": {}}
        out.append(
            {
                "type": "function",
                "function": {
                    "name": item["name"],
                    "description": str(item.get("description") or ""),
                    "parameters": dict(parameters),
                },
            }
        )
    return out


def listed_tools(data: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The OpenAI tool schemas a reset answer lists, when its observation has
    ``episode_tools`` in the shape of a ``list_tools`` answer's ``tools`` (a list of ``{name,
    description, input_schema}``; ``rk-agent openenv serve`` sends them, so that a client need
    not ask); else ``None``: ask with ``list_tools``.

    Example:
        >>> listed_tools({"observation": {"episode_tools": []}})
        []
        >>> listed_tools({"observation": {"episode_tools": ["guess"]}}) is None
        True
    """
    observation = data.get("observation")
    tools = observation.get("episode_tools") if isinstance(observation, Mapping) else None
    if not isinstance(tools, list):
        return None
    for item in tools:
        if not (isinstance(item, Mapping) and isinstance(item.get("name"), str)):
            return None
        if not isinstance(item.get("input_schema", item.get("inputSchema")), Mapping):
            return None
    return tool_schemas({"observation": {"tools": tools}})


def tool_result(data: Mapping[str, Any]) -> ToolResult:
    """A ``call_tool`` answer as the `ToolResult` the model reads: the result's text parts (or
    its data as JSON); an ``error`` (OpenEnv's transport or framework error) or a result whose
    ``is_error`` is set is a failed call."""
    observation = data.get("observation")
    observation = observation if isinstance(observation, Mapping) else {}
    error = observation.get("error")
    if isinstance(error, Mapping) and error:
        kind = _TOOL_ERRORS.get(str(error.get("error_type")), "exception")
        return ToolResult(f"Error: {error.get('message', 'the tool failed')}", False, kind)
    result = observation.get("result")
    if isinstance(result, Mapping):
        content = result.get("content")
        items = content if isinstance(content, list) else []
        texts = [p for p in items if isinstance(p, Mapping) and p.get("type") == "text"]
        parts = [str(p.get("text", "")) for p in texts]
        text = "\n".join(parts)
        if not parts:
            data_value = result.get("data", result.get("structured_content"))
            text = _text(data_value)
        if result.get("is_error") or result.get("isError"):
            return ToolResult(text or "Error: the tool failed", False, "exception")
        return ToolResult(text)
    return ToolResult(_text(result))
