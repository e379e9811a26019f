"""`rk-agent serve` as a real subprocess: its line, auth, config files, graceful shutdown."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from rk_agent import RewardFunction

SECRET = "rk-serve-SECRET-0123456789abcdef"
CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
REWARDS = '''
import time

def exact(response: str, ground_truth: str, delay: float = 0.0) -> float:
    """1.0 when the reply equals the ground truth."""
    time.sleep(delay)
    return float(response.strip() == ground_truth)
'''
RK_AGENT = [sys.executable, "-m", "rk_agent"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def rewards_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_rewards.py"
    path.write_text(REWARDS)
    return path


def rk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RK_AGENT, *args], capture_output=True, text=True, timeout=60,
        env=env or dict(os.environ),
    )  # fmt: skip


@contextmanager
def running(
    *args: str, env: dict[str, str] | None = None, max_files: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[str], list[str]]]:
    """Start `rk-agent serve ARGS` on a free port; yield (base URL, process, its output lines)."""
    port = free_port()
    process = subprocess.Popen(
        [*RK_AGENT, "serve", *args, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env or dict(os.environ), preexec_fn=None if max_files is None else (
            lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))
        ),
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the server did not start: {lines}") from None
                time.sleep(0.1)
        yield url, process, lines
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        reader.join(timeout=5)
        if process.stdout is not None:
            process.stdout.close()


def test_serves_with_a_key_from_the_environment_and_never_shows_it(rewards_file: Path) -> None:
    env = {**os.environ, "RK_AGENT_SERVER_API_KEY": SECRET}
    with running(f"{rewards_file}::exact", env=env) as (url, _, lines):
        remote = RewardFunction(mode="remote", endpoint=f"{url}/evaluate", api_key=SECRET)
        assert remote(messages=CHAT, ground_truth="4").score == 1.0
        unkeyed = httpx.post(f"{url}/evaluate", json={"messages": CHAT, "ground_truth": "4"})
        wrong = httpx.post(
            f"{url}/reward", json={"messages": CHAT}, headers={"Authorization": "Bearer nope"}
        )
        health = httpx.get(f"{url}/health").json()
    assert lines[0] == (
        f"Serving reward 'exact' at {url}/evaluate (also /reward, /batch, /health, /docs); "
        "1 worker, auth on (bearer key).\n"
    )
    assert (unkeyed.status_code, wrong.status_code) == (401, 401)
    assert health == {"status": "ok", "reward": "exact"}
    output = "".join(lines)
    # No line per request by default; an answer other than 2xx gets one, rate-limited by its
    # status: the second 401 within the interval is counted, not logged.
    assert '"POST /evaluate HTTP/1.1"' not in output
    assert "/evaluate answered 401: " in output and "/reward answered 401: " not in output
    assert SECRET not in output and SECRET not in unkeyed.text + wrong.text


def test_serves_a_reward_config_file_without_auth_on_loopback(tmp_path: Path) -> None:
    config = tmp_path / "reward.yaml"
    config.write_text("reward: {name: format, kwargs: {tags: [answer]}}\n")
    with running("--config", str(config), "--no-access-log") as (url, _, lines):
        answer = [*CHAT[:1], {"role": "assistant", "content": "<answer>4</answer>"}]
        result = RewardFunction(mode="remote", endpoint=f"{url}/evaluate")(messages=answer)
    assert result.score == 1.0
    assert lines[0].endswith("1 worker, auth off.\n")
    assert "POST /evaluate" not in "".join(lines)


def test_refuses_a_public_address_without_a_key() -> None:
    out = rk("serve", "format", "--host", "0.0.0.0")
    assert out.returncode == 2
    assert out.stderr.startswith(
        "error: refusing to serve on 0.0.0.0 without an API key: anyone who can reach this "
        "machine could call the reward."
    )
    assert "Serving" not in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["formt"], "error: unknown reward 'formt'. Did you mean 'format'?"),
        (["format", "--config", "r.yaml"], "error: give the reward to serve"),
        (["format", "--max-body-mb", "0"], "error: --max-body-mb must be > 0, got 0."),
        (["format", "--max-wait", "0"], "error: --max-wait must be > 0 seconds, got 0."),
        (["format", "--body-timeout", "-1"], "error: --body-timeout must be > 0 seconds, got -1."),
        (["format", "--max-connections", "0"], "error: --max-connections must be >= 1, got 0."),
        (
            ["format", "--max-body-mb", "8", "--body-budget-mb", "4"],
            "error: --body-budget-mb must be >= --max-body-mb (8), got 4: a body of the largest "
            "size must fit.",
        ),
        (["format", "--port", "-5"], "error: --port must be a TCP port from 1 to 65535, got -5."),
        (["format", "--port", "70000"], "error: --port must be a TCP port from 1 to 65535"),
    ],
    ids=[
        "unknown-name",
        "name-and-config",
        "body-limit",
        "max-wait",
        "body-timeout",
        "max-connections",
        "body-budget",
        "negative-port",
        "port-too-big",
    ],
)
def test_bad_arguments_fail_before_serving(args: list[str], message: str) -> None:
    out = rk("serve", *args)
    assert out.returncode == 2 and out.stderr.startswith(message), out.stderr
    assert "Serving" not in out.stdout


def test_a_port_in_use_is_one_line_before_serving() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        out = rk("serve", "format", "--port", str(port))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"error: cannot serve on 127.0.0.1:{port}: it is already in use (is another server "
        "running?). Pick another port with --port, or stop the process that holds it."
    )
    assert "Serving" not in out.stdout


@pytest.mark.slow
def test_sigterm_lets_the_request_in_flight_finish(rewards_file: Path) -> None:
    with running(f"{rewards_file}::exact", "--no-access-log") as (url, process, lines):
        answers: list[httpx.Response] = []
        body = {"messages": CHAT, "ground_truth": "4", "delay": 1.5}
        slow = threading.Thread(
            target=lambda: answers.append(httpx.post(f"{url}/evaluate", json=body, timeout=30))
        )
        slow.start()
        time.sleep(0.5)  # the request is in the reward now
        process.send_signal(signal.SIGTERM)
        slow.join(timeout=30)
        returncode = process.wait(timeout=30)
    assert answers[0].status_code == 200 and answers[0].json()["score"] == 1.0
    assert returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once shut down
    assert "Waiting for connections to close" in "".join(lines)


@pytest.mark.slow
def test_several_workers_share_the_port(rewards_file: Path) -> None:
    args = (f"{rewards_file}::exact", "--workers", "2", "--api-key", SECRET, "--no-access-log")
    with running(*args) as (url, _, lines):
        remote = RewardFunction(mode="remote", endpoint=f"{url}/evaluate", api_key=SECRET)
        scores = [remote(messages=CHAT, ground_truth="4").score for _ in range(10)]
        unkeyed = httpx.post(f"{url}/evaluate", json={"messages": CHAT, "ground_truth": "4"})
    assert scores == [1.0] * 10 and unkeyed.status_code == 401
    output = "".join(lines)
    assert "2 workers, auth on" in output and output.count("Started server process") == 2
    assert SECRET not in output


SPY = """
import json, os, subprocess, sys

