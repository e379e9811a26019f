"""Pieces of `HFPolicy`'s batched ``model.generate`` (imports torch/transformers; load lazily).

Main names:
    generate_rows: one ``model.generate`` for a batch of prompts, one result per row.
    LogprobRecorder: records each generated token's log-probability, step by step.
    RowStops: stops each row of a batch at its own ``max_tokens`` or stop string.
    finish_row: cuts one row's new tokens where it ended and says why.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteria,
    StoppingCriteriaList,
)

from rk_agent.policies._kv_reuse import PrefixCache, build_layout
from rk_agent.policies.policy import SamplingParams

__all__ = ["BatchRow", "LogprobRecorder", "RowStops", "finish_row", "generate_rows"]

Row = tuple[list[int], list[float], str, str]
"""One row's result: token ids, logprobs, text, finish reason (``"stop"`` or ``"length"``)."""


@dataclass
class BatchRow:
    """One request of a batch: its prompt and where it must stop."""

    prompt_ids: list[int]
    max_new_tokens: int
    stop: list[str] | None = None


def generate_rows(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    rows: Sequence[BatchRow],
    sampling: SamplingParams,
    *,
    eos_ids: set[int],
    pad_id: int,
    generate_kwargs: dict[str, Any],
    cache: PrefixCache | None = None,
    layers: int | None = None,
    abort: threading.Event | None = None,
) -> list[Row]:
    """One left-padded ``model.generate`` for ``rows``, all sampled with ``sampling``.

    With a ``cache``, each prompt continues from its longest cached prefix (earlier turns of
    the same conversation), and every row's keys and values are kept for the next turn. With
    ``layers`` (the model's decoder layers, all full attention) the call's KV cache is
    allocated once at its final size (`rk_agent.policies._kv_buffers.ReservedCache`) instead of
    growing by a concatenation per token. With ``abort``, setting it ends the call at its next
    token (what it returns then is cut short).
    """
    greedy = sampling.temperature == 0
    temperature = 1.0 if greedy else sampling.temperature
    # Set every knob: unset ones are filled from the model's generation_config (e.g. top_k=20,
    # repetition_penalty=1.05), and we want exactly the OpenAI parameters' meaning.
    knobs: dict[str, Any] = {"do_sample": False}
    if not greedy:
        knobs = {"do_sample": True, "temperature": temperature, "top_p": sampling.top_p, "top_k": 0}
    config = GenerationConfig(
        **{
            "max_new_tokens": max(r.max_new_tokens for r in rows),
            "repetition_penalty": 1.0,
            "eos_token_id": sorted(eos_ids),
            "pad_token_id": pad_id,
            "return_dict_in_generate": True,  # the KV cache comes back with the tokens
            **knobs,
            **generate_kwargs,
        }
    )
    if not greedy and sampling.seed is not None:
        torch.manual_seed(sampling.seed)
    if (config.num_beams or 1) > 1 or (config.num_return_sequences or 1) > 1:
        cache = None  # a cache row per beam or sequence, not per prompt: nothing to keep
        layers = None  # and generate expands the batch: a cache sized for it is not ours
    prompts = [r.prompt_ids for r in rows]
    new_tokens = int(config.max_new_tokens or 0)
    if cache is not None:
        layout = cache.layout(prompts, pad_id, layers=layers, new_tokens=new_tokens)
    else:
        found = [None] * len(prompts)
        layout = build_layout(prompts, found, pad_id, layers=layers, new_tokens=new_tokens)
    width = layout.width
    recorder = LogprobRecorder(temperature)
    stops = RowStops(tokenizer, width, [r.max_new_tokens for r in rows], [r.stop for r in rows])
    extra: dict[str, Any] = {}
    if layout.past_key_values is not None:
        extra["past_key_values"] = layout.past_key_values
    with torch.inference_mode():
        output = cast(Any, model).generate(
            input_ids=layout.input_ids.to(model.device),
            attention_mask=layout.attention_mask.to(model.device),
            generation_config=config,
            logits_processor=LogitsProcessorList([recorder]),
            stopping_criteria=StoppingCriteriaList(
                [stops] if abort is None else [stops, Aborted(abort)]
            ),
            **extra,
        )
    sequences = output.sequences
    new_tokens = sequences[:, width:].cpu()
    logprobs = recorder.finish(sequences[:, -1]).cpu()
    results = [
        finish_row(
            tokenizer,
            new_tokens[index].tolist(),
            logprobs[index].tolist(),
            row.max_new_tokens,
            eos_ids,
            row.stop,
        )
        for index, row in enumerate(rows)
    ]
    if cache is not None:
        cache.store(layout, prompts, [r[0] for r in results], output.past_key_values)
    return results


