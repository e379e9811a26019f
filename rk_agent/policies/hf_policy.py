"""`HFPolicy`: a local Hugging Face model, in process, with dynamic batching.

Concurrent episodes each ``await policy.generate(...)``; their requests go to one queue. A single
background worker thread takes whatever is pending (up to ``max_batch_size``, waiting while more
requests keep arriving within ``max_wait_ms`` of each other), left-pads the prompts, runs one
``model.generate`` for the batch, and hands each caller its own result. On a CPU, eight
conversations generate several times faster together than one after another.

Requests batch together when they share the sampling *distribution*: all greedy ones
(``temperature=0``), or sampled ones with the same temperature and top-p. ``max_tokens`` and
``stop`` strings may differ inside a batch (each row stops on its own). Different distributions
in one collected batch are run as separate ``generate`` calls, in order of arrival. A ``seed``
seeds torch's global generator before the batch (from all the batch's seeds), so a sampled reply
is reproducible only for the same batch composition; run with ``batching=False`` for exact
per-request seeding.

Multi-turn: each conversation's KV cache is kept between its turns (``reuse_kv``), so a turn
prefills only what is new since the last one (the environment's reply), not the whole
conversation again; see `rk_agent.policies._kv_reuse`.

Stopping: `abort` (what a trainer calls when Ctrl-C stops a step) ends the batch being
generated at its next token and answers every queued request with an `EndpointError`; `close`
then returns at once, and a Ctrl-C that arrives while it waits for the worker does not leave
the worker running in torch (a process that exits with such a thread alive can end in a native
abort, ``terminate called without an active exception``).

Memory: the KV cache, the batch being generated and the conversations kept for their next
turn together, is budgeted in bytes (``kv_cache_bytes``; by default 1 GiB, or one conversation
of the model's whole context if more, within a quarter of the machine's memory): a batch that
would not fit is generated in parts, and kept conversations are dropped oldest first. Each
``generate`` call allocates its cache once, at its final length
(`rk_agent.policies._kv_buffers.ReservedCache`), so nothing is allocated per token and memory
does not grow with the length of the run.

Tool calls: when the model's chat template renders tools (``tools=`` to
``apply_chat_template``, e.g. the Qwen2.5 template the embedded model carries), the template
does it; otherwise the policy's text tool-call format (``tool_call_format``, a
`rk_agent.tool_calls.ToolCallFormat`, Hermes ``<tool_call>`` blocks by default) describes the
tools in the system prompt. Either way the calls in the reply are parsed into ``tool_calls``
(``<tool_call>{json}</tool_call>`` blocks unless another format is set); a malformed one sets
``PolicyOutput.parse_error``. Prompts are
rendered and replies read by `rk_agent.policies.chat_template`, which `VLLMPolicy` shares.

Main names: `HFPolicy`, `BatchStats`, `default_kv_cache_bytes`.

Example (loads the embedded model on first use):

    import asyncio
    from rk_agent.policies.policy import SamplingParams
    from rk_agent.types import Message

    policy = HFPolicy()  # SmolLM2-135M-Instruct; or HFPolicy("path/to/model")
    reply = asyncio.run(policy.generate(
        [Message(role="user", content="Hi!")], None, SamplingParams(temperature=0, max_tokens=20)
    ))
    print(reply.message.content, reply.finish_reason, len(reply.token_ids))
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from rk_agent.errors import (
    ConfigError,
    ContextOverflowError,
    EndpointError,
    require_extra,
    sentence,
)
from rk_agent.policies.chat_template import (
    ChatTemplate,
    ToolFormat,
    end_of_turn_ids,
    native_message,
    native_tools,
    read_reply,
)
from rk_agent.policies.local_model import (
    DEFAULT_MODEL,
    check_model_folder,
    is_embedded,
    resolve_model,
)
from rk_agent.policies.policy import PolicyOutput, SamplingParams, Usage
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.types import Message

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["BatchStats", "HFPolicy", "default_kv_cache_bytes", "native_message"]


@dataclass
class BatchStats:
    """What the worker has done so far.

    Attributes:
        batches: ``model.generate`` calls made.
        requests: requests answered.
        generated_tokens: new tokens returned to callers.
        generate_s: seconds spent inside ``model.generate``.
        sizes: how many batches had each size, e.g. ``Counter({8: 12, 3: 1})``.
        reused_tokens: prompt tokens taken from earlier turns' KV cache instead of prefilled.
        kv_bytes_peak: the most KV bytes held at the start of a ``generate`` call (the batch's
            whole length, and the conversations kept for reuse), as the policy counts them
            against ``kv_cache_bytes``.
    """

    batches: int = 0
    requests: int = 0
    generated_tokens: int = 0
    generate_s: float = 0.0
    sizes: Counter[int] = field(default_factory=Counter)
    reused_tokens: int = 0
    kv_bytes_peak: int = 0

    @property
    def mean_batch_size(self) -> float:
        """Requests per ``generate`` call (0.0 before the first)."""
        return self.requests / self.batches if self.batches else 0.0


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    max_new_tokens: int
    future: asyncio.Future[_Generated]
    loop: asyncio.AbstractEventLoop
    submitted: float


@dataclass
class _Generated:
    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "stop" or "length"
    batch_size: int
    queue_s: float
    generate_s: float


def _group_key(sampling: SamplingParams) -> tuple[Any, ...]:
    if sampling.temperature == 0:
        return ("greedy",)
    return ("sample", sampling.temperature, sampling.top_p)


class HFPolicy(ChatTemplate):
    """A local transformers model as a `Policy`, batching concurrent requests dynamically.

    Args:
        model: a local folder, a hub id, the embedded model's name (the default), or a loaded
            ``PreTrainedModel`` (then ``tokenizer`` is required and the model is used as is).
        tokenizer: the tokenizer, when ``model`` is an object (else loaded from the folder).
        device: ``"cpu"``, ``"cuda"``, ...; default: CUDA when available, else the CPU.
        dtype: torch dtype of the weights; default: float32 on the CPU, bfloat16 on CUDA.
        max_batch_size: most requests per ``model.generate`` call.
        max_wait_ms: the worker starts a batch that is not full once no new request has arrived
            for this long.
        batching: ``False`` generates one request at a time (for comparisons).
        tool_format: ``"native"`` (the chat template renders tools), ``"text"`` (the text
            protocol), or ``"auto"``: native when the template supports tools.
        tool_call_format: the text protocol's format, a `rk_agent.tool_calls.ToolCallFormat` or
            its name: ``"hermes"`` (default, ``<tool_call>`` blocks) or ``"llama3_json"``.
        max_context: the context window in tokens; default: the model's
            ``max_position_embeddings``.
        name: recorded with trajectories; default: the model spec.
        generate_kwargs: extra ``GenerationConfig`` fields for every call (e.g.
            ``{"min_new_tokens": 64}`` to ignore EOS in benchmarks).
        reuse_kv: keep each conversation's KV cache between turns, so a turn only prefills
            its new tokens (`rk_agent.policies._kv_reuse`). The cache is only valid while the
            weights do not change: the default is on when the policy loads the model itself,
            off for a model object passed in (it may be training); pass ``True`` when its
            weights stay fixed for the policy's life.
        kv_cache_bytes: the most bytes of KV cache held at once (the batch being generated
            and the conversations kept for reuse; briefly up to a batch's more while one is
            handed over). Default: `default_kv_cache_bytes` (1 GiB, or one conversation of
            ``max_context`` if more, within a quarter of the device's memory). It must hold
            one conversation as long as ``max_context``.

    Raises:
        ConfigError: the model or tokenizer could not be loaded, a setting is out of range, or
            ``kv_cache_bytes`` cannot hold one conversation of ``max_context`` tokens.

    Example:
        >>> policy = HFPolicy("smollm2-135m", max_batch_size=8)  # doctest: +SKIP
        >>> policy.stats.mean_batch_size  # doctest: +SKIP
        0.0
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | PreTrainedModel | None = DEFAULT_MODEL,
        *,
        tokenizer: PreTrainedTokenizerBase | None = None,
        device: str | None = None,
        dtype: torch.dtype | None = None,
        max_batch_size: int = 8,
        max_wait_ms: float = 20.0,
        batching: bool = True,
        tool_format: ToolFormat = "auto",
        tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
        max_context: int | None = None,
        name: str | None = None,
        generate_kwargs: dict[str, Any] | None = None,
        reuse_kv: bool | None = None,
        kv_cache_bytes: int | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be at least 1, got {max_batch_size}.")
        if max_wait_ms < 0:
            raise ConfigError(f"max_wait_ms must be >= 0, got {max_wait_ms}.")
        if tool_format not in ("auto", "native", "text"):
            raise ConfigError(
                f"tool_format must be 'auto', 'native' or 'text', got {tool_format!r}."
            )
        require_extra(
            "local", "HFPolicy (a model in this process)", modules=("torch", "transformers")
        )
        from transformers import PreTrainedModel

        from rk_agent.policies._kv_buffers import full_attention_layers, kv_bytes_per_token
        from rk_agent.policies._kv_reuse import PrefixCache

        self.model, self.tokenizer = _load(model, tokenizer, device, dtype)
        if reuse_kv is None:
            reuse_kv = not isinstance(model, PreTrainedModel)
        # Cached turns rely on position ids taken from the attention mask (padding skipped).
        reuse_kv = reuse_kv and "position_ids" in inspect.signature(self.model.forward).parameters
        self.name = name or _default_name(model, self.model)
        self.max_batch_size = max_batch_size if batching else 1
        self.max_wait_s = max_wait_ms / 1000 if batching else 0.0
        self.batching = batching
        self.generate_kwargs = dict(generate_kwargs or {})
        self.max_context = max_context or _max_positions(self.model)
        self.native_tools = native_tools(self.tokenizer, tool_format)
        self.tool_call_format = get_tool_call_format(tool_call_format)
        self.eos_ids = end_of_turn_ids(self.tokenizer, self.model.generation_config)
        pad = self.tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else min(self.eos_ids)
        self.stats = BatchStats()
        self._layers = full_attention_layers(self.model)
        self.kv_bytes_per_token = kv_bytes_per_token(self.model)
        whole = (self.kv_bytes_per_token or 0) * self.max_context  # one conversation at most
        self.kv_cache_bytes = kv_cache_bytes or default_kv_cache_bytes(
            self.model.device.type, whole
        )
        self._check_kv_budget(kv_cache_bytes is not None)
        reuse_kv = reuse_kv and self._layers is not None
        self._kv_cache = PrefixCache(self.kv_cache_bytes) if reuse_kv else None
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._abort = threading.Event()
        self._finished = threading.Event()  # set by the worker thread as it ends

    # -- the Policy protocol -------------------------------------------------------------------

    async def generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> PolicyOutput:
        """Generate the next assistant message (queued and batched with concurrent calls).

        When ``tools`` are offered, ``<tool_call>`` blocks in the reply become ``tool_calls``
        (names checked against ``tools``); a malformed call leaves the raw text as content and
        sets ``parse_error``. ``finish_reason`` is ``"length"`` when ``max_tokens`` or the
        context window cut the reply, ``"tool_calls"`` when it parsed into tool calls, else
        ``"stop"``. The reply's token ids end with the end-of-sequence token when there was one;
        the text does not.

        Raises:
            ContextOverflowError: the prompt is longer than the model's context window.
            EndpointError: the policy is closed, or generation itself failed.
        """
        started = time.perf_counter()
        return await self.generate_ids(self.encode(messages, tools), tools, sampling, started)

    async def generate_ids(
        self,
        prompt_ids: list[int],
        tools: list[dict[str, Any]] | None,
        sampling: SamplingParams,
        started: float | None = None,
    ) -> PolicyOutput:
        """`generate` from prompt tokens the caller built (token in, token out).

        Trainers use it to continue an episode exactly on the tokens the model produced, instead
        of a re-rendered conversation. ``tools`` is only used to parse the reply.

        Raises:
            ContextOverflowError: the prompt is longer than the model's context window.
            EndpointError: the policy is closed, or generation itself failed.
        """
        started = time.perf_counter() if started is None else started
        room = self.max_context - len(prompt_ids)
        if room <= 0:
            raise ContextOverflowError(
                f"the prompt has {len(prompt_ids)} tokens but {self.name} takes at most "
                f"{self.max_context}; shorten the conversation (fewer turns, shorter tool "
                "results) or use a model with a longer context."
            )
        loop = asyncio.get_running_loop()
        request = _Request(
            prompt_ids=prompt_ids,
            sampling=sampling,
            max_new_tokens=min(sampling.max_tokens, room),
            future=loop.create_future(),
            loop=loop,
            submitted=time.perf_counter(),
        )
        self._submit(request)
        generated = await request.future
        reply, finish = read_reply(
            generated.text, tools, generated.finish_reason, self.tool_call_format
        )
        return PolicyOutput(
            message=reply.message,
            prompt_token_ids=prompt_ids,
            token_ids=generated.token_ids,
            logprobs=generated.logprobs,
            usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(generated.token_ids)),
            finish_reason=finish,
            latency_s=time.perf_counter() - started,
            parse_error=reply.parse_error,
            parse_format=self.tool_call_format if tools else None,
            extra={
                "batch_size": generated.batch_size,
                "queue_s": round(generated.queue_s, 6),
                "generate_s": round(generated.generate_s, 6),
            },
        )

    async def aclose(self) -> None:
        """Finish the requests already queued, then stop the worker thread.

        The model stays loaded (it may be shared, e.g. with a trainer); cached GPU memory is
        freed.
        """
        worker = self._stop()
        if worker is not None:
            await asyncio.to_thread(worker.join)
        self._release()

    def close(self) -> None:
        """`aclose` for code without an event loop.

        A Ctrl-C while it waits for the worker aborts the generation (`abort`) and is raised
        again once the worker has stopped: the worker is never left running.
        """
        worker = self._stop()
        if worker is not None:
            # Waited on an event the worker sets as it ends, not on `join`: a join cut short by
            # KeyboardInterrupt can leave the thread reported as stopped while it still runs.
            interrupted = False
            while True:
                try:
                    self._finished.wait()
                    break
                except KeyboardInterrupt:
                    self._abort.set()
                    interrupted = True
            if interrupted:
                self._release()
                raise KeyboardInterrupt
        self._release()

    def abort(self) -> None:
        """Stop generating now and close: the batch being generated ends at its next token, and
        it and every queued request are answered with an `EndpointError`. Follow with `close`
        (or `aclose`), which then returns at once."""
        self._abort.set()
        self._stop()

    # -- the worker ----------------------------------------------------------------------------

    def _submit(self, request: _Request) -> None:
        with self._lock:
            if self._closed:
                raise EndpointError(f"the HFPolicy {self.name!r} is closed; create a new one.")
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name=f"rk-agent-hf-{self.name}", daemon=True
                )
                self._worker.start()
            self._queue.put(request)

    def _stop(self) -> threading.Thread | None:
        """Close the queue (once) and return the worker thread to join, if one started."""
        with self._lock:
            if self._closed:
                return self._worker
            self._closed = True
            if self._worker is not None:
                self._queue.put(None)
            return self._worker

    def _release(self) -> None:
        import torch

        if self._kv_cache is not None:
            self._kv_cache.clear()

        if self.model.device.type == "cuda":
            torch.cuda.empty_cache()

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            self._finished.set()

    def _serve(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch_size:
                try:  # the wait restarts with every arrival: a burst of requests is one batch
                    item = self._queue.get(
                        timeout=self.max_wait_s or None, block=self.max_wait_s > 0
                    )
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            if self._abort.is_set():
                for request in batch:
                    _resolve(request, error=_aborted())
                continue
            live = [r for r in batch if not r.future.cancelled()]
            groups: dict[tuple[Any, ...], list[_Request]] = {}
            for request in live:
                groups.setdefault(_group_key(request.sampling), []).append(request)
            for group in groups.values():
                self._run_group(group)

    def _check_kv_budget(self, given: bool) -> None:
        per_token = self.kv_bytes_per_token
        if per_token is None:
            return
        row = per_token * self.max_context
        if self.kv_cache_bytes < row:
            where = "kv_cache_bytes" if given else "the default kv_cache_bytes"
            raise ConfigError(
                f"{where}={self.kv_cache_bytes:,} cannot hold one conversation of "
                f"{self.name}'s {self.max_context:,}-token context ({row:,} bytes at "
                f"{per_token:,} bytes a token); give kv_cache_bytes of at least {row:,}, or a "
                "smaller max_context."
            )

    def _fitting(self, group: list[_Request]) -> list[list[_Request]]:
        """``group`` in parts whose KV cache fits ``kv_cache_bytes`` (one part when it fits)."""
        per_token = self.kv_bytes_per_token
        if per_token is None:
            return [group]
        parts: list[list[_Request]] = [[]]
        longest = 0
        for request in group:
            length = max(longest, len(request.prompt_ids) + request.max_new_tokens)
            if parts[-1] and (len(parts[-1]) + 1) * length * per_token > self.kv_cache_bytes:
                parts.append([])
                length = len(request.prompt_ids) + request.max_new_tokens
            parts[-1].append(request)
            longest = length
        return parts

    def _run_group(self, group: list[_Request]) -> None:
        for part in self._fitting(group):
            self._run_part(part)

    def _run_part(self, group: list[_Request]) -> None:
        from rk_agent.policies._hf_generation import BatchRow, generate_rows

        started = time.perf_counter()
        per_token = self.kv_bytes_per_token
        if per_token is not None:
            longest = max(len(r.prompt_ids) + r.max_new_tokens for r in group)
            live = len(group) * longest * per_token
            kept = 0
            if self._kv_cache is not None:
                self._kv_cache.make_room(live)
                kept = self._kv_cache.bytes
            self.stats.kv_bytes_peak = max(self.stats.kv_bytes_peak, kept + live)
        try:
            rows = generate_rows(
                self.model,
                self.tokenizer,
                [BatchRow(r.prompt_ids, r.max_new_tokens, r.sampling.stop) for r in group],
                _batch_sampling(group),
                eos_ids=self.eos_ids,
                pad_id=self.pad_id,
                generate_kwargs=self.generate_kwargs,
                cache=self._kv_cache,
                layers=self._layers,
                abort=self._abort,
            )
            if self._abort.is_set():  # cut short: what was generated is no reply
                raise _aborted()
        except Exception as exc:  # one failure answers every caller of the batch
            error = EndpointError(f"local generation failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            for request in group:
                _resolve(request, error=error)
            return
        elapsed = time.perf_counter() - started
        self.stats.batches += 1
        self.stats.requests += len(group)
        self.stats.sizes[len(group)] += 1
        self.stats.generate_s += elapsed
        if self._kv_cache is not None:
            self.stats.reused_tokens = self._kv_cache.reused_tokens
        for request, (token_ids, logprobs, text, finish) in zip(group, rows, strict=True):
            self.stats.generated_tokens += len(token_ids)
            generated = _Generated(
                token_ids, logprobs, text, finish, len(group), started - request.submitted, elapsed
            )
            _resolve(request, result=generated)


def _batch_sampling(group: list[_Request]) -> SamplingParams:
    """The group's shared sampling, seeded from all its seeds (none if one request has none)."""
    seeds = [r.sampling.seed for r in group]
    seed = None
    if all(s is not None for s in seeds):
        seed = seeds[0] if len(seeds) == 1 else hash(tuple(seeds)) % (2**63)
    return group[0].sampling.model_copy(update={"seed": seed})


def _aborted() -> EndpointError:
    return EndpointError("local generation was stopped (HFPolicy.abort): the run is ending.")


def _resolve(
    request: _Request, result: _Generated | None = None, error: BaseException | None = None
) -> None:
    """Answer a caller from the worker thread, on the caller's own event loop."""

    def answer() -> None:
        if request.future.done():  # cancelled meanwhile (e.g. the episode timed out)
            return
        if error is not None:
            request.future.set_exception(error)
        else:
            request.future.set_result(result)  # type: ignore[arg-type]

    # A closed loop (RuntimeError) means the caller is gone: nobody is waiting any more.
    with contextlib.suppress(RuntimeError):
        request.loop.call_soon_threadsafe(answer)


# -- loading -----------------------------------------------------------------------------------


def _load(
    spec: str | os.PathLike[str] | PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase | None,
    device: str | None,
    dtype: torch.dtype | None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

    if isinstance(spec, PreTrainedModel):
        if tokenizer is None:
            raise ConfigError("HFPolicy(model=<a loaded model>) also needs tokenizer=...")
        return spec, tokenizer
    path = resolve_model(spec)
    check_model_folder(path)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        loaded_tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"could not load the model {path!r}: {sentence(str(exc))} Give a local model folder, "
            f"a hub id that is cached or reachable, or {DEFAULT_MODEL!r} for the embedded model."
        ) from exc
    return cast(Any, model).to(device).eval(), loaded_tokenizer


def _default_name(
    spec: str | os.PathLike[str] | PreTrainedModel | None, model: PreTrainedModel
) -> str:
    if spec is None or is_embedded(spec):
        return DEFAULT_MODEL
    if isinstance(spec, (str, os.PathLike)):
        return os.fspath(spec)
    return str(getattr(model.config, "name_or_path", "") or type(model).__name__)


def _max_positions(model: PreTrainedModel) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
    value = getattr(config or model.config, "max_position_embeddings", None)
    return int(value) if value else 2048


def default_kv_cache_bytes(device: str = "cpu", conversation_bytes: int = 0) -> int:
    """The default KV budget of a policy on ``device``: 1 GiB, or one conversation of the
    model's whole context (``conversation_bytes``) where that is more, and never over a quarter
    of the device's memory (the machine's for the CPU, the GPU's own otherwise).

    1 GiB holds the embedded model's batch of 32 and what it keeps for reuse: measured with
    ``benchmarks/bench_policy_memory.py`` (``max_batch_size`` 32, 2 cores), the rollout's peak
    resident memory was 3.43 GB at 1 GiB against 4.58 GB at 2 GiB, at the same episodes/s.

    Example:
        >>> default_kv_cache_bytes("cpu") <= 1024**3
        True
    """
    wanted = max(1024**3, conversation_bytes)
    total = _device_memory(device)
    return int(min(wanted, total // 4)) if total else wanted


def _device_memory(device: str) -> int | None:
    if device == "cuda":
        import torch

        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # not POSIX: no default from the machine
        return None
