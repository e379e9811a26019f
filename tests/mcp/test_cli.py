"""The CLI: rk-agent rollout --mcp, rk-agent mcp tools, and no server left behind after Ctrl-C
or a crash of the run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rk_agent.cli.app import app
from rk_agent.runs.trajectory import Trajectory

from .conftest import processes_tagged, stdio_server, wait_until_gone

RK_AGENT = [sys.executable, "-m", "rk_agent"]


def tools_servers(tmp_path: Path, tag: str, *, stubborn: bool = False) -> Path:
    """An mcpServers file running rk-agent's own tools server, its process tagged; with
    ``stubborn``, also a server that outlives the end of its stdin (only a signal stops it)."""
    path = tmp_path / "servers.json"
    server = {
        "command": sys.executable,
        "args": ["-m", "rk_agent", "mcp", "serve", "--env", "tools", "--no-task-tools"],
        "env": {"RK_TEST_TAG": tag},
    }
    servers = {"tools": server}
    if stubborn:
        servers["stubborn"] = stdio_server(tag, ignore_eof=True, tools=["echo"])
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_rollout_with_mcp_servers(tmp_path: Path, tag: str) -> None:
    servers = tools_servers(tmp_path, tag)
    out = tmp_path / "run"
    done = subprocess.run(
        [*RK_AGENT, "rollout", "--env", "mcp_tools", "--mcp", str(servers), "--provider",
         "solver", "--n", "4", "--concurrency", "4", "--output", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    trajectories = [Trajectory.model_validate_json(line) for line in lines]
    assert len(trajectories) == 4 and all(t.success for t in trajectories)
    assert all(call.ok for t in trajectories for turn in t.turns for call in turn.tool_calls)
    assert wait_until_gone(tag) == []


def test_mcp_tools_lists_what_the_model_sees(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"f": stdio_server(tools=["add"], toolPrefix="f_")}}))
    result = CliRunner().invoke(app, ["mcp", "tools", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "f_add" in result.output and "add" in result.output


def _start_long_run(tmp_path: Path, tag: str, *, stubborn: bool) -> subprocess.Popen[str]:
    servers = tools_servers(tmp_path, tag, stubborn=stubborn)
    process = subprocess.Popen(
        [*RK_AGENT, "rollout", "--env", "mcp_tools", "--mcp", str(servers), "--provider",
         "solver", "--n", "100000", "--concurrency", "2", "--output", str(tmp_path / "run")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    # Wait (bounded) until episodes are being played through the server.
    trajectories = tmp_path / "run" / "trajectories.jsonl"
    for _ in range(1200):
        if processes_tagged(tag) and trajectories.exists() and trajectories.stat().st_size:
            break
        if process.poll() is not None:
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert process.poll() is None and processes_tagged(tag), "the run did not get going"
    return process


@pytest.mark.slow  # a subprocess run with MCP servers, then Ctrl-C: ~5 s
def test_ctrl_c_leaves_no_server_behind(tmp_path: Path, tag: str) -> None:
    process = _start_long_run(tmp_path, tag, stubborn=True)
    assert len(processes_tagged(tag)) >= 2
    process.send_signal(signal.SIGINT)
    assert process.wait(120) != 0
    assert wait_until_gone(tag) == []


def test_a_killed_run_leaves_no_server_behind(tmp_path: Path, tag: str) -> None:
    process = _start_long_run(tmp_path, tag, stubborn=False)
    process.kill()  # no handler runs: the server sees its stdin close and exits
    process.wait(30)
    assert wait_until_gone(tag) == []


@pytest.mark.slow  # a subprocess with MCP servers that crashes: ~4 s
def test_a_crashing_program_leaves_no_server_behind(tag: str) -> None:
    program = (
        "from rk_agent.mcp import McpServers\n"
        f"servers = McpServers({{'s': {stdio_server(tag, ignore_eof=True)!r}}}).start()\n"
        "raise RuntimeError('the program crashed')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert "RuntimeError: the program crashed" in done.stderr
    assert wait_until_gone(tag) == []
