"""``reasoning-gym:NAME[,NAME...]``: environments over reasoning-gym's procedural generators.

reasoning-gym (``pip install 'rk-agent[reasoning-gym]'``) has about a hundred seeded generators
(``chain_sum``, ``basic_arithmetic``, ``knights_knaves``, ...); each makes entries
``{question, answer, metadata}`` and scores an answer with ``dataset.score_answer(answer,
entry)``, a number in [0, 1] (partial credit in some). An episode is one entry:

- the task: the environment's seeded generator picks a generator (uniformly, or by
  ``weights``, when several are named) and a seed for it, and the entry is
  ``create_dataset(name, seed=seed, size=1, **options)[0]``; the task records the generator,
  its seed and options (``metadata``) and the stored answer (``ground_truth``), and the
  session makes the entry again from them (the same entry: it is seeded);
- the prompt: a system prompt that asks for the answer in a stated form (``answer_format``:
  ``"tags"``, ``<answer>...</answer>``, the default, or ``"line"``, a last line
  ``Answer: ...``), then the question;
- the reward ``reasoning_gym``: ``score_answer`` of the answer extracted from the last
  assistant message (``None`` when there is none in that form, which the generator scores),
  with the metric ``answer_format`` (1 when the answer was in the form asked for); a scorer
  that raises or returns something other than a number in [0, 1] gives an invalid score;
- `score_answer` is the same reward for a recorded episode (``rk-agent rescore``): the entry is
  made again from the task's metadata, so the transcript alone scores it;
- the reference solver answers with the stored answer; the generators that store none
  (``answer=None``: boxnet, graph_color, propositional_logic, rubiks_cube, rush_hour in
  0.1.25) have no solver, nor has a mix that holds one.

Single turn, no tools. ``composite`` is not offered: name several generators instead.

Main names: `SOURCE`, `ReasoningGymSource`, `ReasoningGymEnv`, `extract_answer`,
`score_answer`.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.sources import EnvSource
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, EnvError, did_you_mean
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = [
    "ANSWER_FORMATS",
    "SOURCE",
    "ReasoningGymEnv",
    "ReasoningGymSource",
    "extract_answer",
    "score_answer",
]

ANSWER_FORMATS: Mapping[str, str] = {
    "tags": "Give your final answer between <answer> and </answer> tags, e.g. "
    "<answer>42</answer>, with nothing but the answer inside them.",
    "line": "End your reply with a last line of the form\nAnswer: <your answer>\nwith nothing "
    "after it.",
}
"""Each answer format and what the system prompt says of it."""

SYSTEM_PROMPT = "Solve the problem. Think it through step by step. {format}"
_RESERVED = ("seed", "size")  # set by the environment, per episode
_TAGS = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_LINE = re.compile(r"^\s*Answer:\s*(.*?)\s*$", re.MULTILINE)


@functools.cache
def _package() -> ModuleType:
    """reasoning-gym, imported once; a dependency's compile-time ``SyntaxWarning`` (cellpylib
    0.x: ``is`` with a literal) is not ours to raise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        import reasoning_gym

    return reasoning_gym


def _generators() -> dict[str, tuple[type, type]]:
    """Every generator by name: its dataset and config classes."""
    datasets: dict[str, tuple[type, type]] = _package().factory.DATASETS
    return datasets


def extract_answer(text: str, answer_format: str) -> str | None:
    """The answer in ``text`` in the form ``answer_format`` asks for: the last ``<answer>``
    tags' content, or the last ``Answer:`` line's, stripped; ``None`` when there is none.

    Example:
        >>> extract_answer("so <answer> 214 </answer>", "tags")
        '214'
        >>> extract_answer("57 + 87 + 70\\nAnswer: 214", "line")
        '214'
    """
    found = (_TAGS if answer_format == "tags" else _LINE).findall(text)
    return found[-1].strip() if found else None


def _format(answer: str, answer_format: str) -> str:
    return f"<answer>{answer}</answer>" if answer_format == "tags" else f"Answer: {answer}"


class _Session(BaseSession):
    """One entry of one generator."""

    def __init__(self, dataset: Any, entry: dict[str, Any], answer_format: str) -> None:
        self.dataset = dataset
        self.entry = entry
        self.answer_format = answer_format

    def verify(self, messages: list[Message]) -> EvaluateResult:
        reply = next((m.text for m in reversed(messages) if m.role == "assistant"), "")
        answer = extract_answer(reply, self.answer_format)
        try:
            score = self.dataset.score_answer(answer, self.entry)
        except Exception as exc:  # the generator's scorer failed: not a score, not a 0
            return EvaluateResult.invalid(f"score_answer raised {type(exc).__name__}: {exc}")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            return EvaluateResult.invalid(f"score_answer returned {score!r}, not a number")
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            return EvaluateResult.invalid(f"score_answer returned {score!r}, outside [0, 1]")
        found = answer is not None
        return EvaluateResult(
            score=float(score),
            reason=f"score_answer gave {float(score):g} to "
            + (repr(answer[:80]) if found else "no answer"),  # type: ignore[index]
            metrics={
                "answer_format": MetricResult(
                    score=float(found),
                    success=found,
                    reason=None if found else f"no answer in the {self.answer_format!r} form",
                )
            },
        )

    def solve(self, messages: list[Message], tools: Any) -> Message | None:
        answer = self.entry.get("answer")
        if answer is None:
            return None
        return Message(role="assistant", content=_format(str(answer), self.answer_format))


