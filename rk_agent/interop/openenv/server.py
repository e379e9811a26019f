"""Any rk-agent environment served as an OpenEnv server (``rk-agent openenv serve``).

`OpenEnvApp` is an ASGI application (Starlette) that speaks OpenEnv 0.10.0's protocol
(`rk_agent.interop.openenv.wire`), so that OpenEnv's own clients (``GenericEnvClient``,
``MCPToolClient``) and the trainers that drive them play rk-agent's environments:

- ``/ws``: one session per WebSocket, one environment per session (built when the socket
  opens, closed when it closes); ``reset`` (``seed``, ``task_index``), ``step``, ``state``,
  ``mcp`` (JSON-RPC ``tools/list`` and ``tools/call``) and ``close``. ``?session_id=`` attaches
  the socket to a session made with ``openenv/session/create`` (``MCPToolClient`` does);
- an action is ``{"message": text}`` (a reply without tool calls), ``{"type": "call_tool",
  "tool_name": ..., "arguments": {...}}`` (a reply with that one tool call) or ``{"type":
  "list_tools"}``: each ``message`` or ``call_tool`` step is one turn of the rk-agent episode,
  scored as rk-agent scores it (``reward``: the turn's step score, plus the episode's score on
  the last turn, as ``ChatEnv.step`` returns it; ``done``: the episode ended). An episode whose
  score is invalid ends with ``reward: null`` and ``metadata.reward_valid: false``, never a 0;
- the observation holds ``messages`` (what the environment added, OpenAI chat messages; at the
  reset, the opening), ``prompt`` and ``episode_tools`` (at the reset: the opening as text,
  and the episode's tools as ``list_tools`` lists them, which spares a client that step),
  and for tool calls MCP's ``tool_name``, ``result`` (``content``, ``data``, ``is_error``)
  and ``error``;
- ``GET /schema``, ``/health`` (with the sessions open, made so far and allowed), ``/metadata``,
  ``/state``; ``POST /reset`` (an opening, from a fresh environment); ``POST /step`` answers 409:
  as in OpenEnv, each HTTP request would get a fresh environment, so episodes are played over
  ``/ws``; ``POST /mcp`` (JSON-RPC: ``tools/list``, ``tools/call``, ``openenv/session/create``
  and ``openenv/session/close``).

Sessions are bounded: at most ``max_sessions`` at once (one more is refused with OpenEnv's
``CAPACITY_REACHED``), and one idle for ``idle_timeout_s`` is closed (its socket too). Where the
server may listen, its token and its Host/Origin checks are `rk_agent.interop.openenv.serve`'s.

Main names: `OpenEnvApp`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rk_agent.daemon_threads import DaemonThreads
from rk_agent.envs.base import ChatEnv
from rk_agent.envs.tool import ToolResult
from rk_agent.interop.openenv.answers import (
    SCHEMA,
    error_frame,
    observation_frame,
    opening,
    rpc_error,
    state_of,
    tool_result_payload,
    tools_of,
    turn_answer,
)
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = ["OpenEnvApp"]

_threads = DaemonThreads(max_threads=64, name="rk-openenv-serve")
_ACTIONS = (
    '{"message": TEXT}, {"type": "call_tool", "tool_name": NAME, "arguments": {...}} or '
    '{"type": "list_tools"}'
)


class _Refused(Exception):
    """An action or message the protocol does not allow (answered, not raised further)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Session:
    id: str
    env: ChatEnv
    last_active: float = field(default_factory=time.monotonic)
    steps: int = 0
    episode_id: str | None = None
    socket: Any = None  # the WebSocket using it, if any
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class OpenEnvApp:
    """An ASGI app serving one rk-agent environment over OpenEnv's protocol.

    Args:
        make_env: builds one environment (one per session).
        name: the environment's name (``/metadata``).
        max_sessions: sessions at once; one more is refused.
        idle_timeout_s: a session idle this long is closed.

    Example:
        >>> from rk_agent.envs.env_setup import EnvSetup
        >>> app = OpenEnvApp(EnvSetup(name="tools").make, name="tools")  # uvicorn.run(app, ...)
    """

    def __init__(
        self,
        make_env: Callable[[], ChatEnv],
        *,
        name: str,
        max_sessions: int = 64,
        idle_timeout_s: float = 600.0,
    ) -> None:
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.make_env = make_env
        self.name = name
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.sessions: dict[str, _Session] = {}
        self.opened = 0  # sessions made so far (closed = opened - len(sessions))
        self._reaper: asyncio.Task[None] | None = None
        routes = [
            Route("/health", self._health, methods=["GET"]),
            Route("/schema", self._schema, methods=["GET"]),
            Route("/metadata", self._metadata, methods=["GET"]),
            Route("/state", self._state, methods=["GET"]),
            Route("/reset", self._reset, methods=["POST"]),
            Route("/step", self._step, methods=["POST"]),
            Route("/mcp", self._mcp_http, methods=["POST"]),
        ]
        self.app = Starlette(routes=routes, lifespan=self._lifespan)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and scope.get("path") == "/ws":
            await self._ws(_Socket(scope, receive, send))  # bare ASGI: the hot path
            return
        await self.app(scope, receive, send)

    # ---------------------------------------------------------------- sessions

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        self._reaper = asyncio.get_running_loop().create_task(self._reap())
        try:
            yield
        finally:
            self._reaper.cancel()
            for session_id in list(self.sessions):
                await self._destroy(session_id)

    async def _create(self) -> _Session:
        if len(self.sessions) >= self.max_sessions:
            raise _Refused(
                "CAPACITY_REACHED",
                f"the server has {len(self.sessions)} sessions, its most (--max-sessions "
                f"{self.max_sessions}); close one or try again later",
            )
        session = _Session(id=str(uuid.uuid4()), env=None)  # type: ignore[arg-type]
        self.sessions[session.id] = session  # the slot is taken while the env is built
        try:
            session.env = await _build(self.make_env)
        except Exception as exc:
            self.sessions.pop(session.id, None)
            raise _Refused("FACTORY_ERROR", f"could not build the environment: {exc}") from exc
        self.opened += 1
        return session

    async def _destroy(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None or session.env is None:
            return
        if session.socket is not None:
            await session.socket.close(code=1001, reason="session closed")
        with contextlib.suppress(Exception):
            await _env_call(session.env, "close")

    async def _reap(self) -> None:
        interval = max(0.05, min(self.idle_timeout_s / 4, 30.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                idle = now - session.last_active > self.idle_timeout_s
                if idle and session.env is not None and not session.lock.locked():
                    await self._destroy(session.id)

    # ---------------------------------------------------------------- /ws

    async def _ws(self, socket: _Socket) -> None:
        if not await socket.accept():
            return
        attach = socket.query.get("session_id")
        owned = not attach
        try:
            session = await self._create() if owned else self._find(str(attach))
            if session.socket is not None:
                raise _Refused("SESSION_ERROR", f"session {attach} already has a WebSocket")
        except _Refused as exc:
            await socket.send_text(error_frame(exc.code, str(exc)))
            await socket.close(code=1013 if exc.code == "CAPACITY_REACHED" else 1008)
            return
        session.socket = socket
        try:
            while (raw := await socket.receive_text()) is not None:
                session.last_active = time.monotonic()
                try:
                    message = json.loads(raw)
                    if not isinstance(message, dict):
                        raise ValueError("not an object")
                except ValueError as exc:
                    await socket.send_text(error_frame("INVALID_JSON", f"Invalid JSON: {exc}"))
                    continue
                if message.get("type") == "close":
                    break
                async with session.lock:
                    reply = await self._answer(session, message)
                session.last_active = time.monotonic()
                await socket.send_text(json.dumps(reply, ensure_ascii=False))
        finally:
            session.socket = None
            if owned:
                await self._destroy(session.id)
            await socket.close()

    async def _answer(self, session: _Session, message: dict[str, Any]) -> dict[str, Any]:
        kind, data = message.get("type"), message.get("data")
        try:
            if kind == "reset":
                return observation_frame(await self._do_reset(session, data))
            if kind == "step":
                if not isinstance(data, dict):
                    raise _Refused("VALIDATION_ERROR", f"a step's data is an action: {_ACTIONS}")
                return observation_frame(await self._do_step(session, data))
            if kind == "state":
                return {"type": "state", "data": _state_of(session)}
            if kind == "mcp":
                return {"type": "mcp", "data": await self._rpc(data, session)}
            raise _Refused("UNKNOWN_TYPE", f"Unknown message type: {kind}")
        except _Refused as exc:
            return {"type": "error", "data": {"message": str(exc), "code": exc.code}}
        except Exception as exc:  # the environment failed: the client reads it, the server goes on
            text = f"{type(exc).__name__}: {exc}"
            return {"type": "error", "data": {"message": text, "code": "EXECUTION_ERROR"}}

    async def _do_reset(self, session: _Session, data: Any) -> dict[str, Any]:
        data = data if isinstance(data, Mapping) else {}
        seed, index = data.get("seed"), data.get("task_index")
        for key, value in (("seed", seed), ("task_index", index)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise _Refused("VALIDATION_ERROR", f"{key} must be an integer, got {value!r}")
        options = {"task_index": index} if index is not None else None
        await _env_call(session.env, "reset", seed=seed, options=options)
        session.episode_id = str(data.get("episode_id") or uuid.uuid4())
        session.steps = 0
        return opening(session.env)

    async def _do_step(self, session: _Session, action: dict[str, Any]) -> dict[str, Any]:
        env = session.env
        kind = action.get("type")
        if kind == "list_tools":
            return {"observation": {"tools": tools_of(env), "metadata": {}}, "reward": None}
        if kind == "call_tool":
            name, arguments = action.get("tool_name"), action.get("arguments", {})
            if not isinstance(name, str) or not isinstance(arguments, dict):
                raise _Refused(
                    "VALIDATION_ERROR", f"call_tool needs a tool_name and arguments: {_ACTIONS}"
                )
            if not any(s["function"]["name"] == name for s in env.tool_schemas):
                error = {"error_type": "tool_not_found", "message": f"Unknown tool: {name!r}"}
                return {"observation": {"tool_name": name, "result": None, "error": error}}
            call = ToolCall(id=f"call_{session.steps}", function=FunctionCall(
                name=name, arguments=json.dumps(arguments, ensure_ascii=False)))  # fmt: skip
            turn = await _env_call(env, "play_turn", Message(role="assistant", tool_calls=[call]))
            session.steps += 1
            return turn_answer(session.env, turn, call_of=name)
        if "message" in action and isinstance(action["message"], str):
            turn = await _env_call(
                env, "play_turn", Message(role="assistant", content=action["message"])
            )
            session.steps += 1
            return turn_answer(session.env, turn)
        raise _Refused("VALIDATION_ERROR", f"unknown action {json.dumps(action)[:200]}: {_ACTIONS}")

    # ---------------------------------------------------------------- MCP (JSON-RPC)

    async def _rpc(self, request: Any, session: _Session | None) -> dict[str, Any]:
        rid = request.get("id") if isinstance(request, dict) else None
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return rpc_error(rid, -32600, "Invalid Request: a JSON-RPC 2.0 object with a method")
        method, params = request["method"], request.get("params") or {}
        if not isinstance(params, dict):
            return rpc_error(rid, -32602, "Params must be an object")
        if method == "openenv/session/create":
            try:
                created = session or await self._create()
            except _Refused as exc:
                return rpc_error(rid, -32000, str(exc))
            return {"jsonrpc": "2.0", "id": rid, "result": {"session_id": created.id}}
        if method == "openenv/session/close":
            target = params.get("session_id")
            if target not in self.sessions:
                return rpc_error(rid, -32602, f"Unknown session_id: {target}")
            await self._destroy(target)
            return {"jsonrpc": "2.0", "id": rid, "result": {"session_id": target, "closed": True}}
        if method not in ("tools/list", "tools/call"):
            return rpc_error(rid, -32601, f"Method not found: {method}")
        fresh = None
        try:
            if session is None and params.get("session_id"):
                session = self._find(str(params["session_id"]))
            env = (
                session.env if session is not None else (fresh := await _threads.run(self.make_env))
            )
            if method == "tools/list":
                tools = [{"name": t["name"], "description": t["description"],
                          "inputSchema": t["input_schema"]} for t in tools_of(env)]  # fmt: skip
                return {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}
            name, arguments = params.get("name"), params.get("arguments") or {}
            if not isinstance(name, str) or not isinstance(arguments, dict):
                return rpc_error(rid, -32602, "tools/call needs a name and object arguments")
            call = ToolCall(
                id="mcp", function=FunctionCall(name=name, arguments=json.dumps(arguments))
            )
            result = await _threads.run(_call_tool, env, call)
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "result": tool_result_payload(result.content, result.ok),
            }
        except _Refused as exc:
            return rpc_error(rid, -32602, str(exc))
        except Exception as exc:
            return rpc_error(rid, -32603, f"{type(exc).__name__}: {exc}")
        finally:
            if session is not None:
                session.last_active = time.monotonic()
            if fresh is not None:
                await _threads.run(fresh.close)

    def _find(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None or session.env is None:
            raise _Refused("SESSION_ERROR", f"Unknown session_id: {session_id}")
        return session

    # ---------------------------------------------------------------- HTTP

    async def _health(self, request: Any) -> Any:
        sessions = {"active": len(self.sessions), "opened": self.opened, "max": self.max_sessions}
        return _json({"status": "healthy", "sessions": sessions})

    async def _metadata(self, request: Any) -> Any:
        from rk_agent import __version__

        env = await _threads.run(self.make_env)
        try:
            doc = (type(env).__doc__ or "").strip().splitlines()
        finally:
            await _threads.run(env.close)
        return _json({"name": self.name, "description": doc[0] if doc else self.name,
                      "version": __version__, "author": "rk-agent"})  # fmt: skip

    async def _schema(self, request: Any) -> Any:
        return _json(SCHEMA)

    async def _state(self, request: Any) -> Any:
        return _json({"episode_id": None, "step_count": 0})

    async def _reset(self, request: Any) -> Any:
        body = await _body(request)
        session = _Session(id="http", env=await _threads.run(self.make_env))
        try:
            out = await self._do_reset(session, body)
        except _Refused as exc:
            return _json({"detail": str(exc)}, 422)
        finally:
            await _threads.run(session.env.close)
        return _json({**out, "reward": None, "done": False})

    async def _step(self, request: Any) -> Any:
        why = (
            "HTTP /step has no episode: each HTTP request gets a fresh environment (as in "
            "OpenEnv); play episodes over the /ws WebSocket"
        )
        return _json({"detail": why}, 409)

    async def _mcp_http(self, request: Any) -> Any:
        body = await _body(request)
        return _json(await self._rpc(body, None))


def _call_tool(env: ChatEnv, call: ToolCall) -> ToolResult:
    """A tool call made over MCP, outside the episode's turns: in the episode when one was
    started (its tools), else one of the environment's own tools."""
    if env._state is not None:
        return env.run_tool(call)
    found = env._tools.get(call.function.name)
    if found is None:
        known = ", ".join(sorted(env._tools)) or "none (start an episode: its tools may differ)"
        return ToolResult(f"Error: there is no tool named {call.function.name!r}. Available: "
                          f"{known}.", ok=False, error_kind="unknown_tool")  # fmt: skip
    return found.run(call.function.arguments)


def _state_of(session: _Session) -> dict[str, Any]:
    return state_of(session.env, session.episode_id, session.steps)


class _Socket:
    """One ASGI WebSocket connection, bare (Starlette's wrapper costs more than it gives on
    the path every step takes)."""

    def __init__(self, scope: Any, receive: Any, send: Any) -> None:
        from urllib.parse import parse_qs

        self._receive, self._send = receive, send
        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        self.query = {k: v[-1] for k, v in query.items()}
        self.closed = False

    async def accept(self) -> bool:
        """Accept the handshake; ``False`` when the client left before it."""
        if (await self._receive())["type"] != "websocket.connect":
            self.closed = True
            return False
        await self._send({"type": "websocket.accept"})
        return True

    async def receive_text(self) -> str | None:
        """The next text message (bytes are decoded); ``None`` once the client is gone."""
        while not self.closed:
            message = await self._receive()
            if message["type"] == "websocket.disconnect":
                self.closed = True
                return None
            if message.get("text") is not None:
                return str(message["text"])
            if message.get("bytes") is not None:
                return bytes(message["bytes"]).decode("utf-8", "replace")
        return None

    async def send_text(self, text: str) -> None:
        if not self.closed:
            try:
                await self._send({"type": "websocket.send", "text": text})
            except Exception:  # the client is gone: the next receive says so
                self.closed = True

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                await self._send({"type": "websocket.close", "code": code, "reason": reason})


async def _body(request: Any) -> Any:
    try:
        return json.loads(await request.body() or b"{}")
    except ValueError:
        return None


def _json(data: Any, status: int = 200) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse(data, status_code=status)


async def _build(make_env: Callable[[], ChatEnv]) -> ChatEnv:
    """``make_env()``, on a worker thread (building may load data or start processes)."""
    return await _threads.run(make_env)


async def _env_call(env: ChatEnv, method: str, *args: Any, **kwargs: Any) -> Any:
    """``env.<method>(...)`` on the loop when the environment declares its steps never block
    (``inline_steps``), else on a worker thread (as the rollout engine does)."""
    call = getattr(env, method)
    if env.inline_steps:
        return call(*args, **kwargs)
    return await _threads.run(call, *args, **kwargs)
