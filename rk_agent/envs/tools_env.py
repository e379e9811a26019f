"""The ``tools`` environment: questions that take two or three tool calls to answer.

Each task asks for one value that needs facts from the bundled knowledge table, arithmetic,
unit conversion or date arithmetic (the tools of `rk_agent.envs.toolbox`), e.g. "What is the
population of France divided by the population of Kenya? Round to 2 decimal places." Tasks
are generated from 12 question kinds with random countries, elements, dates and numbers; the
ground truth is computed directly from the table, independently of the tools.

The model calls tools over as many turns as it likes (up to ``max_turns``, 8 by default), then
replies without a tool call, ending with ``Answer: <value>``.

Rewards:
    episode ``answer`` (weight 1.0): `answer_match` (from `rk_agent.envs.tool_rewards`), 1.0
        when the final answer equals the ground truth; numbers match within the task's
        ``tolerance`` (one unit in the last decimal place asked for), text matches ignoring
        case, accents and end punctuation.
    episode ``efficiency`` (weight 0.0, a metric): `tool_efficiency`, the minimum number of tool
        calls the task needs divided by the calls made (capped at 1), with the calls, failed
        calls and turns as metrics.
    step ``tool_use``: `tool_use_reward`, +0.05 for a step whose tool calls all succeed, -0.1
        for one whose calls all fail (bad arguments, unknown tool, an error inside the tool),
        the mean over the step's calls otherwise. Only the calls the task needs earn the bonus
        (``min_tool_calls``; needless extra calls earn 0), so a policy cannot farm it: an
        episode that never answers earns at most what one that answers wrongly does.

JSONL tasks: ``{"prompt": "...", "ground_truth": 0.81, "tolerance": 0.01, "min_tool_calls": 3}``,
``tolerance`` and ``min_tool_calls`` optional (without the latter ``efficiency`` is invalid, at
weight 0, and ``tool_use`` pays no bonus); the system prompt is added when the task has none.

Main names: `ToolsEnv`, `solve` (the reference solver), `SYSTEM_PROMPT`, `system_prompt`. The
rewards live in `rk_agent.envs.tool_rewards`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rk_agent.envs._template import (
    Template,
    ensure_system_prompt,
    not_recognised,
    pick,
    question_text,
    stable_id,
    tool_call_message,
)
from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.task import Task
from rk_agent.envs.tool import Tool
from rk_agent.envs.tool_rewards import answer_match, tool_efficiency, tool_use_reward
from rk_agent.envs.toolbox import (
    add_days,
    calculator,
    convert_units,
    days_between,
    knowledge_table,
    lookup,
    weekday,
)
from rk_agent.errors import ConfigError, did_you_mean
from rk_agent.rewards.registry import RewardLike
from rk_agent.types import Message

__all__ = ["SYSTEM_PROMPT", "ToolsEnv", "solve", "system_prompt"]

_TOOL_USES = (
    (("lookup",), "for facts about countries and chemical elements"),
    (("calculator",), "for arithmetic"),
    (("convert_units",), "for unit conversions"),
    (("days_between", "add_days", "weekday"), "for dates (written YYYY-MM-DD)"),
)


def system_prompt(tool_names: Sequence[str] | None = None) -> str:
    """The system prompt, naming only the tools offered (default: all six).

    Example:
        >>> system_prompt(["calculator"]).split(". ")[1]
        'Use a tool for every fact and every calculation: `calculator` for arithmetic'
    """
    offered = None if tool_names is None else set(tool_names)
    uses = []
    for names, use in _TOOL_USES:
        named = [f"`{n}`" for n in names if offered is None or n in offered]
        if named:
            listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
            uses.append(f"{listed} {use}")
    comma = "," if len(uses) > 2 else ""
    joined = uses[0] if len(uses) == 1 else f"{', '.join(uses[:-1])}{comma} and {uses[-1]}"
    return (
        "You answer questions by calling tools. Use a tool for every fact and every calculation: "
        f"{joined}. Call tools, read their results, and call more if needed. When you know the "
        "answer, reply without calling a tool and end your reply with a line of the form\n"
        "Answer: <value>\nwhere the value is just a number, a name, or a date (YYYY-MM-DD), "
        "rounded as the question asks."
    )


SYSTEM_PROMPT = system_prompt()
"""The system prompt with all six tools."""

# --------------------------------------------------------------------------------------------
# Question kinds

Fields = dict[str, Any]
Call = tuple[str, dict[str, Any]]
Step = Callable[[Fields, list[Any]], Call]


@dataclass(frozen=True)
class _Kind:
    """One kind of question: how to sample it, its answer, and the reference solution's calls.

    ``steps`` are the reference solver's tool calls, each computed from the question's fields
    and the results so far; ``final`` turns the fields and results into the answer. ``truth``
    computes the answer straight from the table, as a cross-check of the solver.
    """

    name: str
    template: Template
    sample: Callable[[np.random.Generator], Fields]
    truth: Callable[[Fields], Any]
    steps: Sequence[Step]
    final: Callable[[Fields, list[Any]], Any]
    tolerance: float = 0.0


def _countries() -> dict[str, dict[str, Any]]:
    return knowledge_table()["countries"]


def _elements() -> dict[str, dict[str, Any]]:
    return knowledge_table()["elements"]


def _two(rng: np.random.Generator, names: Sequence[str]) -> tuple[str, str]:
    first, second = rng.choice(len(names), size=2, replace=False)
    return names[int(first)], names[int(second)]


def _two_countries(rng: np.random.Generator) -> Fields:
    a, b = _two(rng, sorted(_countries()))
    return {"a": a, "b": b}


def _date(rng: np.random.Generator) -> str:
    start = dt.date(1990, 1, 1).toordinal()
    return dt.date.fromordinal(start + int(rng.integers(40 * 365))).isoformat()


def _pop(name: str) -> int:
    return int(_countries()[name]["population"])


def _days(fields: Fields) -> int:
    return (dt.date.fromisoformat(fields["end"]) - dt.date.fromisoformat(fields["start"])).days


def _sample_dates(rng: np.random.Generator) -> Fields:
    start = _date(rng)
    end = dt.date.fromisoformat(start) + dt.timedelta(days=int(rng.integers(10, 3000)))
    return {"start": start, "end": end.isoformat()}


def _sample_temperature(rng: np.random.Generator) -> Fields:
    a, b = _two(rng, sorted(c["capital"] for c in _countries().values()))
    fahrenheit = int(rng.integers(50, 105))
    celsius = int(rng.integers(-10, int((fahrenheit - 32) * 5 / 9)))
    return {"city_a": a, "city_b": b, "f": fahrenheit, "c": celsius}


_SQ_MI_KM2 = 2.589988110336
_OUNCE_G = 28.349523125
_MILE_KM = 1.609344

_KINDS: tuple[_Kind, ...] = (
    _Kind(
        "population_ratio",
        Template("What is the population of {a} divided by the population of {b}? "
                 "Round to 2 decimal places."),
        _two_countries,
        lambda f: round(_pop(f["a"]) / _pop(f["b"]), 2),
        [lambda f, r: ("lookup", {"name": f["a"], "attribute": "population"}),
         lambda f, r: ("lookup", {"name": f["b"], "attribute": "population"}),
         lambda f, r: ("calculator", {"expression": f"round({r[0]} / {r[1]}, 2)"})],
        lambda f, r: r[2],
        tolerance=0.01,
    ),
    _Kind(
        "population_density",
        Template("What is the population density of {a}, in people per square kilometre? "
                 "Round to the nearest whole number."),
        lambda rng: {"a": pick(rng, sorted(_countries()))},
        lambda f: round(_pop(f["a"]) / _countries()[f["a"]]["area_km2"]),
        [lambda f, r: ("lookup", {"name": f["a"], "attribute": "population"}),
         lambda f, r: ("lookup", {"name": f["a"], "attribute": "area_km2"}),
         lambda f, r: ("calculator", {"expression": f"round({r[0]} / {r[1]})"})],
        lambda f, r: r[2],
        tolerance=1.0,
    ),
    _Kind(
        "area_square_miles",
        Template("What is the area of {a} in square miles? Round to the nearest whole number."),
        lambda rng: {"a": pick(rng, sorted(_countries()))},
        lambda f: round(_countries()[f["a"]]["area_km2"] / _SQ_MI_KM2),
        [lambda f, r: ("lookup", {"name": f["a"], "attribute": "area_km2"}),
         lambda f, r: ("convert_units", {"value": r[0], "from_unit": "km2", "to_unit": "mi2"})],
        lambda f, r: round(r[1]),
        tolerance=1.0,
    ),
    _Kind(
        "combined_population",
        Template("How many people live in {a} and {b} together?"),
        _two_countries,
        lambda f: _pop(f["a"]) + _pop(f["b"]),
        [lambda f, r: ("lookup", {"name": f["a"], "attribute": "population"}),
         lambda f, r: ("lookup", {"name": f["b"], "attribute": "population"}),
         lambda f, r: ("calculator", {"expression": f"{r[0]} + {r[1]}"})],
        lambda f, r: r[2],
    ),
    _Kind(
        "larger_capital",
        Template("Which country has more people, {a} or {b}? Answer with the capital city of "
                 "that country."),
        _two_countries,
        lambda f: _countries()[max(f["a"], f["b"], key=_pop)]["capital"],
        [lambda f, r: ("lookup", {"name": f["a"], "attribute": "population"}),
         lambda f, r: ("lookup", {"name": f["b"], "attribute": "population"}),
         lambda f, r: ("lookup", {"name": f["a"] if r[0] >= r[1] else f["b"],
                                  "attribute": "capital"})],
        lambda f, r: r[2],
    ),
    _Kind(
        "weeks_between",
        Template("How many weeks are there from {start} to {end}? Round to 1 decimal place."),
        _sample_dates,
        lambda f: round(_days(f) / 7, 1),
        [lambda f, r: ("days_between", {"start": f["start"], "end": f["end"]}),
         lambda f, r: ("calculator", {"expression": f"round({r[0]} / 7, 1)"})],
        lambda f, r: r[1],
        tolerance=0.1,
    ),
    _Kind(
        "weekday_after",
        Template("What day of the week is {n} days after {date}?"),
        lambda rng: {"n": int(rng.integers(2, 1000)), "date": _date(rng)},
        lambda f: (dt.date.fromisoformat(f["date"]) + dt.timedelta(days=f["n"])).strftime("%A"),
        [lambda f, r: ("add_days", {"date": f["date"], "days": int(f["n"])}),
         lambda f, r: ("weekday", {"date": r[0]})],
        lambda f, r: r[1],
    ),
    _Kind(
        "atomic_number_sum",
        Template("What is the sum of the atomic numbers of {a} and {b}?"),
        lambda rng: dict(zip("ab", _two(rng, sorted(_elements())), strict=True)),
        lambda f: sum(_elements()[f[k]]["atomic_number"] for k in "ab"),
        [lambda f, r: ("lookup", {"name": f["a"], "attribute": "atomic_number"}),
         lambda f, r: ("lookup", {"name": f["b"], "attribute": "atomic_number"}),
         lambda f, r: ("calculator", {"expression": f"{r[0]} + {r[1]}"})],
        lambda f, r: r[2],
    ),
    _Kind(
        "moles_to_ounces",
        Template("What is the mass in ounces of {n} moles of {e}? Round to 2 decimal places."),
        lambda rng: {"n": pick(rng, (0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 8, 10, 12, 20)),
                     "e": pick(rng, sorted(_elements()))},
        lambda f: round(f["n"] * _elements()[f["e"]]["atomic_mass"] / _OUNCE_G, 2),
        [lambda f, r: ("lookup", {"name": f["e"], "attribute": "atomic_mass"}),
         lambda f, r: ("calculator", {"expression": f"{f['n']} * {r[0]}"}),
         lambda f, r: ("convert_units", {"value": r[1], "from_unit": "g", "to_unit": "oz"})],
        lambda f, r: round(r[2], 2),
        tolerance=0.01,
    ),
    _Kind(
        "average_speed",
        Template("A car drives {d} miles in {h} hours. What is its average speed in kilometres "
                 "per hour? Round to 1 decimal place."),
        lambda rng: {"d": int(rng.integers(20, 900)), "h": pick(rng, (0.5, 1.5, 2, 2.5, 3,
                                                                         4, 5, 6, 8))},
        lambda f: round(f["d"] * _MILE_KM / f["h"], 1),
        [lambda f, r: ("convert_units", {"value": float(f["d"]), "from_unit": "mi",
                                         "to_unit": "km"}),
         lambda f, r: ("calculator", {"expression": f"round({r[0]} / {f['h']}, 1)"})],
        lambda f, r: r[1],
        tolerance=0.1,
    ),
    _Kind(
        "date_after_weeks",
        Template("What is the date {w} weeks and {n} days after {date}? Answer as YYYY-MM-DD."),
        lambda rng: {"w": int(rng.integers(2, 60)), "n": int(rng.integers(2, 7)),
                     "date": _date(rng)},
        lambda f: (dt.date.fromisoformat(f["date"])
                   + dt.timedelta(days=7 * f["w"] + f["n"])).isoformat(),
        [lambda f, r: ("calculator", {"expression": f"{f['w']} * 7 + {f['n']}"}),
         lambda f, r: ("add_days", {"date": f["date"], "days": int(r[0])})],
        lambda f, r: r[1],
    ),
    _Kind(
        "temperature_difference",
        Template("It is {f} degrees Fahrenheit in {city_a} and {c} degrees Celsius in "
                 "{city_b}. How many degrees Celsius warmer is it in {city_a}? Round to 1 "
                 "decimal place."),
        _sample_temperature,
        lambda f: round((f["f"] - 32) * 5 / 9 - f["c"], 1),
        [lambda f, r: ("convert_units", {"value": float(f["f"]), "from_unit": "F",
                                         "to_unit": "C"}),
         lambda f, r: ("calculator", {"expression": f"round({r[0]} - ({f['c']}), 1)"})],
        lambda f, r: r[1],
        tolerance=0.1,
    ),
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# The reference solver


def _result_value(content: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def _failed(message: Message) -> bool:
    return message.text.startswith("Error")


def _format_answer(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def solve(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None) -> Message:
    """The reference solver: reads the question, makes the needed tool calls one per turn,
    then answers. Usable as ``FunctionPolicy(solve)``.

    Raises:
        EnvError: none of the templates reads the question (a task the environment did not
            generate).

    Example:
        >>> question = "How many people live in France and Japan together?"
        >>> reply = solve([Message(role="user", content=question)])
        >>> reply.tool_calls[0].function.arguments
        '{"name": "France", "attribute": "population"}'
    """
    messages = Message.coerce_list(messages)
    question = question_text(messages)
    for kind in _KINDS:
        fields = kind.template.parse(question)
        if fields is not None:
            break
    else:
        raise not_recognised("tools", "question")
    # Failed calls (an "Error: ..." result) are ignored: the solver repeats the step.
    results = [_result_value(m.text) for m in messages if m.role == "tool" and not _failed(m)]
    if len(results) < len(kind.steps):
        name, arguments = kind.steps[len(results)](fields, results)
        turn = sum(1 for m in messages if m.role == "assistant")
        return tool_call_message(name, arguments, call_id=f"call_{turn}")
    answer = _format_answer(kind.final(fields, results))
    return Message(role="assistant", content=f"Answer: {answer}")


# --------------------------------------------------------------------------------------------
# The environment


def _kind(name: str) -> _Kind:
    for kind in _KINDS:
        if kind.name == name:
            return kind
    known = [k.name for k in _KINDS]
    raise ConfigError(
        f"unknown question kind {name!r} for the tools env.{did_you_mean(name, known)} "
        f"Known: {', '.join(known)}."
    )


class ToolsEnv(ChatEnv):
    """Multi-step questions answered with tools: lookups, arithmetic, units and dates.

    Takes the arguments of `ChatEnv` (``tasks``, ``max_turns``, rewards, ``render_mode``), and:

    Args:
        kinds: generate only these question kinds (default: all; see `ToolsEnv.KINDS`), e.g.
            for a curriculum, or for short prompts with ``tool_names``.
        tool_names: offer only these tools (default: all six). Fewer tools make a much
            shorter prompt (each schema is 100-150 tokens), which matters on a CPU.

    Example:
        >>> env = ToolsEnv()
        >>> observation, info = env.reset(seed=3)
        >>> [schema["function"]["name"] for schema in info["tools"]][:2]
        ['calculator', 'convert_units']
    """

    default_max_turns: ClassVar[int] = 8
    inline_steps = True  # its steps are quick, pure Python: they never block (ChatEnv)
    default_episode_rewards: ClassVar[Mapping[str, RewardLike]] = {
        "answer": answer_match,
        "efficiency": tool_efficiency,
    }
    default_episode_weights: ClassVar[Mapping[str, float]] = {"answer": 1.0, "efficiency": 0.0}
    default_step_rewards: ClassVar[Mapping[str, RewardLike]] = {"tool_use": tool_use_reward}
    reference_solver = staticmethod(solve)
    env_name: ClassVar[str] = "tools"

    KINDS: ClassVar[tuple[str, ...]] = tuple(k.name for k in _KINDS)
    """Every question kind."""

    def __init__(
        self,
        *,
        kinds: Sequence[str] | None = None,
        tool_names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._kinds = _KINDS if kinds is None else tuple(_kind(name) for name in kinds)
        if not self._kinds:
            raise ConfigError(f"kinds must name at least one kind, e.g. {self.KINDS[0]!r}.")
        every = [calculator, convert_units, days_between, add_days, weekday, lookup]
        known = {t.name: t for t in every}
        for name in tool_names or ():
            if name not in known:
                raise ConfigError(
                    f"unknown tool {name!r} for the tools env.{did_you_mean(name, known)} "
                    f"Known: {', '.join(known)}."
                )
        self._offered = every if tool_names is None else [known[n] for n in tool_names]
        self._system_prompt = system_prompt(tool_names)
        super().__init__(**kwargs)

    def tools(self) -> list[Tool]:
        """Calculator, unit conversion, three date tools and the knowledge-table lookup."""
        return list(self._offered)

    def generate_task(self, rng: np.random.Generator) -> Task:
        """A random question of a random kind, with its answer computed from the table."""
        kind = pick(rng, self._kinds)
        fields = kind.sample(rng)
        question = kind.template.render(**fields)
        return Task(
            id=stable_id("tools", question),
            messages=[
                Message(role="system", content=self._system_prompt),
                Message(role="user", content=question),
            ],
            ground_truth=kind.truth(fields),
            metadata={
                "kind": kind.name,
                "tolerance": kind.tolerance,
                "min_tool_calls": len(kind.steps),
            },
        )

    def on_reset(self, state: EpisodeState) -> None:
        """Add the system prompt to dataset tasks that have none."""
        ensure_system_prompt(state, self._system_prompt)