@reward_function(
    name="reasoning_gym", description="reasoning-gym's score_answer on the episode's answer"
)
def score_answer(
    messages: list[Message],
    metadata: dict[str, Any] | None = None,
    answer_format: str = "tags",
    **_: Any,
) -> EvaluateResult:
    """The ``reasoning_gym`` reward on a recorded episode (``rk-agent rescore RUN --reward
    rk_agent.interop.reasoning_gym:score_answer``): the entry is made again from the task's
    ``metadata`` (``generator``, ``seed``, ``options``) and scores the last reply's answer, as
    the episode's session did. ``answer_format`` is the environment's (``--kwargs
    '{"answer_format": "line"}'`` for a run played with ``answer_format="line"``)."""
    meta = metadata or {}
    name, seed, options = meta.get("generator"), meta.get("seed"), meta.get("options") or {}
    if not isinstance(name, str) or not isinstance(seed, int) or not isinstance(options, dict):
        return EvaluateResult.invalid(
            "the task's metadata names no reasoning-gym entry ('generator' and 'seed'): score "
            "episodes played by a reasoning-gym environment"
        )
    if answer_format not in ANSWER_FORMATS:
        return EvaluateResult.invalid(
            f"answer_format {answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}."
        )
    if name not in _generators():
        hint = did_you_mean(name, sorted(_generators()))
        return EvaluateResult.invalid(f"reasoning-gym has no generator {name!r}.{hint}")
    try:
        dataset = _dataset(name, seed, options)
    except ConfigError as exc:
        return EvaluateResult.invalid(str(exc))
    session = _Session(dataset, dataset[0], answer_format)
    return session.verify([Message.coerce(m) for m in messages])


class ReasoningGymEnv(ImportedEnv):
    """Answer a question from reasoning-gym's generators; scored by the generator itself.

    Made by the ``reasoning-gym`` source for one name (``reasoning-gym:chain_sum``), with
    `generators` set; see the module docstring.

    Args:
        options: the generator's config fields (``{"min_terms": 2}``); with several
            generators, a mapping from each name to its fields (those left out keep their
            defaults). ``seed`` and ``size`` are the environment's.
        weights: with several generators, how often each is picked (default: equally).
        answer_format: ``"tags"`` (``<answer>...</answer>``) or ``"line"`` (``Answer: ...``).
        system_prompt: replaces the default one; ``{format}`` is the answer format's sentence.
        **kwargs: see `ChatEnv`.

    Raises:
        ConfigError: an unknown option, weight or answer format, or options the generator
            refuses (its message).

    Example:
        >>> env = make_env("reasoning-gym:chain_sum")  # doctest: +SKIP
    """

    generators: ClassVar[tuple[str, ...]] = ()
    default_max_turns: ClassVar[int] = 1
    source_name: ClassVar[str] = "reasoning-gym"
    talks_back: ClassVar[bool] = False

    def __init__(
        self,
        *,
        options: Mapping[str, Any] | None = None,
        weights: Mapping[str, float] | None = None,
        answer_format: str = "tags",
        system_prompt: str = SYSTEM_PROMPT,
        **kwargs: Any,
    ) -> None:
        if not self.generators:
            raise ConfigError(
                "ReasoningGymEnv is made by the reasoning-gym source: name it "
                "'reasoning-gym:NAME[,NAME...]' (make_env, --env)."
            )
        if answer_format not in ANSWER_FORMATS:
            raise ConfigError(
                f"answer_format {answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}."
            )
        self.answer_format = answer_format
        self.system_prompt = system_prompt.replace("{format}", ANSWER_FORMATS[answer_format])
        self.options = _options(self.generators, options)
        self._weights = _weights(self.generators, weights)
        for name in self.generators:  # the generator's own checks, before any episode
            _dataset(name, 0, self.options[name])
        super().__init__(**kwargs)

    def generate_task(self, rng: np.random.Generator) -> Task:
        """One entry: a generator (by `weights`), a seed for it, the entry it makes."""
        index = int(rng.choice(len(self.generators), p=self._weights))
        name = self.generators[index]
        seed = int(rng.integers(2**31))
        entry = _dataset(name, seed, self.options[name])[0]
        answer = entry.get("answer")
        return Task(
            id=f"{name}-{seed}",
            messages=[
                Message(role="system", content=self.system_prompt),
                Message(role="user", content=str(entry["question"])),
            ],
            ground_truth=None if answer is None else str(answer),
            metadata={"generator": name, "seed": seed, "options": dict(self.options[name])},
        )

    def score_recorded(
        self, messages: list[Message], metadata: dict[str, Any] | None
    ) -> EvaluateResult:
        """`score_answer` in this environment's answer format (single-turn GRPO)."""
        return score_answer(messages, metadata=metadata, answer_format=self.answer_format)

    def open_session(self, task: Task) -> _Session:
        """The entry the task records, made again by its generator."""
        name, seed = task.metadata.get("generator"), task.metadata.get("seed")
        if not isinstance(name, str) or not isinstance(seed, int):
            raise EnvError(
                f"task {task.id!r} is not a reasoning-gym task: its metadata needs 'generator' "
                "and 'seed' (tasks come from the environment's generator, not from tasks=)."
            )
        options = task.metadata.get("options") or {}
        dataset = _dataset(name, seed, options)
        return _Session(dataset, dataset[0], self.answer_format)


