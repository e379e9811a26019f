"""Tokenizing rendered chats piece by piece, each piece remembered: the same ids, much faster.

A chat template writes special tokens (``<|im_start|>``, ``<|im_end|>``) between the messages,
and a fast tokenizer splits its input at those before anything else, so the ids of a rendered
conversation are the ids of the pieces between the special tokens, joined. Re-rendering many
conversations that share their opening (the system prompt with every tool's schema) and, within
an episode, every earlier turn, tokenizes the same pieces again and again; `SegmentTokenizer`
tokenizes each distinct piece once.

It splits only at special tokens that take no neighbouring whitespace and are matched as
written (``lstrip``, ``rstrip`` and ``normalized`` all false: the tokenizer then splits at them
exactly as here), and it checks itself on the first text against the tokenizer's own answer;
when a tokenizer has no such tokens, or the check fails, it tokenizes whole texts as the
tokenizer does.

Main names: `SegmentTokenizer`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SegmentTokenizer"]

_MAX_PIECES = 8192  # remembered pieces; forgotten all at once past this


class SegmentTokenizer:
    """``tokenizer(text, add_special_tokens=False)["input_ids"]``, remembered piece by piece.

    Args:
        tokenizer: a Hugging Face tokenizer.

    Example:
        >>> SegmentTokenizer(tokenizer).ids("<|im_start|>user")  # doctest: +SKIP
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._pieces: dict[str, list[int]] = {}
        self._split = _special_splitter(tokenizer)
        self._checked = False

    def ids(self, text: str) -> list[int]:
        """The ids of ``text``, without special tokens added."""
        if self._split is None:
            return self._whole(text)
        ids = self._by_piece(text, self._split)
        if not self._checked:
            self._checked = True
            if ids != self._whole(text):  # not a tokenizer this holds for: tokenize whole
                self._split = None
                return self._whole(text)
        return ids

    def _whole(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _by_piece(self, text: str, split: re.Pattern[str]) -> list[int]:
        if len(self._pieces) > _MAX_PIECES:
            self._pieces.clear()
        out: list[int] = []
        for piece in split.split(text):
            if not piece:
                continue
            ids = self._pieces.get(piece)
            if ids is None:
                ids = self._pieces[piece] = self._whole(piece)
            out.extend(ids)
        return out


def _special_splitter(tokenizer: Any) -> re.Pattern[str] | None:
    """A pattern that keeps the exact-match special tokens as pieces of their own."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None)
    if not isinstance(decoder, dict):
        return None
    exact = sorted(
        {
            str(token.content)
            for token in decoder.values()
            if getattr(token, "special", False)
            and not getattr(token, "lstrip", True)
            and not getattr(token, "rstrip", True)
            and not getattr(token, "normalized", True)
            and str(getattr(token, "content", ""))
        },
        key=len,
        reverse=True,
    )
    if not exact:
        return None
    return re.compile("(" + "|".join(re.escape(token) for token in exact) + ")")
