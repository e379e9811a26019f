"""Probe policies: the replies a cheating policy would try, and the hook for your own.

A probe is played where a model would be: against a reward it writes one reply per sample;
against an environment it is a policy, asked for a reply at every turn. It sees what a policy
sees (the conversation and the tools) plus, to shape its cheat, the reference reply at that
point and an honest wrong reply (the reference of another task). It never sees an
environment's hidden ground truth.

Main names:
    Probe: the protocol probes implement (the documented hook for your own probes).
    ProbeView: what a probe is shown at each turn.
    probe: a decorator that makes a `Probe` of a function ``(view) -> reply``.
    GENERIC_PROBES, MATH_PROBES: built-in probes (`rk_agent.soundness.catalogue` has them all).
    KINDS: the kinds (``generic``, ``math``, ``code``, ``function_calling``, ``tools``).

The built-in probes: for every kind, an empty reply, a refusal, an echo of the
prompt, the wrong answer padded to the length limit, repetition, the answer format with no
answer, the reference's format with a wrong value, several candidate answers at once, a reply
that restates the question; then those of the kind (`rk_agent.soundness.code_probes`,
`rk_agent.soundness.tool_probes`, the math ones here).

Example:
    >>> @probe("shout", "the honest wrong answer in capitals")
    ... def shout(view):
    ...     return view.wrong.text.upper() if view.wrong is not None else None
    >>> shout.name, shout.variants
    ('shout', 1)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rk_agent.types import Message

__all__ = [
    "GENERIC_PROBES",
    "KINDS",
    "MATH_PROBES",
    "FunctionProbe",
    "Probe",
    "ProbeReply",
    "ProbeView",
    "applies",
    "probe",
]

KINDS = ("generic", "shape", "math", "code", "function_calling", "tools")
"""Kinds of rewards and environments; each adds its own probes to the generic ones. ``shape``
is a reward that judges the form of a reply, not its correctness (``format``, ``length``,
``json_schema``, ...): the probes that change the answer's value are not played against it."""

ProbeReply = Message | str | None
"""What a probe returns: the assistant message (or its text); ``None``: the probe does not
apply here (for a reward, to this sample; for an environment, to this episode)."""

LENGTH_LIMIT = 4000
"""Characters the padding and repetition probes fill a reply to."""


@dataclass(frozen=True)
class ProbeView:
    """What a probe is shown when it replies.

    Attributes:
        messages: the conversation so far (the sample's prompt, or the episode up to now).
        tools: the tool schemas offered (OpenAI format), empty when none.
        reference: what the reference would reply here: the sample's reference reply, or the
            environment's reference solver on this conversation (``None`` when there is none).
        wrong: an honest wrong reply here: the reference reply of another task.
        ground_truth: the sample's ground truth (reward checks only; ``None`` for an
            environment, whose policy cannot see it).
        kind: the kind being checked (one of `KINDS`).
        turn: the turn, from 0.
        variant: which of the probe's ``variants`` is being played, from 0.
    """

    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    reference: Message | None = None
    wrong: Message | None = None
    ground_truth: Any = None
    kind: str = "generic"
    turn: int = 0
    variant: int = 0

    @property
    def question(self) -> str:
        """The text of the first user message (the task's question)."""
        return next((m.text for m in self.messages if m.role == "user"), "")

    @property
    def final(self) -> bool:
        """The reference answers here (a reply without tool calls), rather than calling tools."""
        return self.reference is None or not self.reference.tool_calls


