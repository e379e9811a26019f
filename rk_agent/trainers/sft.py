"""Supervised fine-tuning on trajectories, with the loss on the assistant's tokens only.

`build_sft_trainer` wraps TRL's ``SFTTrainer`` for the datasets `rk_agent.trainers.sft_data`
makes (a ``messages`` and a ``tools`` column). The loss covers what the assistant wrote (its
text, its tool calls and its end-of-turn token), never the system prompt, the user's messages
or the tool results.

TRL finds the assistant's tokens through ``{% generation %}`` markers in the chat template.
Templates without them are swapped, for tokenizing only, for TRL's training variant when TRL
ships one: the embedded model's template (TRL's copy of Qwen2.5's, see
`rk_agent.policies.local_model`) becomes ``trl/chat_templates/qwen2_5_training.jinja``. The
tokenizer itself keeps its template, so checkpoints carry the one that generation and TRL's
tool-call parsing recognise. A template with no markers and no training variant raises
`ConfigError`; pass ``assistant_only_loss=False`` to train on every token instead.

Turns a fork copied from its source episode (the dataset's ``context_messages``) were played by
another policy: they are context, and their tokens are left out of the loss in either case.
TRL tokenizes each row and builds its ``labels``; then the tokens of the row's first
``context_messages`` messages, rendered alone with the same template (the longest prefix they
share with the row's tokens), get the label -100.

Main names: `build_sft_trainer`, `training_chat_template`.

Example::

    from trl import SFTConfig
    data = build_sft_data("runs/tools-solver")
    args = SFTConfig(output_dir="runs/sft", max_length=2048, num_train_epochs=2)
    build_sft_trainer("smollm2-135m", None, data.dataset, args).train()
"""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from rk_agent.errors import ConfigError, NotAvailableError, require_extra

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
    from trl import SFTConfig, SFTTrainer

__all__ = ["build_sft_trainer", "training_chat_template"]

logger = logging.getLogger("rk_agent.trainers")


