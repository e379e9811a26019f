"""The ``code`` environment: write a Python function that passes hidden tests.

Each task asks for one small function from a family of 10 (sum of selected numbers, reversed
words, fizzbuzz variants, sliding windows, counting letters, rotation, clamping, power sums, a
Caesar shift, digit sums in a base), with its parameters (divisor, separator, words, window size,
base, ...) drawn from the seed. The prompt shows one example; the hidden tests are 6 calls with
inputs drawn from the seed and expected values computed by a reference implementation. The
example is not one of the hidden tests.

The model replies with the function in a ```` ```python ```` block. The code runs isolated in the
sandbox (`rk_agent.sandbox`, mode ``bwrap`` unless ``sandbox="process"`` is asked for; one
process computes the 6 calls' values, which the env compares with the expected ones outside the
sandbox, about 60 ms in all); when a test fails, the failure report comes back as feedback for
another turn, until the tests pass or ``max_turns`` (4 by default) is reached. The report names
the failed test by its input and says what the code returned (or the error), never the
expected value: feedback that handed over expected values let a lookup table built from it
earn a mean episode reward of 0.70 while solving nothing (``rk-agent check env code``).

Reward: episode ``tests``, the ``code_execution`` pass rate of the last reply (1.0 when every
test passes). The check that decides the feedback is reused for the episode reward, so the final
reply runs in the sandbox once.

JSONL tasks: ``{"prompt": "...", "ground_truth": [test cases]}`` in any shape the
``code_execution`` reward accepts (e.g. ``["assert add(1, 2) == 3"]``).

Main names: `CodeEnv`, `solve` (the reference solver), `SYSTEM_PROMPT`.
"""

from __future__ import annotations

import ast
import json
import string
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
)
from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.task import Task
from rk_agent.rewards.builtin.code_execution import code_execution_reward
from rk_agent.rewards.decorator import RewardFn, reward_function
from rk_agent.rewards.registry import RewardLike
from rk_agent.sandbox import SandboxLimits, SandboxMode, require_sandbox, sandbox_mode
from rk_agent.types import EvaluateResult, Message

__all__ = ["SYSTEM_PROMPT", "TEST_LIMITS", "CodeEnv", "solve"]

SYSTEM_PROMPT = (
    "Write the Python function the user asks for. Reply with the complete function in one "
    "```python code block (no example calls, no input() or print()). Hidden tests will call it; "
    "if a test fails you will see which one and can reply with corrected code."
)

TEST_LIMITS = SandboxLimits(timeout_s=2.0, memory_mb=512)
"""Sandbox limits per hidden test."""

_HIDDEN_TESTS = 6
_EXAMPLE_DRAWS = 50
Fields = dict[str, str]


@dataclass(frozen=True)
class _Family:
    """One family of problems.

    ``reference(fields)`` is the function that computes expected values, ``source(fields)`` the
    reference solver's code for it; ``inputs`` draws the arguments of one test call.
    """

    template: Template
    sample: Callable[[np.random.Generator], dict[str, Any]]
    reference: Callable[[Fields], Callable[..., Any]]
    source: Callable[[Fields], str]
    inputs: Callable[[np.random.Generator], list[Any]]


def _ints(rng: np.random.Generator, low: int = -20, high: int = 50, longest: int = 10) -> list[int]:
    return [int(x) for x in rng.integers(low, high + 1, size=int(rng.integers(0, longest + 1)))]


_WORDS = ("apple", "Stone", "river", "BLUE", "cat", "moon", "Quick", "tree", "zebra", "sun",
          "Lamp", "echo", "x", "oak", "Jazz")  # fmt: skip


def _text(rng: np.random.Generator) -> str:
    words = [pick(rng, _WORDS) for _ in range(int(rng.integers(0, 7)))]
    return " ".join(w + pick(rng, ("", "", "", "!", ",")) for w in words)


