"""A tiny random Llama steered to write scripted replies, for real TRL runs that need tool calls."""

from __future__ import annotations

from typing import Any


def scripted_model(tok: Any, replies: list[str]) -> Any:
    """A tiny random Llama forced to write ``replies``, turn by turn, through a real forward.

    The smallest models cannot call tools on their own, so this one is steered: at the last
    position it adds a large logit to the next token of the current turn's reply (the turn is
    the number of assistant headers in the sequence). Everything else (TRL's generation,
    response parsing, tool loop, masks, loss) is the real thing.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    scripts = [tok(r + "<|im_end|>", add_special_tokens=False)["input_ids"] for r in replies]
    header = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]

    def starts(ids: list[int]) -> list[int]:
        n = len(header)
        return [at + n for at in range(len(ids) - n + 1) if ids[at : at + n] == header]

    class Scripted(LlamaForCausalLM):
        def forward(self, input_ids: Any = None, logits_to_keep: Any = 0, **kwargs: Any) -> Any:
            out = super().forward(input_ids=input_ids, logits_to_keep=logits_to_keep, **kwargs)
            bias = torch.zeros(out.logits.shape[0], out.logits.shape[-1])
            for row, ids in enumerate(input_ids.tolist()):
                found = starts(ids)
                script = scripts[min(len(found), len(scripts)) - 1]
                done = len(ids) - found[-1]
                bias[row, script[min(done, len(script) - 1)]] = 1e4
            last = out.logits[:, -1:] + bias[:, None].to(out.logits)
            out.logits = torch.cat([out.logits[:, :-1], last], dim=1)
            return out

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    return Scripted(config)