def spy(response: str, ground_truth: str) -> float:
    \"\"\"Writes the environment a process it starts gets to the file ``ground_truth``.\"\"\"
    child = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]
    with open(ground_truth, "w") as out:
        out.write(subprocess.run(child, capture_output=True, text=True, check=True).stdout)
    return 1.0
"""


@pytest.mark.slow
def test_several_workers_hand_no_process_a_reward_starts_the_key(tmp_path: Path) -> None:
    # Issue 38: `serve --workers N` gave the workers their settings, API key included, in an
    # environment variable that every process a reward started inherited.
    (tmp_path / "spy_rewards.py").write_text(SPY)
    env = {k: v for k, v in os.environ.items() if k != "RK_AGENT_SERVER_API_KEY"}
    seen = tmp_path / "environment.json"
    args = (f"{tmp_path / 'spy_rewards.py'}::spy", "--workers", "2", "--api-key", SECRET)
    with running(*args, "--no-access-log", env=env) as (url, _, _lines):
        answer = httpx.post(
            f"{url}/evaluate", json={"messages": CHAT, "ground_truth": str(seen)},
            headers={"Authorization": f"Bearer {SECRET}"}, timeout=30,
        )  # fmt: skip
    assert answer.status_code == 200 and answer.json()["score"] == 1.0
    environment = json.loads(seen.read_text())
    assert environment  # a real environment, PATH and all
    assert not [name for name, value in environment.items() if SECRET in value]


def test_allow_host_answers_a_proxys_name_and_no_other() -> None:
    sample = {"messages": [*CHAT[:1], {"role": "assistant", "content": "<answer>4</answer>"}]}
    with running("format", "--allow-host", "rewards.example", "--no-access-log") as (url, _, _l):
        named = httpx.post(f"{url}/evaluate", json=sample, headers={"Host": "rewards.example"})
        other = httpx.post(f"{url}/evaluate", json=sample, headers={"Host": "attacker.test"})
        own = httpx.post(f"{url}/evaluate", json=sample)
    assert (named.status_code, other.status_code, own.status_code) == (200, 421, 200)


# --------------------------------------------------------------------------------------------
# --sandbox: the mode model code runs in, fixed by the operator

CODE_SAMPLE = {
    "messages": [
        {"role": "user", "content": "Print 2."},
        {"role": "assistant", "content": "```python\nprint(2)\n```"},
    ],
    "ground_truth": [{"input": "", "expected_output": "2"}],
}


@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_code_runs_in_the_chosen_sandbox_mode_and_requests_cannot_change_it(mode: str) -> None:
    from tests.sandbox.support import BWRAP_PROBLEM

    if mode == "bwrap" and BWRAP_PROBLEM is not None:
        pytest.skip(f"bubblewrap cannot isolate here: {BWRAP_PROBLEM}")
    other = "bwrap" if mode == "process" else "process"
    args = ["--sandbox", mode] if mode == "process" else []  # bwrap: the default
    with running("code_execution", *args, "--no-access-log") as (url, _, lines):
        result = httpx.post(f"{url}/evaluate", json=CODE_SAMPLE).json()
        downgrade = httpx.post(f"{url}/evaluate", json={**CODE_SAMPLE, "sandbox": other})
        batch = httpx.post(f"{url}/batch", json={"samples": [CODE_SAMPLE] * 2}).json()
    isolation = "isolated" if mode == "bwrap" else "NOT isolated"
    assert lines[0].endswith(f"model code runs in sandbox mode '{mode}' ({isolation}).\n")
    assert result["score"] == 1.0 and result["metrics"]["sandbox"]["reason"] == mode
    assert [r["metrics"]["sandbox"]["reason"] for r in batch["results"]] == [mode, mode]
    assert downgrade.status_code == 422
    assert f"asks for sandbox '{other}'" in downgrade.text


@pytest.mark.slow
def test_several_workers_keep_the_sandbox_mode() -> None:
    args = ("code_execution", "--sandbox", "process", "--workers", "2", "--no-access-log")
    with running(*args) as (url, _, lines):
        results = [httpx.post(f"{url}/evaluate", json=CODE_SAMPLE).json() for _ in range(6)]
        refused = httpx.post(f"{url}/evaluate", json={**CODE_SAMPLE, "sandbox": "bwrap"})
    assert {r["metrics"]["sandbox"]["reason"] for r in results} == {"process"}
    assert refused.status_code == 422
    assert "2 workers" in lines[0] and "sandbox mode 'process' (NOT isolated)" in lines[0]


def test_without_isolation_serving_code_fails_at_start_naming_the_fix(tmp_path: Path) -> None:
    from tests.sandbox.support import without_bwrap

    env = without_bwrap(tmp_path)
    out = rk("serve", "code_execution", env=env)
    assert out.returncode == 2
    assert "Serving" not in out.stdout
    assert "no bwrap binary for this platform" in out.stderr
    assert "--sandbox process" in out.stderr
    with running("code_execution", "--sandbox", "process", env=env) as (url, _, lines):
        result = httpx.post(f"{url}/evaluate", json=CODE_SAMPLE).json()
    assert result["metrics"]["sandbox"]["reason"] == "process"
    assert "sandbox mode 'process' (NOT isolated)" in lines[0]


def test_sandbox_option_errors() -> None:
    math = rk("serve", "math", "--sandbox", "process")
    assert math.returncode == 2
    assert "reward 'math' takes none. Drop --sandbox." in math.stderr
    typo = rk("serve", "code_execution", "--sandbox", "docker")
    assert typo.returncode == 2
    assert "unknown sandbox mode 'docker'" in typo.stderr
    assert "Serving" not in math.stdout + typo.stdout


# --------------------------------------------------------------------------------------------
# Slow and many clients against the real command (issue 25 items 3 and 4): bounded in count


def _raw_clients(url: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]


def test_slow_clients_do_not_exhaust_file_descriptors_or_flood_the_log() -> None:
    # 512 file descriptors for the server (so 128 connections), 700 clients that never finish
    # their request heads.
    with running("format", max_files=512) as (url, _, lines):
        slow = _raw_clients(url, 700)
        try:
            for sock in slow:
                sock.sendall(b"POST /evaluate HTTP/1.1\r\nHost: rk\r\n")
            during = [httpx.post(f"{url}/evaluate", json={"messages": CHAT}, timeout=10)
                      for _ in range(5)]  # fmt: skip
            for _ in range(50):  # requests that make uvicorn log, again and again
                with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as bad:
                    bad.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                    bad.recv(1024)
        finally:
            for sock in slow:
                sock.close()
        after = httpx.post(f"{url}/evaluate", json={"messages": CHAT}, timeout=10)
    output = "".join(lines)
    assert [r.status_code for r in during] == [200] * 5  # the slow ones made room
    assert after.status_code == 200
    assert "Too many open files" not in output
    assert output.count("closed the oldest connection without a complete request head") == 1
    assert output.count("Invalid HTTP request received.") == 1


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_many_large_bodies_that_never_end_keep_memory_bounded() -> None:
    # 40 clients each send all but the last byte of a 2 MiB body (80 MiB in all); the server
    # reads what fits its 4 MiB budget and leaves the rest in the clients' sockets.
    size = 2 * 1024 * 1024
    args = ("format", "--max-body-mb", "2", "--body-budget-mb", "4", "--body-timeout", "60")
    with running(*args) as (url, process, _):
        at_rest = _rss_mb(process.pid)
        clients = _raw_clients(url, 40)
        try:
            head = (
                f"POST /evaluate HTTP/1.1\r\nHost: rk\r\nContent-Length: {size}\r\n\r\n"
            ).encode()
            body = b'{"messages": []}'.ljust(size)
            for sock in clients:
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    sock.send(head + body[:-1])  # what the socket takes without waiting
            time.sleep(1.0)
            small = httpx.post(f"{url}/evaluate", json={"messages": CHAT}, timeout=10)
            loaded = _rss_mb(process.pid)
        finally:
            for sock in clients:
                sock.close()
    assert small.status_code == 200
    assert loaded - at_rest < 40, (at_rest, loaded)  # 80 MiB were sent


# --------------------------------------------------------------------------------------------
# A client's path in the server's log (issue 38 item 2): an argument, capped, never a template


def test_a_clients_path_is_logged_as_text_capped_and_rate_limited() -> None:
    with running("format", "--api-key", "k") as (url, process, lines):
        at_rest = _rss_mb(process.pid)
        # No key: 401s, logged before any auth. As format strings the first path would raise
        # (a traceback per request) and the second would pad its line to 100 MB (a gigabyte
        # with one more zero); unique paths would each pass the rate limit.
        started = time.monotonic()
        formats = httpx.get(f"{url}/%25s%25s%25d", timeout=30)
        padded = httpx.get(f"{url}/%25100000000sX", timeout=30)
        unique = [httpx.get(f"{url}/probe-{i}", timeout=30).status_code for i in range(200)]
        took = time.monotonic() - started
        grown = _rss_mb(process.pid) - at_rest
    output = "".join(lines)
    assert {formats.status_code, padded.status_code, *unique} == {401}
    assert "/%s%s%d answered 401: " in output  # the path as it came, not formatted
    assert "Traceback" not in output and "Logging error" not in output
    # 202 answers of one cause: one line per 10 s interval (a loaded machine may need two).
    assert output.count(" answered 401: ") <= 1 + int(took // 10), (took, output)
    assert len(output) < 20_000, len(output)
    assert grown < 50, f"the server grew {grown:.0f} MB"


HEAVY = ("torch", "transformers", "trl", "accelerate", "datasets", "wandb", "matplotlib")


def test_serving_a_reward_never_imports_torch_transformers_or_trl(rewards_file: Path) -> None:
    """The real `rk-agent serve`, start to exit: ``PYTHONPROFILEIMPORTTIME`` makes the child
    report every module it imports (on stderr, also while answering), so none escapes."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    with running(f"{rewards_file}::exact", env=env) as (url, _, lines):
        one = httpx.post(f"{url}/evaluate", json={"messages": CHAT, "ground_truth": "4"})
        sample = {"messages": CHAT, "ground_truth": "4"}
        many = httpx.post(f"{url}/batch", json={"samples": [sample] * 3})
    assert one.json()["score"] == 1.0
    assert [r["score"] for r in many.json()["results"]] == [1.0, 1.0, 1.0]
    imported = {
        line.rpartition("|")[2].strip().split(".")[0]
        for line in lines
        if line.startswith("import time:")
    }
    assert {"rk_agent", "uvicorn", "fastapi"} <= imported  # the report is really there
    assert sorted(imported & set(HEAVY)) == []