# The `sum_selected` family's conditions: shown text -> (Python condition on x, predicate).
_CONDITIONS: dict[str, tuple[str, Callable[[int], Callable[[int], bool]]]] = {
    "divisible by {k}": ("x % {k} == 0", lambda k: lambda x: x % k == 0),
    "greater than {k}": ("x > {k}", lambda k: lambda x: x > k),
    "less than {k}": ("x < {k}", lambda k: lambda x: x < k),
    "odd": ("x % 2 != 0", lambda k: lambda x: x % 2 != 0),
    "even": ("x % 2 == 0", lambda k: lambda x: x % 2 == 0),
}
# The `join_reversed` family's word cases: shown text -> (code suffix, function).
_CASES: dict[str, tuple[str, Callable[[str], str]]] = {
    "unchanged": ("", str),
    "in upper case": (".upper()", str.upper),
    "in lower case": (".lower()", str.lower),
    "capitalised (first letter upper case, the rest lower case)": (".capitalize()", str.capitalize),
}
_SEPARATORS = (" ", "-", "_", ", ", " | ", "/", "")
_WORD_PAIRS = (("Fizz", "Buzz"), ("Foo", "Bar"), ("Ping", "Pong"), ("Tick", "Tock"),
               ("Zig", "Zag"), ("Bim", "Bam"), ("Hip", "Hop"), ("Ding", "Dong"))  # fmt: skip
_WINDOW_OPS: dict[str, Callable[[list[int]], int]] = {"sum": sum, "max": max, "min": min}
_STARTS = {"all the": (1, 1), "the odd": (1, 2), "the even": (2, 2)}


def _condition(fields: Fields) -> tuple[str, Callable[[int], bool]]:
    """The Python condition and the predicate of a `sum_selected` task."""
    for shown, (code, predicate) in _CONDITIONS.items():
        parsed = Template(shown).parse(fields["cond"])
        if parsed is not None:
            k = int(parsed.get("k", 0))
            return code.format(k=k), predicate(k)
    raise ValueError(f"unknown condition {fields['cond']!r}")


def _sum_selected(fields: Fields) -> Callable[[list[int]], int]:
    keep = _condition(fields)[1]
    return lambda nums: sum(x for x in nums if keep(x))


def _join_reversed(fields: Fields) -> Callable[[str], str]:
    change, separator = _CASES[fields["case"]][1], ast.literal_eval(fields["sep"])
    return lambda text: separator.join(change(w) for w in reversed(text.split()))


def _sample_condition(rng: np.random.Generator) -> dict[str, Any]:
    shown = pick(rng, list(_CONDITIONS))
    k = int(rng.integers(2, 13)) if "divisible" in shown else int(rng.integers(-5, 21))
    return {"cond": shown.format(k=k)}


def _fizzbuzz(fields: Fields) -> Callable[[int], list[str]]:
    a, b, wa, wb = int(fields["a"]), int(fields["b"]), fields["A"], fields["B"]
    return lambda n: [
        wa + wb if i % a == 0 and i % b == 0 else wa if i % a == 0 else wb if i % b == 0
        else str(i) for i in range(1, n + 1)
    ]  # fmt: skip


def _sample_fizzbuzz(rng: np.random.Generator) -> dict[str, Any]:
    a, b = sorted(int(x) for x in rng.choice(np.arange(2, 10), size=2, replace=False))
    wa, wb = pick(rng, _WORD_PAIRS)
    return {"a": a, "b": b, "A": wa, "B": wb, "AB": wa + wb}


def _rotate(fields: Fields) -> Callable[[list[int]], list[int]]:
    k, right = int(fields["k"]), fields["dir"] == "right"

    def rotate(items: list[int]) -> list[int]:
        if not items:
            return []
        shift = k % len(items)
        shift = -shift if right else shift
        return items[shift:] + items[:shift]

    return rotate


def _caesar(fields: Fields) -> Callable[[str], str]:
    shift = int(fields["shift"])

    def caesar(text: str) -> str:
        out = []
        for c in text:
            if c in string.ascii_lowercase:
                c = chr((ord(c) - 97 + shift) % 26 + 97)
            elif c in string.ascii_uppercase:
                c = chr((ord(c) - 65 + shift) % 26 + 65)
            out.append(c)
        return "".join(out)

    return caesar


def _digit_sum(fields: Fields) -> Callable[[int], int]:
    base = int(fields["b"])

    def digit_sum(n: int) -> int:
        total = 0
        while n:
            n, digit = divmod(n, base)
            total += digit
        return total

    return digit_sum


