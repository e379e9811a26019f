"""The token drift a GRPO step would have had: its episodes re-tokenized from their messages.

Both GRPO loops train on the ids the model generated: the rk loop on `EpisodeTokens`' sequence
(each turn's ``prompt_token_ids`` and ``token_ids`` are recorded on the trajectory), TRL's tool
loop on its own prompt ids and ``completion_ids`` (the replies and the tool results' suffixes,
concatenated). A trainer that rebuilt each episode from its messages with the chat template
would train on other ids wherever re-tokenization differs. `DriftMeter` measures how often
that happens, per training step, with `rk_agent.runs.token_drift.episode_drift` (the check
``rk-agent check tokens`` runs on a run folder):

- an episode whose turns carry generated ids is checked turn by turn against them;
- otherwise, when the batch's ``completion_ids`` are given (TRL's loop), against the prompt
  rendered as TRL renders it (the chat template, the tools, the generation prompt) followed by
  its completion ids;
- an episode with neither, or that failed before its first reply, is not checked.

The step's figures (`DriftCount.figures`) are ``tokens/drift_episodes`` (the share of checked
episodes with a drifted turn) and ``tokens/drift_turns`` (the share of checked turns whose
re-tokenized ids differ); the watch (`rk_agent.trainers.watch`) logs them with its own.

Main names: `DriftMeter`, `DriftCount`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rk_agent.runs.token_drift import TemplateRenderer, episode_drift
from rk_agent.runs.trajectory import Trajectory

__all__ = ["DriftCount", "DriftMeter"]


@dataclass
class DriftCount:
    """Episodes and turns checked and drifted, summed over batches.

    Attributes:
        episodes: episodes checked.
        episodes_drifted: those with at least one drifted turn.
        turns: turns checked.
        turns_drifted: those whose re-tokenized ids differ from the ids trained on.
        seconds: time spent checking.
    """

    episodes: int = 0
    episodes_drifted: int = 0
    turns: int = 0
    turns_drifted: int = 0
    seconds: float = 0.0

    def __add__(self, other: DriftCount) -> DriftCount:
        return DriftCount(
            self.episodes + other.episodes,
            self.episodes_drifted + other.episodes_drifted,
            self.turns + other.turns,
            self.turns_drifted + other.turns_drifted,
            self.seconds + other.seconds,
        )

    def figures(self) -> dict[str, float]:
        """``tokens/drift_episodes`` and ``tokens/drift_turns``; none when nothing was checked.

        Example:
            >>> DriftCount(episodes=4, episodes_drifted=1, turns=8, turns_drifted=1).figures()
            {'tokens/drift_episodes': 0.25, 'tokens/drift_turns': 0.125}
        """
        if not self.episodes:
            return {}
        return {
            "tokens/drift_episodes": self.episodes_drifted / self.episodes,
            "tokens/drift_turns": self.turns_drifted / self.turns if self.turns else 0.0,
        }


class DriftMeter:
    """Checks a training batch's episodes for token drift (module docstring).

    Args:
        tokenizer: the trainer's tokenizer; its chat template re-renders the episodes.
        tools: the tool schemas the episodes were offered (an episode that recorded its own,
            from an environment whose tools differ per task, is rendered with those).
        tool_call_format: how the policy offered the tools (`TemplateRenderer`): ``"native"``
            for TRL's loop, ``None`` (as ``tool_format="auto"``) for the rk loop's policy.

    Example:
        >>> meter = DriftMeter(tokenizer, env.tool_schemas)  # doctest: +SKIP
        >>> meter.measure(trajectories).figures()  # doctest: +SKIP
        {'tokens/drift_episodes': 0.0, 'tokens/drift_turns': 0.0}
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[dict[str, Any]],
        tool_call_format: str | None = None,
    ) -> None:
        self.renderer = TemplateRenderer(tokenizer, tool_call_format)
        self.tools = list(tools)

    def measure(
        self,
        trajectories: Sequence[Trajectory],
        completion_ids: Sequence[Sequence[int]] | None = None,
    ) -> DriftCount:
        """The drift of one batch: ``trajectories`` in the batch's order, and, for episodes
        whose turns carry no ids, the batch's ``completion_ids`` (TRL's, one row each)."""
        started = time.perf_counter()
        count = DriftCount()
        for row, trajectory in enumerate(trajectories):
            trained = None
            if not any(turn.token_ids for turn in trajectory.turns):
                if completion_ids is None or row >= len(completion_ids) or not trajectory.turns:
                    continue
                offered = trajectory.offered_tools(0, self.tools)
                prompt = self.renderer.ids(trajectory.opening_messages, offered, prompt=True)
                trained = [*prompt, *completion_ids[row]]
            drifts, turns = episode_drift(trajectory, self.renderer, self.tools, trained)
            if not turns:
                continue
            count.episodes += 1
            count.episodes_drifted += bool(drifts)
            count.turns += turns
            count.turns_drifted += len(drifts)
        count.seconds = time.perf_counter() - started
        return count
