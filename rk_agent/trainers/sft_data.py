"""SFT data from trajectories: rejection sampling for a warm start.

A run directory (or a trajectories JSONL file) becomes a `datasets.Dataset` that TRL's
``SFTTrainer`` trains on: the episodes that pass an `SFTFilter` (solved, above a reward
threshold, not failed, at most N per task), one conversation per row. A weak model can so be
warm-started on the successful episodes of a strong model or of an environment's reference
solver before GRPO.

Columns:
    messages: the conversation as chat-template dicts: system, user, assistant (tool-call
        arguments as dicts), tool; it ends on the last assistant message. An episode played
        with a text tool-call format (a server without native tools: the tools described in
        the system prompt, calls and results written as text) is rendered as it was sent:
        plain system/user/assistant turns in that format.
    tools: the OpenAI tool schemas the episode offered (``[]`` for none, and for a text
        format, whose prompt already describes them); TRL passes them to the chat template,
        which renders them into the system prompt. An episode whose tools changed between
        its turns (an environment whose ``tool_scope`` is ``turn``) makes one row per run of
        turns offered the same tools: the conversation up to that run's last reply, with
        those tools, so each reply is rendered after the tools it was offered (under
        assistant-only loss the earlier replies of a later row are trained again, there with
        the later tools in the prompt).
    task_id, trajectory_id, env: where the row came from.
    episode_reward: the episode score (``None`` when it was missing or invalid).
    context_messages: how many of the first ``messages`` are context only, not trained on:
        the turns a fork copied from its source episode (``Turn.copied_from``), which another
        policy played; ``0`` for an episode played from its start.
        `rk_agent.trainers.sft.build_sft_trainer` leaves their tokens out of the loss. A
        forked episode with no turn of its own is dropped (`DropReason.NO_ASSISTANT`).

Rows are in task order (task index, then sample), whatever order the episodes finished in:
the same episodes make the same dataset, so a seeded SFT run trains the same model.

``messages`` and ``tools`` are stored as lists of `datasets.Json` values (datasets >= 4.7):
each message and schema keeps exactly its own keys. Arrow structs would merge the keys of all
rows, so a tool call's ``{"a": 1}`` next to another's ``{"b": 2}`` would come back as
``{"a": 1, "b": None}`` and be rendered with a null argument. Reading a row gives plain dicts
(datasets decodes them with pandas' ujson: a float of 17 significant digits may come back one
unit off in its last digit).

**What the model saw.** A run folder's ``provenance.json`` (`rk_agent.runs.provenance`)
gives the tools each episode was offered, MCP servers' included, and the tool-call format it
was played with; the rows render exactly that prompt. An episode whose tools differ per task
or change between turns carries its own record of them (``Trajectory.provenance``), read
first, also in a training run's episode log. Without it (a run made before rk-agent
recorded it, a training run's episode log) the tools are read from the environment, built
again with the run's arguments (MCP servers' tools cannot be: pass ``tools=``).

Main names: `SFTFilter`, `DropReason`, `SelectionReport`, `SFTData`, `load_trajectories`,
`select_trajectories`, `select_for_sft`, `training_messages`, `build_sft_data`, `sft_dataset`,
`check_tools_trust` (`SFTFilter` is defined in `rk_agent.trainers.sft_filter`, a light module
a train config reads).

Example::

    data = build_sft_data("runs/tools-solver", filter=SFTFilter(max_per_task=2))
    print(data.report)  # kept 37 of 64 trajectories (27 unsuccessful)
    trainer = build_sft_trainer(model, tokenizer, data.dataset, args)
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent.errors import ConfigError, DataError, NotAvailableError, require_extra
from rk_agent.policies.hf_policy import native_message
from rk_agent.runs.provenance import NATIVE, RunProvenance
from rk_agent.runs.run_dir import CONFIG_FILE, RunDir, read_provenance, read_trajectories
from rk_agent.runs.trajectory import Trajectory
from rk_agent.trainers.sft_filter import SFTFilter

if TYPE_CHECKING:
    from datasets import Dataset

    from rk_agent.runs.config import RolloutConfig

__all__ = [
    "DropReason",
    "SFTData",
    "SFTFilter",
    "SelectionReport",
    "build_sft_data",
    "check_tools_trust",
    "load_trajectories",
    "select_for_sft",
    "select_trajectories",
    "sft_dataset",
    "training_messages",
]

Source = str | os.PathLike[str] | Sequence[Trajectory]
"""A run directory, a trajectories JSONL file, or trajectories already loaded."""

_Offered = Callable[[Trajectory], tuple[list[dict[str, Any]], str | None]]
"""An episode -> the tool schemas it was offered and its tool-call format."""


class DropReason(str, Enum):
    """Why a trajectory was left out (the first reason that applies, in this order)."""

    FAILED = "failed"
    """It recorded a failure and ``drop_failed`` is on."""
    UNSUCCESSFUL = "unsuccessful"
    """``success_only`` is on and the episode was not solved."""
    NO_REWARD = "without a valid reward"
    """``min_reward`` is set and the episode has no valid episode reward."""
    LOW_REWARD = "below min_reward"
    """Its episode reward is below ``min_reward``."""
    NO_ASSISTANT = "without an assistant turn"
    """There is nothing to train on: the model never answered, or every turn was copied from
    another episode by a fork (always dropped)."""
    OVER_TASK_LIMIT = "over max_per_task"
    """Its task already has ``max_per_task`` better samples."""


@dataclass(frozen=True)
class SelectionReport:
    """How many trajectories the filter kept, and why the others were dropped.

    ``str(report)`` reads ``kept 37 of 64 trajectories (27 unsuccessful)``.
    """

    total: int
    kept: int
    dropped: dict[DropReason, int] = field(default_factory=dict)

    def reasons(self) -> str:
        """The drop counts as text, e.g. ``2 failed, 27 unsuccessful`` (``""`` for none)."""
        return ", ".join(f"{self.dropped[r]} {r.value}" for r in DropReason if self.dropped.get(r))

    def __str__(self) -> str:
        reasons = self.reasons()
        tail = f" ({reasons})" if reasons else ""
        return f"kept {self.kept} of {self.total} trajectories{tail}"


@dataclass(frozen=True)
class SFTData:
    """An SFT dataset and the selection that made it.

    Attributes:
        dataset: the rows (see the module docstring for the columns).
        report: the counts for ``kept 37 of 64 trajectories (27 unsuccessful)``.
    """

    dataset: Dataset
    report: SelectionReport


# ---------------------------------------------------------------------------- reading


def load_trajectories(source: str | os.PathLike[str]) -> list[Trajectory]:
    """Read every trajectory of a run directory or of a trajectories JSONL file.

    The rules are those of every reader (`rk_agent.runs.run_dir.read_trajectories`): a torn
    last line (a crash mid-write) is skipped; every other non-blank line must be a trajectory;
    in a run directory an episode repeated by two writers counts once.

    Raises:
        ConfigError: the path does not exist, or is a directory without ``trajectories.jsonl``.
        DataError: a line is not JSON or not a trajectory (the message names file:line).
    """
    return read_trajectories(source)


def _run_config(path: Path) -> RolloutConfig | None:
    """The rollout config of the run a path belongs to, when there is one next to it."""
    folder = path if path.is_dir() else path.parent
    return RunDir.open(folder).config if (folder / CONFIG_FILE).is_file() else None


def check_tools_trust(
    source: str | os.PathLike[str], trajectories: Sequence[Trajectory], *, trust_run: bool
) -> None:
    """Refuse to build the environment whose tools `build_sft_data` reads when it names code
    (a file or module: `rk_agent.runs.run_wants.env_wants`) and the source is not this
    user's own run (`rk_agent.runs.run_trust`), unless ``trust_run``. Nothing is built
    for a run that recorded what its episodes were offered (``provenance.json``).

    Raises:
        UntrustedRunError: it names code, and the source is neither signed nor trusted.
    """
    from rk_agent.envs.env_setup import EnvSetup
    from rk_agent.runs.run_trust import require_trust, signed_training_env
    from rk_agent.runs.run_wants import env_wants

    path = Path(source)
    if _run_provenance(path) is not None:
        return
    folder = path if path.is_dir() else path.parent
    if (folder / CONFIG_FILE).is_file():
        run = RunDir.open(folder)
        setups = [EnvSetup(name=run.config.env.name, kwargs=run.config.env.kwargs)]
        signed = run.signed
    else:
        names = sorted({t.env for t in trajectories})
        setups = [EnvSetup(name=name) for name in names]
        signed = all(signed_training_env(folder, name) for name in names)
    wants = [want for setup in setups for want in env_wants(setup)]
    require_trust(
        path, wants, trust_run=trust_run, signed=signed, doing="reading its environment's tools"
    )


def _run_provenance(path: Path) -> RunProvenance | None:
    """What the model of the run a path belongs to saw, when it was recorded."""
    return read_provenance(path if path.is_dir() else path.parent)


# ---------------------------------------------------------------------------- selecting


def select_trajectories(
    trajectories: Sequence[Trajectory], filter: SFTFilter | None = None
) -> tuple[list[Trajectory], SelectionReport]:
    """The trajectories that pass ``filter`` (in their original order), and the counts.

    Example:
        >>> kept, report = select_trajectories([])
        >>> str(report)
        'kept 0 of 0 trajectories'
    """
    rules = filter or SFTFilter()
    dropped: Counter[DropReason] = Counter()
    passed: list[Trajectory] = []
    for trajectory in trajectories:
        reason = _drop_reason(trajectory, rules)
        if reason is None:
            passed.append(trajectory)
        else:
            dropped[reason] += 1
    kept = passed
    if rules.max_per_task is not None:
        kept = _best_per_task(passed, rules.max_per_task)
        dropped[DropReason.OVER_TASK_LIMIT] += len(passed) - len(kept)
    report = SelectionReport(
        total=len(trajectories), kept=len(kept), dropped={r: n for r, n in dropped.items() if n}
    )
    return kept, report


def _drop_reason(trajectory: Trajectory, rules: SFTFilter) -> DropReason | None:
    if rules.drop_failed and trajectory.failure is not None:
        return DropReason.FAILED
    if rules.success_only and trajectory.success is not True:
        return DropReason.UNSUCCESSFUL
    if rules.min_reward is not None:
        reward = trajectory.episode_reward
        if reward is None:
            return DropReason.NO_REWARD
        if reward < rules.min_reward:
            return DropReason.LOW_REWARD
    if all(turn.copied_from is not None for turn in trajectory.turns):  # none, or all copied
        return DropReason.NO_ASSISTANT
    return None


def _best_per_task(trajectories: list[Trajectory], limit: int) -> list[Trajectory]:
    by_task: dict[str, list[int]] = defaultdict(list)
    for index, trajectory in enumerate(trajectories):
        by_task[trajectory.task.id].append(index)
    keep: set[int] = set()
    for indices in by_task.values():
        # Highest return first, an episode without one (an invalid score) last, never as a 0;
        # ties keep the file order (sorted() is stable).
        best = sorted(indices, key=lambda i: _rank(trajectories[i]))[:limit]
        keep.update(best)
    return [t for i, t in enumerate(trajectories) if i in keep]


def _rank(trajectory: Trajectory) -> tuple[bool, float]:
    value = trajectory.episode_return.value
    return (value is None, 0.0 if value is None else -value)


# ---------------------------------------------------------------------------- rows


def training_messages(
    trajectory: Trajectory,
    tools: list[dict[str, Any]] | None = None,
    tool_call_format: str | None = None,
) -> list[dict[str, Any]]:
    """A trajectory's conversation as chat-template dicts, ending on its last assistant turn.

    Messages after the last assistant turn (the final tool results or feedback of an episode
    that ran out of turns) are cut: nothing after the last reply is trained on.

    Args:
        trajectory: the episode.
        tools: the tool schemas it was offered (used by a text ``tool_call_format`` only).
        tool_call_format: how it was played (`rk_agent.runs.provenance`): ``None`` or
            ``"native"`` gives the messages as chat templates take them with ``tools=``; a
            text format's name (``"hermes"``) gives the plain turns that format sent, the
            tools described in the system prompt.
    """
    if tools and tool_call_format not in (None, NATIVE):
        from rk_agent.tool_calls import get_tool_call_format

        text = get_tool_call_format(tool_call_format)
        messages: list[dict[str, Any]] = list(text.render_messages(trajectory.conversation, tools))
    else:
        messages = [native_message(m) for m in trajectory.conversation]
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return messages[: last + 1]


def build_sft_data(
    source: Source,
    *,
    filter: SFTFilter | None = None,
    tools: list[dict[str, Any]] | None = None,
    trust_run: bool = False,
) -> SFTData:
    """Select trajectories and build the SFT dataset, with the selection's counts.

    Args:
        source: a run directory, a trajectories JSONL file, or trajectories.
        filter: which trajectories to keep (default: `SFTFilter()`, solved episodes only).
        tools: the tool schemas of every row (rendered natively). By default they are what
            each episode was offered, as its run recorded it (``provenance.json``, tool-call
            format included); for a run without that record, the environment's: the run's
            (its ``config.yaml`` names it and its arguments), else the one each trajectory
            names; an episode that recorded its own (per-task or per-turn tools) is rendered
            with those. Give them when neither is there; ``[]`` for none (given, they are
            every row's, whatever the episodes recorded).
        trust_run: build that environment even when it is a file or module and the source is
            not a run rk-agent wrote here (`check_tools_trust`).

    Raises:
        ConfigError: the source does not exist, or an environment cannot be built to read
            its tools.
        UntrustedRunError: the environment whose tools would be read names code, and the
            source is neither this user's own run nor trusted.
        DataError: the source is unreadable or empty, or no trajectory passed the filter.
        NotAvailableError: the installed ``datasets`` is older than 4.7.
    """
    kept, report = select_for_sft(source, filter)
    path = Path(source) if isinstance(source, (str, os.PathLike)) else None
    provenance = _run_provenance(path) if path is not None and tools is None else None
    if provenance is not None:
        return SFTData(dataset=_to_dataset(kept, _recorded(provenance)), report=report)
    config = _run_config(path) if path is not None else None
    if path is not None and tools is None:
        check_tools_trust(path, kept, trust_run=trust_run)
    by_env = _tool_lookup(kept, tools, config)
    dataset = _to_dataset(kept, lambda t: (by_env(t.env), None), recorded=tools is None)
    return SFTData(dataset=dataset, report=report)


def select_for_sft(
    source: Source, filter: SFTFilter | None = None
) -> tuple[list[Trajectory], SelectionReport]:
    """The trajectories of ``source`` that pass ``filter``, and the counts; at least one.

    What `build_sft_data` trains on, and what ``rk-agent train sft`` checks before it loads
    anything heavy (`rk_agent.trainers.preflight`). Light: no torch, no datasets.

    Raises:
        ConfigError: the source does not exist.
        DataError: the source is unreadable or empty, or no trajectory passed the filter (the
            message says how many were read, the filter, why each was dropped and how to
            loosen it).
    """
    rules = filter or SFTFilter()
    where: str | None = None
    if isinstance(source, (str, os.PathLike)):
        trajectories = load_trajectories(source)
        where = str(source)
    else:
        trajectories = list(source)
    if not trajectories:
        raise DataError(
            "no trajectories to train on (the run is empty). Collect episodes with "
            "`rk-agent rollout` first.",
            path=where,
        )
    kept, report = select_trajectories(trajectories, rules)
    if not kept:
        raise DataError(
            f"0 of {report.total} trajectories passed the filter ({rules.describe()}): "
            f"{report.reasons()}. {_loosen(report, rules)}",
            path=where,
        )
    return kept, report


def _loosen(report: SelectionReport, rules: SFTFilter) -> str:
    """How to keep more of them: one hint for each reason that dropped some."""
    hints = {
        DropReason.FAILED: "sft_filter: {drop_failed: false} in a --config keeps episodes that "
        "recorded a failure",
        DropReason.UNSUCCESSFUL: "--include-unsuccessful (sft_filter.success_only: false) keeps "
        "unsolved episodes",
        DropReason.NO_REWARD: "leaving out --min-reward keeps episodes without a valid reward",
        DropReason.LOW_REWARD: f"a --min-reward below {rules.min_reward} keeps lower-scoring "
        "episodes",
    }
    given = [hint for reason, hint in hints.items() if report.dropped.get(reason)]
    more = "collect more episodes (solved ones: `rk-agent rollout --provider solver`)"
    return f"To keep more: {'; '.join([*given, more])}." if given else f"To keep some, {more}."


def sft_dataset(
    source: Source,
    *,
    filter: SFTFilter | None = None,
    tools: list[dict[str, Any]] | None = None,
    trust_run: bool = False,
) -> Dataset:
    """The SFT dataset of `build_sft_data`, without the counts (same arguments and errors)."""
    require_extra("train", "sft_dataset")
    return build_sft_data(source, filter=filter, tools=tools, trust_run=trust_run).dataset


def _tool_lookup(
    trajectories: list[Trajectory],
    tools: list[dict[str, Any]] | None,
    config: RolloutConfig | None,
) -> Callable[[str], list[dict[str, Any]]]:
    """The tool schemas of an environment name, as the trajectories need them."""
    if tools is not None:
        override = list(tools)
        return lambda name: override
    if config is not None:  # the run's environment, built with the run's arguments
        run_tools = _env_tools(config.env.name, config.env.kwargs)
        return lambda name: run_tools
    by_env = {name: _env_tools(name, {}) for name in sorted({t.env for t in trajectories})}
    return by_env.__getitem__


def _recorded(provenance: RunProvenance) -> _Offered:
    """The tools and tool-call format each episode was played with, as its run recorded them."""

    def offered(trajectory: Trajectory) -> tuple[list[dict[str, Any]], str | None]:
        seen = trajectory.provenance
        return provenance.episode_tools(seen), provenance.episode_format(seen)

    return offered


def _env_tools(name: str, env_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    from rk_agent.envs.registry import make_env

    # The tasks do not change the tools, and a tasks file may not be readable from here.
    kwargs = {k: v for k, v in env_kwargs.items() if k != "tasks"}
    try:
        env = make_env(name, **kwargs)
    except Exception as exc:  # any failure to build it means: ask for the tools instead
        raise ConfigError(
            f"cannot build environment {name!r} to read its tool schemas ({exc}). Pass "
            "tools= with the schemas the episodes were played with ([] for none)."
        ) from exc
    try:
        return list(env.tool_schemas)
    finally:
        env.close()


def _task_order(trajectories: list[Trajectory]) -> list[Trajectory]:
    """The episodes by task, then sample: not in the order they finished.

    A run's file holds its episodes as they finished, which depends on threads and load; TRL
    shuffles the rows with its seed, so the order they come in picks the batches. In task
    order the same episodes train the same model (before, the learning benchmark's warm start
    solved 8 or 15 of the same 32 held-out tasks after training on the same 24 episodes,
    depending on what had run earlier in the process).
    """
    return sorted(trajectories, key=lambda t: (t.task_index, t.sample, t.id))


def _to_dataset(
    trajectories: list[Trajectory], offered: _Offered, *, recorded: bool = True
) -> Dataset:
    """The rows; ``recorded``: an episode's own record of its tools (per turn) wins over
    ``offered``'s (``False`` for the tools a caller gave)."""
    try:
        from datasets import Dataset, Features, Json, List, Value
    except ImportError as exc:  # datasets < 4.7 has no Json feature
        import datasets

        raise NotAvailableError(
            f"SFT datasets need datasets >= 4.7 (its Json feature); {datasets.__version__} is "
            "installed. Upgrade it: `uv add 'datasets>=4.7'`."
        ) from exc

    features = Features(
        {
            "messages": List(Json()),
            "tools": List(Json()),
            "task_id": Value("string"),
            "trajectory_id": Value("string"),
            "env": Value("string"),
            "episode_reward": Value("float64"),
            "context_messages": Value("int64"),
        }
    )
    # Each value is handed over as JSON text: datasets' own encoder (pandas' ujson) would keep
    # only 9 significant digits of a float; a JSON string is stored as it is.
    rows = []
    for t in _task_order(trajectories):
        first, tool_call_format = offered(t)
        pieces = _tool_spans(t, first) if recorded else [(t, first)]
        for part, tools in pieces:
            messages = training_messages(part, tools, tool_call_format)
            context = _context_messages(part, tools, tool_call_format)
            if context >= len(messages):  # every reply of this piece was copied: nothing new
                continue
            if tool_call_format not in (None, NATIVE):  # the system prompt describes them
                tools = []
            rows.append(
                {
                    "messages": [json.dumps(m, ensure_ascii=False) for m in messages],
                    "tools": [json.dumps(s, ensure_ascii=False) for s in tools],
                    "task_id": t.task.id,
                    "trajectory_id": t.id,
                    "env": t.env,
                    "episode_reward": t.episode_reward,
                    "context_messages": context,
                }
            )
    return Dataset.from_list(rows, features=features)


def _context_messages(
    trajectory: Trajectory, tools: list[dict[str, Any]], tool_call_format: str | None
) -> int:
    """How many leading messages of the episode's rendering are context: through the last
    reply of the turns a fork copied (they lead the episode), 0 when none was copied."""
    copied = 0
    while copied < len(trajectory.turns) and trajectory.turns[copied].copied_from is not None:
        copied += 1
    if copied == 0:
        return 0
    prefix = trajectory.model_copy(update={"turns": trajectory.turns[:copied]})
    return len(training_messages(prefix, tools, tool_call_format))


def _tool_spans(
    trajectory: Trajectory, first: list[dict[str, Any]]
) -> list[tuple[Trajectory, list[dict[str, Any]]]]:
    """The episode cut where the tools it offered changed: for each run of turns offered the
    same tools, the episode up to that run's last turn and those tools (one piece, the whole
    episode, when they never changed)."""
    pieces: list[tuple[Trajectory, list[dict[str, Any]]]] = []
    turns = trajectory.turns
    current = trajectory.offered_tools(0, first)
    for turn in turns[1:]:
        now = trajectory.offered_tools(turn.index, first)
        if now != current:
            cut = trajectory.model_copy(update={"turns": turns[: turn.index]})
            pieces.append((cut, current))
            current = now
    pieces.append((trajectory, current))
    return pieces
