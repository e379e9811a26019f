"""``rk-agent serve --tls-cert --tls-key --client-ca`` and ``RewardFunction(client_cert=...)``:
HTTPS and mutual TLS on loopback.

Certificates are made in the test with ``trustme``: one CA signs the server's certificate,
another the clients'. A client with a certificate from the client CA scores; one without a
certificate, or with one from another CA, is refused in the TLS handshake.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme

from rk_agent import RewardFunction
from rk_agent.errors import ConfigError, EndpointError
from rk_agent.rewards.remote import ClientTLS, close_remote_clients, post_evaluate
from rk_agent.server import serving, tls_options

CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
SAMPLE = {"messages": CHAT, "ground_truth": "4"}


@dataclass(frozen=True)
class Pki:
    server_ca: Path
    server_cert: Path
    server_key: Path
    client_ca: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # signed by a CA the server does not trust
    stranger_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    server_ca, client_ca, other_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server = server_ca.issue_cert("127.0.0.1", "localhost")
    client = client_ca.issue_cert("trainer@example.com")
    stranger = other_ca.issue_cert("stranger@example.com")
    paths = {name: folder / f"{name}.pem" for name in Pki.__dataclass_fields__}
    server_ca.cert_pem.write_to_path(str(paths["server_ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["server_cert"]))
    server.private_key_pem.write_to_path(str(paths["server_key"]))
    client_ca.cert_pem.write_to_path(str(paths["client_ca"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client_cert"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    stranger.cert_chain_pems[0].write_to_path(str(paths["stranger_cert"]))
    stranger.private_key_pem.write_to_path(str(paths["stranger_key"]))
    return Pki(**paths)


def client_context(pki: Pki, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.server_ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def mtls_server(pki: Pki, tmp_path: Path) -> Iterator[str]:
    """``rk-agent serve`` with mutual TLS as a real process; yields its base URL."""
    rewards = tmp_path / "my_rewards.py"
    rewards.write_text("def exact(response: str, ground_truth: str) -> float:\n"
                       "    return float(response.strip() == ground_truth)\n")  # fmt: skip
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "RK_AGENT_SERVER_API_KEY"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rk_agent", "serve", f"{rewards}::exact", "--port", str(port),
         "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
         "--client-ca", str(pki.client_ca), "--no-access-log"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    good = client_context(pki, pki.client_cert, pki.client_key)
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/health", verify=good, timeout=1)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(process.communicate()[0]) from None
            time.sleep(0.1)
    try:
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert output.startswith(
        f"Serving reward 'exact' at https://127.0.0.1:{port}/evaluate (also /reward, /batch, "
        "/health, /docs); 1 worker, auth on (client certificate)."
    )


def test_a_client_with_a_certificate_from_the_client_ca_scores(mtls_server: str, pki: Pki) -> None:
    url = mtls_server
    good = client_context(pki, pki.client_cert, pki.client_key)
    answer = httpx.post(f"{url}/evaluate", json=SAMPLE, verify=good)
    assert (answer.status_code, answer.json()["score"]) == (200, 1.0)


@pytest.mark.parametrize("who", ["no certificate", "a certificate from another CA"])
def test_a_client_without_a_trusted_certificate_is_refused(
    mtls_server: str, pki: Pki, who: str
) -> None:
    url = mtls_server
    if who == "no certificate":
        context = client_context(pki)
    else:
        context = client_context(pki, pki.stranger_cert, pki.stranger_key)
    with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        httpx.post(f"{url}/evaluate", json=SAMPLE, verify=context)


def test_serving_in_process_with_mutual_tls(pki: Pki) -> None:
    with serving("format", tls_cert=pki.server_cert, tls_key=pki.server_key,
                 client_ca=pki.client_ca) as url:  # fmt: skip
        assert url.startswith("https://127.0.0.1:")
        good = client_context(pki, pki.client_cert, pki.client_key)
        assert httpx.get(f"{url}/health", verify=good).json()["reward"] == "format"
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            httpx.get(f"{url}/health", verify=client_context(pki))


def test_tls_settings_are_checked_before_serving(pki: Pki, tmp_path: Path) -> None:
    half = "--tls-cert needs --tls-key as well: HTTPS takes the server's certificate and its"
    with pytest.raises(ConfigError, match=re.escape(half)):
        tls_options(pki.server_cert, None)
    alone = "--client-ca needs --tls-cert and --tls-key as well"
    with pytest.raises(ConfigError, match=re.escape(alone)):
        tls_options(None, None, pki.client_ca)
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError) as caught:
        tls_options(pki.server_cert, pki.server_key, missing)
    assert str(caught.value) == (
        f"--client-ca {missing}: expected a PEM file, but there is no such file."
    )
    options = tls_options(pki.server_cert, pki.server_key, pki.client_ca)
    assert options["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    assert options["ssl_ca_certs"] == str(pki.client_ca)


def test_tunnel_and_tls_together_are_refused(pki: Pki) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "serve", "format", "--tunnel", "--tls-cert",
         str(pki.server_cert), "--tls-key", str(pki.server_key), "--api-key", "k" * 16],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stderr.strip() == (
        "error: expected --tunnel or --tls-cert, got both: a tunnel ends TLS at its own edge, so "
        "client certificates never reach this server. Use --tunnel with --api-key."
    )


# ------------------------------------------------------------------ the client: RewardFunction


def test_reward_function_with_a_client_certificate_scores(mtls_server: str, pki: Pki) -> None:
    remote = RewardFunction(
        mode="remote", endpoint=f"{mtls_server}/evaluate",
        client_cert=(str(pki.client_cert), str(pki.client_key)), ca_cert=str(pki.server_ca),
    )  # fmt: skip
    assert remote(messages=CHAT, ground_truth="4").score == 1.0
    assert asyncio.run(remote.acall(messages=CHAT, ground_truth="5")).score == 0.0
    # An idle TLS connection held open makes the server wait for it as it stops (asyncio
    # waits up to 30 s for the TLS goodbye): close the shared clients first.
    close_remote_clients()


def test_without_a_client_certificate_the_call_fails_with_an_endpoint_error(
    mtls_server: str, pki: Pki
) -> None:
    with pytest.raises(EndpointError) as caught:
        post_evaluate(f"{mtls_server}/evaluate", SAMPLE, max_retries=0,
                      tls=ClientTLS(ca=str(pki.server_ca)))  # fmt: skip
    assert caught.value.status is None  # refused in the handshake, before any HTTP status


def test_tls_files_that_do_not_load_fail_when_the_reward_is_made(tmp_path: Path) -> None:
    missing = str(tmp_path / "client.pem")
    with pytest.raises(ConfigError) as caught:
        RewardFunction(mode="remote", endpoint="https://127.0.0.1:1/evaluate",
                       client_cert=(missing, missing))  # fmt: skip
    assert str(caught.value).startswith(
        f"cannot load the TLS files (client_cert={missing!r}, key={missing!r}, ca_cert=None): "
    )
    assert str(caught.value).endswith(
        "Expected PEM files: the client certificate and its key, and the CA that signed the "
        "server's certificate."
    )


def test_a_stalled_tls_handshake_is_cut_at_the_head_deadline(pki: Pki) -> None:
    with serving("format", tls_cert=pki.server_cert, tls_key=pki.server_key,
                 header_timeout_s=0.5) as url:  # fmt: skip
        host, port = url.removeprefix("https://").rsplit(":", 1)
        # asyncio's own handshake timeout is 60 s: a close within 30 s is the server's deadline.
        with socket.create_connection((host, int(port)), timeout=30) as stalled:
            stalled.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
            assert stalled.recv(4096) == b""  # closed by the server, not by the timeout
        context = client_context(pki)
        assert httpx.get(f"{url}/health", verify=context).json()["reward"] == "format"


def test_connections_in_their_tls_handshake_count_and_make_room_for_real_clients(
    pki: Pki,
) -> None:
    # Issue 38: idle connections that never sent a ClientHello were outside --max-connections
    # (1,100 of them took every descriptor; 1 of 5 clients with a certificate got through).
    # Now each counts from its accept, and the oldest makes room, as a plain one does.
    limit = 20
    tls = {"tls_cert": pki.server_cert, "tls_key": pki.server_key, "client_ca": pki.client_ca}
    with serving("format", max_connections=limit, header_timeout_s=60, **tls) as url:
        host, port = url.removeprefix("https://").rsplit(":", 1)
        idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(3 * limit)]
        try:
            good = client_context(pki, pki.client_cert, pki.client_key)
            answers = [httpx.get(f"{url}/health", verify=good, timeout=10) for _ in range(5)]
            time.sleep(0.2)
            readable, _, _ = select.select(idle, [], [], 1.0)
            closed = set()
            for sock in readable:  # nothing else comes to a connection that sent nothing
                try:
                    if not sock.recv(4096):
                        closed.add(sock)
                except ConnectionResetError:
                    closed.add(sock)
            still_open = [sock for sock in idle if sock not in closed]
        finally:
            for sock in idle:
                sock.close()
    assert [a.status_code for a in answers] == [200] * 5
    assert len(still_open) <= limit  # the rest were closed, oldest first
    assert set(still_open) <= set(idle[-limit:])
