"""Which tools an environment offers the model, and when that may change.

Most environments offer the same tools in every episode: their ``@tool`` functions and the tools
of their MCP servers (`ToolScope.ENV`). Environments from elsewhere often do not: BFCL's tasks
each bring one of 20 tool sets, and its ``miss_func`` tasks add a function at a given turn. An
environment says which with ``ChatEnv.tool_scope``, and offers the episode's tools through its
``ChatEnv.episode_tools`` hook, which the environment calls after ``reset`` (scope ``task`` and
``turn``) and after every turn (scope ``turn``). Loops read ``ChatEnv.tool_schemas`` after the
reset and after every turn, and record each change (`rk_agent.runs.provenance.ToolChange`).

`offer` merges an episode's tools with the outside ones into `OfferedTools`: the schemas the
model sees and the `Tool`s the default ``ChatEnv.call_tool`` can run. A tool given as a bare
OpenAI schema (a mapping) is only offered: the environment runs it in its own ``call_tool``
(imported environments do, `rk_agent.envs.imported`).

Main names: `ToolScope`, `OfferedTools`, `offer`, `EpisodeTool`.

Example:
    >>> offered = offer([{"type": "function", "function": {"name": "ls", "description": "List.",
    ...                   "parameters": {"type": "object", "properties": {}}}}], [], "MyEnv")
    >>> [s["function"]["name"] for s in offered.schemas], offered.runnable
    (['ls'], {})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rk_agent.envs.tool import Tool
from rk_agent.errors import EnvError

__all__ = ["EpisodeTool", "OfferedTools", "ToolScope", "offer"]

EpisodeTool = Tool | Mapping[str, Any]
"""A tool an episode offers: a `Tool` (run by ``ChatEnv.call_tool``'s default) or a bare OpenAI
schema ``{"type": "function", "function": {...}}`` (offered only; the environment runs it)."""


class ToolScope(str, Enum):
    """When the tools an environment offers may change (``ChatEnv.tool_scope``)."""

    ENV = "env"
    """The same tools in every episode: the environment's own and its MCP servers' (the
    default; ``episode_tools`` is never called)."""
    TASK = "task"
    """Each task may bring its own tools, the same on every turn of its episode
    (``episode_tools`` is called after ``reset``)."""
    TURN = "turn"
    """The tools may also change between the turns of an episode (``episode_tools`` is called
    after ``reset`` and after every turn that does not end the episode)."""


@dataclass(frozen=True)
class OfferedTools:
    """What the model is offered now.

    Attributes:
        schemas: the OpenAI tool schemas, in order.
        runnable: the `Tool`s among them, by name (what the default ``call_tool`` runs).
    """

    schemas: tuple[dict[str, Any], ...] = ()
    runnable: Mapping[str, Tool] = field(default_factory=dict)


def offer(episode: Sequence[EpisodeTool], outside: Sequence[Tool], env: str) -> OfferedTools:
    """An episode's tools, then the outside ones (MCP servers'), as `OfferedTools`.

    Raises:
        EnvError: a tool is neither a `Tool` nor an OpenAI function schema, or two tools share
            a name.
    """
    schemas: list[dict[str, Any]] = []
    runnable: dict[str, Tool] = {}
    names: set[str] = set()
    for item in [*episode, *outside]:
        if isinstance(item, Tool):
            name, schema = item.name, item.schema
            runnable[name] = item
        else:
            schema = dict(item)
            name = _schema_name(schema, env)
        if name in names:
            raise EnvError(
                f"{env} offers two tools named {name!r} in one episode; give each tool of an "
                'episode its own name (an MCP server\'s a "toolPrefix").'
            )
        names.add(name)
        schemas.append(schema)
    return OfferedTools(tuple(schemas), runnable)


def _schema_name(schema: Mapping[str, Any], env: str) -> str:
    function = schema.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    if schema.get("type") != "function" or not isinstance(name, str) or not name:
        raise EnvError(
            f"{env}.episode_tools gave {str(dict(schema))[:120]}, which is neither a Tool nor an "
            'OpenAI tool schema: expected {"type": "function", "function": {"name": ..., '
            '"description": ..., "parameters": {...}}}.'
        )
    return name
