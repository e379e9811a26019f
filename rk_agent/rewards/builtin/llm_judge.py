"""LLM-as-a-judge: an OpenAI-compatible model grades the response against a rubric.

Main names:
    llm_judge_reward: ``"llm_judge"``, asks the judge and turns its reply into a score in [0, 1].
    parse_judge_score: finds the score in a judge's reply (usable on its own).
    JudgeScore: what `parse_judge_score` returns.
    close_judge_clients: closes the cached HTTP clients (for a clean shutdown).

The judge is any server speaking the OpenAI chat-completions API (OpenAI, Fireworks, vLLM,
SGLang, ...), called through the model client the policies use (`rk_agent.model_client`, its
synchronous face `SyncModelClient`: rewards are plain functions). One client is built per
endpoint (base URL, model, API key, timeout) and reused, from any thread, so that connections
are pooled across the thousands of calls of a training run. Every failure is an
`EndpointError` worded as the policies' are (`rk_agent.endpoint_errors`); failed calls are
retried under `rk_agent.retry.JUDGE_RETRY` (connection errors, timeouts, 408, 409, 429, 5xx, a
reply that is not JSON, honouring ``Retry-After``). The base URL is ``base_url``, else
``$OPENAI_BASE_URL``, else OpenAI's.

Failures are data, never a silent 0: an endpoint that cannot be reached, answers with an error
status or times out, and a reply with no readable score, all give an invalid result
(``is_score_valid=False``) whose ``error`` says what happened. The API key is removed from every
message this module writes (``error``, ``reason``, logs), even where a server echoes it back
(`rk_agent.secrets.redact`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from rk_agent.endpoint_errors import NO_KEY, Endpoint
from rk_agent.errors import ConfigError, EndpointError
from rk_agent.model_client import SyncModelClient
from rk_agent.retry import JUDGE_RETRY, retry_call
from rk_agent.rewards.builtin._reply import no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.secrets import redact
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["JudgeScore", "close_judge_clients", "llm_judge_reward", "parse_judge_score"]

logger = logging.getLogger("rk_agent.rewards.builtin.llm_judge")

_SNIPPET = 200
_OPENAI_URL = "https://api.openai.com/v1"
_REASON_CHARS = 500


# --------------------------------------------------------------------------------------------
# Parsing the judge's reply


class JudgeScore(NamedTuple):
    """A score read from a judge's reply.

    Attributes:
        value: the number the judge gave.
        out_of: the denominator when the judge wrote a fraction (``7/10``, ``4 out of 5``).
        justification: the judge's explanation (the reply, or a JSON ``reason`` field).
    """

    value: float
    out_of: float | None
    justification: str


_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_OUT_OF = r"\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)"
# "Score: 7", "**Score:** 8.5", "Final score = 7/10", "Rating (0-10): 6": a label, an optional
# parenthesised range, then up to 12 characters of punctuation or words before the number.
_LABELLED = re.compile(
    rf"(?<![a-z])(?:score|rating|grade)(?![a-z])"  # the label, not "scores" or "underscore"
    rf"(?:\s*\([^)\n]*\))?[^0-9\n]{{0,12}}?({_NUMBER})(?:{_OUT_OF})?",
    re.IGNORECASE,
)
_FRACTION = re.compile(rf"(?<![\d.])({_NUMBER}){_OUT_OF}", re.IGNORECASE)
_BARE_LINE = re.compile(rf"^[\s*_`#>]*({_NUMBER})[\s*_`.]*$")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_JSON_OBJECT = re.compile(r"\{[^{}]*\}")
_REASON_KEYS = ("reason", "reasoning", "justification", "explanation", "rationale")


def _visible(reply: str) -> str:
    """The reply without reasoning blocks (``<think>...</think>``)."""
    reply = _THINK.sub("", reply)
    if "</think>" in reply.lower():  # an opening tag the server already stripped
        reply = reply[reply.lower().rindex("</think>") + len("</think>") :]
    return reply.strip()


def _from_json(text: str) -> JudgeScore | None:
    objects = [m.group() for m in _JSON_OBJECT.finditer(text)]
    candidates = [_FENCE.sub("", text), *reversed(objects)]  # the last object wins
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(data, dict) or "score" not in data:
            continue
        value = data["score"]
        if isinstance(value, str) and re.fullmatch(_NUMBER, value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        why = next((str(data[k]) for k in _REASON_KEYS if k in data), text)
        return JudgeScore(float(value), None, why)
    return None


def parse_judge_score(reply: str) -> JudgeScore | None:
    """Find the score in a judge's reply, or return ``None`` when there is none.

    Looked for in this order (the last occurrence wins where there are several, since the judge
    is asked to end with its score): a JSON object with a ``score`` key (possibly in a code
    fence); a labelled score (``Score: 7``, ``**Score:** 8.5``, ``Rating: 6/10``, ``Final grade
    = 4 out of 5``); a bare fraction (``7/10``); a last line that is only a number. Reasoning in
    ``<think>...</think>`` is ignored. The value is returned as written; range checks are the
    caller's.

    Example:
        >>> parse_judge_score("Accurate.\\n**Score:** 8.5")
        JudgeScore(value=8.5, out_of=None, justification='Accurate.\\n**Score:** 8.5')
        >>> parse_judge_score('{"score": 0.8, "reason": "mostly right"}').justification
        'mostly right'
        >>> parse_judge_score("No idea.") is None
        True
    """
    text = _visible(reply)
    if not text:
        return None
    found = _from_json(text)
    if found is not None:
        return found
    for pattern in (_LABELLED, _FRACTION):
        matches = list(pattern.finditer(text))
        if matches:
            value, out_of = matches[-1].group(1), matches[-1].group(2)
            return JudgeScore(float(value), float(out_of) if out_of else None, text)
    lines = [line for line in text.splitlines() if line.strip()]
    bare = _BARE_LINE.match(lines[-1]) if lines else None
    if bare:
        return JudgeScore(float(bare.group(1)), None, text)
    return None


def _normalise(score: JudgeScore, low: float, high: float) -> float | None:
    """The score in [0, 1], or ``None`` when it lies outside its range."""
    if score.out_of is not None:
        if score.out_of <= 0 or not 0 <= score.value <= score.out_of:
            return None
        return score.value / score.out_of
    if not low <= score.value <= high:
        return None
    return (score.value - low) / (high - low)


# --------------------------------------------------------------------------------------------
# Clients and the endpoint boundary

_clients: dict[Endpoint, SyncModelClient] = {}
_clients_lock = threading.Lock()


def _client(endpoint: Endpoint) -> SyncModelClient:
    """The shared client for this endpoint (URL, model, key, timeout), built on first use (it
    never retries by itself: `rk_agent.retry` does)."""
    with _clients_lock:
        client = _clients.get(endpoint)
        if client is None:
            client = _clients[endpoint] = SyncModelClient(endpoint, retry=JUDGE_RETRY)
        return client


def close_judge_clients() -> None:
    """Close and forget every cached judge client (their connections with them).

    Example:
        >>> close_judge_clients()
    """
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def _ask(client: SyncModelClient, request: dict[str, Any]) -> str | None:
    """Send the request once; the reply's text (``None`` when it has none).

    Raises:
        EndpointError: the client's (`rk_agent.model_client`), or a reply with no choices.
    """
    url = client.endpoint.url
    body = client.request("POST", "/chat/completions", request)
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise EndpointError(f"{url} sent a reply with no choices", url=url)
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None


# --------------------------------------------------------------------------------------------
# The prompt


def _system_prompt(low: float, high: float) -> str:
    return (
        "You are an impartial, strict evaluator. Grade the final response of the conversation "
        "according to the rubric, and nothing else. Explain your judgement in a few sentences, "
        f"then end with a line of the form `Score: <number>` where the number is between {low:g} "
        f"and {high:g} ({high:g} is best)."
    )


def _render(message: Message) -> str:
    text = message.text
    for call in message.tool_calls or ():
        text += f"\n(calls tool {call.function.name} with {call.function.arguments})"
    return text.strip()


def _user_prompt(
    rubric: str,
    context: list[Message],
    response: Message,
    ground_truth: Any,
    low: float,
    high: float,
) -> str:
    parts = [f"# Rubric\n{rubric.strip()}"]
    if context:
        turns = "\n\n".join(f"[{m.role}]\n{_render(m)}" for m in context)
        parts.append(f"# Conversation so far\n{turns}")
    parts.append(f"# Response to grade\n{_render(response) or '(empty response)'}")
    if ground_truth is not None:
        reference = ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth)
        parts.append(f"# Reference answer\n{reference}")
    parts.append(f"End your reply with `Score: <number from {low:g} to {high:g}>`.")
    return "\n\n".join(parts)


# --------------------------------------------------------------------------------------------
# The reward


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:_SNIPPET] + ("..." if len(flat) > _SNIPPET else ""))


def _check_options(
    rubric: str, model: str, score_range: Sequence[float], timeout: float, max_retries: int
) -> tuple[float, float]:
    if not isinstance(rubric, str) or not rubric.strip():
        raise ConfigError("llm_judge reward: rubric must be a non-empty string")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError("llm_judge reward: model must be the judge model's name, e.g. 'gpt-4o'")
    try:
        low, high = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise ConfigError(
            f"llm_judge reward: score_range must be two numbers (low, high), got {score_range!r}"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ConfigError(f"llm_judge reward: score_range needs low < high, got {score_range!r}")
    if not timeout > 0:
        raise ConfigError(f"llm_judge reward: timeout must be > 0 seconds, got {timeout!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"llm_judge reward: max_retries must be an int >= 0, got {max_retries!r}")
    return low, high


def _api_key(api_key: str | None, api_key_env: str, base_url: str | None) -> tuple[str, str]:
    """The key, and where it came from."""
    if api_key:
        return api_key, "api_key"
    key = os.environ.get(api_key_env)
    if key:
        return key, api_key_env
    if base_url is not None:
        return NO_KEY, "none"
    raise ConfigError(
        f"llm_judge reward: no API key for the judge. Pass api_key=..., set ${api_key_env}, or "
        "pass base_url= for a server that needs none"
    )


@reward_function(name="llm_judge", description="An LLM judge grades the response against a rubric.")
def llm_judge_reward(
    messages: list[Message],
    ground_truth: Any = None,
    *,
    rubric: str,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    score_range: tuple[float, float] = (0, 10),
    temperature: float = 0.0,
    max_tokens: int | None = None,
    timeout: float = 60.0,
    max_retries: int = JUDGE_RETRY.max_retries,
    **kwargs: Any,
) -> EvaluateResult:
    """Ask an OpenAI-compatible model to grade the last assistant message against ``rubric``.

    The judge sees the rubric, the conversation before the response, the response, and the
    reference answer when ``ground_truth`` is given, and is asked to end its reply with
    ``Score: <number>`` in ``score_range``. The score is read with `parse_judge_score` and
    scaled to [0, 1]: ``(value - low) / (high - low)``, or ``value / out_of`` when the judge
    wrote a fraction such as ``4/5``. A score outside its range (``Score: 12`` on 0-10) is not
    clamped: it means the judge did not follow the instructions, and the result is invalid.

    Args:
        messages: the conversation; the last assistant message is graded.
        ground_truth: a reference answer shown to the judge (a string, or JSON-dumped).
        rubric: what a good response is, in words.
        model: the judge model's name on the endpoint.
        base_url: the endpoint (e.g. ``"http://localhost:8000/v1"``); default OpenAI (or
            ``$OPENAI_BASE_URL``).
        api_key: the key; defaults to the environment variable named by ``api_key_env``. With
            ``base_url`` and no key, ``"EMPTY"`` is sent, as local servers expect.
        api_key_env: the environment variable holding the key.
        score_range: the judge's scale ``(low, high)``.
        temperature: sampling temperature of the judge.
        max_tokens: a cap on the judge's reply, if any.
        timeout: seconds to wait for each attempt.
        max_retries: retries on connection errors, timeouts, 408/409/429 and 5xx (with backoff,
            honouring ``Retry-After``; `rk_agent.retry.JUDGE_RETRY`).
        **kwargs: ignored.

    Returns:
        The score in [0, 1] with the metric ``judge_score``; ``reason`` carries the judge's
        justification. Invalid (``is_score_valid=False``, ``error`` set) when the endpoint
        fails or the reply holds no score within range.

    Raises:
        ConfigError: an empty rubric or model name, a bad ``score_range``, ``timeout`` or
            ``max_retries``, or no API key and no ``base_url``: these are settings, wrong for
            every sample alike, so they are not turned into invalid results.

    Example:
        >>> result = llm_judge_reward(  # doctest: +SKIP
        ...     [{"role": "user", "content": "Capital of France?"},
        ...      {"role": "assistant", "content": "Paris."}],
        ...     rubric="Correct and concise answers score high.", model="gpt-4o-mini")
        >>> result.score, result.metrics["judge_score"].reason  # doctest: +SKIP
        (1.0, 'judge gave 10 on a 0-10 scale')
    """
    low, high = _check_options(rubric, model, score_range, timeout, max_retries)
    position = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None
    )
    if position is None:
        return no_reply("llm_judge")
    key, key_source = _api_key(api_key, api_key_env, base_url)
    request: dict[str, Any] = {
        "model": model,
        "temperature": temperature,
        "messages": [
            {"role": "system", "content": _system_prompt(low, high)},
            {
                "role": "user",
                "content": _user_prompt(
                    rubric, messages[:position], messages[position], ground_truth, low, high
                ),
            },
        ],
    }
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_URL).rstrip("/")
    client = _client(
        Endpoint(url=url, model=model, key=key, key_source=key_source, timeout_s=float(timeout))
    )
    try:
        reply = retry_call(
            lambda: _ask(client, request), JUDGE_RETRY.replace(max_retries=max_retries)
        )
    except EndpointError as exc:
        error = redact(f"EndpointError: the judge failed: {exc}", [key])
        logger.warning("llm_judge: %s", error)
        return EvaluateResult.invalid(error)
    return _result(reply or "", low, high, key)


def _result(reply: str, low: float, high: float, key: str) -> EvaluateResult:
    if not reply.strip():
        return EvaluateResult.invalid("the judge's reply was empty")
    parsed = parse_judge_score(reply)
    if parsed is None:
        return EvaluateResult.invalid(
            redact(
                f"the judge reply could not be parsed: no score found in {_snippet(reply)}", [key]
            )
        )
    normalised = _normalise(parsed, low, high)
    scale = f"{parsed.out_of:g}" if parsed.out_of is not None else f"{low:g}-{high:g}"
    if normalised is None:
        return EvaluateResult.invalid(
            redact(
                f"the judge's score {parsed.value:g} is outside its range {scale}: "
                f"{_snippet(reply)}",
                [key],
            )
        )
    gave = (
        f"judge gave {parsed.value:g}/{parsed.out_of:g}"
        if parsed.out_of is not None
        else f"judge gave {parsed.value:g} on a {scale} scale"
    )
    why = " ".join(parsed.justification.split())
    why = why[:_REASON_CHARS] + ("..." if len(why) > _REASON_CHARS else "")
    return EvaluateResult(
        score=normalised,
        reason=redact(f"{gave}: {why}", [key]),
        metrics={"judge_score": MetricResult(score=normalised, reason=gave)},
    )
