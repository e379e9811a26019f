"""``rk-agent openenv serve``: rk-agent's environments played by OpenEnv's own clients.

The server is the real command, in a subprocess; OpenEnv's ``GenericEnvClient`` and
``MCPToolClient`` (openenv 0.10.0, in their own environment, `openenv_client.py`) play it, and
so does rk-agent's ``openenv:`` source. What they see is checked against the same episode
played in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rk_agent.envs.check import play_with_solver
from rk_agent.envs.registry import get_env_class, make_env
from rk_agent.errors import ToolServerError
from rk_agent.interop.openenv.connection import Connection
from tests.interop.openenv.servers import free_port, openenv_python, stop, wait_healthy

HERE = Path(__file__).parent
TOKEN = "openenv-test-token-0123456789abcdef"
TOOL_NAMES = sorted(s["function"]["name"] for s in make_env("tools").tool_schemas)


@contextlib.contextmanager
def served(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, Any]]:
    """``rk-agent openenv serve ARGS`` on a free port: ``(http URL, process)``."""
    port = free_port()
    host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
    process = subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "openenv", "serve", "--port", str(port), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        if host == "127.0.0.1":
            wait_healthy(url, process)
        yield url, process
    finally:
        stop(process)


@pytest.fixture(scope="module")
def tools_url() -> Iterator[str]:
    with served("--env", "tools", "--max-sessions", "8") as (url, _):
        yield url


def openenv_client(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Play ``plan`` with OpenEnv's own client (`openenv_client.py`, in its environment)."""
    out = subprocess.run(
        [str(openenv_python()), str(HERE / "openenv_client.py")], input=json.dumps(plan),
        capture_output=True, text=True, timeout=180, cwd=HERE,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


def solved_locally(seed: int) -> Any:
    """The ``tools`` episode of ``seed`` played in process by its reference solver."""
    env = make_env("tools", max_turns=8)
    solver = get_env_class("tools").reference_solver
    return play_with_solver(env, solver, seed=seed)


def actions_of(played: Any) -> list[dict[str, Any]]:
    """The solver's turns as OpenEnv actions: one ``call_tool`` per call, else the message."""
    out: list[dict[str, Any]] = []
    for message in played.messages:
        if message.role != "assistant":
            continue
        for call in message.tool_calls or []:
            arguments = json.loads(call.function.arguments)
            out.append(
                {"type": "call_tool", "tool_name": call.function.name, "arguments": arguments}
            )
        if not message.tool_calls:
            out.append({"message": message.text})
    return out


def test_openenvs_generic_client_plays_a_served_episode_as_in_process(tools_url: str) -> None:
    local = solved_locally(seed=3)
    assert all(len(m.tool_calls or []) <= 1 for m in local.messages)  # one call a turn
    lines = openenv_client({"url": tools_url, "client": "generic", "seed": 3,
                            "actions": actions_of(local)})  # fmt: skip
    reset, listed, *steps, state = lines
    opening = [m for m in local.messages if m.role in ("system", "user")][:2]
    assert reset["observation"]["messages"] == [m.to_openai() for m in opening]
    assert reset["reward"] is None and reset["done"] is False
    names = [t["name"] for t in listed["observation"]["tools"]]
    assert sorted(names) == TOOL_NAMES
    # The reset lists them too (episode_tools), so that a client need not ask.
    assert reset["observation"]["episode_tools"] == listed["observation"]["tools"]
    tool_texts = [m.text for m in local.messages if m.role == "tool"]
    calls = [s for s in steps if "tool_name" in s["observation"]]
    assert [s["observation"]["result"]["data"] for s in calls] == tool_texts
    assert all(s["observation"]["result"]["is_error"] is False for s in calls)
    step_scores = [o.reward for o in local.episode.step_outputs]  # the tools env's tool shaping
    assert [s["reward"] for s in steps] == [*step_scores[:-1], step_scores[-1] + 1.0]
    assert [s["done"] for s in steps] == [False] * (len(steps) - 1) + [True]
    last = steps[-1]
    assert local.episode.score == 1.0
    assert last["metadata"]["episode"]["score"] == 1.0
    assert last["metadata"]["stop_reason"] == "answered"
    assert state["state"]["step_count"] == len(steps) and state["state"]["done"] is True


def test_openenvs_mcp_tool_client_lists_and_calls_tools_in_a_session(tools_url: str) -> None:
    local = solved_locally(seed=5)
    calls = [a for a in actions_of(local) if a.get("type") == "call_tool"]
    texts = [m.text for m in local.messages if m.role == "tool"]
    # MCPToolClient.call_tool(name, **arguments) cannot pass an argument called "name" (lookup's)
    kept = [(a, t) for a, t in zip(calls, texts, strict=True) if "name" not in a["arguments"]]
    assert kept
    lines = openenv_client({"url": tools_url, "client": "mcp", "seed": 5,
                            "actions": [a for a, _ in kept]})  # fmt: skip
    reset, listed, *results = lines
    assert reset["observation"]["messages"][1]["content"] == local.messages[1].text
    assert sorted(listed["names"]) == TOOL_NAMES
    assert [r["result"] for r in results] == [t for _, t in kept]
    health = httpx.get(f"{tools_url}/health", trust_env=False).json()
    assert health["sessions"]["active"] == 0  # the client closed its HTTP session


def test_rk_agents_own_client_plays_it_back_as_the_same_episode(
    tools_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Any] = []
    request = Connection.request

    def recorded(self: Connection, message: Any) -> dict[str, Any]:
        asked.append(message)
        return request(self, message)

    monkeypatch.setattr(Connection, "request", recorded)
    env = make_env(f"openenv:{tools_url.replace('http', 'ws')}", max_turns=8)
    solver = get_env_class("tools").reference_solver
    try:
        for seed in range(3):
            remote = play_with_solver(env, solver, seed=seed)
            local = play_with_solver(make_env("tools", max_turns=8), solver,
                                     seed=remote.task.metadata["seed"])  # fmt: skip
            assert [m.to_openai() for m in remote.messages] == [
                m.to_openai() for m in local.messages
            ]
            assert remote.episode is not None and local.episode is not None
            assert remote.episode.score == local.episode.score == 1.0
            assert [t["function"]["name"] for t in env.tool_schemas] == [
                t["function"]["name"] for t in make_env("tools").tool_schemas
            ]
    finally:
        env.close()
    # the reset's answer listed the tools: no list_tools step was sent
    assert [m["type"] for m in asked if m["type"] != "step"] == ["reset"] * 3
    assert not [m for m in asked if m.get("data", {}).get("type") == "list_tools"]
    health = httpx.get(f"{tools_url}/health", trust_env=False).json()
    assert health["sessions"]["active"] == 0


def test_http_endpoints_answer_as_openenvs(tools_url: str) -> None:
    schema = httpx.get(f"{tools_url}/schema", trust_env=False).json()
    titles = [a["title"] for a in schema["action"]["anyOf"]]
    assert titles == ["MessageAction", "CallToolAction", "ListToolsAction"]
    reset = httpx.post(f"{tools_url}/reset", json={"seed": 3}, trust_env=False).json()
    assert reset["observation"]["messages"][1]["content"] == solved_locally(3).messages[1].text
    step = httpx.post(f"{tools_url}/step", json={"action": {"message": "hi"}}, trust_env=False)
    assert step.status_code == 409 and "play episodes over the /ws WebSocket" in step.text
    rpc = {"jsonrpc": "2.0", "method": "tools/list", "id": 7}
    listed = httpx.post(f"{tools_url}/mcp", json=rpc, trust_env=False).json()
    assert listed["id"] == 7 and "calculator" in {t["name"] for t in listed["result"]["tools"]}
    called = httpx.post(f"{tools_url}/mcp", trust_env=False, json={
        "jsonrpc": "2.0", "method": "tools/call", "id": 8,
        "params": {"name": "calculator", "arguments": {"expression": "6*7"}}}).json()  # fmt: skip
    assert called["result"]["data"] == "42" and called["result"]["is_error"] is False


def test_a_foreign_host_or_origin_is_refused(tools_url: str) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    port = tools_url.rsplit(":", 1)[1]
    health = f"{tools_url}/health"
    assert httpx.get(health, headers={"Host": f"localhost:{port}"}, trust_env=False).is_success
    wrong_host = httpx.get(health, headers={"Host": f"evil.example:{port}"}, trust_env=False)
    assert (wrong_host.status_code, wrong_host.json()) == (421, {"error": "Invalid Host header"})
    origin = httpx.get(health, headers={"Origin": "http://evil.example"}, trust_env=False)
    assert (origin.status_code, origin.json()) == (403, {"error": "Invalid Origin header"})
    assert httpx.get(health, headers={"Origin": f"http://127.0.0.1:{port}"},
                     trust_env=False).is_success  # fmt: skip

    async def handshake(**kwargs: Any) -> int:
        try:
            async with connect(f"ws://127.0.0.1:{port}/ws", proxy=None, **kwargs):
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(handshake(origin="http://evil.example")) == 403  # type: ignore[arg-type]
    assert asyncio.run(handshake(additional_headers={"Host": "evil.example"})) == 421
    assert asyncio.run(handshake()) == 101


def test_off_loopback_a_token_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rk_agent", "openenv", "serve", "--host", "0.0.0.0", "--port",
         str(free_port())], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: refusing to serve OpenEnv on 0.0.0.0 without a token: anyone who can reach this "
        "machine could play the environment and call its tools. Set one with --token-env VAR "
        "(clients send 'Authorization: Bearer <token>'), bind --host 127.0.0.1, or pass "
        "--allow-public if the network is trusted."
    ]
    with served("--host", "0.0.0.0", "--token-env", "RK_OE_TOKEN", env={"RK_OE_TOKEN": TOKEN}) as (
        url, process,
    ):  # fmt: skip
        monkeypatch.setenv("OPENENV_TOKEN", TOKEN)
        wait_healthy_with_token(url, process)
        refused = httpx.get(f"{url}/health", trust_env=False)
        assert refused.status_code == 401
        lines = openenv_client({"url": url, "client": "generic", "seed": 1, "actions": [],
                                "token": TOKEN})  # fmt: skip
        assert lines[0]["kind"] == "reset" and lines[0]["observation"]["messages"]
        env = make_env(f"openenv:{url}")  # OPENENV_TOKEN is sent
        try:
            assert env.reset(seed=1)[1]["tools"]
        finally:
            env.close()
        monkeypatch.delenv("OPENENV_TOKEN")
        with pytest.raises(
            ToolServerError, match=re.escape("HTTP 401 (set OPENENV_TOKEN")
        ) as caught:
            make_env(f"openenv:{url.replace('127.0.0.1', 'localhost')}")
        assert caught.value.auth


