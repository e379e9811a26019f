"""`rk-agent openenv serve`'s refusals, each one line (the served protocol is tested with OpenEnv's
own clients in tests/interop/openenv/test_server.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.interop.openenv.servers import free_port

ENV = {**os.environ, "COLUMNS": "200"}


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", "openenv", "serve", *args], capture_output=True,
        text=True, env=ENV, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--host", "0.0.0.0"], "error: refusing to serve OpenEnv on 0.0.0.0 without a token: "
         "anyone who can reach this machine could play the environment and call its tools. Set "
         "one with --token-env VAR (clients send 'Authorization: Bearer <token>'), bind --host "
         "127.0.0.1, or pass --allow-public if the network is trusted."),
        (["--env-kwargs", "{oops"], "error: --env-kwargs is not valid JSON (Expecting property "
         "name enclosed in double quotes): '{oops'."),
        (["--token-env", "RK_NO_SUCH_VARIABLE"], "error: --token-env RK_NO_SUCH_VARIABLE: that "
         "environment variable is not set."),
        (["--max-sessions", "0"], "error: --max-sessions must be at least 1 and --idle-timeout "
         "positive; got 0 and 600.0."),
        (["--env", "no_such_env"], "error: unknown environment 'no_such_env'."),
    ],
)  # fmt: skip
def test_a_bad_option_is_one_line(args: list[str], line: str) -> None:
    out = serve("--port", str(free_port()), *args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[0].startswith(line), out.stderr


def test_a_port_in_use_is_one_line() -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = serve("--port", str(port))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"error: cannot serve on 127.0.0.1:{port}: it is already in use (is another server "
        "running?). Pick another port with --port, or stop the process that holds it."
    ]