def build_sft_trainer(
    model: str | os.PathLike[str] | PreTrainedModel,
    tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None,
    dataset: Dataset,
    args: SFTConfig,
    callbacks: list[TrainerCallback] | None = None,
    *,
    assistant_only_loss: bool = True,
    fit_max_length: bool = False,
) -> SFTTrainer:
    """A TRL ``SFTTrainer`` that trains on the assistant's tokens of each conversation.

    Args:
        model: a loaded model, a folder or hub id, or the embedded model's name
            (``"smollm2-135m"``).
        tokenizer: the tokenizer, or where to load it from (``None``: from the model's folder).
        dataset: conversations with a ``messages`` column (and ``tools``), as
            `rk_agent.trainers.sft_data.sft_dataset` makes them.
        args: TRL's settings. Its ``assistant_only_loss`` is replaced by the argument below
            (on a copy: ``args`` itself is left as it is). Mind ``max_length`` (TRL's default
            is 1024 tokens): longer conversations are cut from the end, and a warning says
            how many.
        callbacks: ``transformers`` callbacks (progress, logging).
        assistant_only_loss: train on the assistant's tokens only (``False``: on every token).
        fit_max_length: set ``max_length`` to the longest conversation's length in tokens, so
            that none is cut (the CLI does this when the user sets no ``max_length``).

    Raises:
        ConfigError: the dataset has no ``messages`` column, the tokenizer has no chat
            template, or its template cannot mark the assistant's tokens (see
            `training_chat_template`); or an in-memory model came without a tokenizer.
    """
    require_extra("train", "build_sft_trainer")
    from trl import SFTTrainer

    from rk_agent.trainers.trl_patches import quiet_tied_weights_on_resume

    tokenizer = _load_tokenizer(model, tokenizer)
    args = copy.copy(args)
    args.assistant_only_loss = assistant_only_loss
    template: str | None = None
    if assistant_only_loss:
        if "messages" not in (dataset.column_names or []):
            raise ConfigError(
                "assistant-only loss needs conversations: expected a dataset with a `messages` "
                f"column (as sft_dataset() makes), got columns {dataset.column_names}. Pass "
                "assistant_only_loss=False to train on plain text."
            )
        template = training_chat_template(tokenizer)
    if "messages" in (dataset.column_names or []) and (fit_max_length or args.max_length):
        lengths = _conversation_lengths(dataset, tokenizer, template)
        if fit_max_length and lengths:
            args.max_length = max(lengths)
        elif args.max_length is not None:
            _warn_if_truncated(lengths, args.max_length)
    loaded_or_path: Any = model
    if isinstance(model, (str, os.PathLike)):
        from rk_agent.policies.local_model import resolve_model

        loaded_or_path = resolve_model(model)
    trainer = SFTTrainer(
        model=loaded_or_path,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    _mask_context(trainer, tokenizer)
    quiet_tied_weights_on_resume(trainer)  # a resumed tied LM head is no missing key
    return trainer


def _mask_context(trainer: SFTTrainer, tokenizer: PreTrainedTokenizerBase) -> None:
    """Leave the context of each row (its first ``context_messages`` messages: the turns a
    fork copied) out of the loss: their tokens' labels become -100."""
    dataset: Any = trainer.train_dataset
    columns = dataset.column_names or []
    if "context_messages" not in columns or not any(dataset["context_messages"]):
        return
    if "labels" not in columns:
        raise NotAvailableError(
            "the SFT rows hold turns copied by a fork, which are left out of the loss by "
            "editing the labels TRL builds; this TRL version built none. Use the TRL version "
            "rk-agent's lock file pins, or leave the forked episodes out."
        )
    render: Any = tokenizer.apply_chat_template
    template = trainer.chat_template  # what TRL tokenized with (None: the tokenizer's own)

    def mask(row: dict[str, Any]) -> dict[str, Any]:
        labels = list(row["labels"])
        context = row["context_messages"]
        if context:
            tools = row.get("tools")
            prefix = render(
                row["messages"][:context],
                tools=(json.loads(tools) if isinstance(tools, str) else tools) or None,
                chat_template=template,
                tokenize=True,
                return_dict=True,
            )["input_ids"]
            shared = _shared_prefix(prefix, row["input_ids"])
            labels[:shared] = [-100] * min(shared, len(labels))
        return {"labels": labels}

    trainer.train_dataset = dataset.map(mask, desc="Masking copied turns")


def _shared_prefix(ids: list[int], other: list[int]) -> int:
    """How many leading tokens two sequences share."""
    count = 0
    for a, b in zip(ids, other, strict=False):
        if a != b:
            break
        count += 1
    return count


def training_chat_template(tokenizer: PreTrainedTokenizerBase) -> str | None:
    """The chat template TRL tokenizes with for assistant-only loss.

    Returns ``None`` when the tokenizer's own template already has ``{% generation %}``
    markers; otherwise TRL's training variant of it (for the embedded model's Qwen2.5 template,
    ``trl/chat_templates/qwen2_5_training.jinja``). `SFTTrainer` makes the same choice; this
    function checks beforehand that there is one.

    Raises:
        ConfigError: the tokenizer has no chat template, or one without generation markers
            that TRL has no training variant of.
    """
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template: Any = tokenizer.chat_template
    if not template:
        raise ConfigError(
            "the tokenizer has no chat template, so conversations cannot be rendered. Give it "
            "one, e.g. `tokenizer.chat_template = open('qwen2_5.jinja').read()` with TRL's copy "
            "of the Qwen2.5 template (trl/chat_templates/) for a ChatML model."
        )
    if has_generation_markers(template):
        return None
    try:
        patched: str | None = get_training_chat_template(tokenizer)
    except ValueError as exc:
        raise ConfigError(
            "assistant-only loss needs a chat template that marks the assistant's output with "
            "{% generation %} ... {% endgeneration %}; this tokenizer's template has no markers "
            "and TRL has no training variant of it. Add the markers around the assistant's "
            "content, tool calls and end-of-turn token; or use a template TRL knows (its "
            "trl/chat_templates/, e.g. qwen2_5.jinja for a ChatML model); or pass "
            "assistant_only_loss=False to train on every token."
        ) from exc
    return patched


def _load_tokenizer(
    model: str | os.PathLike[str] | PreTrainedModel,
    tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None,
) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        return tokenizer
    source: Any = tokenizer
    if source is None and isinstance(model, (str, os.PathLike)):
        from rk_agent.policies.local_model import resolve_model

        source = resolve_model(model)
    elif source is None:
        source = getattr(model, "name_or_path", "")
        if not source:
            raise ConfigError(
                "give the tokenizer: the model was built in memory and names no folder to "
                "load one from."
            )
    loaded: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(os.fspath(source))
    return loaded


def _conversation_lengths(
    dataset: Dataset, tokenizer: PreTrainedTokenizerBase, template: str | None
) -> list[int]:
    """Each conversation's length in tokens, as the chat template renders it for training."""
    render: Any = tokenizer.apply_chat_template
    return [
        len(
            render(
                row["messages"],
                tools=row.get("tools") or None,
                chat_template=template,
                tokenize=True,
                return_dict=True,
            )["input_ids"]
        )
        for row in dataset
    ]


def _warn_if_truncated(lengths: list[int], max_length: int) -> None:
    """Log how many conversations TRL will cut at ``max_length`` (their ends are lost)."""
    over = [n for n in lengths if n > max_length]
    if over:
        logger.warning(
            "%d of %d SFT conversations are longer than max_length=%d tokens (the longest has "
            "%d); TRL cuts them from the end, so their last assistant turns are not trained "
            "on. Raise max_length in the SFT settings, or set it to None.",
            len(over),
            len(lengths),
            max_length,
            max(over),
        )