_FAMILIES: tuple[_Family, ...] = (
    _Family(
        Template("Write a Python function `sum_selected(nums)` that returns the sum of the "
                 "numbers in the list `nums` that are {cond} (0 when there are none)."),
        _sample_condition,
        _sum_selected,
        lambda f: ("def sum_selected(nums):\n"
                   f"    return sum(x for x in nums if {_condition(f)[0]})\n"),
        lambda rng: [_ints(rng)],
    ),
    _Family(
        Template("Write a Python function `join_reversed(text)` that splits the string `text` "
                 "on whitespace and returns its words in reverse order, {case}, joined by "
                 "the separator {sep}."),
        lambda rng: {"case": pick(rng, list(_CASES)), "sep": repr(pick(rng, _SEPARATORS))},
        _join_reversed,
        lambda f: ("def join_reversed(text):\n"
                   f"    words = [w{_CASES[f['case']][0]} for w in text.split()]\n"
                   f"    return {f['sep']}.join(reversed(words))\n"),
        lambda rng: [_text(rng)],
    ),
    _Family(
        Template("Write a Python function `fizzbuzz(n)` that returns a list of the numbers "
                 "from 1 to `n` as strings, except that multiples of both {a} and {b} are "
                 "replaced by '{AB}', other multiples of {a} by '{A}', and other multiples of "
                 "{b} by '{B}'."),
        _sample_fizzbuzz,
        _fizzbuzz,
        lambda f: ("def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n"
                   f"        if i % {f['a']} == 0 and i % {f['b']} == 0:\n"
                   f"            out.append('{f['AB']}')\n"
                   f"        elif i % {f['a']} == 0:\n            out.append('{f['A']}')\n"
                   f"        elif i % {f['b']} == 0:\n            out.append('{f['B']}')\n"
                   "        else:\n            out.append(str(i))\n    return out\n"),
        lambda rng: [int(rng.integers(0, 46))],
    ),
    _Family(
        Template("Write a Python function `window_{op}(nums)` that returns a list with the "
                 "{op} of every run of {w} consecutive numbers in the list `nums`, in order "
                 "(an empty list when `nums` has fewer than {w} numbers)."),
        lambda rng: {"op": pick(rng, ("sum", "max", "min")), "w": int(rng.integers(2, 7))},
        lambda f: lambda nums: [
            _WINDOW_OPS[f["op"]](nums[i : i + int(f["w"])])
            for i in range(len(nums) - int(f["w"]) + 1)
        ],
        lambda f: (f"def window_{f['op']}(nums):\n"
                   f"    return [{f['op']}(nums[i:i + {f['w']}]) "
                   f"for i in range(len(nums) - {f['w']} + 1)]\n"),
        lambda rng: [_ints(rng, longest=12)],
    ),
    _Family(
        Template("Write a Python function `count_letters(text)` that returns how many "
                 "characters of the string `text` are one of the letters '{chars}', ignoring "
                 "case."),
        lambda rng: {"chars": "".join(sorted(str(c) for c in rng.choice(
            list(string.ascii_lowercase), size=int(rng.integers(3, 7)), replace=False)))},
        lambda f: lambda text: sum(1 for c in text.lower() if c in f["chars"]),
        lambda f: ("def count_letters(text):\n"
                   f"    return sum(1 for c in text.lower() if c in '{f['chars']}')\n"),
        lambda rng: [_text(rng)],
    ),
    _Family(
        Template("Write a Python function `rotate(items)` that returns a new list: the list "
                 "`items` rotated {dir} by {k} positions (by {k} modulo its length; an empty "
                 "list stays empty)."),
        lambda rng: {"dir": pick(rng, ("left", "right")), "k": int(rng.integers(1, 10))},
        _rotate,
        lambda f: ("def rotate(items):\n    if not items:\n        return []\n"
                   f"    k = {f['k']} % len(items)\n"
                   + ("    return items[-k:] + items[:-k] if k else list(items)\n"
                      if f["dir"] == "right" else "    return items[k:] + items[:k]\n")),
        lambda rng: [_ints(rng, 0, 9, longest=8)],
    ),
    _Family(
        Template("Write a Python function `clamp_all(nums)` that returns a new list where "
                 "every number of `nums` below {lo} is replaced by {lo} and every number above "
                 "{hi} by {hi}."),
        lambda rng: {"lo": int(rng.integers(-20, 1)), "hi": int(rng.integers(1, 31))},
        lambda f: lambda nums: [min(max(x, int(f["lo"])), int(f["hi"])) for x in nums],
        lambda f: ("def clamp_all(nums):\n"
                   f"    return [min(max(x, {f['lo']}), {f['hi']}) for x in nums]\n"),
        lambda rng: [_ints(rng, -40, 50)],
    ),
    _Family(
        Template("Write a Python function `power_sum(n)` that returns the sum of i ** {p} over "
                 "{which} integers i from 1 to `n` inclusive (0 when there are none)."),
        lambda rng: {"p": int(rng.integers(1, 6)), "which": pick(rng, list(_STARTS))},
        lambda f: lambda n: sum(
            i ** int(f["p"]) for i in range(_STARTS[f["which"]][0], n + 1, _STARTS[f["which"]][1])
        ),
        lambda f: ("def power_sum(n):\n    return sum(i ** {p} for i in range({0}, n + 1, {1}))\n"
                   .format(*_STARTS[f["which"]], p=f["p"])),
        lambda rng: [int(rng.integers(0, 30))],
    ),
    _Family(
        Template("Write a Python function `caesar(text)` that shifts every letter of the "
                 "string `text` {shift} places forward in the alphabet, wrapping around from "
                 "'z' to 'a' and keeping upper and lower case; other characters stay the same."),
        lambda rng: {"shift": int(rng.integers(1, 26))},
        _caesar,
        lambda f: ("def caesar(text):\n    out = []\n    for c in text:\n"
                   "        if c.islower() and c.isascii():\n"
                   f"            c = chr((ord(c) - 97 + {f['shift']}) % 26 + 97)\n"
                   "        elif c.isupper() and c.isascii():\n"
                   f"            c = chr((ord(c) - 65 + {f['shift']}) % 26 + 65)\n"
                   "        out.append(c)\n    return ''.join(out)\n"),
        lambda rng: [_text(rng)],
    ),
    _Family(
        Template("Write a Python function `digit_sum(n)` that returns the sum of the digits of "
                 "the non-negative integer `n` written in base {b}."),
        lambda rng: {"b": int(rng.integers(2, 17))},
        _digit_sum,
        lambda f: ("def digit_sum(n):\n    total = 0\n    while n:\n"
                   f"        n, d = divmod(n, {f['b']})\n        total += d\n    return total\n"),
        lambda rng: [int(rng.integers(0, 100_000))],
    ),
)  # fmt: skip


