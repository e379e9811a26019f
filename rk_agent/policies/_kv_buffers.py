"""KV caches allocated once per ``generate`` call, at their final size; and what a token costs.

transformers' ``DynamicCache`` grows each layer's keys and values by concatenation: every
generated token allocates a new, slightly larger tensor per layer and frees the old one. At a
batch of 32 conversations of 800 tokens that is over a gigabyte allocated and freed per token
on the embedded 135M model, in blocks just under glibc's largest mmap threshold; the heap
fragments and the process keeps the freed memory (measured: 7.7 GB after 96 episodes, 15.5 GB
after 1,000). `ReservedCache` gives each layer one buffer of the call's final length (the
prompt width plus the most new tokens) and writes into it in place; the keys and values the
model attends to are views of the filled part. Nothing is allocated per token, and the
buffers are freed whole when the call ends.

`kv_bytes_per_token` is what one token of one row costs in KV memory (all layers, keys and
values), read from the model's config: what `rk_agent.policies.hf_policy.HFPolicy` budgets.

Main names: `ReservedCache`, `kv_bytes_per_token`, `full_attention_layers`.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

__all__ = ["ReservedCache", "ReservedLayer", "full_attention_layers", "kv_bytes_per_token"]


class ReservedLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values live in buffers of a fixed capacity.

    ``keys`` and ``values`` are views of the first ``length`` positions; `update` copies the
    new states in place. Going past the capacity grows the buffers to twice it (not expected:
    the capacity is the call's whole length).
    """

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.reserve(key_states, value_states, batch=key_states.shape[0])

    def reserve(self, like_keys: torch.Tensor, like_values: torch.Tensor, batch: int) -> None:
        """Allocate the buffers for ``batch`` rows, shaped and typed as the given states
        (``... x heads x n x dim``)."""
        self.dtype, self.device = like_keys.dtype, like_keys.device
        keys = like_keys.new_empty((batch, like_keys.shape[-3], self.capacity, like_keys.shape[-1]))
        values = like_values.new_empty(
            (batch, like_values.shape[-3], self.capacity, like_values.shape[-1])
        )
        self._buffers = (keys, values)
        self.is_initialized = True
        self.extend_to(0)

    def write_row(self, row: int, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Copy one row's cached states (``heads x n x dim``) to positions ``start .. start+n``."""
        key_buffer, value_buffer = self._reserved()
        end = start + keys.shape[-2]
        key_buffer[row, :, start:end] = keys
        value_buffer[row, :, start:end] = values

    def zero_row(self, row: int, start: int, end: int) -> None:
        """Zero one row's positions ``start .. end`` (padding: masked, but must be finite)."""
        key_buffer, value_buffer = self._reserved()
        key_buffer[row, :, start:end] = 0
        value_buffer[row, :, start:end] = 0

    def extend_to(self, length: int) -> None:
        """Count the first ``length`` positions as filled (after `write_row` and `zero_row`)."""
        key_buffer, value_buffer = self._reserved()
        self.length = length
        self.keys = key_buffer[:, :, :length]
        self.values = value_buffer[:, :, :length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, count = self.length, key_states.shape[-2]
        if start + count > self.capacity:
            self._grow(max(2 * self.capacity, start + count))
        key_buffer, value_buffer = self._reserved()
        key_buffer[:, :, start : start + count] = key_states
        value_buffer[:, :, start : start + count] = value_states
        self.extend_to(start + count)
        return key_buffer[:, :, : start + count], value_buffer[:, :, : start + count]

    def _grow(self, capacity: int) -> None:
        old_keys, old_values = self._reserved()
        length = self.length
        self.capacity = capacity
        self.reserve(old_keys, old_values, batch=old_keys.shape[0])
        key_buffer, value_buffer = self._reserved()
        key_buffer[:, :, :length] = old_keys[:, :, :length]
        value_buffer[:, :, :length] = old_values[:, :, :length]
        self.extend_to(length)

    def _reserved(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value buffers (``batch x heads x capacity x dim``)."""
        if self._buffers is None:
            raise RuntimeError("ReservedLayer: reserve() it before writing to it")
        return self._buffers


class ReservedCache(DynamicCache):
    """A ``DynamicCache`` of `ReservedLayer` s, each of ``capacity`` positions.

    Args:
        layers: the model's decoder layers (how many caches to make).
        capacity: positions per layer: the prompt width plus the most tokens to generate.
    """

    layers: list[ReservedLayer]  # type: ignore[assignment]

    def __init__(self, layers: int, capacity: int) -> None:
        Cache.__init__(self, layers=[ReservedLayer(capacity) for _ in range(layers)])


def full_attention_layers(model: Any) -> int | None:
    """How many decoder layers the model has when every one attends to the whole sequence (what
    `ReservedCache` and reusing prefixes assume), else ``None`` (sliding windows, linear
    attention, or a config that does not say)."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(text, "num_hidden_layers", None)
    types = getattr(text, "layer_types", None)
    if types is not None and any(kind != "full_attention" for kind in types):
        return None
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return None
    return int(layers) if isinstance(layers, int) and layers > 0 else None


def kv_bytes_per_token(model: Any) -> int | None:
    """KV bytes one token of one row takes, all layers' keys and values, or ``None`` when the
    config does not say (a model this cannot size: its cache is then not budgeted).

    Example:
        >>> from types import SimpleNamespace
        >>> config = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9,
        ...                          num_key_value_heads=3, hidden_size=576)
        >>> kv_bytes_per_token(SimpleNamespace(config=config, dtype=torch.float32))
        46080
    """
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None)
    if head_dim is None and heads and getattr(text, "hidden_size", None):
        head_dim = text.hidden_size // heads
    if not (layers and kv_heads and head_dim):
        return None
    itemsize = torch.empty((), dtype=model.dtype).element_size()
    return int(layers) * 2 * int(kv_heads) * int(head_dim) * itemsize
