"""A reward server on loopback answers only this machine (issue 38 item 6): requests for other
names get 421, pages of other sites 403, and a scoring endpoint reads JSON only (415).

The browser tests open a page of another site in Debian's chromium (Playwright; skipped
without it): ``attacker.test`` is mapped to ``127.0.0.1`` by the browser's resolver, as DNS
rebinding or any page served from this machine would, and its page posts ``text/plain`` to a
keyless ``code_execution`` server that runs code with no isolation (``--sandbox process``).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rk_agent import reward_function
from rk_agent.server import create_app, load_served_reward, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"
)
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
SAMPLE = {"messages": CHAT, "ground_truth": "4"}
JSON = {"content-type": "application/json"}


@reward_function
def exact(response: str, ground_truth: str) -> float:
    return float(response.strip() == ground_truth)


def raw(url: str, request: bytes) -> tuple[int, dict[str, Any]]:
    """Send one raw request; its status and JSON body."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    return int(data[9:12]), json.loads(data.partition(b"\r\n\r\n")[2])


def post_as(host: str, body: bytes = json.dumps(SAMPLE).encode(), extra: str = "") -> bytes:
    return (
        f"POST /evaluate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_a_request_for_another_name_gets_421_even_health() -> None:
    with serving(exact) as url:
        port = url.rsplit(":", 1)[1]
        rebound = raw(url, post_as(f"attacker.test:{port}"))
        health = raw(url, f"GET /health HTTP/1.1\r\nHost: attacker.test:{port}\r\n\r\n".encode())
        twice = raw(url, post_as("127.0.0.1", extra="Host: attacker.test\r\n"))
        own = [raw(url, post_as(f"{name}:{port}")) for name in ("127.0.0.1", "localhost", "[::1]")]
    assert rebound == (421, {"detail": (
        "this server listens on a loopback address and answers only its loopback names "
        f"(localhost, 127.0.0.1, [::1]), but the request was for 'attacker.test:{port}' (its "
        "Host header): a web page may be trying to reach it under its own name (DNS "
        "rebinding). Call it as http://127.0.0.1:PORT, or start it with --allow-host NAME for "
        "a name of yours (a proxy, a tunnel).")})  # fmt: skip
    assert health[0] == 421 and twice[0] == 421
    assert [status for status, _ in own] == [200, 200, 200]


def test_a_page_of_another_site_gets_403() -> None:
    with serving(exact) as url:
        foreign = raw(url, post_as("127.0.0.1", extra="Origin: https://attacker.test\r\n"))
        null = raw(url, post_as("127.0.0.1", extra="Origin: null\r\n"))
        local = raw(url, post_as("127.0.0.1", extra="Origin: http://localhost:3000\r\n"))
    assert foreign == (403, {"detail": (
        "this server answers only pages of this machine, but the request came from a page of "
        "'https://attacker.test' (its Origin header): a page on another site may not call it. "
        "Call it from a program, or start it with --allow-host NAME for pages served under a "
        "name of yours.")})  # fmt: skip
    assert null[0] == 403
    assert local[0] == 200


def test_allowed_names_and_public_addresses_are_answered() -> None:
    with serving(exact, allowed_hosts=["rewards.example"]) as url:
        named = raw(url, post_as("rewards.example", extra="Origin: https://rewards.example\r\n"))
    with serving(exact, host="0.0.0.0", api_key="k" * 16) as url:
        public = httpx.post(
            url.replace("0.0.0.0", "127.0.0.1") + "/evaluate", json=SAMPLE,
            headers={"Host": "rewards.example", "Authorization": "Bearer " + "k" * 16},
        )  # fmt: skip
    assert named[0] == 200
    assert public.status_code == 200  # a public address: its names are its business


@pytest.mark.parametrize("kind", ["text/plain", None, "application/x-www-form-urlencoded"])
def test_a_scoring_endpoint_reads_json_only(kind: str | None) -> None:
    headers = {} if kind is None else {"content-type": kind}
    with serving(exact) as url:
        answer = httpx.post(
            url + "/evaluate", content=json.dumps(SAMPLE).encode(), headers=headers, timeout=10
        )
        charset = httpx.post(
            url + "/batch", content=json.dumps({"samples": [SAMPLE]}).encode(), timeout=10,
            headers={"content-type": "Application/JSON; charset=utf-8"},
        )  # fmt: skip
    got = "no Content-Type" if kind is None else repr(kind)
    assert (answer.status_code, answer.json()) == (415, {"detail": (
        f"expected Content-Type: application/json, got {got}; send the sample as JSON with that "
        "header (the reward server reads no other body, so that a page on another site, which "
        "can send text/plain without asking, cannot have a sample scored).")})  # fmt: skip
    assert charset.status_code == 200


# ------------------------------------------------------------------ in a browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--host-resolver-rules=MAP attacker.test 127.0.0.1"],
        )  # fmt: skip
        yield launched
        launched.close()


@contextlib.contextmanager
def site(html: str) -> Iterator[int]:
    """A web site on loopback that serves ``html`` at every path: its port."""
    page = html.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def attack(target: str, sample: dict[str, Any]) -> str:
    """A page that posts ``sample`` as text/plain to ``target`` (a "simple" request: no
    preflight) and says in its title when the answer came."""
    body = json.dumps(json.dumps(sample))
    return (
        "<!doctype html><title></title><script>\n"
        f"fetch({json.dumps(target)}, {{method: 'POST', mode: 'no-cors', "
        f"headers: {{'Content-Type': 'text/plain'}}, body: {body}}})\n"
        "  .then(() => { document.title = 'answered'; },\n"
        "        (error) => { document.title = 'failed: ' + error; });\n"
        "</script>"
    )


@needs_chromium
@pytest.mark.parametrize(
    ("origin", "status"), [("attacker.test", 403), ("localhost", 415)],
    ids=["another site", "another port of this machine"],
)  # fmt: skip
def test_a_page_of_another_origin_cannot_run_code_on_a_keyless_code_server(
    browser: Any, tmp_path: Path, origin: str, status: int
) -> None:
    # Issue 38: a page on another origin posted text/plain to a keyless `serve
    # code_execution --sandbox process`, and the code ran.
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('ran')\nprint(1)"
    sample = {
        "messages": [{"role": "user", "content": "Print 1."},
                     {"role": "assistant", "content": f"```python\n{code}\n```"}],
        "ground_truth": [{"input": "", "expected_output": "1"}],
    }  # fmt: skip
    app = create_app(load_served_reward("code_execution", None, sandbox="process"),
                     allowed_hosts=())  # fmt: skip
    with serving(app) as url, site(attack(url + "/evaluate", sample)) as port:
        page = browser.new_page()
        try:
            page.goto(f"http://{origin}:{port}/")
            page.wait_for_function("document.title !== ''", timeout=30_000)
            title = page.title()
        finally:
            page.close()
        answered = dict(app.endpoints.answers.counts)
    assert title == "answered"  # the request went out and its answer came
    assert not marker.exists()  # and no code ran
    assert answered == {status: 1}
