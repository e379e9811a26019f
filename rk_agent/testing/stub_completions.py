"""What the stub server answers on vLLM's token-id completions endpoint, ``POST /v1/completions``.

vLLM's OpenAI-compatible server takes a prompt as token ids (``"prompt": [151644, 8948, ...]``)
and, asked with ``return_token_ids``, answers with the generated token ids, the prompt's token
ids and, with ``logprobs``, one log-probability per generated token; `VLLMPolicy` relies on it.
This module gives `rk_agent.testing.stub_server.StubServer` the same contract, so tests can
play token-exact episodes over real HTTP without a GPU. The shapes follow vLLM's
``CompletionRequest`` / ``CompletionResponseChoice`` / ``CompletionLogProbs`` (see
`rk_agent.policies.vllm_policy` for the sources).

Scripted replies are text or token ids. Text becomes token ids with the server's tokenizer
(any object with ``encode(text, add_special_tokens=False)`` and ``decode(ids, ...)``, e.g. a
Hugging Face tokenizer), followed by its end-of-sequence token as a chat model ends its turn;
without a tokenizer, each word becomes one stand-in id (CRC32 of the word), as on the chat
endpoint. A reply is:

- a string: the text;
- a dict with any of ``text``, ``tool_calls`` (OpenAI or short form, written into the text in
  the ``tool_call_format``: by default as ``<tool_call>`` blocks, the way Qwen-style templates
  have the model write them),
  ``token_ids`` (sent exactly as given, end token included or not: the text is then decoded
  from them unless given), ``logprobs`` (one per token), ``finish_reason``;
- a whole response body (a dict with ``choices``), sent as given (for the whole request);
- a `Message` (its text and tool calls);
- a `Fault` (handled by the server).

``max_tokens`` (vLLM's default: 16) cuts a reply, with ``finish_reason`` ``"length"``.

Main names: `TextTokenizer`, `CompletionScript`, `completions_body`, `prompts_of`.

Example:
    >>> body = completions_body({"prompt": [5, 6], "return_token_ids": True, "logprobs": 0},
    ...                         ["four"], model="m", tokenizer=None)
    >>> choice = body["choices"][0]
    >>> choice["text"], choice["prompt_token_ids"], choice["logprobs"]["token_logprobs"]
    ('four', [5, 6], [-0.125])
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from rk_agent.errors import ConfigError
from rk_agent.testing.stub_replies import next_id, tool_call_dict, word_token_ids
from rk_agent.tool_calls import HERMES, ToolCallFormat
from rk_agent.types import Message, ToolCall

__all__ = ["CompletionScript", "Prompt", "TextTokenizer", "completions_body", "prompts_of"]

Prompt = str | tuple[int, ...]
"""One prompt of a completions request: text, or token ids."""

_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest.max_tokens default


class TextTokenizer(Protocol):
    """What the stub needs of a tokenizer (a Hugging Face tokenizer has all of it)."""

    eos_token_id: int | None

    def encode(self, text: str, *, add_special_tokens: bool = ...) -> Any:
        """Token ids of ``text`` (a list of ints)."""
        ...

    def decode(self, token_ids: list[int], *, skip_special_tokens: bool = ...) -> Any:
        """The text of ``token_ids`` (a string)."""
        ...


def prompts_of(request: dict[str, Any]) -> list[Prompt] | None:
    """The prompts of a completions request (vLLM's four ``prompt`` forms), or ``None`` when
    ``prompt`` is none of them (empty, or negative token ids)."""
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        return [prompt] if prompt else None
    if not isinstance(prompt, list) or not prompt:
        return None
    if all(_token_id(x) for x in prompt):
        return [tuple(prompt)]
    if all(isinstance(x, str) and x for x in prompt):
        return list(prompt)
    if all(isinstance(x, list) and x and all(_token_id(i) for i in x) for x in prompt):
        return [tuple(x) for x in prompt]
    return None


def _token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class CompletionScript:
    """Picks the scripted reply for a prompt: ``replies[i]`` for a prompt that continues ``i``
    earlier prompts.

    A multi-turn episode's turn ``i`` prompt is its turn ``i - 1`` prompt, plus the reply, plus
    what the environment said, so it starts with each of the episode's ``i`` earlier prompts,
    whatever the chat template. Episodes played side by side, or again in a later training
    step, count the same way. The last reply repeats.

    Example:
        >>> script = CompletionScript(["call", "answer"])
        >>> script.reply((1, 2)), script.reply((1, 2, 3, 4)), script.reply((1, 2))
        ('call', 'answer', 'call')
    """

    def __init__(self, replies: Sequence[Any]) -> None:
        self.replies = list(replies)
        self._seen: set[Prompt] = set()

    def reply(self, prompt: Prompt) -> Any:
        """The reply for ``prompt`` (remembered for the prompts that continue it)."""
        turn = sum(1 for p in self._seen if len(p) < len(prompt) and prompt[: len(p)] == p)
        self._seen.add(prompt)
        return self.replies[min(turn, len(self.replies) - 1)]


def completions_body(
    request: dict[str, Any],
    replies: Sequence[Any],
    *,
    model: str,
    tokenizer: TextTokenizer | None,
    tool_call_format: ToolCallFormat = HERMES,
) -> dict[str, Any]:
    """The ``text_completion`` body answering ``request``, one reply per prompt.

    ``request["n"]`` choices are made per prompt, prompt-major (as vLLM orders them), each with
    that prompt's reply. Token ids (``token_ids``, ``prompt_token_ids``) are added with
    ``return_token_ids``; per-token log-probabilities with ``logprobs`` (tokens spelt
    ``token_id:<id>`` with ``return_tokens_as_token_ids``).

    Args:
        request: the request JSON (its ``prompt`` already checked by `prompts_of`).
        replies: one reply per prompt, see the module docstring (no faults).
        model: the model id, when the request names none.
        tokenizer: turns text into token ids and back; ``None`` for stand-in word ids.
        tool_call_format: how scripted ``tool_calls`` are written into the text (default:
            Hermes ``<tool_call>`` blocks).
    """
    head = {
        "id": f"cmpl-stub-{next_id()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.get("model") or model,
    }
    whole = next((r for r in replies if isinstance(r, dict) and "choices" in r), None)
    if whole is not None:
        return {**head, **whole}
    prompts = prompts_of(request) or []
    n = int(request.get("n") or 1)
    limit = request.get("max_tokens")
    limit = _DEFAULT_MAX_TOKENS if limit is None else int(limit)
    choices: list[dict[str, Any]] = []
    prompt_tokens = completion_tokens = 0
    for prompt, reply in zip(prompts, replies, strict=True):
        prompt_ids = _prompt_ids(prompt, tokenizer)
        prompt_tokens += len(prompt_ids)
        for _ in range(n):
            choice = _choice(request, reply, limit, tokenizer, tool_call_format)
            choice["index"] = len(choices)
            completion_tokens += len(choice["token_ids"])
            if request.get("return_token_ids"):
                choice["prompt_token_ids"] = prompt_ids
            else:
                del choice["token_ids"]
            choices.append(choice)
    return {
        **head,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _prompt_ids(prompt: Prompt, tokenizer: TextTokenizer | None) -> list[int]:
    if isinstance(prompt, tuple):
        return list(prompt)
    if tokenizer is None:
        return word_token_ids(prompt.split())
    return list(tokenizer.encode(prompt, add_special_tokens=False))


def _choice(
    request: dict[str, Any],
    reply: Any,
    limit: int,
    tokenizer: TextTokenizer | None,
    tool_call_format: ToolCallFormat,
) -> dict[str, Any]:
    spec: dict[str, Any]
    if isinstance(reply, str):
        spec = {"text": reply}
    elif isinstance(reply, Message):
        spec = {"text": reply.text, "tool_calls": [c.model_dump() for c in reply.tool_calls or ()]}
    else:
        spec = dict(reply)
    text = spec.get("text") or ""
    calls = [
        tool_call_format.render_call(ToolCall.model_validate(tool_call_dict(call)))
        for call in spec.get("tool_calls") or ()
    ]
    text = "\n".join(part for part in [text, *calls] if part)
    ids, pieces = _tokens(spec, text, tokenizer)
    logprobs = list(spec.get("logprobs") or [-0.125 * (1 + i % 4) for i in range(len(ids))])
    if len(logprobs) != len(ids):
        raise ConfigError(
            f"a scripted reply has {len(ids)} tokens but {len(logprobs)} logprobs; "
            "give one per token."
        )
    finish = spec.get("finish_reason") or "stop"
    if len(ids) > limit:
        ids, pieces, logprobs, finish = ids[:limit], pieces[:limit], logprobs[:limit], "length"
        text = _text(ids, pieces, request, tokenizer)
    elif "token_ids" in spec and "text" not in spec:
        text = _text(ids, pieces, request, tokenizer)
    choice: dict[str, Any] = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish,
        "stop_reason": None,
        "token_ids": ids,
    }
    if request.get("logprobs") is not None:
        choice["logprobs"] = _logprobs(ids, pieces, logprobs, request, tokenizer)
    return choice


def _tokens(
    spec: dict[str, Any], text: str, tokenizer: TextTokenizer | None
) -> tuple[list[int], list[str]]:
    """The reply's token ids, and the word behind each (stand-in ids only; else empty)."""
    if "token_ids" in spec:
        return [int(i) for i in spec["token_ids"]], []
    if tokenizer is None:
        words = text.split()
        return word_token_ids(words), words
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return ids, []


def _text(
    ids: list[int], words: list[str], request: dict[str, Any], tokenizer: TextTokenizer | None
) -> str:
    if tokenizer is None:
        return " ".join(words)
    skip = bool(request.get("skip_special_tokens", True))
    return str(tokenizer.decode(ids, skip_special_tokens=skip))


def _logprobs(
    ids: list[int],
    words: list[str],
    values: list[float],
    request: dict[str, Any],
    tokenizer: TextTokenizer | None,
) -> dict[str, Any]:
    """vLLM's ``CompletionLogProbs``: the sampled token's log-probability at each position."""
    if request.get("return_tokens_as_token_ids"):
        tokens = [f"token_id:{i}" for i in ids]
    elif tokenizer is None:
        tokens = words or [str(i) for i in ids]
    else:
        tokens = [str(tokenizer.decode([i], skip_special_tokens=False)) for i in ids]
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "text_offset": offsets,
        "token_logprobs": values,
        "tokens": tokens,
        "top_logprobs": [{t: v} for t, v in zip(tokens, values, strict=True)],
    }