class LogprobRecorder(LogitsProcessor):
    """Records ``log_softmax(logits / temperature)`` of each chosen token.

    Custom processors run after ``generate``'s own processors and before its temperature and
    top-p warpers, so this sees the model's logits (plus e.g. ``min_new_tokens`` masking) and
    applies the temperature itself: the log-probability under the model at the sampling
    temperature, before top-p truncation (the quantity a policy-gradient loss recomputes).

    Only the previous step's distribution is kept (memory: batch x vocab), not all of them: the
    token chosen at step ``k`` is read from ``input_ids`` at step ``k + 1``, and the last one by
    `finish`.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self.previous: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.previous is not None:
            self.steps.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """All steps' log-probabilities, ``(batch, new_tokens)``, given the last chosen tokens."""
        if self.previous is not None:
            self.steps.append(self.previous.gather(1, last_tokens[:, None]).squeeze(1))
            self.previous = None
        if not self.steps:
            return torch.zeros((last_tokens.shape[0], 0))
        return torch.stack(self.steps, dim=1)


class RowStops(StoppingCriteria):
    """Per-row stopping: each row at its own token budget and stop strings (EOS is generate's)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        prompt_width: int,
        max_new_tokens: Sequence[int],
        stops: Sequence[list[str] | None],
    ) -> None:
        self.tokenizer = tokenizer
        self.prompt_width = prompt_width
        self.max_new_tokens = torch.tensor(list(max_new_tokens))
        self.stops = [list(s) if s else [] for s in stops]
        # A stop string of n characters spans at most n tokens: decode only that tail.
        self.tails = [max((len(s) for s in row), default=0) + 1 for row in self.stops]

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: object
    ) -> torch.BoolTensor:
        generated = input_ids.shape[1] - self.prompt_width
        done = (self.max_new_tokens <= generated).to(input_ids.device)
        for row, strings in enumerate(self.stops):
            if strings and not done[row]:
                tail = input_ids[row, input_ids.shape[1] - min(self.tails[row], generated) :]
                text = _decode(self.tokenizer, tail.tolist())
                if any(s in text for s in strings):
                    done[row] = True
        return done  # type: ignore[return-value]


class Aborted(StoppingCriteria):
    """Stops every row once ``event`` is set (checked after each token)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: object
    ) -> torch.BoolTensor:
        stop = self.event.is_set()
        return torch.full((input_ids.shape[0],), stop, device=input_ids.device)  # type: ignore[return-value]


def _decode(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> str:
    return str(tokenizer.decode(ids, skip_special_tokens=True))


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    positions = [text.find(s) for s in stops if s and s in text]
    return min(positions) if positions else None


def finish_row(
    tokenizer: PreTrainedTokenizerBase,
    tokens: list[int],
    logprobs: list[float],
    max_new_tokens: int,
    eos_ids: set[int],
    stops: list[str] | None,
) -> Row:
    """One row's result: (token ids, logprobs, text, ``"stop"`` or ``"length"``).

    The row is cut at its own budget, then after its first end-of-sequence token (kept in the
    ids, as trainers expect, but not in the text), then after the token that completes a stop
    string (the text ends before the stop string, as OpenAI does). Tokens after the cut are the
    batch's padding.
    """
    tokens, logprobs = tokens[:max_new_tokens], logprobs[:max_new_tokens]
    end = next((i for i, token in enumerate(tokens) if token in eos_ids), None)
    body = tokens if end is None else tokens[:end]
    text = _decode(tokenizer, body)
    cut = _first_stop(text, stops or [])
    if cut is not None:
        # The fewest tokens whose text contains the stop string (decoding is monotone in length).
        low, high = 1, len(body)
        while low < high:
            middle = (low + high) // 2
            partial = _decode(tokenizer, body[:middle])
            if _first_stop(partial, stops or []) is not None:
                high = middle
            else:
                low = middle + 1
        return tokens[:low], logprobs[:low], text[:cut], "stop"
    if end is not None:
        return tokens[: end + 1], logprobs[: end + 1], text, "stop"
    return tokens, logprobs, text, "length"
