"""Shared fixtures: the embedded tokenizer and a tiny random Llama that uses it."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

# A suite started where SIGINT is ignored (under nohup, as a background job of a script)
# passes that on to every child it starts, and the Ctrl-C tests' children would never see
# their Ctrl-C; a handler installed here is reset to the default in each child instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Under pytest-xdist each worker gets its share of the cores: torch (and the training
# subprocesses, which inherit this) would otherwise start one thread per core in every worker.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(scope="session")
def embedded_tok() -> Any:
    """The embedded model's tokenizer (SmolLM2 vocabulary, Qwen2.5 tool template)."""
    from rk_agent.policies.local_model import embedded_tokenizer

    return embedded_tokenizer()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, embedded_tok: Any) -> Path:
    """A random 2-layer Llama (hidden 64) with the embedded tokenizer, saved as a checkpoint."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-llama")
    config = LlamaConfig(
        vocab_size=len(embedded_tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=embedded_tok.bos_token_id,
        eos_token_id=embedded_tok.eos_token_id,
        pad_token_id=embedded_tok.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    embedded_tok.save_pretrained(path)
    return path