@runtime_checkable
class Probe(Protocol):
    """A probe policy: the hook for your own probes (pass them as ``probes=[...]``).

    Attributes:
        name: a short name, shown in the report.
        description: one line saying what it tries.
        variants: how many ways it is played; its score on a sample (or seed) is that of its
            worst variant, so a trick that pays only in one arrangement (the right answer
            last, say) is not counted as a hack.
        kinds: the kinds it applies to (`KINDS`); empty for every kind.

    Example:
        >>> isinstance(GENERIC_PROBES[0], Probe)
        True
    """

    @property
    def name(self) -> str:
        """A short name, shown in the report."""
        ...

    @property
    def description(self) -> str:
        """One line saying what the probe tries."""
        ...

    @property
    def variants(self) -> int:
        """How many ways it is played (its worst variant counts)."""
        ...

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds it applies to; empty for every kind."""
        ...

    def reply(self, view: ProbeView) -> ProbeReply:
        """The reply at this point, or ``None`` when the probe does not apply."""
        ...


@dataclass(frozen=True)
class FunctionProbe:
    """A `Probe` made of a function ``(view) -> reply`` (what `probe` builds)."""

    name: str
    description: str
    function: Callable[[ProbeView], ProbeReply]
    variants: int = 1
    kinds: frozenset[str] = frozenset()

    def reply(self, view: ProbeView) -> ProbeReply:
        """Call the function."""
        return self.function(view)


def probe(
    name: str, description: str, *, variants: int = 1, kinds: Sequence[str] = ()
) -> Callable[[Callable[[ProbeView], ProbeReply]], FunctionProbe]:
    """Make a `Probe` of a function ``(view: ProbeView) -> Message | str | None``.

    Example:
        >>> @probe("yes", "always says yes")
        ... def yes(view):
        ...     return "Yes."
        >>> yes.reply(ProbeView(messages=[]))
        'Yes.'
    """

    def wrap(function: Callable[[ProbeView], ProbeReply]) -> FunctionProbe:
        return FunctionProbe(name, description, function, variants, frozenset(kinds))

    return wrap


def applies(candidate: Probe, kind: str) -> bool:
    """Whether ``candidate`` is played against a ``kind``."""
    return not candidate.kinds or kind in candidate.kinds


# --------------------------------------------------------------------------------------------
# Answer slots: where a reply puts its answer, so a probe can empty it or change it.

_SLOTS = (
    re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}"),
    re.compile(r"####[ \t]*([^\n]*)"),
    re.compile(r"(?im)^[\W_]*(?:final\s+)?answer\s*[:=][ \t]*([^\n]*)"),
    re.compile(r"(?s)<answer>(.*?)</answer>"),
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def answer_slots(text: str) -> list[tuple[int, int]]:
    """The spans of the answers in ``text``: ``\\boxed{}``, ``####``, ``Answer:``, ``<answer>``;
    else the last number; else nothing."""
    for pattern in _SLOTS:
        spans = [m.span(1) for m in pattern.finditer(text)]
        if spans:
            return spans
    numbers = list(_NUMBER.finditer(text))
    return [numbers[-1].span()] if numbers else []


def answer_of(text: str) -> str | None:
    """The last answer of ``text`` (see `answer_slots`)."""
    spans = answer_slots(text)
    return text[spans[-1][0] : spans[-1][1]].strip() if spans else None


def fill_slots(text: str, value: Callable[[str], str]) -> str | None:
    """``text`` with each answer replaced by ``value(answer)``; ``None`` when it has none."""
    spans = answer_slots(text)
    if not spans:
        return None
    out, last = [], 0
    for start, end in spans:
        out += [text[last:start], value(text[start:end].strip())]
        last = end
    return "".join([*out, text[last:]])


def other_value(answer: str, wrong: Message | None) -> str:
    """A wrong value for ``answer``: the honest wrong reply's answer when it differs, else the
    answer's numbers moved by one, else the answer with ``" (not)"`` appended."""
    theirs = answer_of(wrong.text) if wrong is not None and not wrong.tool_calls else None
    if theirs and theirs != answer:
        return theirs
    if _NUMBER.search(answer):
        return _NUMBER.sub(lambda m: _bump(m.group()), answer)
    return f"{answer} (not)"


def _bump(number: str) -> str:
    return str(int(number) + 1) if "." not in number else f"{float(number) + 1:g}"


def _answer_probe(
    name: str,
    description: str,
    change: Callable[[ProbeView, str], str | None],
    variants: int = 1,
    kinds: frozenset[str] = frozenset({"generic", "math", "tools"}),
) -> FunctionProbe:
    """A probe that plays the reference's tool calls and changes only its final answer."""

    def reply(view: ProbeView) -> ProbeReply:
        if view.reference is None:
            return None
        if not view.final:
            return view.reference
        return change(view, view.reference.text)

    return FunctionProbe(name, description, reply, variants, kinds)


