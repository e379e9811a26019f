"""Where rk-agent changes how TRL runs, each change for a measured reason, and nothing else.

`score_completions_only`: TRL 1.16's GRPO computes the log-probabilities it trains on with a
fused LM head (``trl.trainer.utils.add_fused_lm_head``), which scores only the completion's
positions on CUDA/XPU but *every* position, the prompt's too, on other devices (so that
compiled kernels on devices such as Neuron see fixed shapes). On a CPU nothing is compiled, and
scoring the prompt is pure waste: a row of the README's smoke run has ~1,040 prompt tokens and
a few dozen to 256 completion tokens, so the head projected every row onto the 49,152-word
vocabulary 4 to 20 times more than needed, in 140 MB tiles (about 0.9 GB of a step's peak
memory, and seconds of every micro-step). The patch makes the head score only the completion's
positions on a CPU too; the log-probabilities, the loss and the gradients are the same (the
other positions were masked out of the loss anyway; `tests/trainers/test_trl_patches.py`).

`quiet_checkpointing_renames`: TRL 1.16 turns gradient checkpointing off and on around every
generation through the names transformers 5 renamed (``is_gradient_checkpointing``,
``gradient_checkpointing_disable`` / ``_enable``), and each call prints a ``FutureWarning``:
three per GRPO step, about TRL's code, that the user can do nothing about. Around those calls
exactly these three are silenced; any other warning still shows.

`escape_printed_completions`: with ``log_completions`` and ``num_completions_to_print`` (rk-agent
asks for none; a config may), TRL 1.16's GRPO prints a table of sampled prompts and completions
to the terminal with rich, as the model wrote them: an escape sequence in a completion (a
clipboard write, a hidden link, a screen clear) reached the terminal. The patch hands TRL the
same rows with their control characters escaped (`rk_agent.terminal_text`); what goes to wandb
and to the run folder is untouched.

`quiet_tied_weights_on_resume`: a model whose LM head is tied to its input embeddings (the
embedded SmolLM2 among them) is saved with one copy of the shared weight, so a run resumed from
a checkpoint loads a state without ``lm_head.weight``, and transformers' ``Trainer`` (5.x) warns
``There were missing keys in the checkpoint model loaded: ['lm_head.weight']``: harmless, since
the tie gives the head its value, but alarming. The patched trainer leaves out of that warning
the missing keys whose parameter is the very tensor of a key that was loaded (a tie), and
re-ties; any other missing or unexpected key still warns.

Main names: `score_completions_only`, `quiet_checkpointing_renames`,
`escape_printed_completions`, `quiet_tied_weights_on_resume`, `tied_to_loaded`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from rk_agent.terminal_text import terminal_text

__all__ = [
    "escape_printed_completions",
    "quiet_checkpointing_renames",
    "quiet_tied_weights_on_resume",
    "score_completions_only",
    "tied_to_loaded",
]

_RENAMED = r"`(is_gradient_checkpointing|gradient_checkpointing_(enable|disable))` is deprecated"

_PATCHED = "_rk_agent_scores_completions_only"


def score_completions_only() -> bool:
    """Make TRL's fused LM head score only completion positions on a CPU (module docstring).

    Idempotent. Returns whether the patch is in place (``False`` when this TRL has no such
    switch: then TRL runs as it is).
    """
    try:
        from trl.trainer import utils
    except ImportError:  # pragma: no cover - TRL is a dependency
        return False
    choose = getattr(utils, "_use_triton", None)
    if choose is None:
        return False
    if getattr(choose, _PATCHED, False):
        return True

    def compact_on_cpu(device: Any) -> bool:
        return bool(choose(device)) or getattr(device, "type", None) == "cpu"

    setattr(compact_on_cpu, _PATCHED, True)
    utils._use_triton = compact_on_cpu
    return True


@contextlib.contextmanager
def quiet_checkpointing_renames() -> Iterator[None]:
    """Silence transformers' ``FutureWarning`` about the renamed gradient-checkpointing methods
    that TRL calls (module docstring), and only those, for the ``with`` block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RENAMED, category=FutureWarning)
        yield


_ESCAPED = "_rk_agent_escapes_completions"


def escape_printed_completions() -> bool:
    """Make GRPO's printed table of completions show them escaped (module docstring).

    Idempotent. Returns whether the patch is in place (``False`` when this TRL prints no such
    table).
    """
    try:
        from trl.trainer import grpo_trainer
    except ImportError:  # pragma: no cover - TRL is a dependency
        return False
    printer = getattr(grpo_trainer, "print_prompt_completions_sample", None)
    if printer is None:
        return False
    if getattr(printer, _ESCAPED, False):
        return True

    @functools.wraps(printer)
    def escaped(prompts: Any, completions: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("extra"):
            kwargs["extra"] = _escaped(kwargs["extra"])
        return printer(_escaped(prompts), _escaped(completions), *args, **kwargs)

    setattr(escaped, _ESCAPED, True)
    grpo_trainer.print_prompt_completions_sample = escaped
    return True


def _escaped(value: Any) -> Any:
    """``value`` (text, or lists and dicts of it: messages, tool calls) with every string's
    control characters escaped; a tool call's JSON arguments are read first, as TRL reads them,
    so that their keys are escaped too."""
    if isinstance(value, str):
        return terminal_text(value)
    if isinstance(value, list | tuple):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        found = {}
        for key, item in value.items():
            if key == "arguments" and isinstance(item, str):
                with contextlib.suppress(ValueError):
                    item = json.loads(item)
            found[_escaped(key)] = _escaped(item)
        return found
    return value


def tied_to_loaded(model: Any, missing_keys: Sequence[str]) -> set[str]:
    """The ``missing_keys`` of a state loaded into ``model`` that are tied to a loaded key: the
    parameter they name is the same tensor as that of a key the state held (module docstring).
    """
    params = dict(model.named_parameters(remove_duplicate=False))
    missing = set(missing_keys)
    loaded = {id(param) for name, param in params.items() if name not in missing}
    return {key for key in missing if key in params and id(params[key]) in loaded}


def quiet_tied_weights_on_resume(trainer: Any) -> None:
    """Make ``trainer`` (a transformers ``Trainer``) leave tied weights out of the warning it
    gives after loading a checkpoint to resume (module docstring). Idempotent."""
    issue = getattr(trainer, "_issue_warnings_after_load", None)
    if issue is None or getattr(issue, _TIED, False):
        return

    @functools.wraps(issue)
    def warn_untied(load_result: Any) -> Any:
        model = trainer.model
        tied = tied_to_loaded(model, load_result.missing_keys)
        if tied:
            model.tie_weights()
            kept = [key for key in load_result.missing_keys if key not in tied]
            load_result = load_result._replace(missing_keys=kept)
        return issue(load_result)

    setattr(warn_untied, _TIED, True)
    trainer._issue_warnings_after_load = warn_untied


_TIED = "_rk_agent_quiet_tied_weights"
