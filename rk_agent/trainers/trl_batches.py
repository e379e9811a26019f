"""TRL's scored GRPO batches, cut to some of their groups and joined into one.

``GRPOTrainer._generate_and_score_completions`` (TRL 1.16) returns one dict per generation:
padded token tensors with a row per completion (prompts padded on the left, completions on the
right), the advantages, and ``num_items_in_batch`` (the tokens the loss counts). Dynamic
sampling (`rk_agent.trainers.group_sampling`) scores several such batches in one step and
trains on some groups of each: `select_groups` takes the chosen groups' rows of every batch,
pads each tensor to the widest batch on the side TRL pads it, joins them, and counts
``num_items_in_batch`` again over the rows kept.

Every key TRL 1.16 returns for a text batch has its rule here (`MERGED_KEYS`); any other key
(images, or one a later TRL adds) is refused by name (`NotAvailableError`) rather than guessed
at, and ``tests/trainers/test_trl_batches.py`` reads TRL's source to fail loudly when an
upgrade returns a key without a rule.

Main names: `select_groups`, `MERGED_KEYS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rk_agent.errors import NotAvailableError

__all__ = ["MERGED_KEYS", "select_groups"]


@dataclass(frozen=True)
class _Rule:
    """How one key's tensors are joined: ``side`` they are padded on (``None``: one value per
    row), with ``pad`` (``None``: the tokenizer's pad token)."""

    side: str | None
    pad: float | None = 0


MERGED_KEYS: Mapping[str, _Rule] = {
    "prompt_ids": _Rule("left", None),
    "prompt_mask": _Rule("left", 0),
    "completion_ids": _Rule("right", None),
    "completion_mask": _Rule("right", 0),
    "tool_mask": _Rule("right", 1),
    "old_per_token_logps": _Rule("right", 0.0),
    "sampling_per_token_logps": _Rule("right", 0.0),
    "ref_per_token_logps": _Rule("right", 0.0),
    "importance_sampling_ratio": _Rule("right", 1.0),
    "advantages": _Rule(None),
}
"""The keys of TRL 1.16's text batches and how each is joined; ``num_items_in_batch`` is
counted again."""

_COUNTED = "num_items_in_batch"


def select_groups(
    parts: Sequence[tuple[Mapping[str, Any], Sequence[int]]], group_size: int, pad_token_id: int
) -> dict[str, Any]:
    """One batch of the chosen groups of several scored batches (module docstring).

    Args:
        parts: each scored batch (one at least) with the indexes of its groups to keep, in
            order.
        group_size: rows per group (``num_generations``).
        pad_token_id: the tokenizer's pad token (TRL's padding of token ids).

    Raises:
        NotAvailableError: a batch has a key without a rule (images, or a newer TRL's).

    Example:
        >>> import torch
        >>> a = {"completion_ids": torch.tensor([[5, 0], [6, 7]]),
        ...      "completion_mask": torch.tensor([[1, 0], [1, 1]]),
        ...      "advantages": torch.tensor([1.0, -1.0]), "num_items_in_batch": torch.tensor(3)}
        >>> b = {"completion_ids": torch.tensor([[8, 9, 9], [8, 0, 0]]),
        ...      "completion_mask": torch.tensor([[1, 1, 1], [1, 0, 0]]),
        ...      "advantages": torch.tensor([0.5, -0.5]), "num_items_in_batch": torch.tensor(4)}
        >>> out = select_groups([(a, [0]), (b, [0])], group_size=2, pad_token_id=0)
        >>> out["completion_ids"].tolist(), out["num_items_in_batch"].item()
        ([[5, 0, 0], [6, 7, 0], [8, 9, 9], [8, 0, 0]], 7)
    """
    keys = set(parts[0][0])
    for batch, _ in parts:
        unknown = sorted(set(batch) - set(MERGED_KEYS) - {_COUNTED})
        if unknown or set(batch) != keys:
            raise NotAvailableError(
                f"dynamic sampling cannot join TRL's scored batches: they hold "
                f"{', '.join(map(repr, unknown or sorted(set(batch) ^ keys)))}, which it has no "
                f"rule for (it joins text batches with the keys of TRL 1.16: "
                f"{', '.join(sorted(MERGED_KEYS))}). Train without dynamic sampling, or with "
                "TRL 1.16."
            )
    out: dict[str, Any] = {}
    for key in sorted(keys - {_COUNTED}):
        rule = MERGED_KEYS[key]
        pieces = [_rows(batch[key], groups, group_size) for batch, groups in parts]
        pad = pad_token_id if rule.pad is None else rule.pad
        out[key] = _join(pieces, rule.side, pad)
    mask = out["completion_mask"]
    if "tool_mask" in out:
        mask = mask * out["tool_mask"]
    out[_COUNTED] = mask.sum()
    return out


def _rows(tensor: torch.Tensor, groups: Sequence[int], size: int) -> torch.Tensor:
    index = torch.tensor([g * size + i for g in groups for i in range(size)], dtype=torch.long)
    return tensor.index_select(0, index.to(tensor.device))


def _join(pieces: list[torch.Tensor], side: str | None, pad: float) -> torch.Tensor:
    if side is None:
        return torch.cat(pieces, dim=0)
    width = max(p.shape[1] for p in pieces)
    padded = []
    for piece in pieces:
        extra = width - piece.shape[1]
        if extra:
            filler = piece.new_full((piece.shape[0], extra, *piece.shape[2:]), pad)
            both = (filler, piece) if side == "left" else (piece, filler)
            piece = torch.cat(both, dim=1)
        padded.append(piece)
    return torch.cat(padded, dim=0)
