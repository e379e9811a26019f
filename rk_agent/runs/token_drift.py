"""Token drift: do the ids a trainer re-tokenizes from a conversation equal the ids generated?

A policy that generates from token ids (`rk_agent.policies.hf_policy.HFPolicy`, the local
model; `rk_agent.policies.vllm_policy.VLLMPolicy`; `OpenAIPolicy` with ``return_token_ids``
against vLLM) records on each turn the prompt's ids (``Turn.prompt_token_ids``) and the
generated ids (``Turn.token_ids``). A trainer that rebuilds an episode from its messages renders
the conversation with the chat template and tokenizes it again; where that differs from what the
model saw and generated (a tool call re-rendered with other JSON spacing, a word split into
other tokens, a template that renders a tool result otherwise than the one the run used), the
trainer scores tokens the model never produced: token drift.

`check_tokens` checks every turn that has generated ids: it renders the conversation up to and
including that assistant turn with the chat template (no generation prompt), tokenizes it, and
compares it with the ids the model saw and generated (the recorded prompt ids, else the
re-rendered prompt, then the generated ids), over the length of the latter. The first differing
position is reported as in the turn's prompt or in its reply, with the ids and decoded text
around it on both sides (`TurnDrift`).

The prompt is rendered as the run's policy rendered it: the tools offered and the tool-call
format of its `rk_agent.runs.provenance.RunProvenance` (``"native"``: the template renders
the tools; a text format's name: that format describes them), with the run's local model
folder's tokenizer unless another is given. `TokenChecker` holds what that takes for one run
(the tokenizer loaded once) and checks one episode at a time: what ``rk-agent view`` does for
the episode it shows.

The same check runs on a training step's episodes (`rk_agent.trainers.drift_rate`):
`episode_drift` checks one episode, either against its turns' recorded ids (as above) or against
the one sequence a trainer trained on (``trained``: TRL's prompt and completion ids, where the
turns are not split), and `TemplateRenderer` renders as a policy did.

Main names: `check_tokens`, `episode_drift`, `TemplateRenderer`, `TokenChecker`,
`TokenDriftReport`, `TurnDrift`, `load_tokenizer`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, computed_field

from rk_agent.errors import ConfigError, require_extra
from rk_agent.policies.chat_template import ChatTemplate, native_tools
from rk_agent.runs.provenance import NATIVE, RunProvenance, template_sha256
from rk_agent.runs.run_dir import iter_trajectories, read_provenance
from rk_agent.runs.segment_tokens import SegmentTokenizer
from rk_agent.runs.trajectory import Trajectory
from rk_agent.tool_calls import get_tool_call_format
from rk_agent.types import Message

__all__ = [
    "TemplateRenderer",
    "TokenChecker",
    "TokenDriftReport",
    "TurnDrift",
    "check_tokens",
    "episode_drift",
    "load_tokenizer",
]

_BEFORE = 4  # ids shown before the first differing position
_AFTER = 6  # ids shown from it on
RECORDING_POLICIES = (
    "HFPolicy (the local model, --provider local), VLLMPolicy, and OpenAIPolicy with "
    "return_token_ids against a vLLM server"
)
"""The policies that record token ids, as the messages name them."""


class TurnDrift(BaseModel):
    """Where one turn's re-tokenized ids first differ from the ids the model saw and generated.

    Attributes:
        episode: the episode's id.
        turn: the turn's index.
        part: ``"prompt"``: the difference is in what the model saw (a template that renders
            the earlier conversation otherwise); ``"reply"``: in what it generated.
        position: the index of the first differing id within that part.
        generated: the ids the model saw or generated around ``position`` (from
            ``position - 4``).
        retokenized: the re-tokenized ids at the same places.
        generated_text: ``generated`` decoded.
        retokenized_text: ``retokenized`` decoded.
    """

    episode: str
    turn: int
    part: Literal["prompt", "reply"]
    position: int
    generated: list[int]
    retokenized: list[int]
    generated_text: str
    retokenized_text: str

    def describe(self) -> str:
        """``episode 0-0 turn 1: reply differs at token 7: generated ..., re-tokenized ...``."""
        return (
            f"episode {self.episode} turn {self.turn}: {self.part} differs at token "
            f"{self.position}: generated {json.dumps(self.generated_text)} {self.generated}, "
            f"re-tokenized {json.dumps(self.retokenized_text)} {self.retokenized}"
        )


class TokenDriftReport(BaseModel):
    """What `check_tokens` found.

    Attributes:
        run: the run checked.
        tokenizer: where the tokenizer came from.
        episodes: the episodes read.
        episodes_checked: those with generated ids on at least one turn.
        turns_checked: the turns with generated ids.
        drifts: each turn whose re-tokenized ids differ, by task, sample and turn.
        note: a warning about the check itself (the tokenizer's chat template is not the run's).
    """

    run: str
    tokenizer: str
    episodes: int
    episodes_checked: int
    turns_checked: int
    drifts: list[TurnDrift]
    note: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def episodes_affected(self) -> int:
        """Episodes with at least one drifted turn."""
        return len({drift.episode for drift in self.drifts})

    @computed_field  # type: ignore[prop-decorator]
    @property
    def turns_affected(self) -> int:
        """Turns whose re-tokenized ids differ."""
        return len(self.drifts)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def drift_rate(self) -> float:
        """Drifted turns over checked turns (0.0 when none was checked)."""
        return self.turns_affected / self.turns_checked if self.turns_checked else 0.0

    def describe(self) -> list[str]:
        """The report as lines: what was checked, each drifted turn, a verdict."""
        lines = [
            f"Checked {self.turns_checked} turns of {self.episodes_checked} episodes "
            f"(of {self.episodes}) in {self.run} with the tokenizer of {self.tokenizer}"
        ]
        if self.note:
            lines.append(f"note: {self.note}")
        lines += [drift.describe() for drift in self.drifts]
        if self.drifts:
            lines.append(
                f"Drift: {self.turns_affected} of {self.turns_checked} turns "
                f"({self.drift_rate:.1%}) in {self.episodes_affected} of "
                f"{self.episodes_checked} episodes re-tokenize otherwise than generated."
            )
        else:
            lines.append(
                "No drift: every turn re-tokenizes to the ids the model saw and generated."
            )
        return lines


class TemplateRenderer(ChatTemplate):
    """A policy's prompt rendering (`ChatTemplate`), without its model: the ids a trainer that
    re-tokenizes a conversation would get.

    Args:
        tokenizer: the tokenizer whose chat template renders.
        tool_call_format: how the policy offered tools: ``"native"`` (the template renders
            them), a text format's name (``"hermes"``: that format describes them), or ``None``
            (native when the template can render tools, as ``tool_format="auto"`` decides).
    """

    def __init__(self, tokenizer: Any, tool_call_format: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.segments = SegmentTokenizer(tokenizer)  # the shared opening is tokenized once
        if tool_call_format is None or tool_call_format == NATIVE:
            self.native_tools = tool_call_format == NATIVE or native_tools(tokenizer, "auto")
        else:
            self.native_tools = False
            self.tool_call_format = get_tool_call_format(tool_call_format)

    def ids(
        self, messages: list[Message], tools: list[dict[str, Any]], *, prompt: bool
    ) -> list[int]:
        """``messages`` rendered (with the generation prompt when ``prompt``) and tokenized."""
        text = self.render(messages, tools or None, add_generation_prompt=prompt)
        return self.segments.ids(text)


class TokenChecker:
    """Checks the episodes of one run for token drift, one at a time (module docstring).

    Args:
        run: a run directory or a trajectories JSONL file (then ``tokenizer`` is needed).
        tokenizer: as for `check_tokens`.

    Attributes:
        source: where the tokenizer came from.
        note: a warning about the check itself (the tokenizer's chat template is not the run's).

    Raises:
        ConfigError: no tokenizer is available (`load_tokenizer`).

    Example:
        >>> checker = TokenChecker("runs/local")  # doctest: +SKIP
        >>> drifts, checked = checker.check(trajectory)  # doctest: +SKIP
    """

    def __init__(self, run: str | Path, tokenizer: str | Path | None = None) -> None:
        self.provenance = read_provenance(run_folder(run))
        self.tokenizer, self.source = load_tokenizer(run, tokenizer, self.provenance)
        self.note = _template_note(self.tokenizer, self.provenance)
        self._renderers: dict[str | None, TemplateRenderer] = {}

    def check(self, trajectory: Trajectory) -> tuple[list[TurnDrift], int]:
        """The drifted turns of one episode, and how many of its turns had generated ids."""
        if not any(turn.token_ids for turn in trajectory.turns):
            return [], 0
        provenance = self.provenance
        fmt = provenance.episode_format(trajectory.provenance) if provenance else None
        if fmt not in self._renderers:
            self._renderers[fmt] = TemplateRenderer(self.tokenizer, fmt)
        tools = provenance.episode_tools(trajectory.provenance) if provenance else []
        return episode_drift(trajectory, self._renderers[fmt], tools)


def check_tokens(run: str | Path, tokenizer: str | Path | None = None) -> TokenDriftReport:
    """Check every turn of ``run`` that has generated ids for token drift (module docstring).

    Args:
        run: a run directory (its ``provenance.json`` names the model folder, the tools and the
            tool-call format) or a trajectories JSONL file (then ``tokenizer`` is needed).
        tokenizer: a folder with the tokenizer and the chat template to render with, or
            ``"embedded"`` for the embedded model's; default: the run's local model folder.

    Raises:
        ConfigError: ``run`` is not a run, none of its turns has generated ids, or no tokenizer
            is available.

    Example:
        >>> report = check_tokens("runs/local")  # doctest: +SKIP
        >>> report.turns_affected, report.drift_rate  # doctest: +SKIP
        (0, 0.0)
    """
    trajectories = iter_trajectories(run)  # checks the path first
    _check_ids_recorded(run)  # before a tokenizer is looked for, or loaded
    checker = TokenChecker(run, tokenizer)
    episodes = checked = turns = 0
    drifts: list[tuple[int, int, TurnDrift]] = []
    for trajectory in trajectories:
        episodes += 1
        found, count = checker.check(trajectory)
        if not count:
            continue
        checked += 1
        turns += count
        drifts += [(trajectory.task_index, trajectory.sample, drift) for drift in found]
    return TokenDriftReport(
        run=str(run),
        tokenizer=checker.source,
        episodes=episodes,
        episodes_checked=checked,
        turns_checked=turns,
        drifts=[drift for *_, drift in sorted(drifts, key=lambda d: (d[0], d[1], d[2].turn))],
        note=checker.note,
    )


def run_folder(run: str | Path) -> Path:
    """The run folder of ``run``: itself, or the folder of a run's ``trajectories.jsonl``
    (whose ``provenance.json`` lies beside it); a trajectories file elsewhere has none, and
    its folder holds no ``provenance.json``."""
    path = Path(run)
    return path if path.is_dir() else path.parent


def _check_ids_recorded(run: str | Path) -> None:
    """Raise, without loading a tokenizer, when no turn of ``run`` has generated ids."""
    episodes = 0
    for trajectory in iter_trajectories(run):
        if any(turn.token_ids for turn in trajectory.turns):
            return
        episodes += 1
    raise ConfigError(
        f"{run} has no generated token ids in its {episodes} episodes: only "
        f"{RECORDING_POLICIES} record them. Play the run with one of those."
    )


def load_tokenizer(
    run: str | Path, tokenizer: str | Path | None, provenance: RunProvenance | None
) -> tuple[Any, str]:
    """The tokenizer to re-render with, and where it came from: ``tokenizer`` (a folder, or
    ``"embedded"``), else the run's local model folder.

    Raises:
        ConfigError: none is given and the run names no local model folder, or it cannot be
            loaded.
    """
    from rk_agent.policies.local_model import embedded_tokenizer, is_embedded

    if tokenizer is not None and is_embedded(str(tokenizer)):
        return embedded_tokenizer(), "the embedded model"
    if tokenizer is None:
        model = provenance.model.model if provenance is not None else None
        if model is None or not Path(model).is_dir():
            said = f"names the model {model!r}, not a local folder" if model else "names no model"
            if provenance is None:
                said = "has no provenance.json"
                if not Path(run).is_dir():  # a trajectories file: nothing beside it says
                    said = (
                        f"is a trajectories file without its run's provenance.json beside it "
                        f"(in {run_folder(run)})"
                    )
            raise ConfigError(
                f"{run} {said}: no tokenizer to re-render its episodes with. Give one with "
                "--tokenizer PATH (a model folder with the tokenizer and chat template the run "
                "used) or --tokenizer embedded."
            )
        tokenizer = model
    require_extra("local", "re-rendering episodes with a tokenizer", modules=("transformers",))
    from transformers import AutoTokenizer

    path = Path(tokenizer)
    if not path.is_dir():
        raise ConfigError(
            f"--tokenizer {str(tokenizer)!r} is not a folder: expected a model folder with "
            "tokenizer files and a chat template, or 'embedded'."
        )
    try:
        return AutoTokenizer.from_pretrained(path), str(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"could not load a tokenizer from {path}: {exc}. Give a model folder with "
            "tokenizer files (tokenizer.json or tokenizer_config.json)."
        ) from exc


def _template_note(tokenizer: Any, provenance: RunProvenance | None) -> str | None:
    recorded = provenance.model.chat_template_sha256 if provenance is not None else None
    now = template_sha256(getattr(tokenizer, "chat_template", None))
    if recorded is None or recorded == now:
        return None
    return (
        f"the tokenizer's chat template (sha256 {str(now)[:12]}) is not the run's "
        f"({recorded[:12]}): differences may come from the template"
    )


def episode_drift(
    trajectory: Trajectory,
    renderer: TemplateRenderer,
    tools: list[dict[str, Any]],
    trained: list[int] | None = None,
) -> tuple[list[TurnDrift], int]:
    """The drifted turns of one episode, and how many turns were checked.

    Each assistant turn's conversation (the opening the model was sent, the turns before and the
    turn's reply) is rendered with ``renderer`` and tokenized, then compared with the ids the model
    saw and generated. Those are the turn's recorded ids (``prompt_token_ids``, else the re-rendered
    prompt, then ``token_ids``; turns without ``token_ids`` are not checked), or, with ``trained``,
    the whole sequence trained on (prompt and completion, as TRL's tool loop builds it) over the
    length of the turn's re-rendering, every turn checked. Each turn is rendered with the tools
    it offered: ``tools`` (the episode's), or what the trajectory recorded for that turn when
    its environment's tools differ per task or change between turns
    (`rk_agent.runs.trajectory.Trajectory.offered_tools`).

    Example:
        >>> renderer = TemplateRenderer(tokenizer)  # doctest: +SKIP
        >>> drifts, checked = episode_drift(trajectory, renderer, tools)  # doctest: +SKIP
    """
    drifts = []
    checked = 0
    before: list[Message] = trajectory.opening_messages
    for turn in trajectory.turns:
        through = [*before, turn.assistant]
        if trained is not None or turn.token_ids:
            checked += 1
            offered = trajectory.offered_tools(turn.index, tools)
            again = renderer.ids(through, offered, prompt=False)
            if trained is None:
                prompt = turn.prompt_token_ids or renderer.ids(before, offered, prompt=True)
                seen = [*prompt, *(turn.token_ids or [])]
            else:
                prompt = trained[: len(renderer.ids(before, offered, prompt=True))]
                seen = trained[: len(again)]
            at = _first_difference(seen, again)
            if at is not None:
                drifts.append(
                    _drift(trajectory.id, turn.index, seen, again, at, len(prompt), renderer)
                )
        before = [*through, *turn.environment]
    return drifts, checked


def _first_difference(seen: list[int], again: list[int]) -> int | None:
    for i, token in enumerate(seen):
        if i >= len(again) or again[i] != token:
            return i
    return None


def _drift(
    episode: str,
    turn: int,
    seen: list[int],
    again: list[int],
    at: int,
    prompt_len: int,
    renderer: TemplateRenderer,
) -> TurnDrift:
    start, end = max(0, at - _BEFORE), at + _AFTER
    if at >= prompt_len:  # the sample stays inside the reply
        start, end = max(prompt_len, start), min(end, len(seen))
    shown, other = seen[start:end], again[start:end]
    decode = renderer.tokenizer.decode
    return TurnDrift(
        episode=episode,
        turn=turn,
        part="prompt" if at < prompt_len else "reply",
        position=at if at < prompt_len else at - prompt_len,
        generated=shown,
        retokenized=other,
        generated_text=decode(shown),
        retokenized_text=decode(other),
    )
