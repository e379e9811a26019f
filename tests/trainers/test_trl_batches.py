"""Joining TRL's scored batches, and what dynamic sampling relies on in TRL itself.

The contract tests read the installed TRL: if an upgrade changes the method dynamic sampling
wraps, the keys it returns, how it pads, normalises or counts, or the checkpoint hooks, they
fail here, naming what changed, before a run trains on a batch joined wrongly.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import re
import textwrap

import pytest
import torch

from rk_agent.errors import NotAvailableError
from rk_agent.trainers import trl_batches
from rk_agent.trainers.trl_batches import MERGED_KEYS, select_groups

PAD = 9


def _batch(prompts: list[list[int]], completions: list[list[int]], tools: bool = True) -> dict:
    """A batch padded as TRL pads it: prompts on the left, completions on the right."""
    width_p = max(map(len, prompts))
    width_c = max(map(len, completions))
    batch = {
        "prompt_ids": torch.tensor([[PAD] * (width_p - len(p)) + p for p in prompts]),
        "prompt_mask": torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in prompts]),
        "completion_ids": torch.tensor([c + [PAD] * (width_c - len(c)) for c in completions]),
        "completion_mask": torch.tensor(
            [[1] * len(c) + [0] * (width_c - len(c)) for c in completions]
        ),
        "old_per_token_logps": torch.tensor(
            [[-0.5] * len(c) + [0.0] * (width_c - len(c)) for c in completions]
        ),
        "advantages": torch.arange(len(prompts), dtype=torch.float32) + 10 * len(prompts[0]),
        "num_items_in_batch": torch.tensor(-1),
    }
    if tools:  # the environment's tokens (here: the second one of each completion) are masked
        batch["tool_mask"] = torch.tensor(
            [[1, 0, *[1] * (len(c) - 2)] + [1] * (width_c - len(c)) for c in completions]
        )
    return batch


def test_the_chosen_groups_are_padded_on_trls_sides_and_counted_again() -> None:
    a = _batch([[1, 2], [1, 2], [3], [3]], [[5, 6, 7], [5, 6], [8, 9], [8, 9, 9, 9]])
    b = _batch([[4, 4, 4], [4, 4, 4]], [[6, 6], [6, 6]])
    out = select_groups([(a, [1]), (b, [0])], group_size=2, pad_token_id=PAD)
    assert set(out) == set(a)
    assert out["prompt_ids"].tolist() == [[PAD, PAD, 3], [PAD, PAD, 3], [4, 4, 4], [4, 4, 4]]
    assert out["prompt_mask"].tolist() == [[0, 0, 1], [0, 0, 1], [1, 1, 1], [1, 1, 1]]
    assert out["completion_ids"].tolist() == [
        [8, 9, PAD, PAD], [8, 9, 9, 9], [6, 6, PAD, PAD], [6, 6, PAD, PAD]
    ]  # fmt: skip
    assert out["completion_mask"].tolist() == [
        [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]
    ]  # fmt: skip
    assert out["tool_mask"].tolist() == [[1, 0, 1, 1], [1, 0, 1, 1], [1, 0, 1, 1], [1, 0, 1, 1]]
    assert out["old_per_token_logps"][1].tolist() == [-0.5] * 4
    assert out["old_per_token_logps"][0].tolist() == [-0.5, -0.5, 0.0, 0.0]
    assert out["advantages"].tolist() == [22.0, 23.0, 30.0, 31.0]
    # the loss counts the model's tokens of the rows kept: 1 + 3 + 1 + 1
    assert out["num_items_in_batch"].item() == 6
    no_tools = select_groups(
        [(_batch([[1]] * 2, [[5, 6]] * 2, tools=False), [0])], group_size=2, pad_token_id=PAD
    )
    assert "tool_mask" not in no_tools and no_tools["num_items_in_batch"].item() == 4


def test_a_key_without_a_rule_is_refused_by_name() -> None:
    a = _batch([[1]] * 2, [[5, 6]] * 2)
    with_images = {**a, "pixel_values": torch.zeros(2, 3)}
    message = (
        "dynamic sampling cannot join TRL's scored batches: they hold 'pixel_values', which it "
        "has no rule for (it joins text batches with the keys of TRL 1.16: advantages, "
        "completion_ids, completion_mask, importance_sampling_ratio, old_per_token_logps, "
        "prompt_ids, prompt_mask, ref_per_token_logps, sampling_per_token_logps, tool_mask). "
        "Train without dynamic sampling, or with TRL 1.16."
    )
    with pytest.raises(NotAvailableError, match=re.escape(message)):
        select_groups([(with_images, [0])], 2, PAD)
    b = {k: v for k, v in a.items() if k != "old_per_token_logps"}
    with pytest.raises(NotAvailableError, match="they hold 'old_per_token_logps'"):
        select_groups([(a, [0]), (b, [0])], 2, PAD)


# --------------------------------------------------------------------------------------------
# What TRL must still do (read from the installed TRL's source)

_IMAGE_KEYS = {
    "pixel_values", "image_grid_thw", "pixel_attention_mask", "spatial_shapes", "image_sizes",
    "token_type_ids", "mm_token_type_ids", "image_position_ids", "num_images", "num_tiles",
}  # fmt: skip
"""Keys TRL 1.16 adds for images only: rk-agent's environments are text, and a batch holding
them is refused at run time."""


def _source(method: object) -> str:
    return textwrap.dedent(inspect.getsource(method))  # type: ignore[arg-type]


def _output_keys() -> set[str]:
    from trl import GRPOTrainer

    tree = ast.parse(_source(GRPOTrainer._generate_and_score_completions))
    keys: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == "output":  # output = {...}
                if isinstance(node.value, ast.Dict):
                    keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
            elif (  # output["key"] = ...
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == "output"
                and isinstance(target.slice, ast.Constant)
            ):
                keys.add(target.slice.value)
    return keys


def test_trl_returns_no_key_without_a_rule() -> None:
    keys = _output_keys()
    assert {"prompt_ids", "completion_ids", "advantages", "num_items_in_batch"} <= keys
    unknown = keys - set(MERGED_KEYS) - {"num_items_in_batch"} - _IMAGE_KEYS
    assert not unknown, (
        f"TRL's _generate_and_score_completions now returns {sorted(unknown)}: give each a rule "
        "in rk_agent.trainers.trl_batches.MERGED_KEYS (how dynamic sampling joins it) before "
        "allowing this TRL"
    )


def test_trl_pads_normalises_and_counts_as_the_join_assumes() -> None:
    from trl import GRPOTrainer

    code = " ".join(_source(GRPOTrainer._generate_and_score_completions).split())
    relied_on = {
        "prompts padded on the left": r"prompt_ids = pad\( prompt_ids, [^)]*padding_side=\"left\"",
        "completions on the right": r"completion_ids = pad\( completion_ids, [^)]*"
        r"padding_side=\"right\"",
        "the tool mask with 1": r"tool_mask = pad\( tool_mask, padding_value=1, "
        r"padding_side=\"right\"",
        "advantages normalised within each group": r"rewards\.view\(-1, num_generations\)",
        "the loss's token count": r"num_items_in_batch = self\.accelerator\.gather\("
        r"loss_mask\.sum\(\)\)\.sum\(\)",
        "rewards computed once per call": r"rewards_per_func = self\._calculate_rewards\(",
        "the metrics dict it logs": r"self\._metrics\[mode\]\[",
    }
    missing = [what for what, pattern in relied_on.items() if not re.search(pattern, code)]
    assert not missing, f"TRL's _generate_and_score_completions no longer shows: {missing}"


def test_the_methods_dynamic_sampling_wraps_keep_their_signatures() -> None:
    from transformers import Trainer
    from trl import GRPOTrainer

    def params(method: object) -> list[str]:
        return list(inspect.signature(method).parameters)  # type: ignore[arg-type]

    assert params(GRPOTrainer._generate_and_score_completions) == ["self", "inputs"]
    assert params(GRPOTrainer._save_checkpoint) == ["self", "model", "trial"]
    assert params(GRPOTrainer._load_optimizer_and_scheduler) == ["self", "checkpoint"]
    assert params(Trainer._get_output_dir) == ["self", "trial"]
    # TRL calls the scoring method once per generation batch, from _prepare_inputs
    prepare = " ".join(_source(GRPOTrainer._prepare_inputs).split())
    assert "self._generate_and_score_completions(generation_batch)" in prepare
    # and keeps its own extra checkpoint state through the same two methods
    assert "super()._save_checkpoint(model, trial)" in _source(GRPOTrainer._save_checkpoint)


def test_docstring_examples() -> None:
    assert doctest.testmod(trl_batches, raise_on_error=True).failed == 0
