"""`SegmentTokenizer` gives the tokenizer's own ids, with the real embedded tokenizer."""

from __future__ import annotations

import copy
from typing import Any

from rk_agent.envs.registry import get_solver, make_env
from rk_agent.runs.segment_tokens import SegmentTokenizer
from rk_agent.types import Message


def _texts(tok: Any) -> list[str]:
    env = make_env("tools")
    observation, _ = env.reset(seed=3)
    messages = [Message.coerce(m) for m in observation]
    reply = Message.coerce(get_solver("tools")(messages, env.tool_schemas))
    conversation = [m.model_dump(exclude_none=True) for m in [*messages, reply]]
    rendered = tok.apply_chat_template(conversation, tools=env.tool_schemas, tokenize=False)
    return [
        rendered,
        str(rendered) + " trailing  spaces\n\n<|im_start|>user\n  indented<|im_end|>",
        "<|im_end|><|im_start|>",
        "no special tokens at all",
        "",
    ]


def test_the_ids_are_the_tokenizers_own(embedded_tok: Any) -> None:
    segments = SegmentTokenizer(embedded_tok)
    for text in _texts(embedded_tok) * 2:  # the second time from remembered pieces
        assert segments.ids(text) == embedded_tok(text, add_special_tokens=False)["input_ids"]
    assert segments._split is not None and segments._pieces


def test_special_tokens_that_take_whitespace_are_not_split_at(embedded_tok: Any) -> None:
    from tokenizers import AddedToken

    tok = copy.deepcopy(embedded_tok)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken("<grab>", lstrip=True)]})
    segments = SegmentTokenizer(tok)
    assert segments._split is not None and "grab" not in segments._split.pattern
    for text in ("<|im_start|>user\nhi   <grab> there<|im_end|>", "a <grab>b<|im_end|>\n"):
        assert segments.ids(text) == tok(text, add_special_tokens=False)["input_ids"]
