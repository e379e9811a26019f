"""Tests for `rk_agent.rewards.builtin.llm_judge`, against a real OpenAI-compatible server
on loopback.

The `judge_server` fixture runs a small ``/v1/chat/completions`` server in a background thread
(``http.server.ThreadingHTTPServer`` on port 0). Each test scripts its replies (a completion, an
error status, a delay) and reads back the requests the server received.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import re
import socket
import subprocess
import sys
import threading
import warnings
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rk_agent.endpoint_errors import Endpoint
from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.rewards.builtin import llm_judge
from rk_agent.rewards.builtin.llm_judge import (
    JudgeScore,
    close_judge_clients,
    llm_judge_reward,
    parse_judge_score,
)

KEY = "sk-test-0123456789abcdef-SECRET"
RUBRIC = "Reward answers that name the right city and stay under one sentence."
QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
MESSAGES = [
    {"role": "system", "content": "You are a geography tutor."},
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "content": ANSWER},
]


# ---------------------------------------------------------------------------------------------
# The loopback judge server


@dataclass
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content")) for m in self.body.get("messages", []))


@dataclass
class JudgeServer:
    """Scripted OpenAI-compatible chat-completions server; see `reply`, `fail`, `stall`."""

    base_url: str = ""
    requests: list[Received] = field(default_factory=list)
    script: deque[dict[str, Any]] = field(default_factory=deque)
    release: threading.Event = field(default_factory=threading.Event)

    def reply(self, content: str | None) -> None:
        self.script.append({"content": content})

    def fail(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        error = body if body is not None else {"error": {"message": "boom", "type": "server"}}
        self.script.append({"status": status, "body": error, "headers": headers or {}})

    def stall(self, seconds: float) -> None:
        self.script.append({"sleep": seconds, "content": "Score: 10"})

    def raw(self, data: bytes, content_type: str = "application/json") -> None:
        self.script.append({"raw": data, "content_type": content_type})


def _completion(model: str, content: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        judge = self.server.judge
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        judge.requests.append(
            Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        action: dict[str, Any] = judge.script.popleft() if judge.script else {"content": "Score: 5"}
        if "sleep" in action:
            judge.release.wait(action["sleep"])
        if "raw" in action:
            self._send(200, action["raw"], {"Content-Type": action["content_type"]})
        elif "status" in action:
            headers = {"Content-Type": "application/json", **action["headers"]}
            self._send(action["status"], json.dumps(action["body"]).encode(), headers)
        else:
            data = json.dumps(_completion(body.get("model", ""), action["content"])).encode()
            self._send(200, data, {"Content-Type": "application/json"})

    def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    judge: JudgeServer


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.judge = JudgeServer(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.judge
    finally:
        server.judge.release.set()
        close_judge_clients()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _no_ambient_openai_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def judge(server: JudgeServer, messages: Any = MESSAGES, **options: Any) -> Any:
    settings: dict[str, Any] = {
        "rubric": RUBRIC,
        "model": "judge-model",
        "base_url": server.base_url,
        "api_key": KEY,
        "timeout": 5.0,
        "max_retries": 0,
    }
    settings.update(options)
    return llm_judge_reward(messages, **settings)


# ---------------------------------------------------------------------------------------------
# Talking to the judge


def test_the_judge_receives_rubric_conversation_response_model_and_key(
    judge_server: JudgeServer,
) -> None:
    judge_server.reply("Correct city, one sentence.\nScore: 8")
    result = judge(judge_server, ground_truth="Paris")
    assert result.is_score_valid, result.error
    assert result.score == pytest.approx(0.8)
    assert result.metrics["judge_score"].score == pytest.approx(0.8)
    assert result.metrics["judge_score"].reason == "judge gave 8 on a 0-10 scale"
    assert result.reason == "judge gave 8 on a 0-10 scale: Correct city, one sentence. Score: 8"

    (request,) = judge_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "judge-model"
    assert request.body["temperature"] == 0
    assert "max_tokens" not in request.body
    for part in (RUBRIC, QUESTION, ANSWER, "# Reference answer\nParis", "Score: <number"):
        assert part in request.prompt
    assert "between 0 and 10" in request.body["messages"][0]["content"]


def test_tool_calls_and_earlier_turns_are_shown_to_the_judge(judge_server: JudgeServer) -> None:
    messages = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "-3C, snow"},
        {"role": "assistant", "content": "It is -3C and snowing in Oslo."},
    ]
    judge_server.reply("Score: 9")
    result = judge(judge_server, messages, max_tokens=64, temperature=0.3)
    assert result.score == pytest.approx(0.9)
    (request,) = judge_server.requests
    assert 'calls tool get_weather with {"city": "Oslo"}' in request.prompt
    assert "[tool]\n-3C, snow" in request.prompt
    assert "# Response to grade\nIt is -3C and snowing in Oslo." in request.prompt
    assert (request.body["max_tokens"], request.body["temperature"]) == (64, 0.3)


@pytest.mark.parametrize(
    ("reply", "score_range", "expected"),
    [
        ("Score: 7", (0, 10), 0.7),
        ("Good.\n**Score:** 8.5", (0, 10), 0.85),
        ('{"score": 0.8, "reason": "mostly right"}', (0, 1), 0.8),
        ("Solid answer, 4/5.", (0, 10), 0.8),
        ("Score: 3", (1, 5), 0.5),
        ("Score: 0", (0, 10), 0.0),
        ("Score: 10/10", (0, 10), 1.0),
    ],
)
def test_scores_are_normalised_to_zero_one(
    judge_server: JudgeServer, reply: str, score_range: tuple[float, float], expected: float
) -> None:
    judge_server.reply(reply)
    result = judge(judge_server, score_range=score_range)
    assert result.is_score_valid, result.error
    assert result.score == pytest.approx(expected)


def test_a_json_reason_becomes_the_result_reason(judge_server: JudgeServer) -> None:
    judge_server.reply('```json\n{"score": 6, "reason": "right city, too wordy"}\n```')
    result = judge(judge_server)
    assert result.reason == "judge gave 6 on a 0-10 scale: right city, too wordy"


def test_a_reply_without_a_score_is_invalid_with_a_snippet(judge_server: JudgeServer) -> None:
    judge_server.reply("The response lists 3 reasons and seems fine overall.")
    result = judge(judge_server)
    assert not result.is_score_valid
    assert result.score == 0.0
    assert result.error == (
        "the judge reply could not be parsed: no score found in "
        "'The response lists 3 reasons and seems fine overall.'"
    )


def test_a_score_out_of_range_is_invalid_not_clamped(judge_server: JudgeServer) -> None:
    judge_server.reply("Outstanding!\nScore: 12")
    result = judge(judge_server)
    assert not result.is_score_valid
    assert (
        result.error == "the judge's score 12 is outside its range 0-10: 'Outstanding! Score: 12'"
    )
    judge_server.reply("Score: 6/5")
    assert judge(judge_server).error == "the judge's score 6 is outside its range 5: 'Score: 6/5'"


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_an_empty_reply_is_invalid(judge_server: JudgeServer, content: str | None) -> None:
    judge_server.reply(content)
    result = judge(judge_server)
    assert not result.is_score_valid
    assert result.error == "the judge's reply was empty"


# ---------------------------------------------------------------------------------------------
# Endpoint failures: invalid results, never a silent 0, never the key


def test_http_500_is_an_invalid_result_and_is_retried(judge_server: JudgeServer) -> None:
    fast = {"retry-after-ms": "1"}
    judge_server.fail(500, headers=fast)
    judge_server.fail(500, headers=fast)
    result = judge(judge_server, max_retries=1)
    assert not result.is_score_valid
    assert result.error is not None
    assert result.error == (
        f"EndpointError: the judge failed: {judge_server.base_url}: HTTP 500: boom "
        "(gave up after 2 attempts)"
    )
    assert len(judge_server.requests) == 2


def test_a_retry_after_a_500_can_succeed(judge_server: JudgeServer) -> None:
    judge_server.fail(503, headers={"retry-after-ms": "1"})
    judge_server.reply("Score: 7")
    result = judge(judge_server, max_retries=2)
    assert result.is_score_valid, result.error
    assert result.score == pytest.approx(0.7)
    assert len(judge_server.requests) == 2


def test_a_refused_key_says_where_it_came_from(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_server.fail(401, body={"error": {"message": "invalid key"}})
    monkeypatch.setenv("RK_TEST_JUDGE_KEY", KEY)
    result = judge(judge_server, api_key=None, api_key_env="RK_TEST_JUDGE_KEY", max_retries=2)
    assert result.error == (
        f"EndpointError: the judge failed: {judge_server.base_url}: HTTP 401: invalid key "
        "(check the API key; it came from: RK_TEST_JUDGE_KEY)"
    )
    assert len(judge_server.requests) == 1


def test_a_client_error_is_not_retried(judge_server: JudgeServer) -> None:
    judge_server.fail(400, body={"error": {"message": "unknown model 'judge-model'"}})
    result = judge(judge_server, max_retries=3)
    assert not result.is_score_valid
    assert "HTTP 400: " in (result.error or "") and "gave up" not in (result.error or "")
    assert "unknown model 'judge-model'" in (result.error or "")
    assert len(judge_server.requests) == 1


def test_a_timeout_is_an_invalid_result(judge_server: JudgeServer) -> None:
    judge_server.stall(10)
    result = judge(judge_server, timeout=0.3)
    assert not result.is_score_valid
    assert result.error == (
        f"EndpointError: the judge failed: {judge_server.base_url} did not answer within 0.3s "
        "(timeout) (gave up after 1 attempt)"
    )


def test_connection_refused_is_an_invalid_result() -> None:
    with socket.socket() as probe:  # a port that nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = llm_judge_reward(
        MESSAGES,
        rubric=RUBRIC,
        model="judge-model",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=KEY,
        max_retries=0,
        timeout=5,
    )
    close_judge_clients()
    assert not result.is_score_valid
    assert (result.error or "").startswith(
        f"EndpointError: the judge failed: could not reach http://127.0.0.1:{port}/v1: "
    )
    assert (result.error or "").endswith("(gave up after 1 attempt)")


def test_a_200_reply_that_is_not_json_is_retried_then_an_invalid_result(
    judge_server: JudgeServer,
) -> None:
    judge_server.raw(b"<html>gateway says hi</html>", "text/html")
    judge_server.raw(b"<html>gateway says hi</html>", "text/html")
    result = judge(judge_server, max_retries=1)
    assert not result.is_score_valid
    assert result.error is not None
    assert result.error.startswith(
        f"EndpointError: the judge failed: {judge_server.base_url} sent a body that is not JSON: "
        "JSONDecodeError: "
    )
    assert result.error.endswith("(gave up after 2 attempts)")
    assert len(judge_server.requests) == 2


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (b'{"object": "chat.completion"}', "application/json"),
        (b'{"choices": []}', "application/json"),
        (b'{"choices": ["Score: 7"]}', "application/json"),
        (b"[1, 2]", "application/json"),
    ],
)
def test_a_200_reply_that_is_not_a_completion_is_an_invalid_result(
    judge_server: JudgeServer, data: bytes, content_type: str
) -> None:
    judge_server.raw(data, content_type)
    result = judge(judge_server)
    assert not result.is_score_valid
    assert result.error == (
        f"EndpointError: the judge failed: {judge_server.base_url} sent a reply with no choices"
    )


def test_the_key_never_appears_in_errors_reasons_or_logs(
    judge_server: JudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # A careless server echoing the whole Authorization header back in its error body.
    judge_server.fail(401, body={"error": {"message": "bad key: Bearer " + KEY}})
    failed = judge(judge_server)
    assert not failed.is_score_valid
    assert "HTTP 401: " in (failed.error or "")
    assert "bad key: Bearer ***" in (failed.error or "")
    # ... and a judge whose reply quotes it.
    judge_server.reply(f"The key {KEY} is irrelevant here. Score: 4")
    scored = judge(judge_server)
    assert scored.score == pytest.approx(0.4)
    judge_server.reply(f"no score, just {KEY}")
    unparsed = judge(judge_server)
    assert not unparsed.is_score_valid
    for result in (failed, scored, unparsed):
        assert KEY not in result.model_dump_json()
    assert "llm_judge: EndpointError" in caplog.text
    assert KEY not in caplog.text
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in judge_server.requests)


# ---------------------------------------------------------------------------------------------
# Keys, clients, options


def test_the_key_comes_from_the_environment_variable_named_by_api_key_env(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-default-env")
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-from-my-env")
    judge(judge_server, api_key=None)
    judge(judge_server, api_key=None, api_key_env="MY_JUDGE_KEY")
    assert [r.headers["authorization"] for r in judge_server.requests] == [
        "Bearer sk-from-default-env",
        "Bearer sk-from-my-env",
    ]


def test_a_base_url_without_a_key_sends_the_empty_placeholder(judge_server: JudgeServer) -> None:
    result = judge(judge_server, api_key=None)
    assert result.is_score_valid
    assert judge_server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_no_key_and_no_base_url_is_a_config_error_raised_before_any_request() -> None:
    message = (
        "llm_judge reward: no API key for the judge. Pass api_key=..., set $OPENAI_API_KEY, or "
        "pass base_url= for a server that needs none"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        llm_judge_reward(MESSAGES, rubric=RUBRIC, model="gpt-4o-mini")


def test_one_client_per_endpoint_is_shared_across_threads(judge_server: JudgeServer) -> None:
    for _ in range(8):
        judge_server.reply("Score: 6")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: judge(judge_server), range(8)))
    assert [r.score for r in results] == [pytest.approx(0.6)] * 8
    ((endpoint, first),) = llm_judge._clients.items()
    assert endpoint == Endpoint(
        url=judge_server.base_url, model="judge-model", key=KEY, key_source="api_key",
        timeout_s=5.0,
    )  # fmt: skip
    assert llm_judge._client(endpoint) is first
    assert llm_judge._client(dataclasses.replace(endpoint, key="sk-other-key")) is not first
    close_judge_clients()
    assert llm_judge._clients == {}
    judge_server.reply("Score: 6")
    assert judge(judge_server).score == pytest.approx(0.6)  # a new client after closing


def test_a_forked_child_judges_on_its_own_connections(judge_server: JudgeServer) -> None:
    """A process forked after the judge was used (a data loader's workers) does not wait on
    the parent's client thread, which the child does not have."""
    judge_server.reply("Score: 6")
    judge_server.reply("Score: 8")
    assert judge(judge_server).score == pytest.approx(0.6)  # the parent's client is running
    context = multiprocessing.get_context("fork")
    scores: Any = context.Queue()

    def in_child() -> None:
        scores.put(judge(judge_server).score)

    with warnings.catch_warnings():
        # Python 3.12 warns on fork() in a process with threads (this one has the client's).
        warnings.filterwarnings("ignore", ".*use of fork.*", DeprecationWarning)
        child = context.Process(target=in_child)
        child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert scores.get(timeout=5) == pytest.approx(0.8)


def test_missing_rubric_or_model_is_a_caller_error() -> None:
    message = "reward 'llm_judge' cannot be called with these arguments: "
    with pytest.raises(RewardInputError, match=re.escape(message)) as info:
        llm_judge_reward(MESSAGES, model="m")
    assert "'rubric'" in str(info.value)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"rubric": "  "}, "llm_judge reward: rubric must be a non-empty string"),
        ({"score_range": (10, 0)}, "llm_judge reward: score_range needs low < high, got (10, 0)"),
        (
            {"score_range": (0, "ten")},
            "llm_judge reward: score_range must be two numbers (low, high), got (0, 'ten')",
        ),
        ({"timeout": 0}, "llm_judge reward: timeout must be > 0 seconds, got 0"),
        ({"max_retries": -1}, "llm_judge reward: max_retries must be an int >= 0, got -1"),
    ],
)
def test_bad_options_raise_a_config_error_before_any_request(
    judge_server: JudgeServer, options: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        judge(judge_server, **options)
    assert judge_server.requests == []


def test_no_assistant_message_is_invalid_without_any_request(judge_server: JudgeServer) -> None:
    result = judge(judge_server, MESSAGES[:2])
    assert result.error == (
        "reward 'llm_judge' scores the last assistant message, but the conversation has none"
    )
    assert judge_server.requests == []


def test_the_judge_needs_neither_the_openai_sdk_nor_an_http_stack_on_import() -> None:
    code = (
        "import sys, rk_agent.rewards.builtin.llm_judge\n"
        "print(sorted(m for m in ('openai', 'aiohttp', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# parse_judge_score


@pytest.mark.parametrize(
    ("reply", "value", "out_of"),
    [
        ("Score: 7", 7.0, None),
        ("The answer is right.\nScore: 7/10", 7.0, 10.0),
        ("**Score:** 8.5", 8.5, None),
        ("__Score__: 9", 9.0, None),
        ('{"score": 0.8}', 0.8, None),
        ('{"score": "6"}', 6.0, None),
        ('Verdict follows. {"score": 3, "reason": "x"} then {"score": 5}', 5.0, None),
        ("Rating (0-10): 6", 6.0, None),
        ("Final grade = 4 out of 5", 4.0, 5.0),
        ("I'd give it 7/10.", 7.0, 10.0),
        ("Good answer.\n\n9", 9.0, None),
        ("Good answer.\n\n**9.**", 9.0, None),
        ("<think>Score: 2 maybe</think>\nScore: 9", 9.0, None),
        ("draft Score: 2 ...</think> Score: 9", 9.0, None),
        ("First look: score 3. After checking the math, final score: 8", 8.0, None),
        ("Score - 8", 8.0, None),
        ("Score: -1", -1.0, None),
        ("The score is 7.", 7.0, None),
    ],
)
def test_parse_judge_score_finds_the_score(reply: str, value: float, out_of: float | None) -> None:
    parsed = parse_judge_score(reply)
    assert parsed is not None
    assert (parsed.value, parsed.out_of) == (value, out_of)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "No idea.",
        "The response lists 3 reasons.",
        "<think>Score: 5</think>",
        '{"score": "high"}',
        '{"score": true}',
        "Scores range widely.",
    ],
)
def test_parse_judge_score_returns_none_without_a_score(reply: str) -> None:
    assert parse_judge_score(reply) is None


def test_parse_judge_score_keeps_the_justification() -> None:
    assert parse_judge_score('{"score": 2, "justification": "wrong city"}') == JudgeScore(
        2.0, None, "wrong city"
    )
    assert parse_judge_score("Concise.\nScore: 9") == JudgeScore(9.0, None, "Concise.\nScore: 9")
