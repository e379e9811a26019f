"""`check_reward`: play the probe catalogue against a reward, on samples with reference replies.

Each sample is a JSONL line (or a dict) as ``rk-agent preview`` reads them:
``{"messages": [...], "ground_truth": ..., <other fields passed to the reward>}``, whose last
message is the **reference reply**: an assistant message the reward should score at its
maximum. The honest wrong answer of a sample is the reference reply of another sample (the
next one with a different ground truth, or a different reply), so at least two samples are
needed. Every probe writes one reply per sample (its worst variant counts); the report
(`SoundnessReport`) has the mean reward and components of the reference, the wrong answer and
every probe, and the flags (`rk_agent.soundness.flags`).

Main names: `check_reward`, `reward_kind`, `load_samples`, `Sample`.

Example:
    >>> samples = [
    ...     {"messages": [{"role": "user", "content": "2+2?"},
    ...                   {"role": "assistant", "content": "#### 4"}], "ground_truth": "4"},
    ...     {"messages": [{"role": "user", "content": "3+4?"},
    ...                   {"role": "assistant", "content": "#### 7"}], "ground_truth": "7"},
    ... ]
    >>> check_reward("math", samples).flags
    []
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rk_agent.errors import ConfigError, DataError
from rk_agent.jsonl import iter_jsonl
from rk_agent.rewards.decorator import check_options
from rk_agent.rewards.function import RewardFunction
from rk_agent.rewards.preview import messages_problem
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.sandbox import SandboxMode
from rk_agent.soundness.catalogue import catalogue
from rk_agent.soundness.flags import Played, Score, judge, score_of, worst
from rk_agent.soundness.probes import KINDS, Probe, ProbeView
from rk_agent.soundness.report import SoundnessReport
from rk_agent.types import Message

__all__ = ["Sample", "check_reward", "load_samples", "reward_kind"]

_KINDS = {
    "math": "math",
    "cosine_length": "math",
    "code_execution": "code",
    "function_call": "function_calling",
    "tool_calls": "function_calling",
    "format": "shape",
    "length": "shape",
    "json_schema": "shape",
    "repetition": "shape",
    "relevance": "shape",
}
_MAX_SCORES = {"repetition": 0.0}  # a penalty: 0 is the best it gives


def reward_kind(name: str) -> str:
    """The probe kind of a reward, by its name: ``math``, ``code``, ``function_calling`` or
    ``shape`` for the built-ins that are, else ``generic``."""
    return _KINDS.get(name, "generic")


@dataclass(frozen=True)
class Sample:
    """One sample: the prompt, its reference reply and the other fields (passed to the reward).

    Attributes:
        where: ``file:line`` (or ``sample N``), for messages.
    """

    prompt: list[Message]
    reference: Message
    fields: dict[str, Any]
    where: str

    @property
    def key(self) -> str:
        """What makes two samples' answers differ: ground truth, else the reference reply."""
        truth = self.fields.get("ground_truth")
        if truth is not None:
            return json.dumps(truth, sort_keys=True, default=str)
        return self.reference.model_dump_json()


def load_samples(
    samples: str | Path | Iterable[Mapping[str, Any]], max_samples: int | None = None
) -> list[Sample]:
    """Read samples from a JSONL file or a list of dicts; every one must be usable.

    Raises:
        DataError: a line is not JSON, has no valid ``messages``, or does not end with the
            reference reply (an assistant message); fewer than 2 samples.
    """
    out: list[Sample] = []
    if isinstance(samples, (str, Path)):
        rows: Iterable[tuple[str, Any]] = _file_rows(Path(samples))
    else:
        rows = ((f"sample {i}", row) for i, row in enumerate(samples, start=1))
    for where, row in rows:
        if max_samples is not None and len(out) >= max_samples:
            break
        out.append(_sample(where, row))
    if len(out) < 2:
        raise DataError(
            f"check_reward needs at least 2 samples (a sample's honest wrong answer is another "
            f"sample's reference reply); got {len(out)}. Add samples with other answers."
        )
    return out


def _file_rows(path: Path) -> Iterable[tuple[str, Any]]:
    for line in iter_jsonl(path):
        if line.error is not None:
            raise line.error
        yield f"{path}:{line.number}", line.value


def _sample(where: str, row: Any) -> Sample:
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}.")
    fields = dict(row)
    messages = fields.pop("messages", None)
    problem = messages_problem(messages)
    if problem:
        raise DataError(f"{where}: {problem}.")
    chat = Message.coerce_list(messages)
    if chat[-1].role != "assistant":
        raise DataError(
            f"{where}: expected the last message to be the reference reply (an assistant "
            f"message the reward scores at its maximum), got a {chat[-1].role!r} message. "
            "Add the correct reply as the last message."
        )
    return Sample(chat[:-1], chat[-1], fields, where)