def wait_healthy_with_token(url: str, process: Any) -> None:
    import time

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        with contextlib.suppress(httpx.HTTPError):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            if httpx.get(f"{url}/health", headers=headers, trust_env=False).is_success:
                return
        time.sleep(0.2)
    raise AssertionError("the server did not start")


def test_sessions_are_capped_closed_when_idle_and_on_disconnect() -> None:
    from websockets.asyncio.client import connect

    async def scenario(port: int) -> tuple[list[str], str, int | None]:
        url = f"ws://127.0.0.1:{port}/ws"
        first = await connect(url, proxy=None)
        second = await connect(url, proxy=None)
        third = await connect(url, proxy=None)
        refused = json.loads(await third.recv())
        await third.wait_closed()
        await first.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        opened = json.loads(await first.recv())["type"]
        await second.close()  # a disconnect frees its slot at once
        await asyncio.sleep(0.3)
        fourth = await connect(url, proxy=None)
        await fourth.send(json.dumps({"type": "state"}))
        state = json.loads(await fourth.recv())["type"]
        await first.wait_closed()  # the idle one is closed by the server
        await fourth.close()
        return [opened, state], refused["data"]["code"], first.close_code

    with served("--env", "tools", "--max-sessions", "2", "--idle-timeout", "1.5") as (url, _):
        port = int(url.rsplit(":", 1)[1])
        kinds, refused, code = asyncio.run(asyncio.wait_for(scenario(port), 60))
        assert kinds == ["observation", "state"]
        assert refused == "CAPACITY_REACHED" and code == 1001
        health = httpx.get(f"{url}/health", trust_env=False).json()
        assert health["sessions"]["active"] == 0 and health["sessions"]["opened"] == 3