def _dataset(name: str, seed: int, options: Mapping[str, Any]) -> Any:
    try:
        return _package().create_dataset(name, seed=seed, size=1, **options)
    except (AssertionError, TypeError, ValueError) as exc:  # the config's own checks
        raise ConfigError(
            f"reasoning-gym's {name!r} refused the options {dict(options)}: "
            f"{type(exc).__name__}: {exc}. Give options its config accepts."
        ) from exc


def _fields(name: str) -> list[str]:
    import dataclasses

    config_class = _generators()[name][1]
    return [f.name for f in dataclasses.fields(config_class) if f.name not in _RESERVED]


def _options(names: tuple[str, ...], options: Mapping[str, Any] | None) -> dict[str, dict]:
    """Each generator's options, checked against its config's fields."""
    given: Mapping[str, Any] = options or {}
    if len(names) == 1 and not (set(given) <= set(names) and given):
        per_name: Mapping[str, Any] = {names[0]: given}
    else:
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ConfigError(
                f"options of a mix of generators are keyed by generator: {unknown[0]!r} is not "
                f"one of {', '.join(names)}."
            )
        per_name = given
    out: dict[str, dict] = {}
    for name in names:
        fields = dict(per_name.get(name) or {})
        allowed = _fields(name)
        bad = sorted(set(fields) - set(allowed))
        if bad:
            hint = did_you_mean(bad[0], allowed)
            raise ConfigError(
                f"reasoning-gym's {name!r} has no option {bad[0]!r}.{hint} It takes: "
                f"{', '.join(allowed)} (seed and size are set per episode)."
            )
        out[name] = fields
    return out


def _weights(names: tuple[str, ...], weights: Mapping[str, float] | None) -> list[float]:
    if not weights:
        return [1.0 / len(names)] * len(names)
    unknown = sorted(set(weights) - set(names))
    if unknown or any(not w >= 0 for w in weights.values()) or not sum(weights.values()) > 0:
        raise ConfigError(
            f"weights must give each of {', '.join(names)} a weight >= 0, some > 0; got "
            f"{dict(weights)}."
        )
    raw = [float(weights.get(name, 0.0)) for name in names]
    return [w / sum(raw) for w in raw]


class ReasoningGymSource(EnvSource):
    """The ``reasoning-gym`` source (see the module docstring)."""

    summary = (
        "reasoning-gym's procedural generators (about a hundred), one question per episode, "
        "scored by the generator's score_answer"
    )
    form = "reasoning-gym:NAME[,NAME...]"
    packages = ("reasoning_gym",)
    extra = "reasoning-gym"

    def build_class(self, rest: str) -> type[ChatEnv]:
        """The environment class of the generators ``rest`` names, comma-separated."""
        names = tuple(part.strip() for part in rest.split(","))
        known = _generators()
        offered = sorted(n for n in known if n != "composite")
        for name in names:
            if name == "composite":
                raise ConfigError(
                    "reasoning-gym:composite is not offered: name the generators to mix, "
                    "reasoning-gym:NAME,NAME (weights= sets how often each is picked)."
                )
            if name not in known:
                hint = did_you_mean(name, offered) if name else ""
                raise ConfigError(
                    f"reasoning-gym has no generator {name!r}.{hint} It has {len(offered)}: "
                    f"{', '.join(offered[:8])}, ... (reasoning_gym.factory.DATASETS)."
                )
        if len(set(names)) != len(names):
            raise ConfigError(f"reasoning-gym:{rest} names a generator twice; name each once.")
        unsolvable = [n for n in names if _dataset(n, 0, {})[0].get("answer") is None]
        label = f"reasoning-gym:{','.join(names)}"
        why = (
            f"reasoning-gym's {', '.join(unsolvable)} store{'s' if len(unsolvable) == 1 else ''} "
            "no answer (answer=None) to answer with; score_answer checks a reply against the "
            "puzzle itself"
            if unsolvable
            else None
        )
        return type(
            "ReasoningGymEnv",
            (ReasoningGymEnv,),
            {
                "__module__": __name__,
                "__qualname__": f"ReasoningGymEnv[{','.join(names)}]",
                "__doc__": ReasoningGymEnv.__doc__,
                "generators": names,
                "env_name": label,
                "has_solver": not unsolvable,
                "no_solver_reason": why,
            },
        )


SOURCE = ReasoningGymSource()
"""The source the ``reasoning-gym`` entry point names."""
