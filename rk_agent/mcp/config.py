"""The ``mcpServers`` configuration: which MCP servers a run takes tools from, and how.

The format is the one MCP clients already use (Claude Desktop, Cursor, VS Code): a JSON object
whose ``mcpServers`` maps a server's name to either a command started over stdio
(``command``, ``args``, ``env``, ``cwd``) or a streamable-HTTP endpoint (``url``, ``headers``).
rk-agent adds a few optional keys of its own, in the same camelCase style::

    {
      "mcpServers": {
        "kb":     {"command": "python", "args": ["-m", "my_kb_server"], "env": {"KB": "x"}},
        "search": {"url": "http://127.0.0.1:8000/mcp",
                   "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
                   "toolPrefix": "search_", "timeout": 10, "idempotentTools": ["query"]}
      }
    }

``${NAME}`` in ``env``, ``headers`` and ``url`` is read from the environment when the
configuration is loaded, so secrets stay out of the file. Keys other MCP clients write and
rk-agent has no use for (``autoApprove``, ``alwaysAllow``, ``description``) are accepted and
ignored; ``"disabled": true`` leaves a server out.

Main names: `McpConfig`, `McpServerConfig`, `SessionMode`, `load_mcp_config`.

Example:
    >>> config = load_mcp_config({"mcpServers": {"kb": {"command": "python", "args": ["-V"]}}})
    >>> server = config.servers["kb"]
    >>> server.transport, server.timeout, server.session.value
    ('stdio', 30.0, 'shared')
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from rk_agent.errors import ConfigError, did_you_mean, sentence
from rk_agent.secrets import redact

__all__ = ["McpConfig", "McpServerConfig", "SessionMode", "load_mcp_config"]

_IGNORED_KEYS = frozenset({"autoApprove", "alwaysAllow", "description", "disabledTools"})
_TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SessionMode(str, Enum):
    """How episodes share a server's client."""

    SHARED = "shared"
    """One client (one connection, one stdio process) per server for the whole run, shared by
    every concurrent episode. For stateless tools; the default."""
    PER_EPISODE = "per_episode"
    """A fresh client for each episode (a new stdio process, or a new HTTP session), closed when
    the episode's environment resets or closes. For servers that keep per-session state."""


