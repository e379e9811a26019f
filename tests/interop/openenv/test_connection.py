"""`Connection`, one OpenEnv session over a plain socket, against a real WebSocket server.

The server is websockets' own (``websockets.asyncio.server``) on loopback, in a thread, with a
handler each test writes: it can stay silent, ping the client, answer in fragments or with what
is not JSON, which OpenEnv's servers do only when something is wrong.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rk_agent.errors import ToolServerError
from rk_agent.interop.openenv import idle_watch
from rk_agent.interop.openenv.connection import Connection
from rk_agent.interop.openenv.wire import endpoints

Handler = Callable[[Any], Awaitable[None]]


@contextmanager
def ws_server(handler: Handler, **options: Any) -> Iterator[str]:
    """websockets' server running ``handler`` per connection, on a loopback port: its URL."""
    from websockets.asyncio.server import serve

    started = threading.Event()
    found: dict[str, Any] = {}

    async def main() -> None:
        async with serve(handler, "127.0.0.1", 0, compression=None, **options) as server:
            found["port"] = server.sockets[0].getsockname()[1]
            found["stop"] = stop = asyncio.get_running_loop().create_future()
            found["loop"] = asyncio.get_running_loop()
            started.set()
            await stop

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield f"ws://127.0.0.1:{found['port']}"
    finally:
        found["loop"].call_soon_threadsafe(found["stop"].set_result, None)
        thread.join(30)


def connect(url: str, timeout_s: float = 10.0) -> Connection:
    connection = Connection(endpoints(url), token=None, open_timeout_s=10, timeout_s=timeout_s)
    connection.open()
    return connection


async def answer_state(ws: Any) -> None:
    """Answer every message with a ``state`` whose data is the message's ``data``."""
    async for raw in ws:
        message = json.loads(raw)
        await ws.send(json.dumps({"type": "state", "data": message.get("data") or {}}))


def test_answers_in_fragments_and_larger_than_a_read_are_put_back_together() -> None:
    big = "x" * 300_000

    async def handler(ws: Any) -> None:
        async for raw in ws:
            data = json.dumps({"type": "state", "data": {"big": big, "asked": json.loads(raw)}})
            await ws.send([data[:1000], data[1000:150_000], data[150_000:]])  # three frames

    with ws_server(handler) as url:
        connection = connect(url)
        try:
            for n in range(3):
                assert connection.request({"n": n}) == {"big": big, "asked": {"n": n}}
        finally:
            connection.close()


def test_an_idle_connection_answers_the_servers_pings_and_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(idle_watch, "PERIOD_S", 0.1)
    # The server pings every second and drops a client that has not answered in 3 s.
    with ws_server(answer_state, ping_interval=1.0, ping_timeout=3.0) as url:
        kept, unwatched = connect(url), connect(url)
        idle_watch.forget(unwatched)  # as if nothing answered for it: the server drops it
        try:
            time.sleep(6.5)  # idle (the model is thinking): every ping is answered for `kept`
            assert kept.request({"data": {"a": 1}}) == {"a": 1}
            with pytest.raises(ToolServerError, match=re.escape("closed the session (code 1011")):
                unwatched.request({"data": {}})
        finally:
            kept.close()
            unwatched.close()


def test_close_from_another_thread_wakes_a_request_and_ends_the_session() -> None:
    ended = threading.Event()

    async def silent(ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for _ in ws:
                pass  # never answers
        except ConnectionClosed:
            pass  # the client ended the connection without a close frame (it was mid-request)
        ended.set()

    with ws_server(silent) as url:
        connection = connect(url, timeout_s=60)
        failed: list[BaseException] = []

        def ask() -> None:
            try:
                connection.request({"type": "reset"})
            except BaseException as exc:
                failed.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(0.3)
        connection.close()  # from this thread, the request waiting in the other
        asking.join(30)
        assert not asking.is_alive()
        assert [type(e) for e in failed] == [ToolServerError]
        assert "session closed (the environment was closed)" in str(failed[0])
        assert ended.wait(10)  # the server saw the session end
        assert connection.closed
        connection.close()  # again: nothing to do


def test_an_answer_that_is_not_json_breaks_the_session_for_good() -> None:
    async def garbled(ws: Any) -> None:
        async for _ in ws:
            await ws.send("<html>")

    with ws_server(garbled) as url:
        connection = connect(url)
        message = "sent something that is not JSON: b'<html>'"
        for _ in range(2):  # the second request fails the same way, without sending
            with pytest.raises(ToolServerError, match=re.escape(message)):
                connection.request({"type": "state"})
        assert connection.closed