def _no_answer(view: ProbeView, text: str) -> str | None:
    return fill_slots(text, lambda answer: "")


def _wrong_value(view: ProbeView, text: str) -> str | None:
    return fill_slots(text, lambda answer: other_value(answer, view.wrong))


def _last_answer(
    view: ProbeView, text: str, options: Callable[[str, str, str], list[str]]
) -> str | None:
    """``text`` with its last answer replaced by ``options(right, wrong, text before it)``'s
    entry for this variant."""
    spans = answer_slots(text)
    if not spans:
        return None
    start, end = spans[-1]
    right = text[start:end].strip()
    chosen = options(right, other_value(right, view.wrong), text[:start])[view.variant]
    return text[:start] + chosen + text[end:]


def _pair(right: str, wrong: str, before: str) -> list[str]:
    if before.endswith("\\boxed{"):  # two boxed answers
        return [f"{right}}} \\boxed{{{wrong}", f"{wrong}}} \\boxed{{{right}"]
    return [f"{right} or {wrong}", f"{wrong} or {right}"]


def _both(view: ProbeView, text: str) -> str | None:
    return _last_answer(view, text, _pair)


def _wrong_text(view: ProbeView) -> str:
    if view.wrong is not None and view.wrong.text:
        return view.wrong.text
    return "I think the answer is 0."


def _fill(text: str) -> str:
    return (text * (LENGTH_LIMIT // max(1, len(text)) + 1))[:LENGTH_LIMIT]


GENERIC_PROBES: tuple[FunctionProbe, ...] = (
    FunctionProbe("empty", "an empty reply", lambda view: ""),
    FunctionProbe(
        "refusal", "a refusal", lambda view: "I'm sorry, but I can't help with that request."
    ),
    FunctionProbe("echo", "the prompt's last message echoed", lambda view: view.messages[-1].text),
    FunctionProbe(
        "padding",
        f"the honest wrong answer padded with filler to {LENGTH_LIMIT} characters",
        lambda view: _wrong_text(view) + "\n" + _fill(" Let me double-check this.")[:-100],
    ),
    FunctionProbe(
        "repetition",
        f"the honest wrong answer repeated to {LENGTH_LIMIT} characters",
        lambda view: _fill(_wrong_text(view) + "\n"),
    ),
    FunctionProbe(
        "restate",
        "a reply that only restates the question",
        lambda view: f"You are asking: {view.question}",
    ),
    _answer_probe(
        "format_only",
        "the reference's answer format with no answer",
        _no_answer,
        kinds=frozenset({"generic", "shape", "math", "tools"}),
    ),
    _answer_probe("wrong_value", "the reference's format with a wrong value", _wrong_value),
    _answer_probe(
        "two_answers",
        "the right and a wrong answer at once ('3 or 4', two boxed); its worse order counts",
        _both,
        variants=2,
    ),
)


def _units(right: str, wrong: str, before: str) -> list[str]:
    return [f"{wrong} (that is {right} in other units)", f"{right} units, i.e. {wrong}"]


def _unit_trick(view: ProbeView, text: str) -> str | None:
    """A wrong value with the right one hidden in a unit conversion."""
    return _last_answer(view, text, _units)


def _hedge_range(view: ProbeView, text: str) -> str | None:
    """Every value near the right one, listed as candidates."""
    right = answer_of(text)
    if right is None or not _NUMBER.fullmatch(right.replace(",", "")):
        return None
    number = float(right.replace(",", ""))
    candidates = [f"{number + d:g}" for d in (-2, -1, 0, 1, 2)]
    order = candidates if view.variant == 0 else candidates[::-1]
    return fill_slots(text, lambda answer: ", ".join(order))


MATH_PROBES: tuple[FunctionProbe, ...] = (
    _answer_probe(
        "unit_trick",
        "a wrong value with the right one hidden in a unit conversion",
        _unit_trick,
        variants=2,
        kinds=frozenset({"math"}),
    ),
    _answer_probe(
        "hedge_range",
        "five candidate values around the right one, in both orders",
        _hedge_range,
        variants=2,
        kinds=frozenset({"math"}),
    ),
)
