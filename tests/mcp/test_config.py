"""The mcpServers configuration: the format other MCP clients write, rk-agent's keys, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.mcp.config import McpConfig, SessionMode, load_mcp_config


def test_reads_the_claude_desktop_format_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"A": "1"},
                           "autoApprove": ["read"]},
                    "web": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp",
                            "headers": {"Authorization": "Bearer x"}},
                    "off": {"command": "nothing", "disabled": True},
                }
            }
        )
    )  # fmt: skip
    config = load_mcp_config(path)
    assert sorted(config.servers) == ["fs", "web"]
    fs, web = config.servers["fs"], config.servers["web"]
    assert (fs.transport, fs.args, fs.env) == ("stdio", ["-y", "server-fs", "/tmp"], {"A": "1"})
    assert (web.transport, web.headers) == ("http", {"Authorization": "Bearer x"})
    assert fs.session is SessionMode.SHARED and fs.timeout == 30.0


def test_rk_agent_keys_in_camel_case_and_idempotent_tools() -> None:
    config = load_mcp_config(
        '{"mcpServers": {"kb": {"url": "https://kb.example/mcp", "toolPrefix": "kb_", '
        '"timeout": 5, "tools": ["find"], "idempotentTools": ["find"], "session": "per_episode"}}}'
    )
    kb = config.servers["kb"]
    assert (kb.tool_prefix, kb.timeout, kb.tools) == ("kb_", 5.0, ["find"])
    assert kb.session is SessionMode.PER_EPISODE
    assert kb.is_idempotent("find") and not kb.is_idempotent("write")
    assert (
        load_mcp_config({"a": {"command": "x", "idempotentTools": ["*"]}})
        .servers["a"]
        .is_idempotent("anything")
    )


def test_placeholders_read_the_environment() -> None:
    config = load_mcp_config(
        {"k": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}},
        environ={"TOKEN": "abc"},
    )
    assert config.servers["k"].headers == {"Authorization": "Bearer abc"}
    with pytest.raises(
        ConfigError, match=re.escape("uses ${TOKEN}, but the environment variable TOKEN is not set")
    ):
        load_mcp_config({"k": {"url": "http://h/mcp", "headers": {"X": "${TOKEN}"}}}, environ={})


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        (
            {"k": {"comand": "x"}},
            "server 'k': unknown key 'comand'. Did you mean 'command'? Known keys: type, command,",
        ),
        (
            {"k": {"command": "x", "url": "http://h"}},
            'give either "command" (a stdio server) or "url"',
        ),
        ({"k": {}}, 'give either "command" (a stdio server) or "url"'),
        ({"k": {"type": "sse", "url": "http://h"}}, "the SSE transport is deprecated in MCP"),
        ({"k": {"url": "ftp://h"}}, "url must start with http:// or https://"),
        (
            {"k": {"command": "x", "timeout": 0}},
            "timeout: Input should be greater than 0. Known keys: type,",
        ),
        ({"k k": {"command": "x"}}, "server name 'k k' must be 1-64 letters"),
        ({"k": {"command": "x", "disabled": True}}, "names no enabled server"),
    ],
)
def test_mistakes_say_what_and_where(servers: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_mcp_config({"mcpServers": servers})


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the MCP configuration .*missing\.json"):
        load_mcp_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ConfigError, match=re.escape("bad.json is not valid JSON")):
        load_mcp_config(bad)
    with pytest.raises(ConfigError, match=re.escape('the servers go under the key "mcpServers"')):
        load_mcp_config({"servers": {}})


def test_round_trips_through_json() -> None:
    config = load_mcp_config({"k": {"command": "x", "args": ["1"], "toolPrefix": "p_"}})
    again = McpConfig.model_validate_json(config.model_dump_json(by_alias=True))
    assert again == config
