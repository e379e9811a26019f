"""Reusing the KV cache of earlier turns: a multi-turn prompt is only prefilled where it is new.

Turn ``k + 1`` of an episode starts with turn ``k``'s prompt and reply, token for token. Without
reuse, every turn re-runs the model over the whole conversation so far (on a CPU the prefill of
a few hundred tokens costs as much as generating tens of them). `PrefixCache` keeps each row's
keys and values after a batch, compacted to exactly that row's tokens; the next batch looks up
the longest stored prefix of each prompt and starts from it.

A batch mixes rows with different cached lengths ``c_i`` and new lengths ``n_i``. Its layout,
one row per line (``.`` = padding, masked out)::

    [. . c c c c][. . n n]  <- cache region (width C = max c_i), new region (width N = max n_i)
    [c c c c c c][n n n n]
    [. . . . . .][. n n n]  <- a row with nothing cached

Position ids come from the attention mask's running sum (what ``generate`` does), so a row's
new tokens continue at position ``c_i`` whatever padding sits before them, and the cached keys
(rotated at positions ``0 .. c_i - 1`` when they were computed) stay valid.

The cache holds keys computed by the current weights: it belongs to one policy whose model does
not change while it lives (`EpisodeRollout` makes a fresh policy for every training step).
Only plain ``DynamicCache`` models (every layer a full-attention ``DynamicLayer``) are reused;
for any other cache the policy turns reuse off and generates as before.

Main names: `PrefixCache`, `BatchLayout`, `build_layout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rk_agent.policies._kv_buffers import ReservedCache, ReservedLayer

__all__ = ["BatchLayout", "PrefixCache", "build_layout"]


@dataclass
class _Entry:
    """One row's tokens and, per layer, its keys and values ``(heads, len(tokens), dim)``."""

    tokens: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class BatchLayout:
    """Inputs for one ``generate`` call that continues from cached prefixes.

    Attributes:
        input_ids: ``(batch, C + N)``, the cache region then the new region.
        attention_mask: ones on every real token, zeros on padding.
        past_key_values: the cache region's keys and values (``None`` when nothing is cached).
        cached: ``c_i`` per row, the tokens taken from the cache.
        new: ``n_i`` per row, the tokens to prefill.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    past_key_values: Any
    cached: list[int]
    new: list[int]

    @property
    def width(self) -> int:
        """``C + N``: where the generated tokens start in ``generate``'s output."""
        return int(self.input_ids.shape[1])


