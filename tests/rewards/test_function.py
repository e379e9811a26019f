"""RewardFunction: local calls with bound kwargs, async, and remote calls over real HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from rk_agent import EvaluateResult, Message, RewardFunction, reward_function
from rk_agent.errors import ConfigError, EndpointError, RewardInputError

CHAT = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
SECRET = "sk-test-SECRET-value-0123456789"


@reward_function
def needs_bound(messages: list[Message], threshold: float, ground_truth: str = "") -> float:
    return float(len(messages[-1].text) >= threshold and messages[-1].text == ground_truth)


def test_local_with_bound_kwargs() -> None:
    rf = RewardFunction(func=needs_bound, threshold=1)
    assert rf(messages=CHAT, ground_truth="4").score == 1.0
    assert rf(messages=CHAT, ground_truth="4", threshold=5).score == 0.0  # call overrides bound
    assert rf.name == "needs_bound"


def test_func_path_and_names(tmp_path: Any) -> None:
    path = tmp_path / "my_rewards.py"
    path.write_text(
        "from rk_agent import reward_function\n\n"
        "@reward_function\n"
        "def combined_reward(messages, original_messages, **kwargs):\n"
        "    return len(original_messages)\n"
    )
    rf = RewardFunction(func_path=f"{path}::combined_reward")
    assert rf(messages=CHAT).score == 1.0  # original_messages defaults to messages[:-1]
    assert RewardFunction("math", name="gsm8k").name == "gsm8k"


def test_async_reward_called_sync_and_async() -> None:
    @reward_function
    async def slow(response: str) -> float:
        await asyncio.sleep(0)
        return 0.5

    rf = RewardFunction(slow)
    assert rf.is_async
    assert rf(messages=CHAT).score == 0.5

    async def inside_a_loop() -> None:
        assert (await rf.acall(messages=CHAT)).score == 0.5
        with pytest.raises(RewardInputError, match=re.escape("use `await reward.acall(...)`")):
            rf(messages=CHAT)

    asyncio.run(inside_a_loop())


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown reward mode 'cloud'"):
        RewardFunction(needs_bound, mode="cloud")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="a local RewardFunction needs func"):
        RewardFunction()
    with pytest.raises(ConfigError, match="needs endpoint="):
        RewardFunction(mode="remote")
    monkeypatch.delenv("FIREWORKS_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="set FIREWORKS_API_KEY"):
        RewardFunction(mode="fireworks_hosted", model_id="my-eval")
    with pytest.raises(ConfigError, match="either func or func_path"):
        RewardFunction(needs_bound, func_path="math")
    with pytest.raises(RewardInputError, match="needs messages="):
        RewardFunction(needs_bound, threshold=1)()


# --- remote mode against a real HTTP server on loopback -------------------------------------


class _RewardServer(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        if self.path == "/evaluate":
            kwargs = body.get("kwargs", {})
            result = needs_bound(
                messages=body["messages"], ground_truth=body.get("ground_truth", ""), **kwargs
            )
            self._send(200, result.model_dump_json().encode())
        elif self.path == "/overloaded":
            self._send(503, json.dumps({"detail": "too busy, retry later"}).encode())
        elif self.path == "/garbage":
            self._send(200, b"<html>not json</html>")
        elif self.path == "/slow":
            time.sleep(1.0)
            self._send(200, b"{}")

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server() -> Iterator[str]:
    _RewardServer.received = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RewardServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_remote_round_trip(server: str) -> None:
    rf = RewardFunction(mode="remote", endpoint=f"{server}/evaluate", api_key=SECRET, threshold=1)
    result = rf(messages=[Message(role="user", content="2+2?"), CHAT[1]], ground_truth="4")
    assert result == EvaluateResult(score=1.0)
    request = _RewardServer.received[0]
    assert request["auth"] == f"Bearer {SECRET}"
    assert request["body"] == {"messages": CHAT, "ground_truth": "4", "kwargs": {"threshold": 1}}


def test_remote_server_error_is_typed_and_keeps_the_message(server: str) -> None:
    rf = RewardFunction(mode="remote", endpoint=f"{server}/overloaded", api_key=SECRET)
    with pytest.raises(
        EndpointError, match=re.escape("answered 503: too busy, retry later")
    ) as info:
        rf(messages=CHAT)
    assert info.value.status == 503 and info.value.retryable
    assert SECRET not in str(info.value)


def test_remote_garbage_reply(server: str) -> None:
    rf = RewardFunction(mode="remote", endpoint=f"{server}/garbage")
    with pytest.raises(EndpointError, match="not an EvaluateResult") as info:
        rf(messages=CHAT)
    assert not info.value.retryable


def test_remote_timeout_and_refused(server: str) -> None:
    rf = RewardFunction(mode="remote", endpoint=f"{server}/slow", timeout=0.2)
    with pytest.raises(EndpointError, match=re.escape("did not answer within 0.2 s")) as info:
        rf(messages=CHAT)
    assert info.value.retryable
    refused = RewardFunction(mode="remote", endpoint="http://127.0.0.1:9/evaluate", api_key=SECRET)
    with pytest.raises(EndpointError, match="cannot reach reward endpoint") as info:
        refused(messages=CHAT)
    assert SECRET not in str(info.value)


def test_remote_from_async_code(server: str) -> None:
    rf = RewardFunction(mode="remote", endpoint=f"{server}/evaluate", threshold=1)
    result = asyncio.run(rf.acall(messages=CHAT, ground_truth="4"))
    assert result.score == 1.0


def test_fireworks_hosted_builds_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREWORKS_API_KEY", SECRET)
    rf = RewardFunction(mode="fireworks_hosted", model_id="my-eval")
    assert rf.endpoint == "https://api.fireworks.ai/v1/models/my-eval/reward"
    assert SECRET not in repr(rf)


@pytest.mark.parametrize(
    ("reward", "options", "message"),
    [
        ("format", {"tagz": ["answer"]},
         "reward 'format' has no option 'tagz'. Did you mean 'tags'? It takes: messages, "
         "ground_truth, pattern, tags, partial_credit, allow_outside_text."),
        ("length", {"target_char": 400}, "Did you mean 'target_chars'?"),
    ],
)  # fmt: skip
def test_a_misspelt_option_is_refused_with_did_you_mean(
    reward: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        RewardFunction(reward, **options)


def test_options_a_reward_has_no_parameter_for() -> None:
    def strict(response: str, ground_truth: str, bonus: float = 0.0) -> float:
        return float(response == ground_truth) + bonus

    with pytest.raises(
        ConfigError, match=re.escape("reward 'strict' has no option 'weight'. It takes: ")
    ):
        RewardFunction(strict, weight=2.0)
    assert (
        RewardFunction(strict, bonus=0.5)(
            [{"role": "assistant", "content": "4"}], ground_truth="4"
        ).score
        == 1.5
    )
    # A reward with **kwargs takes fields it does not name (a dataset's columns): not refused.
    assert RewardFunction("format", source="gsm8k").bound_kwargs == {"source": "gsm8k"}