def _example(
    family: _Family,
    function: Callable[..., Any],
    calls: list[list[Any]],
    rng: np.random.Generator,
) -> list[Any]:
    """The arguments of the example shown in the prompt: a call that is not a hidden test.

    The example is not scored (a policy that memorised it would be paid for memorising); it
    is drawn apart, preferring a non-empty input with a non-empty result.
    """
    fallback: list[Any] | None = None
    for _ in range(_EXAMPLE_DRAWS):
        args = family.inputs(rng)
        if args in calls:
            continue
        if args[0] and function(*args):
            return args
        fallback = fallback or args
    if fallback is None:  # every draw was a hidden test: the families' inputs make this moot
        raise ValueError(f"no example apart from the hidden tests in {_EXAMPLE_DRAWS} draws")
    return fallback


def _function_name(question: str) -> str:
    return question.split("`", 2)[1].split("(", 1)[0]


def solve(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None) -> Message:
    """The reference solver: recognises the problem and writes the reference function.

    Raises:
        EnvError: none of the templates reads the question (a task the environment did not
            generate).

    Example:
        >>> env = CodeEnv()
        >>> observation, info = env.reset(seed=0)
        >>> solve(Message.coerce_list(observation)).text.startswith("```python")
        True
    """
    head = question_text(Message.coerce_list(messages)).split("\n\n", 1)[0]
    for family in _FAMILIES:
        fields = family.template.parse(head)
        if fields is not None:
            return Message(role="assistant", content=f"```python\n{family.source(fields)}```")
    raise not_recognised("code", "task")


