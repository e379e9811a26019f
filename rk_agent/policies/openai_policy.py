"""A `Policy` on any OpenAI-compatible chat-completions server: Fireworks, OpenAI, vLLM, SGLang,
Ollama, llama.cpp.

It sends plain JSON over ``aiohttp`` (`rk_agent.model_client`: the ``openai`` SDK's
request machinery cost three times the HTTP work itself; imported on first use, so importing
this module stays cheap), and adds what a rollout engine needs around it: its own retries
(`rk_agent.retry`: exponential backoff with full jitter on 408, 409, 429, 5xx, connection
errors and timeouts, honouring ``Retry-After``), a per-request timeout, a
client-side concurrency limit, native tool calling with a fallback to the text tool-call
protocol, and running usage totals. HTTP errors become `EndpointError` /
`ContextOverflowError` in one place, the client, worded by `rk_agent.endpoint_errors`. The API
key never appears in an error message or a ``repr``.

Main names:
    OpenAIPolicy: the policy.
    make_policy: build one from CLI-style settings; a missing key is a `ConfigError` at once.
    PolicyStats: running totals (requests, retries, errors, tokens).
    PROVIDERS: the presets (``"fireworks"``, ``"openai"``).

Example:
    >>> policy = make_policy(base_url="http://127.0.0.1:8000/v1", model="my-model")
    >>> policy
    OpenAIPolicy(model='my-model', base_url='http://127.0.0.1:8000/v1', provider=None)
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rk_agent.endpoint_errors import NO_KEY, Endpoint, rejects_tools, server_message
from rk_agent.errors import ConfigError, ContextOverflowError, EndpointError, UnknownNameError
from rk_agent.model_client import ModelClient, ssl_context
from rk_agent.policies.policy import PolicyOutput, SamplingParams, Usage
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy, aretry_call
from rk_agent.secrets import redact
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.types import Message

__all__ = [
    "PROVIDERS",
    "OpenAIPolicy",
    "PolicyStats",
    "Provider",
    "fireworks_model_hint",
    "make_policy",
]

logger = logging.getLogger(__name__)

Provider = Literal["fireworks", "openai"]


@dataclass(frozen=True)
class _Preset:
    base_url: str
    key_env: str
    model_prefix: str = ""


PROVIDERS: dict[str, _Preset] = {
    "fireworks": _Preset(
        "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY", "accounts/fireworks/models/"
    ),
    "openai": _Preset("https://api.openai.com/v1", "OPENAI_API_KEY"),
}
"""Provider presets: base URL, the environment variable holding the key, the model-name shape."""


@dataclass
class PolicyStats:
    """Running totals of one `OpenAIPolicy`.

    Attributes:
        calls: `generate` calls finished (successful or not).
        requests: HTTP requests sent (retries and tool fall-backs included).
        retries: requests sent again after a retryable failure.
        errors: `generate` calls that raised.
        prompt_tokens: prompt tokens of the successful calls, as the server counted them.
        completion_tokens: completion tokens of the successful calls.
        tool_fallbacks: requests re-sent without ``tools`` because the server rejected them.
    """

    calls: int = 0
    requests: int = 0
    retries: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_fallbacks: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        """The totals as a plain dict (for summaries)."""
        return {**asdict(self), "total_tokens": self.total_tokens}


def fireworks_model_hint(model: str) -> str | None:
    """A hint when ``model`` does not look like a Fireworks model name, else ``None``.

    Example:
        >>> fireworks_model_hint("qwen3-8b")
        "Fireworks model names look like 'accounts/fireworks/models/<name>'; did you mean 'accounts/fireworks/models/qwen3-8b'?"
    """  # noqa: E501  (a doctest's expected output cannot be wrapped)
    if model.startswith("accounts/"):
        return None
    prefix = PROVIDERS["fireworks"].model_prefix
    return f"Fireworks model names look like '{prefix}<name>'; did you mean '{prefix}{model}'?"


def _resolve(
    provider: str | None, base_url: str | None, api_key: str | None
) -> tuple[str, str, str]:
    """``(base_url, key, where the key came from)``; raises `ConfigError` for what is missing."""
    if provider is not None and provider not in PROVIDERS:
        raise UnknownNameError("provider", provider, PROVIDERS, hint="Or pass --base-url.")
    if provider is None:
        if not base_url:
            raise ConfigError(
                "no model endpoint: pass --provider fireworks|openai, or --base-url URL for an "
                "OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp)"
            )
        return base_url, api_key or NO_KEY, "argument" if api_key else "none"
    preset = PROVIDERS[provider]
    key = api_key or os.environ.get(preset.key_env)
    if not key:
        raise ConfigError(
            f"provider {provider!r} needs an API key: set {preset.key_env} or pass --api-key "
            "(api_key=...)"
        )
    return base_url or preset.base_url, key, "argument" if api_key else preset.key_env


class OpenAIPolicy:
    """A `Policy` backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model id (Fireworks: ``accounts/fireworks/models/<name>``).
        base_url: the server's base URL, e.g. ``http://localhost:8000/v1``; overrides the
            provider's.
        api_key: the key; default: the provider's environment variable, or ``"EMPTY"`` for a
            bare ``base_url`` (local servers usually check none).
        provider: ``"fireworks"`` or ``"openai"`` presets (base URL, key variable), or ``None``.
        timeout_s: per-request timeout (connect, and each wait for the server).
        max_retries: retries after a retryable failure (429, 408, 409, 5xx, connection errors,
            timeouts, unreadable replies); 0 disables them.
        max_concurrency: at most this many requests in flight from this policy.
        tool_choice: sent with ``tools``: ``"auto"``, ``"required"``, ``"none"`` or a dict.
        native_tools: ``True`` always sends ``tools`` (native tool calling). ``False`` uses the
            text protocol instead: the tools are described in the system prompt, earlier
            calls and results are sent as text, and the calls in the reply are parsed with
            ``tool_call_format`` (a malformed one sets ``parse_error``). ``None`` (default)
            sends ``tools`` until the server rejects them once (a 4xx saying it does not
            support tools), then uses the text protocol from then on.
        tool_call_format: the text protocol's format, a `rk_agent.tool_calls.ToolCallFormat`
            or its name: ``"hermes"`` (default, ``<tool_call>`` blocks) or ``"llama3_json"``.
        logprobs: ask for per-token log-probabilities.
        return_token_ids: ask a vLLM server for prompt and completion token ids
            (``return_token_ids``, vLLM >= 0.10.2).
        backoff_base_s: the first retry waits up to this long; it doubles per attempt.
        backoff_max_s: the longest wait between attempts, ``Retry-After`` included.
        retry: the whole retry policy instead of ``max_retries`` and ``backoff_*`` (e.g. to
            retry other statuses, or, in tests, to record the waits instead of sleeping).
            Default: `rk_agent.retry.MODEL_ENDPOINT_RETRY` with the three above.
        extra_body: more request fields (``top_k``, ``context_length_exceeded_behavior``, ...).
        name: the policy's name in trajectories; default: ``model``.

    Raises:
        ConfigError: no endpoint, an unknown provider, or a missing key (before any request).

    Example:
        >>> import asyncio
        >>> from rk_agent.testing.stub_server import StubServer
        >>> async def ask(policy):
        ...     try:
        ...         return await policy.generate([Message(role="user", content="2+2?")], None,
        ...                                      SamplingParams())
        ...     finally:
        ...         await policy.aclose()
        >>> with StubServer(["4"]) as server:
        ...     policy = OpenAIPolicy("stub", base_url=server.base_url)
        ...     out = asyncio.run(ask(policy))
        >>> out.message.content, policy.stats.requests
        ('4', 1)
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: Provider | None = None,
        timeout_s: float = 120.0,
        max_retries: int = MODEL_ENDPOINT_RETRY.max_retries,
        max_concurrency: int = 64,
        tool_choice: str | dict[str, Any] = "auto",
        native_tools: bool | None = None,
        tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
        logprobs: bool = False,
        return_token_ids: bool = False,
        backoff_base_s: float = MODEL_ENDPOINT_RETRY.base_s,
        backoff_max_s: float = MODEL_ENDPOINT_RETRY.max_s,
        retry: RetryPolicy | None = None,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIPolicy: pass the model id (--model), e.g. 'gpt-4o-mini'")
        for label, value in (("timeout_s", timeout_s), ("backoff_max_s", backoff_max_s)):
            if not value > 0:
                raise ConfigError(f"OpenAIPolicy: {label} must be > 0 seconds, got {value!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"OpenAIPolicy: max_retries must be an int >= 0, got {max_retries!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
            raise ConfigError(
                f"OpenAIPolicy: max_concurrency must be an int, got {max_concurrency!r}"
            )
        if max_concurrency < 1:
            raise ConfigError(f"OpenAIPolicy: max_concurrency must be >= 1, got {max_concurrency}")
        url, key, self.key_source = _resolve(provider, base_url, api_key)
        self.model = model
        self.name = name or model
        self.provider = provider
        self.base_url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        hint = fireworks_model_hint(model) if provider == "fireworks" else None
        self._endpoint = Endpoint(
            url=self.base_url,
            model=model,
            key=key,
            key_source=self.key_source,
            timeout_s=self.timeout_s,
            model_hint=hint,
        )
        self.retry = retry or MODEL_ENDPOINT_RETRY.replace(
            max_retries=max_retries, base_s=float(backoff_base_s), max_s=float(backoff_max_s)
        )
        self.max_retries = self.retry.max_retries
        self.max_concurrency = max_concurrency
        self.tool_choice = tool_choice
        self.native_tools = native_tools
        self.tool_call_format = get_tool_call_format(tool_call_format)
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        self.backoff_base_s = self.retry.base_s
        self.backoff_max_s = self.retry.max_s
        self.extra_body = dict(extra_body or {})
        self.stats = PolicyStats()
        self._client: ModelClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        if hint:
            logger.warning("model %r: %s", model, hint)

    def __repr__(self) -> str:
        return (
            f"OpenAIPolicy(model={self.model!r}, base_url={self.base_url!r}, "
            f"provider={self.provider!r})"
        )

    def check_endpoint(self, timeout_s: float = 15.0, completion_timeout_s: float = 120.0) -> None:
        """Check once, before a run starts, that the server answers and accepts the key.

        It asks for the models first (``GET <base_url>/models``: cheap, and every hosted API
        answers it). A connection that fails and a refused key (401/403) are fatal there. Any
        other failure of ``/models`` does not decide: some servers cannot list their models
        (``transformers serve`` offline answers 500) or do not serve the route at all, while
        their completions work. Then one real completion of a single token
        (``POST <base_url>/chat/completions``) decides; only if that fails too is it an error.
        So a wrong or unreachable ``--base-url``, a refused key or an unknown model is one clear
        error here instead of a run whose every episode fails.

        Raises:
            EndpointError: what was tried, what came back, and how to fix it (never the key).
        """

        url = f"{self.base_url}/models"
        listed = self._probe("GET", url, None, timeout_s)
        if listed.status_code < 400:
            return
        if listed.status_code in (401, 403):
            raise self._refused(listed, "GET", url)
        chat_url = f"{self.base_url}/chat/completions"
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 1,
        }
        answered = self._probe("POST", chat_url, body, completion_timeout_s)
        if answered.status_code < 400:
            logger.info(
                "%s answered %d; its chat completions work, so the run goes on",
                url, listed.status_code,
            )  # fmt: skip
            return
        if answered.status_code in (401, 403):
            raise self._refused(answered, "POST", chat_url)
        status = answered.status_code
        if status == 404 and listed.status_code == 404:
            fix = (
                "there is no OpenAI-compatible API at this URL; base URLs usually end in /v1, "
                "e.g. --base-url http://localhost:8000/v1."
            )
        else:
            fix = f"the server said: {self._said(answered)}."
        raise EndpointError(
            f"the model server answered {listed.status_code} to GET {url} and {status} to a "
            f"one-token POST {chat_url} (model {self.model!r}): {fix}",
            status=status,
            retryable=status >= 500,
            url=chat_url,
        )

    def _probe(self, method: str, url: str, body: dict[str, Any] | None, timeout_s: float) -> Any:
        """One request of `check_endpoint` on a connection of its own (a server may drop a
        kept-alive connection after an error); a failed connection is the fatal error."""
        import httpx

        key = self._endpoint.key
        try:
            return httpx.request(
                method, url, json=body, headers={"Authorization": f"Bearer {key}"},
                timeout=timeout_s, verify=ssl_context(),
            )  # fmt: skip
        except httpx.HTTPError as exc:
            reason = redact(str(exc), [key]) or type(exc).__name__
            raise EndpointError(
                f"cannot reach the model server: {method} {url} failed ({reason}). Is the "
                "server running, and is --base-url right? OpenAI-compatible servers serve under "
                "/v1, e.g. --base-url http://localhost:8000/v1.",
                retryable=True,
                url=url,
            ) from None

    def _refused(self, response: Any, method: str, url: str) -> EndpointError:
        if self.key_source == "none":
            fix = "the server wants an API key; pass it with --api-key."
        else:
            fix = (
                f"the API key (from {self.key_source}) was refused; pass the right one with "
                "--api-key or its environment variable."
            )
        status = response.status_code
        return EndpointError(
            f"the model server answered {status} to {method} {url}: {fix}",
            status=status,
            retryable=False,
            url=url,
        )

    def _said(self, response: Any) -> str:
        text = server_message(response.text, response.reason_phrase)
        return redact(text, [self._endpoint.key])[:300].strip() or "(no body)"

    # ------------------------------------------------------------------------------------
    # The Policy protocol

    async def generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> PolicyOutput:
        """The next assistant message; see the class docstring for retries and errors.

        Raises:
            ContextOverflowError: the conversation does not fit the model's context window.
            EndpointError: a non-retryable failure, or the last of ``max_retries + 1``
                retryable ones; ``status``, ``retryable`` and ``url`` are set and the message
                carries the server's own.
        """
        limit = self._semaphore
        if limit is None:
            limit = self._semaphore = asyncio.Semaphore(self.max_concurrency)
        queued = time.perf_counter()
        # acquire and release rather than ``async with``: two coroutines fewer a call, on the
        # rollout engine's hot path (docs/development.md, "Hand-made machinery: what it buys")
        await limit.acquire()
        try:
            start = time.perf_counter()
            output = await self._with_retries(messages, tools, sampling)
            output.latency_s = time.perf_counter() - start
            output.extra["queued_s"] = start - queued
        except EndpointError:
            self.stats.errors += 1
            raise
        finally:
            self.stats.calls += 1
            limit.release()
        if output.usage is not None:
            self.stats.prompt_tokens += output.usage.prompt_tokens
            self.stats.completion_tokens += output.usage.completion_tokens
        return output

    async def aclose(self) -> None:
        """Close the HTTP client and its connections (the policy can be used again after)."""
        client, self._client = self._client, None
        self._semaphore = None  # a next use may come from another event loop
        if client is not None:
            await client.aclose()

    # ------------------------------------------------------------------------------------
    # Retries

    async def _with_retries(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, sampling: SamplingParams
    ) -> PolicyOutput:
        attempts = 0
        native = False

        async def attempt() -> PolicyOutput:
            nonlocal attempts, native
            attempts += 1
            while True:
                native = bool(tools) and self.native_tools is not False
                request = self._request(messages, tools, sampling, native=native)
                self.stats.requests += 1
                try:
                    return await self._send(request)
                except ContextOverflowError:
                    raise
                except EndpointError as error:
                    if not (native and self.native_tools is None and rejects_tools(error)):
                        raise
                    logger.warning(
                        "%s rejected `tools` (%s); using the text tool-call protocol from now "
                        "on. Pass native_tools=False to skip this.",
                        self.base_url,
                        error,
                    )
                    self.native_tools = False
                    self.stats.tool_fallbacks += 1

        def count_retry(error: EndpointError, failed: int, delay: float) -> None:
            self.stats.retries += 1

        output = await aretry_call(attempt, self.retry, on_retry=count_retry)
        if tools and not native:
            parsed = self.tool_call_format.parse(output.message.text, tools)
            parsed.message.reasoning_content = output.message.reasoning_content
            output.message, output.parse_error = parsed.message, parsed.parse_error
            output.parse_format = self.tool_call_format
        output.extra["attempts"] = attempts
        output.extra["tool_protocol"] = ("native" if native else "text") if tools else None
        if tools:  # what a run records (rk_agent.runs.provenance)
            output.extra["tool_call_format"] = "native" if native else self.tool_call_format.name
        return output

    # ------------------------------------------------------------------------------------
    # One request

    def _request(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
        *,
        native: bool,
    ) -> dict[str, Any]:
        if tools and not native:
            wire: list[dict[str, Any]] = self.tool_call_format.render_messages(messages, tools)
        else:
            wire = [_wire(m) for m in messages]
        request: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        # OpenAI's newer models take only `max_completion_tokens`; other servers know `max_tokens`.
        limit_name = "max_completion_tokens" if self.provider == "openai" else "max_tokens"
        request[limit_name] = sampling.max_tokens
        if sampling.stop:
            request["stop"] = sampling.stop
        if sampling.seed is not None:
            request["seed"] = sampling.seed
        if tools and native:
            request["tools"] = tools
            request["tool_choice"] = self.tool_choice
        if self.logprobs:
            request["logprobs"] = True
        if self.return_token_ids:
            request["return_token_ids"] = True  # vLLM's extension
        request.update(self.extra_body)
        return request

    async def warm_up(self, connections: int = 0) -> None:
        """Import the HTTP stack and open the client now, so that the first request does not
        pay for it, and ``connections`` connections to a plain-HTTP server (at most
        ``max_concurrency``): the engine and rollout workers call it before their first
        episode, with the episodes they play at once."""
        await self._open_client().preconnect(min(connections, self.max_concurrency))

    def _open_client(self) -> ModelClient:
        if self._client is None:
            self._client = ModelClient(
                self._endpoint,
                max_connections=self.max_concurrency,
                retry=self.retry,
                headers=_openai_headers() if self.provider == "openai" else None,
            )
        return self._client

    async def _send(self, request: dict[str, Any]) -> PolicyOutput:
        """One HTTP request (the client turns its failures into `EndpointError`)."""
        body = await self._open_client().request("POST", "/chat/completions", request)
        try:
            return _output(body)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise EndpointError(
                f"{self.base_url} sent an unreadable completion: {type(exc).__name__}: "
                f"{redact(str(exc), [self._endpoint.key])[:500]}",
                status=200,
                retryable=True,
                url=self.base_url,
            ) from exc


# ----------------------------------------------------------------------------------------
# Helpers


def make_policy(
    *,
    model: str | None,
    provider: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> OpenAIPolicy:
    """Build an `OpenAIPolicy` from CLI-style settings, checking them before any work.

    Args:
        model: the model id (``--model``).
        provider: ``"fireworks"``, ``"openai"`` or ``None`` (``--provider``).
        base_url: an OpenAI-compatible server (``--base-url``); overrides the provider's.
        api_key: the key (``--api-key``); default: the provider's environment variable.
        **options: the other `OpenAIPolicy` arguments (``timeout_s``, ``max_concurrency``, ...).

    Raises:
        ConfigError: no model, no endpoint, an unknown provider (did you mean ...?), or a
            provider whose key is missing ("set FIREWORKS_API_KEY or pass --api-key").

    Example:
        >>> make_policy(provider="fireworks", model="accounts/fireworks/models/qwen3-8b",
        ...             api_key="fw-example-key")
        OpenAIPolicy(model='accounts/fireworks/models/qwen3-8b', base_url='https://api.fireworks.ai/inference/v1', provider='fireworks')
    """  # noqa: E501  (a doctest's expected output cannot be wrapped)
    _resolve(provider, base_url, api_key)  # endpoint and key problems first: they need no model
    if not model:
        example = "accounts/fireworks/models/qwen3-8b" if provider == "fireworks" else "MODEL"
        raise ConfigError(
            f"no model: pass --model (e.g. --model {example}); an OpenAI-compatible server lists "
            "its models at GET <base-url>/models"
        )
    return OpenAIPolicy(
        model,
        provider=provider,  # type: ignore[arg-type]  # checked by _resolve above
        base_url=base_url,
        api_key=api_key,
        **options,
    )


def _openai_headers() -> dict[str, str]:
    """OpenAI's organization and project headers, from the variables its SDK reads
    (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``), when they are set."""
    names = {"OPENAI_ORG_ID": "OpenAI-Organization", "OPENAI_PROJECT_ID": "OpenAI-Project"}
    return {header: os.environ[var] for var, header in names.items() if os.environ.get(var)}


def _wire(message: Message) -> dict[str, Any]:
    """The message as sent: standard fields only (no ``reasoning_content`` or extras, which
    some servers reject in a request), without nulls; the same dict as
    ``message.to_openai()`` cut to those fields, read off the attributes (a sixth of
    ``model_dump``'s time, for every message of every request)."""
    data: dict[str, Any] = {"role": message.role}
    if message.content is not None:
        data["content"] = message.content
    if message.name is not None:
        data["name"] = message.name
    if message.tool_calls is not None:
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": call.type,
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    return data


def _output(body: Any) -> PolicyOutput:
    """Our `PolicyOutput` from a chat-completion body (a dict decoded from JSON).

    Raises:
        KeyError, IndexError, TypeError, ValueError: the body is not a chat completion.
    """
    # Decoded JSON holds plain dicts: `isinstance(..., dict)`, not the ABC's slower check.
    choice = body["choices"][0]
    wire = choice["message"]
    reasoning = wire.get("reasoning_content") or wire.get("reasoning")
    calls = None
    wire_calls = wire.get("tool_calls")
    if wire_calls:
        calls = []
        for index, call in enumerate(wire_calls):
            function = call.get("function")
            if isinstance(function, dict):
                calls.append({
                    "id": call.get("id") or f"call_{index}",
                    "function": {
                        "name": function["name"],
                        "arguments": function.get("arguments") or "{}",
                    },
                })  # fmt: skip
    # Decoded JSON, validated by the model (a server that sent arguments as an object: the
    # model serialises them).
    message = Message.model_validate({
        "role": "assistant",
        "content": wire.get("content"),
        "tool_calls": calls or None,
        "reasoning_content": reasoning if isinstance(reasoning, str) else None,
    })  # fmt: skip
    logprobs = None
    choice_logprobs = choice.get("logprobs")
    if choice_logprobs:
        content_logprobs = choice_logprobs.get("content")
        if content_logprobs is not None:
            logprobs = [float(item["logprob"]) for item in content_logprobs]
    usage = None
    counts = body.get("usage")
    if isinstance(counts, dict):  # servers omit fields; we fill them with 0
        usage = Usage(
            prompt_tokens=counts.get("prompt_tokens") or 0,
            completion_tokens=counts.get("completion_tokens") or 0,
        )
    token_ids = choice.get("token_ids")  # vLLM's `return_token_ids`
    prompt_token_ids = body.get("prompt_token_ids")
    return PolicyOutput(
        message=message,
        prompt_token_ids=list(prompt_token_ids) if prompt_token_ids else None,
        token_ids=list(token_ids) if token_ids else None,
        logprobs=logprobs,
        usage=usage,
        finish_reason=choice.get("finish_reason"),
        extra={"id": body.get("id"), "served_model": body.get("model")},
    )
