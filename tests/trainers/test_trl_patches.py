"""TRL, patched where rk-agent changes how it runs: the fused LM head scores only completions on a
CPU and gives the same numbers; the renamed-method warnings of each generation stay silent."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from rk_agent.terminal_text import CONTROLS
from rk_agent.trainers.trl_patches import escape_printed_completions, score_completions_only


def test_completion_log_probs_entropy_and_gradients_match_full_logits(
    tiny_model_dir: Path,
) -> None:
    from transformers import AutoModelForCausalLM
    from trl.trainer import utils
    from trl.trainer.utils import add_fused_lm_head

    assert score_completions_only() and score_completions_only()  # idempotent
    assert utils._use_triton(torch.device("cpu"))

    torch.manual_seed(0)
    fused = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    add_fused_lm_head(fused, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, 1000, (2, 40))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # a left-padded row
    completion = 12  # the last 12 positions are the completion, as in GRPO
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-completion] = -100

    out = fused(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    logps, entropy = out.log_probs[:, -completion:], out.entropy[:, -completion:]
    logps.sum().backward()

    logits = plain(input_ids=ids, attention_mask=mask).logits[:, :-1][:, -completion:]
    reference = logits.log_softmax(-1)
    expected = reference.gather(-1, ids[:, -completion:, None]).squeeze(-1)
    expected_entropy = -(reference.exp() * reference).sum(-1)
    expected.sum().backward()

    torch.testing.assert_close(logps, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy, rtol=1e-4, atol=1e-5)
    for (name, a), (_, b) in zip(fused.named_parameters(), plain.named_parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_generation_model_prints_none_of_transformers_renaming_warnings(
    tiny_model_dir: Path,
) -> None:
    import warnings
    from types import SimpleNamespace

    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from rk_agent.trainers.rollout import _generation_model

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.gradient_checkpointing_enable()  # as TRL's GRPO trains by default: toggled each time
    trainer = SimpleNamespace(
        model_wrapped=model, accelerator=Accelerator(cpu=True),
        args=SimpleNamespace(ds3_gather_for_generation=True),
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # every step, not only the first
            with _generation_model(trainer) as unwrapped:
                assert unwrapped is model and not model.is_activation_checkpointing
        assert model.is_activation_checkpointing  # switched back on for training
    assert [str(w.message) for w in caught] == []


def test_only_the_renaming_warnings_are_silenced() -> None:
    import warnings

    from rk_agent.trainers.trl_patches import quiet_checkpointing_renames

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_checkpointing_renames():
            warnings.warn("`gradient_checkpointing_enable` is deprecated", FutureWarning, 1)
            warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning, 1)
            warnings.warn("`from_pretrained(torch_dtype=)` is deprecated", FutureWarning, 1)
    assert [str(w.message) for w in caught] == ["`from_pretrained(torch_dtype=)` is deprecated"]


CODES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m"


def test_the_printed_table_of_completions_shows_their_codes_escaped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GRPO prints sampled completions when asked (``num_completions_to_print``): TRL's own
    printer, called as GRPO calls it, with rows a model wrote (issue 38)."""
    from trl.trainer import grpo_trainer

    monkeypatch.setenv("COLUMNS", "400")  # rich's width: no code cut across lines
    assert escape_printed_completions() and escape_printed_completions()  # idempotent
    prompts = [[{"role": "user", "content": f"say {CODES}"}]]
    call = {"function": {"name": f"f{CODES}", "arguments": json.dumps({f"k{CODES}": CODES})}}
    completions = [[{"role": "assistant", "content": CODES, "tool_calls": [call]}]]
    grpo_trainer.print_prompt_completions_sample(
        prompts, completions, {"reward": [1.0]}, [0.5], 3, 1, extra={"trajectory": [CODES]}
    )
    printed = capsys.readouterr().out
    assert "\\x1b]52;c;ZXZpbA==" in printed
    assert [c for c in printed if ord(c) in CONTROLS and c != "\n"] == []
    assert prompts[0][0]["content"] == f"say {CODES}"  # the rows themselves are untouched


def test_resuming_a_tied_lm_head_warns_of_no_missing_key(
    tmp_path: Path, embedded_tok: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The embedded SmolLM2 ties its LM head to its embeddings: a checkpoint holds one copy, and
    transformers' Trainer warned `missing keys ['lm_head.weight']` on every resume (issue 40
    item 15). Another missing key still warns."""
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    from rk_agent.trainers.trl_patches import quiet_tied_weights_on_resume, tied_to_loaded

    config = LlamaConfig(vocab_size=len(embedded_tok), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         tie_word_embeddings=True)  # fmt: skip
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[])
    checkpoint = tmp_path / "checkpoint-1"
    Trainer(model=LlamaForCausalLM(config), args=args).save_model(str(checkpoint))

    def resume(quiet: bool) -> list[str]:
        trainer = Trainer(model=LlamaForCausalLM(config), args=args)
        if quiet:
            quiet_tied_weights_on_resume(trainer)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="transformers.trainer"):
            trainer._load_from_checkpoint(str(checkpoint))
        model = trainer.model
        assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied
        return [r.getMessage() for r in caplog.records if "missing keys" in r.getMessage()]

    assert resume(quiet=False) == [
        "There were missing keys in the checkpoint model loaded: ['lm_head.weight']."
    ]  # what a resume printed: the warning this test is about
    assert resume(quiet=True) == []

    model = LlamaForCausalLM(config)
    assert tied_to_loaded(model, ["lm_head.weight"]) == {"lm_head.weight"}
    untied = ["lm_head.weight", "model.norm.weight"]  # a real gap stays in the warning
    assert tied_to_loaded(model, untied) == {"lm_head.weight"}
    both = ["lm_head.weight", "model.embed_tokens.weight"]  # neither was loaded: no tie to trust
    assert tied_to_loaded(model, both) == set()