class CodeEnv(ChatEnv):
    """Write a Python function that passes hidden tests; failures come back as feedback.

    Args:
        limits: sandbox limits per hidden test (default `TEST_LIMITS`: 2 s, 512 MiB).
        sandbox: ``"bwrap"`` (isolated, the default) or ``"process"`` (no isolation, an explicit
            opt-in); recorded in the episode metric ``tests.sandbox``.
        **kwargs: see `ChatEnv`.

    Raises:
        SandboxError: mode ``bwrap`` cannot isolate code on this machine (names the cause and
            the fix), checked when the env is made, not at the first reply.

    Example:
        >>> env = CodeEnv()
        >>> observation, info = env.reset(seed=0)
        >>> info["task"].metadata["fn_name"]
        'caesar'
    """

    default_max_turns: ClassVar[int] = 4
    default_episode_rewards: ClassVar[Mapping[str, RewardLike]] = {"tests": "code_execution"}
    reference_solver = staticmethod(solve)
    env_name: ClassVar[str] = "code"

    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        sandbox: SandboxMode | str = SandboxMode.BWRAP,
        **kwargs: Any,
    ) -> None:
        self.limits = limits or TEST_LIMITS
        self.sandbox = sandbox_mode(sandbox)
        require_sandbox(self.sandbox)
        self._checked: tuple[str, str, EvaluateResult] | None = None
        if kwargs.get("episode_rewards") is None:
            kwargs["episode_rewards"] = {"tests": self._tests_reward()}
        super().__init__(**kwargs)

    def generate_task(self, rng: np.random.Generator) -> Task:
        """A random function to write, with an example and 6 hidden tests."""
        family = pick(rng, _FAMILIES)
        fields = {k: str(v) for k, v in family.sample(rng).items()}
        function = family.reference(fields)
        head = family.template.render(**fields)
        name = _function_name(head)
        calls = [family.inputs(rng) for _ in range(_HIDDEN_TESTS)]
        tests = [{"fn_name": name, "args": args, "expected": function(*args)} for args in calls]
        example = _example(family, function, calls, rng)
        shown = ", ".join(repr(a) for a in example)
        question = f"{head}\n\nFor example, `{name}({shown})` returns `{function(*example)!r}`."
        return Task(
            id=stable_id("code", question, tests),
            messages=[
                Message(role="system", content=SYSTEM_PROMPT),
                Message(role="user", content=question),
            ],
            ground_truth=tests,
            metadata={"fn_name": name},
        )

    def on_reset(self, state: EpisodeState) -> None:
        """Add the system prompt to dataset tasks that have none."""
        ensure_system_prompt(state, SYSTEM_PROMPT)

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """End when every test passes (or the tests are unusable); else report the failure."""
        result = self._check(state.messages, state.task.ground_truth)
        if not result.is_score_valid or result.score >= 1.0:
            return None
        return [
            Message(
                role="user",
                content=(
                    f"Your code did not pass the tests: {result.reason}.\nFix it and reply with "
                    "the complete corrected function in one ```python block."
                ),
            )
        ]

    def _check(self, messages: list[Message], ground_truth: Any) -> EvaluateResult:
        """Run the tests on the last reply, once per distinct reply and task."""
        reply = next((m.text for m in reversed(messages) if m.role == "assistant"), "")
        key = json.dumps(ground_truth, sort_keys=True, default=str)
        if self._checked is not None and self._checked[:2] == (reply, key):
            return self._checked[2]
        result = code_execution_reward(
            messages,
            ground_truth=ground_truth,
            limits=self.limits,
            sandbox=self.sandbox,
            reveal_expected=False,  # the reason is the feedback: no expected values in it
        )
        self._checked = (reply, key, result)
        return result

    def _tests_reward(self) -> RewardFn:
        @reward_function(
            name="code_execution",
            description="pass rate of the hidden tests (code_execution, checked once per reply)",
        )
        def tests(messages: list[Message], ground_truth: Any = None) -> EvaluateResult:
            return self._check(messages, ground_truth)

        return tests