class PrefixCache:
    """Per-row KV caches of recent batches, looked up by token prefix, within a byte budget.

    Args:
        max_bytes: the most bytes the kept rows' keys and values take; the oldest rows go
            first (a row that alone is over it is not kept).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.enabled = True
        self.reused_tokens = 0
        self.bytes = 0
        self._entries: list[_Entry] = []

    def layout(
        self,
        prompts: Sequence[list[int]],
        pad_id: int,
        *,
        layers: int | None = None,
        new_tokens: int = 0,
    ) -> BatchLayout:
        """The batch's inputs: each prompt split into its longest cached prefix and the rest
        (``layers`` and ``new_tokens`` as in `build_layout`)."""
        found = [self._take(prompt) if self.enabled else None for prompt in prompts]
        layout = build_layout(prompts, found, pad_id, layers=layers, new_tokens=new_tokens)
        self.reused_tokens += sum(layout.cached)
        return layout

    def store(
        self,
        layout: BatchLayout,
        prompts: Sequence[list[int]],
        replies: Sequence[list[int]],
        cache: Any,
    ) -> None:
        """Keep each row's cache after ``generate``.

        Args:
            layout: the batch's layout.
            prompts: the batch's prompts.
            replies: per row, the generated token ids the caller got (cut at EOS, stop strings
                or its budget); the next turn's prompt starts with prompt plus reply.
            cache: ``generate``'s returned ``past_key_values``.
        """
        if not self.enabled:
            return
        if not _is_plain_dynamic(cache):
            self.enabled = False  # sliding windows, linear attention, ...: not safe to compact
            return
        length = cache.get_seq_length()  # every token but the last generated one
        width_c, width = max(layout.cached), layout.width
        for row, prompt in enumerate(prompts):
            c, n = layout.cached[row], layout.new[row]
            generated = max(0, min(len(replies[row]), length - width))
            index = torch.cat(
                [
                    torch.arange(width_c - c, width_c),
                    torch.arange(width - n, width),
                    torch.arange(width, width + generated),
                ]
            ).to(cache.layers[0].keys.device)
            layers = [
                (
                    layer.keys[row].index_select(1, index).contiguous(),
                    layer.values[row].index_select(1, index).contiguous(),
                )
                for layer in cache.layers
            ]
            tokens = list(prompt) + list(replies[row][:generated])
            self._entries.append(_Entry(tokens, layers))
            self.bytes += _entry_bytes(layers)
        self.make_room(0)

    def make_room(self, needed: int) -> None:
        """Drop the oldest rows until ``needed`` more bytes fit in the budget."""
        while self._entries and self.bytes + needed > self.max_bytes:
            self.bytes -= _entry_bytes(self._entries.pop(0).layers)

    def clear(self) -> None:
        """Drop every entry (frees their memory)."""
        self._entries.clear()
        self.bytes = 0

    def _take(self, prompt: list[int]) -> _Entry | None:
        """The entry sharing the longest prefix with ``prompt``, cut to that prefix.

        An entry wholly inside ``prompt`` is removed (its conversation moved on, and the new
        turn will store a longer one). A partly shared one stays: another conversation with
        the same system prompt, or this one re-rendered as text, where a reply may tokenize
        differently from the tokens generated.
        """
        best, best_size = None, 0
        for index, entry in enumerate(self._entries):
            size = _common_prefix(prompt, entry.tokens)
            if size > best_size:
                best, best_size = index, size
        if best is None:
            return None
        entry = self._entries[best]
        if best_size == len(entry.tokens):
            self.bytes -= _entry_bytes(entry.layers)
            return self._entries.pop(best)
        return _Entry(entry.tokens[:best_size], entry.layers)


def _entry_bytes(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    return sum(keys.nbytes + values.nbytes for keys, values in layers)


def _common_prefix(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix (list slices compare in C)."""
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def build_layout(
    prompts: Sequence[list[int]],
    found: Sequence[_Entry | None],
    pad_id: int,
    *,
    layers: int | None = None,
    new_tokens: int = 0,
) -> BatchLayout:
    """The inputs for ``prompts``, continuing from ``found[i]`` where it is not ``None``.

    With nothing found this is plain left padding. With ``layers`` (the model's, all full
    attention) the cache is a `ReservedCache` holding the batch's whole length, the prompts
    and ``new_tokens`` more, allocated once (empty when nothing is found).
    """
    # At least one token per row must be new: generate needs an input to continue from.
    cached = [
        min(len(entry.tokens), len(prompt) - 1) if entry is not None else 0
        for entry, prompt in zip(found, prompts, strict=True)
    ]
    new = [len(prompt) - c for prompt, c in zip(prompts, cached, strict=True)]
    width_c, width_n = max(cached), max(new)
    rows = len(prompts)
    input_ids = torch.full((rows, width_c + width_n), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, width_c + width_n), dtype=torch.long)
    for row, (prompt, c, n) in enumerate(zip(prompts, cached, new, strict=True)):
        input_ids[row, width_c - c : width_c] = torch.tensor(prompt[:c], dtype=torch.long)
        input_ids[row, width_c + width_n - n :] = torch.tensor(prompt[c:], dtype=torch.long)
        mask[row, width_c - c : width_c] = 1
        mask[row, width_c + width_n - n :] = 1
    past: Any = None
    if layers is not None:
        capacity = width_c + width_n + new_tokens
        past = _reserved_cache(found, cached, width_c, layers, capacity)
    elif width_c:
        past = _batch_cache(found, cached, width_c)
    return BatchLayout(input_ids, mask, past, cached, new)


def _reserved_cache(
    found: Sequence[_Entry | None], cached: Sequence[int], width: int, layers: int, capacity: int
) -> ReservedCache:
    """A `ReservedCache` whose first ``width`` positions are the cache region: each row's
    cached keys right-aligned, zeros before them."""
    cache = ReservedCache(layers, capacity)
    template = next((entry.layers for entry in found if entry is not None), None)
    if template is None or width == 0:
        return cache  # filled by the prefill
    for index, layer in enumerate(cache.layers):
        layer.reserve(*template[index], batch=len(found))
        for row, entry in enumerate(found):
            c = cached[row]
            if c < width:
                layer.zero_row(row, 0, width - c)
            if entry is not None and c:
                keys, values = entry.layers[index]
                layer.write_row(row, width - c, keys[:, :c], values[:, :c])
        layer.extend_to(width)
    return cache


def _batch_cache(found: Sequence[_Entry | None], cached: Sequence[int], width: int) -> Any:
    """A ``DynamicCache`` of the cache region: each row's keys right-aligned, zeros before."""
    from transformers import DynamicCache

    template = next(entry for entry in found if entry is not None).layers
    data = []
    for layer, (key, value) in enumerate(template):
        heads, _, dim = key.shape
        keys = key.new_zeros((len(found), heads, width, dim))
        values = value.new_zeros((len(found), value.shape[0], width, value.shape[2]))
        for row, entry in enumerate(found):
            c = cached[row]
            if entry is None or c == 0:
                continue
            keys[row, :, width - c :] = entry.layers[layer][0][:, :c]
            values[row, :, width - c :] = entry.layers[layer][1][:, :c]
        data.append((keys, values))
    return DynamicCache(ddp_cache_data=data)


def _is_plain_dynamic(cache: Any) -> bool:
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", ())
    plain = type(cache) in (DynamicCache, ReservedCache)
    return plain and all(type(layer) in (DynamicLayer, ReservedLayer) for layer in layers)