def _wrong_for(samples: Sequence[Sample], index: int) -> Sample:
    """The next sample with another answer (another ground truth, else another reply)."""
    n = len(samples)
    others = [samples[(index + k) % n] for k in range(1, n)]
    mine = samples[index]
    found = next((s for s in others if s.key != mine.key), None)
    if found is None:
        raise DataError(
            f"every sample has the same answer as {mine.where}: the honest wrong answer is "
            "another sample's reference reply, so give samples with different answers."
        )
    return found


def check_reward(
    reward: RewardLike | RewardFunction,
    samples: str | Path | Iterable[Mapping[str, Any]],
    *,
    probes: Sequence[Probe] = (),
    builtin_probes: bool = True,
    kind: str | None = None,
    max_score: float | None = None,
    sandbox: SandboxMode | str | None = None,
    max_samples: int | None = None,
    **reward_kwargs: Any,
) -> SoundnessReport:
    """Play the probe catalogue (and ``probes``) against a reward; see the module docs.

    Args:
        reward: a registered name, ``module:fn``, ``file.py::fn``, a callable or a
            `RewardFunction`.
        samples: a JSONL file or a list of sample dicts, each ending with its reference reply.
        probes: your own probes (`rk_agent.soundness.probes.Probe`), played after the built-in
            ones.
        builtin_probes: play the built-in catalogue for the reward's kind.
        kind: the probe kind (`KINDS`); default: from the reward's name (`reward_kind`).
        max_score: the score the reference should reach; default 1.0 (0.0 for
            ``repetition``, a penalty).
        sandbox: for a reward that runs code: ``"bwrap"`` (default) or ``"process"``.
        max_samples: use only the first N samples.
        **reward_kwargs: passed to the reward on every call (sample fields take precedence).

    Returns:
        The `SoundnessReport`; ``report.flagged`` says whether anything was found.

    Raises:
        DataError: unusable samples (what was expected, where, how to fix it).
        ConfigError: an unknown reward, kind or option.
    """
    from rk_agent.rewards.sandbox_choice import fix_sandbox

    if isinstance(reward, RewardFunction):
        if sandbox is not None or reward_kwargs:
            raise ConfigError(
                "give the sandbox mode and the reward's options to the RewardFunction, not to "
                "check_reward."
            )
        rf = reward
    else:
        func = get_reward_function(reward)
        check_options(func, reward_kwargs)
        rf = RewardFunction(fix_sandbox(func, sandbox), **reward_kwargs)
    kind = kind or reward_kind(rf.name)
    if kind not in KINDS:
        raise ConfigError(f"unknown probe kind {kind!r}; expected one of {', '.join(KINDS)}.")
    loaded = load_samples(samples, max_samples)
    played_probes = [*(catalogue(kind) if builtin_probes else []), *probes]
    rows = [
        Played("reference", "reference", "the sample's reference reply"),
        Played("wrong", "wrong", "an honest wrong answer: another sample's reference reply"),
        *(Played(p.name, "probe", p.description) for p in played_probes),
    ]

    def score(sample: Sample, reply: Message) -> Score:
        return score_of(rf(messages=[*sample.prompt, reply], **sample.fields))

    for index, sample in enumerate(loaded):
        wrong = _wrong_for(loaded, index).reference
        rows[0].scores[index] = score(sample, sample.reference)
        rows[1].scores[index] = score(sample, wrong)
        for row, candidate in zip(rows[2:], played_probes, strict=True):
            replies = _replies(candidate, sample, wrong, kind)
            if replies is None:
                row.skipped += 1
            else:
                row.scores[index] = worst([score(sample, r) for r in replies])
    return judge(
        target=rf.name,
        checked="reward",
        kind=kind,
        cases=len(loaded),
        max_score=_MAX_SCORES.get(rf.name, 1.0) if max_score is None else max_score,
        played=rows,
    )


def _replies(candidate: Probe, sample: Sample, wrong: Message, kind: str) -> list[Message] | None:
    replies = []
    for variant in range(max(1, candidate.variants)):
        view = ProbeView(
            messages=list(sample.prompt),
            tools=list(sample.fields.get("tools") or []),
            reference=sample.reference,
            wrong=wrong,
            ground_truth=sample.fields.get("ground_truth"),
            kind=kind,
            variant=variant,
        )
        reply = call_probe(candidate, view)
        if reply is None:
            return None
        replies.append(reply)
    return replies


def call_probe(candidate: Probe, view: ProbeView) -> Message | None:
    """The probe's reply as an assistant `Message` (``None``: it does not apply).

    Raises:
        ConfigError: the probe raised, or returned something that is not a reply.
    """
    try:
        reply: Any = candidate.reply(view)
    except Exception as exc:  # a user's probe: name it and say what it raised
        raise ConfigError(f"probe {candidate.name!r} raised {type(exc).__name__}: {exc}") from exc
    if reply is None or isinstance(reply, Message):
        return reply
    if isinstance(reply, str):
        return Message(role="assistant", content=reply)
    try:
        return Message.coerce(reply)
    except ValueError as exc:
        raise ConfigError(
            f"probe {candidate.name!r} returned a {type(reply).__name__}; expected a Message, "
            "its text, an OpenAI message dict or None."
        ) from exc
