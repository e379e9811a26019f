"""`VLLMPolicy`: a model served by vLLM's OpenAI-compatible server, token in, token out.

Multi-turn training needs the very tokens the model sampled. `VLLMPolicy` renders prompts with
the model's own tokenizer and chat template (`rk_agent.policies.chat_template`, as `HFPolicy`
does), sends the prompt's *token ids*
to the server's completions endpoint and reads back the generated *token ids* and their
log-probabilities, so nothing is re-tokenized on either side. `generate_ids` is the
token-level call the trainers' `EpisodeTokens` uses; `generate` (the `Policy` protocol) renders
the conversation first.

The request (``POST {base_url}/completions``) carries: ``model``; ``prompt``, the token ids
(vLLM takes ``list[int]`` as one tokenized prompt and does not tokenize it again);
``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``; ``stop_token_ids``, the
tokenizer's end-of-turn tokens (the same stop rule as `HFPolicy`); ``logprobs: 0`` (the sampled
token's log-probability only); ``return_token_ids: true``; ``return_tokens_as_token_ids: true``;
plus ``extra_body`` (e.g. ``top_k``, ``min_p``, ``repetition_penalty``). From the reply's
``choices[0]`` it reads ``token_ids`` (the generated tokens, end-of-turn token included),
``prompt_token_ids`` (checked to be the ids sent), ``logprobs.token_logprobs`` (one per
generated token), ``text`` (decoded without special tokens, parsed for ``<tool_call>`` blocks)
and ``finish_reason`` (``"stop"`` or ``"length"``); and ``usage``.

Sources for those fields (vLLM versions that TRL 1.16 supports, 0.22 to 0.31):

- vLLM, ``vllm/entrypoints/openai/completion/protocol.py`` (``CompletionRequest``: ``prompt``
  as ``list[int] | list[list[int]] | str | list[str]``, ``logprobs: int``, ``stop_token_ids``,
  ``return_token_ids``, ``return_tokens_as_token_ids``, ``skip_special_tokens``;
  ``CompletionResponseChoice``: ``text``, ``logprobs``, ``finish_reason``, ``stop_reason``,
  ``token_ids``, ``prompt_token_ids``; ``CompletionLogProbs``: ``tokens``,
  ``token_logprobs``, ``top_logprobs``, ``text_offset``), and
  ``vllm/entrypoints/openai/completion/serving.py``
  (``request_output_to_completion_response`` fills ``token_ids`` and ``prompt_token_ids`` only
  with ``return_token_ids``, and one ``token_logprobs`` entry per generated token), read from
  vllm-project/vllm at commits 002032e and 030ea52 (2026). Before that layout the same models
  lived in ``vllm/entrypoints/openai/protocol.py``.
- TRL 1.16, ``trl/generation/vllm_client.py``, ``VLLMClient.generate``: TRL's own server-mode
  generation posts token-id prompts to ``/v1/completions`` with ``return_token_ids`` and
  ``return_tokens_as_token_ids`` and reads ``choices[].prompt_token_ids``,
  ``choices[].token_ids`` and ``choices[].logprobs``; ``VLLMClient.__init__`` takes the model
  id from ``GET /v1/models``.

This contract is tested against the project's stub server
(`rk_agent.testing.stub_server`, which speaks it); it has not yet run against a real vLLM.

Requests go over one HTTP client (`rk_agent.model_client`, as `OpenAIPolicy`'s:
concurrent episodes' turns in parallel; vLLM batches them), whose failures are `EndpointError` /
`ContextOverflowError`; 408, 409, 429, 5xx, connection errors and timeouts are retried
under `rk_agent.retry.MODEL_ENDPOINT_RETRY` (``max_retries`` of them, honouring
``Retry-After``), the same policy as `OpenAIPolicy`'s.

Main names: `VLLMPolicy`, `openai_base_url`.

Example (needs a running server)::

    policy = VLLMPolicy("http://localhost:8000", tokenizer=AutoTokenizer.from_pretrained(path))
    output = await policy.generate_ids(prompt_ids, None, SamplingParams(max_tokens=64))
    output.token_ids, output.logprobs, output.message.content, output.finish_reason
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rk_agent.endpoint_errors import NO_KEY, Endpoint
from rk_agent.errors import ConfigError, EndpointError, UnknownNameError
from rk_agent.model_client import ModelClient
from rk_agent.policies.chat_template import (
    ChatTemplate,
    ToolFormat,
    end_of_turn_ids,
    native_tools,
    read_reply,
)
from rk_agent.policies.policy import PolicyOutput, SamplingParams, Usage
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy, aretry_call
from rk_agent.secrets import redact
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.types import Message

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["VLLMPolicy", "openai_base_url"]


def openai_base_url(url: str) -> str:
    """The OpenAI base URL (ending in ``/v1``) of a server given as ``http://host:port`` (TRL's
    form) or already as ``http://host:port/v1``.

    Example:
        >>> openai_base_url("http://0.0.0.0:8000"), openai_base_url("http://gpu:8000/v1/")
        ('http://0.0.0.0:8000/v1', 'http://gpu:8000/v1')
    """
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"a server URL starts with http:// or https://, got {url!r}")
    return url if url.endswith("/v1") else url + "/v1"


class VLLMPolicy(ChatTemplate):
    """A `Policy` on a vLLM server's token-id completions endpoint (see the module docstring).

    Args:
        base_url: the server, ``http://host:port`` or ``http://host:port/v1``.
        tokenizer: the served model's tokenizer (renders prompts, decodes nothing else).
        model: the served model id; default: the first one ``GET /v1/models`` lists.
        api_key: sent as a bearer token (vLLM's ``--api-key``); default: none.
        eos_ids: the end-of-turn tokens generation stops at; default: the tokenizer's
            end-of-sequence token and ChatML's ``<|im_end|>`` when it has one
            (`end_of_turn_ids`).
        tool_format: ``"native"`` (the chat template renders tools), ``"text"`` (the text
            tool-call protocol in the system prompt) or ``"auto"`` (native when the template
            supports tools), as for `HFPolicy`.
        tool_call_format: the text protocol's format, a `rk_agent.tool_calls.ToolCallFormat` or
            its name: ``"hermes"`` (default, ``<tool_call>`` blocks) or ``"llama3_json"``.
        timeout_s: per-request timeout.
        max_retries: retries of retryable failures; 0 disables them.
        retry: the whole retry policy instead of ``max_retries`` (default:
            `rk_agent.retry.MODEL_ENDPOINT_RETRY` with ``max_retries``).
        extra_body: more request fields (``top_k``, ``min_p``, ``repetition_penalty``, ...).
        name: recorded with trajectories; default: the model id.

    Raises:
        ConfigError: the URL is not an http(s) URL, or a setting is out of range.
    """

    def __init__(
        self,
        base_url: str,
        tokenizer: PreTrainedTokenizerBase,
        *,
        model: str | None = None,
        api_key: str | None = None,
        eos_ids: Iterable[int] | None = None,
        tool_format: ToolFormat = "auto",
        tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
        timeout_s: float = 600.0,
        max_retries: int = 2,
        retry: RetryPolicy | None = None,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if not timeout_s > 0:
            raise ConfigError(f"VLLMPolicy: timeout_s must be > 0 seconds, got {timeout_s!r}")
        if max_retries < 0:
            raise ConfigError(f"VLLMPolicy: max_retries must be >= 0, got {max_retries!r}")
        self.base_url = openai_base_url(base_url)
        self.tokenizer = tokenizer
        self.model = model
        self.name = name or model or self.base_url
        self._named = name is not None
        self._key = api_key or NO_KEY
        self.eos_ids = set(eos_ids) if eos_ids is not None else end_of_turn_ids(tokenizer)
        self.native_tools = native_tools(tokenizer, tool_format)
        self.tool_call_format = get_tool_call_format(tool_call_format)
        self.timeout_s = float(timeout_s)
        self.retry = retry or MODEL_ENDPOINT_RETRY.replace(max_retries=max_retries)
        self.max_retries = self.retry.max_retries
        self.extra_body = dict(extra_body or {})
        self._client: ModelClient | None = None
        self._ready: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"VLLMPolicy(base_url={self.base_url!r}, model={self.model!r})"

    # -- the server ----------------------------------------------------------------------------

    async def connect(self) -> str:
        """Check that the server answers and serves the model; returns the model id.

        Raises:
            EndpointError: no server answers at the URL (its message names the URL).
            ConfigError: the server does not serve ``model`` (the served ids are listed).
        """
        try:
            listed = await self._send("GET", "/models", None, retry=False)
            served = [str(m["id"]) for m in listed["data"]]
        except EndpointError as error:
            raise EndpointError(
                f"no model server answers at {self.base_url} ({error}). Start it first (e.g. "
                "`trl vllm-serve --model MODEL` or `vllm serve MODEL`), or point the rollout "
                "at it (server_url=..., or TRL's vllm_server_base_url / vllm_server_host and "
                "vllm_server_port).",
                status=error.status,
                retryable=error.retryable,
                url=self.base_url,
            ) from error
        except (KeyError, TypeError) as exc:
            raise EndpointError(
                f"{self.base_url}/models did not list models as an OpenAI-compatible server "
                f"does ({type(exc).__name__}: {exc}); is this a vLLM server?",
                status=200,
                url=self.base_url,
            ) from exc
        if self.model is None:
            if not served:
                raise ConfigError(f"{self.base_url}/models lists no model; is it still loading?")
            self.model = served[0]
        elif self.model not in served:
            raise UnknownNameError(
                "served model",
                self.model,
                served,
                hint=f"(from {self.base_url}/models); pass the name the server was started "
                "with (vllm serve --served-model-name).",
            )
        if not self._named:
            self.name = self.model
        return self.model

    async def generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> PolicyOutput:
        """The next assistant message: the conversation rendered, then `generate_ids`."""
        started = time.perf_counter()
        return await self.generate_ids(self.encode(messages, tools), tools, sampling, started)

    async def generate_ids(
        self,
        prompt_ids: list[int],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
        started: float | None = None,
    ) -> PolicyOutput:
        """Generate from prompt tokens the caller built (token in, token out).

        ``tools`` is only used to parse ``<tool_call>`` blocks in the reply's text. The reply's
        token ids end with the end-of-turn token when the model wrote one; ``finish_reason`` is
        ``"length"`` when ``max_tokens`` or the context window cut it, ``"tool_calls"`` when it
        parsed into tool calls, else ``"stop"``.

        Raises:
            ContextOverflowError: the prompt does not fit the served model's context window.
            EndpointError: the request failed (after this policy's retries).
            ConfigError: the server answered without token ids, or with other prompt tokens
                than were sent: it does not keep vLLM's token-id contract.
        """
        started = time.perf_counter() if started is None else started
        if self.model is None:
            await self._connect_once()
        body = await self._send("POST", "/completions", self._request(prompt_ids, sampling))
        try:
            choice = body["choices"][0]
            text = str(choice.get("text") or "")
            finish = choice.get("finish_reason")
            reply_ids = choice.get("token_ids")
            echoed = choice.get("prompt_token_ids")
            logprobs = _token_logprobs(choice.get("logprobs"), reply_ids)
            usage = body.get("usage") or {}
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise EndpointError(
                f"{self.base_url}/completions sent an unreadable completion: "
                f"{type(exc).__name__}: {redact(str(exc), [self._key])[:500]}",
                status=200,
                retryable=True,
                url=self.base_url,
            ) from exc
        self._check_tokens(prompt_ids, reply_ids, echoed)
        reply, finish = read_reply(text, tools, finish, self.tool_call_format)
        return PolicyOutput(
            message=reply.message,
            prompt_token_ids=list(prompt_ids),
            token_ids=list(reply_ids),
            logprobs=logprobs,
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or len(prompt_ids)),
                completion_tokens=int(usage.get("completion_tokens") or len(reply_ids)),
            ),
            finish_reason=finish,
            latency_s=time.perf_counter() - started,
            parse_error=reply.parse_error,
            parse_format=self.tool_call_format if tools else None,
            extra={"id": body.get("id"), "served_model": body.get("model")},
        )

    async def warm_up(self, connections: int = 0) -> None:
        """Import the HTTP stack and open the client now, so that the first request does not
        pay for it, and ``connections`` connections to a plain-HTTP server: the engine and
        rollout workers call it before their first episode, with the episodes they play at
        once."""
        await self._open_client().preconnect(connections)

    async def aclose(self) -> None:
        """Close the HTTP client (the policy can be used again after, from any event loop)."""
        client, self._client = self._client, None
        self._ready = None
        if client is not None:
            await client.aclose()

    # -- requests ------------------------------------------------------------------------------

    def _request(self, prompt_ids: list[int], sampling: SamplingParams) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "stop_token_ids": sorted(self.eos_ids),
            "logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        if sampling.stop:
            request["stop"] = sampling.stop
        if sampling.seed is not None:
            request["seed"] = sampling.seed
        request.update(self.extra_body)
        return request

    def _check_tokens(self, sent: list[int], reply_ids: Any, echoed: Any) -> None:
        if not isinstance(reply_ids, list) or not all(isinstance(i, int) for i in reply_ids):
            raise ConfigError(
                f"{self.base_url}/completions answered without `token_ids` (got "
                f"{type(reply_ids).__name__}); training needs the sampled token ids, which vLLM "
                "returns for `return_token_ids: true` (vLLM >= 0.10.2). Serve the model with "
                "vLLM's OpenAI-compatible server (`vllm serve` or `trl vllm-serve`)."
            )
        if echoed is not None and list(echoed) != sent:
            raise ConfigError(
                f"{self.base_url}/completions generated from other prompt tokens than were "
                f"sent ({len(echoed)} tokens back for {len(sent)} sent); the episode would train "
                "on a sequence the model never saw. Check that the server does not truncate "
                "prompts (truncate_prompt_tokens) or add special tokens to token-id prompts."
            )

    async def _connect_once(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Lock()
        async with self._ready:
            if self.model is None:
                await self.connect()

    async def _send(
        self, method: str, path: str, body: dict[str, Any] | None, *, retry: bool = True
    ) -> Any:
        """One request, JSON back, retried under ``self.retry`` (unless ``retry`` is false)."""
        if not retry:
            return await self._send_once(method, path, body)
        return await aretry_call(lambda: self._send_once(method, path, body), self.retry)

    async def _send_once(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One request, no retry; its failures are the client's `EndpointError` (or
        `ContextOverflowError`)."""
        return await self._open_client().request(method, path, body)

    def _open_client(self) -> ModelClient:
        model = self.model or ""
        if self._client is None or self._client.endpoint.model != model:
            endpoint = Endpoint(
                url=self.base_url,
                model=model,  # known once connect() has asked the server
                key=self._key,
                key_source="argument" if self._key != NO_KEY else "none",
                timeout_s=self.timeout_s,
            )
            if self._client is None:  # retries are ours (self.retry), not the client's
                self._client = ModelClient(endpoint, max_connections=1000, retry=self.retry)
            self._client.endpoint = endpoint
        return self._client


def _token_logprobs(logprobs: Any, reply_ids: Any) -> list[float] | None:
    """One log-probability per generated token, or ``None`` when the server gave none (or not
    one for every token)."""
    if not isinstance(logprobs, Mapping) or not isinstance(reply_ids, list):
        return None
    values = logprobs.get("token_logprobs")
    if not isinstance(values, list) or len(values) != len(reply_ids):
        return None
    if any(not isinstance(v, (int, float)) for v in values):
        return None
    return [float(v) for v in values]
