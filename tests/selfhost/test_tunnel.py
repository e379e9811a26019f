"""``rk-agent serve --tunnel``: the public URL from a tunnel client's output, and its lifetime.

No tunnel service can be reached here, so ``cloudflared`` is a stand-in put first on ``PATH``
that prints a quick tunnel's banner the way cloudflared 2024+ does (on stderr, with the URL
in a box) and then waits to be stopped, recording its argv and pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rk_agent.errors import NotAvailableError
from rk_agent.selfhost.tunnel import NO_TUNNEL_CLIENT, TunnelClient, find_tunnel_client, open_tunnel

KEY = "tunnel-test-key-0123456789"
PUBLIC = "https://seasonal-deck-organisms-sf.trycloudflare.com"
CLOUDFLARED = """#!{python}
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
with open({record!r}, "w") as out:
    json.dump({{"argv": sys.argv[1:], "pid": os.getpid()}}, out)
for line in [
    "INF Thank you for trying Cloudflare Tunnel. ... you should use a pre-created named tunnel "
    "by following: https://developers.cloudflare.com/cloudflare-one/connections/connect-networks",
    "INF Requesting new quick Tunnel on trycloudflare.com...",
    "INF +" + "-" * 92 + "+",
    "INF |  Your quick Tunnel has been created! Visit it at (it may take some time to be "
    "reachable):  |",
    "INF |  {public}                                      |",
    "INF +" + "-" * 92 + "+",
]:
    print("2026-11-25T17:30:00Z " + line, file=sys.stderr, flush=True)
while True:
    time.sleep(0.1)
"""


@pytest.fixture
def cloudflared(tmp_path: Path) -> Path:
    """A folder with the stand-in ``cloudflared``; it records to ``<folder>/record.json``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "cloudflared"
    script.write_text(CLOUDFLARED.format(python=sys.executable, record=str(folder / "record.json"),
                                         public=PUBLIC))  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_open_tunnel_yields_the_url_and_stops_the_client(
    cloudflared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{cloudflared}{os.pathsep}{os.environ['PATH']}")
    client = find_tunnel_client()
    assert client == TunnelClient("cloudflared", str(cloudflared / "cloudflared"))
    with open_tunnel("http://127.0.0.1:8123", client=client) as tunnel:
        assert tunnel.public_url == PUBLIC
        pid = tunnel.process.pid
    assert tunnel.process.returncode == 0  # stopped with SIGTERM, not killed
    assert json.loads((cloudflared / "record.json").read_text()) == {
        "argv": ["tunnel", "--no-autoupdate", "--url", "http://127.0.0.1:8123"], "pid": pid,
    }  # fmt: skip


def test_ngrok_announces_its_url_in_the_started_tunnel_line() -> None:
    ngrok = TunnelClient("ngrok", "/usr/local/bin/ngrok")
    assert ngrok.argv("http://127.0.0.1:8000") == [
        "/usr/local/bin/ngrok", "http", "http://127.0.0.1:8000", "--log", "stdout",
        "--log-format", "logfmt",
    ]  # fmt: skip
    started = (
        't=2026-11-25T17:30:00+0000 lvl=info msg="started tunnel" obj=tunnels name=command_line '
        "addr=http://127.0.0.1:8000 url=https://4f2a-198-51-100-7.ngrok-free.app"
    )
    assert ngrok.public_url(started) == "https://4f2a-198-51-100-7.ngrok-free.app"
    assert ngrok.public_url('lvl=info msg="client session established" url=https://x') is None


def test_with_no_client_installed_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NotAvailableError) as caught:
        find_tunnel_client()
    assert str(caught.value) == (
        "--tunnel needs a tunnel client on PATH, but neither cloudflared nor ngrok is installed. "
        "Install one of them (cloudflared needs no account for a quick tunnel), or serve on a "
        "public address instead: --host 0.0.0.0 with an API key."
    )
    assert str(caught.value) == NO_TUNNEL_CLIENT


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("stopped", ["while serving", "before the server is up"])
def test_serve_tunnel_prints_the_public_url_and_stops_the_client_with_the_server(
    cloudflared: Path, tmp_path: Path, stopped: str
) -> None:
    reward = tmp_path / "my_rewards.py"
    reward.write_text("def exact(response: str) -> float:\n    return 1.0\n")
    port = _free_port()
    env = {**os.environ, "PATH": f"{cloudflared}{os.pathsep}{os.environ['PATH']}",
           "RK_AGENT_SERVER_API_KEY": KEY}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "serve", f"{reward}::exact", "--tunnel",
         "--port", str(port), "--no-access-log"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    lines = [process.stdout.readline(), process.stdout.readline()]
    if stopped == "while serving":
        local = f"http://127.0.0.1:{port}"
        _wait_until_up(local, process)
        # The tunnel forwards requests under its public name: the server answers it (and
        # only it, besides loopback names).
        sample = {"messages": [{"role": "assistant", "content": "4"}]}
        auth = {"Authorization": f"Bearer {KEY}"}
        through = httpx.post(f"{local}/evaluate", json=sample,
                             headers={**auth, "Host": PUBLIC.removeprefix("https://")})  # fmt: skip
        other = httpx.post(f"{local}/evaluate", json=sample,
                           headers={**auth, "Host": "attacker.test"})  # fmt: skip
        assert (through.status_code, other.status_code) == (200, 421)
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=30)
    assert lines == [
        f"Serving reward 'exact' at http://127.0.0.1:{port}/evaluate (also /reward, /batch, "
        "/health, /docs); 1 worker, auth on (bearer key).\n",
        f"Public URL: {PUBLIC}/evaluate (through cloudflared; it stops with the server).\n",
    ], rest
    record = json.loads((cloudflared / "record.json").read_text())
    assert record["argv"] == ["tunnel", "--no-autoupdate", "--url", f"http://127.0.0.1:{port}"]
    deadline = time.monotonic() + 10
    while not _gone(record["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(record["pid"])
    assert KEY not in "".join(lines) + rest


def test_the_tunnel_client_dies_with_a_server_killed_outright(
    cloudflared: Path, tmp_path: Path
) -> None:
    reward = tmp_path / "my_rewards.py"
    reward.write_text("def exact(response: str) -> float:\n    return 1.0\n")
    env = {**os.environ, "PATH": f"{cloudflared}{os.pathsep}{os.environ['PATH']}",
           "RK_AGENT_SERVER_API_KEY": KEY}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "serve", f"{reward}::exact", "--tunnel",
         "--port", str(_free_port()), "--no-access-log"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    lines = [process.stdout.readline(), process.stdout.readline()]
    assert lines[1].startswith("Public URL: "), lines
    process.kill()  # no exit hook, no finally: only the kernel can stop the client now
    process.communicate(timeout=30)
    pid = json.loads((cloudflared / "record.json").read_text())["pid"]
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def _wait_until_up(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/health", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("the server did not start")


def test_serve_tunnel_without_a_key_is_refused(cloudflared: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{cloudflared}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RK_AGENT_SERVER_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "serve", "length", "--tunnel"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: refusing to open a public tunnel without an API key: anyone with the URL could "
        "call the reward. Set a key with --api-key or RK_AGENT_SERVER_API_KEY, or pass "
        "--allow-public."
    )
    assert not (cloudflared / "record.json").exists()  # no tunnel was started


def test_serve_tunnel_with_no_client_installed_fails_before_serving(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path), "RK_AGENT_SERVER_API_KEY": KEY}
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "serve", "length", "--tunnel", "--port",
         str(_free_port())],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {NO_TUNNEL_CLIENT}"