class McpServerConfig(BaseModel):
    """One server of ``mcpServers``: how to reach it and how its tools are offered.

    Attributes:
        type: ``"stdio"`` or ``"http"`` (also spelled ``"streamable-http"``); inferred from
            ``command`` / ``url`` when left out.
        command: the program that runs a stdio server.
        args: its arguments.
        env: variables added to the server's environment (the MCP SDK passes only a safe few
            of ours: ``PATH``, ``HOME``, ...).
        cwd: its working directory.
        url: a streamable-HTTP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: HTTP headers sent with every request (e.g. ``Authorization``); redacted in
            logs and errors.
        timeout: seconds one tool call may take before the model is told it timed out.
        tool_prefix: put before every tool name of this server (``toolPrefix``), to resolve
            a name two servers (or a server and the environment) both use.
        tools: offer only these tools of the server (by their name on the server).
        idempotent_tools: tools that are safe to run twice (``idempotentTools``; ``["*"]`` for
            all): a call of one of them that was in flight when the connection dropped is sent
            again after the reconnect. Any other call is reported to the model as failed, never
            replayed.
        session: `SessionMode`: one shared client (default) or one per episode.
        disabled: leave the server out.
    """

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    type: Literal["stdio", "http"] | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold secrets
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold secrets
    timeout: float = Field(default=30.0, gt=0)
    tool_prefix: str = ""
    tools: list[str] | None = None
    idempotent_tools: list[str] = Field(default_factory=list)
    session: SessionMode = SessionMode.SHARED
    disabled: bool = False

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = {k: v for k, v in data.items() if k not in _IGNORED_KEYS}
        kind = data.get("type")
        if kind is not None:
            if kind == "sse":
                raise ValueError(
                    "the SSE transport is deprecated in MCP and not supported; run the server "
                    'with streamable HTTP and give its "url" (type "http")'
                )
            if kind not in _TRANSPORTS:
                raise ValueError(f"type must be 'stdio' or 'http', got {kind!r}")
            data["type"] = _TRANSPORTS[kind]
        return data

    @model_validator(mode="after")
    def _check(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                'give either "command" (a stdio server) or "url" (a streamable-HTTP server)'
            )
        if self.type is not None and self.type != self.transport:
            raise ValueError(f"type {self.type!r} does not match the {self.transport} fields given")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        if self.tool_prefix and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", self.tool_prefix):
            raise ValueError(
                f"toolPrefix {self.tool_prefix!r} must be 1-32 letters, digits, '_' or '-'"
            )
        return self

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():  # a URL may carry a token
            yield name, redact(value) if name == "url" and isinstance(value, str) else value

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` (``command``) or ``"http"`` (``url``)."""
        return "stdio" if self.command is not None else "http"

    def is_idempotent(self, tool: str) -> bool:
        """Whether a call of ``tool`` (its name on the server) may be sent again."""
        return "*" in self.idempotent_tools or tool in self.idempotent_tools


class McpConfig(BaseModel):
    """A whole ``mcpServers`` file: server name -> `McpServerConfig`.

    Attributes:
        servers: the servers, disabled ones left out (JSON key ``mcpServers``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, McpServerConfig] = Field(alias="mcpServers")


def load_mcp_config(
    source: McpConfig | Mapping[str, Any] | str | Path, *, environ: Mapping[str, str] | None = None
) -> McpConfig:
    """Read an ``mcpServers`` configuration from a file, a mapping or JSON text.

    Args:
        source: a path to a JSON file, the JSON text itself, a mapping (``{"mcpServers":
            {...}}``, or the inner ``{name: server}`` mapping), or an `McpConfig`.
        environ: where ``${NAME}`` placeholders are looked up (default: ``os.environ``).

    Raises:
        ConfigError: the file is missing or not JSON, a server is malformed (the message names
            the server and the key), a placeholder names an unset variable, or no server is
            enabled.
    """
    if isinstance(source, McpConfig):
        return source
    where = "the MCP configuration"
    if isinstance(source, Path) or (
        isinstance(source, str) and not source.lstrip().startswith("{")
    ):
        path = Path(source)
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the MCP configuration {where}: {exc.strerror or exc}. Give the path "
                'of a JSON file holding {"mcpServers": {...}}.'
            ) from exc
        source = text
    if isinstance(source, str):
        try:
            data = json.loads(source)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from exc
    else:
        data = source
    if not isinstance(data, Mapping):
        raise ConfigError(f'{where} must be a JSON object {{"mcpServers": {{...}}}}, got {data!r}.')
    if "mcpServers" not in data:
        if any(key in data for key in ("servers", "mcp_servers", "mcp")):
            raise ConfigError(f'{where}: the servers go under the key "mcpServers".')
        data = {"mcpServers": data}
    servers = data["mcpServers"]
    if not isinstance(servers, Mapping):
        raise ConfigError(f'{where}: "mcpServers" must map server names to servers.')
    extra = sorted(set(data) - {"mcpServers"})
    if extra:
        raise ConfigError(f'{where}: unknown top-level keys {extra}; only "mcpServers" is read.')
    env = os.environ if environ is None else environ
    parsed: dict[str, McpServerConfig] = {}
    for name, raw in servers.items():
        if not _NAME.fullmatch(str(name)):
            raise ConfigError(
                f"{where}: server name {name!r} must be 1-64 letters, digits, '_' or '-'."
            )
        server = _parse_server(str(name), _expand(raw, env, f"{where}, server {name!r}"), where)
        if not server.disabled:
            parsed[str(name)] = server
    if not parsed:
        raise ConfigError(f'{where} names no enabled server; add one under "mcpServers".')
    return McpConfig(mcpServers=parsed)


def _parse_server(name: str, raw: Any, where: str) -> McpServerConfig:
    try:
        return McpServerConfig.model_validate(raw)
    except ValidationError as exc:
        known = [to_camel(field) for field in McpServerConfig.model_fields]
        problems = []
        for error in exc.errors():
            location = ".".join(str(part) for part in error["loc"])
            if error["type"] == "extra_forbidden":
                key = str(error["loc"][-1])
                problems.append(f"unknown key {key!r}.{did_you_mean(key, known)}")
            else:
                message = error["msg"].removeprefix("Value error, ")
                problems.append(f"{location}: {message}" if location else message)
        raise ConfigError(
            f"{where}, server {name!r}: "
            + sentence("; ".join(problems))
            + f" Known keys: {', '.join(known)}."
        ) from None


def _expand(value: Any, environ: Mapping[str, str], where: str) -> Any:
    """``${NAME}`` placeholders in strings replaced by environment variables."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ConfigError(
                    f"{where} uses ${{{name}}}, but the environment variable {name} is not set. "
                    "Set it, or write the value in the file."
                )
            return environ[name]

        return _VARIABLE.sub(replace, value)
    if isinstance(value, Mapping):
        return {key: _expand(item, environ, where) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item, environ, where) for item in value]
    return value
