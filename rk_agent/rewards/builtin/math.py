"""Math answer correctness: is the final answer of a response equal to the reference answer?

Main names:
    math_reward: ``"math"``, 1.0 when the last assistant message's final answer equals
        ``ground_truth``, else 0.0 (or a small partial credit, see below).
    extract_answer: the final answer of a response, as text.
    answers_match: whether a predicted answer equals a reference answer.

**Which answer counts** (`extract_answer`): only the last assistant message's ``content`` is read,
after the last ``</think>`` when there is one (a ``<think>`` that never closes means the model
never answered). The final answer is, in order:

1. the content of the last ``\\boxed{...}`` (nested braces allowed) or the text after the last
   GSM8K-style ``####`` marker on its line, whichever comes later (these set the ``format``
   metric);
2. otherwise the last number-like token in the text: a number (``-1,234.5``, ``$18``, ``25%``), a
   fraction (``3/4``, ``\\frac{3}{4}``) or an inline LaTeX formula (``$x^2+1$``; after its last
   ``=``). "The answer is 42, no wait 24" answers 24, and a response that lists many numbers is
   judged on its last one only.

**How answers compare** (`answers_match`): when both sides are plain numbers (integers, decimals,
thousands separators, ``$``/``€``/``£``, ``%``, fractions, trailing unit words) they are compared
exactly with `fractions.Fraction`, with the rules math-verify uses: ``42 == 42.0``,
``0.5 == 1/2 == \\frac{1}{2}``, ``1,234 == 1234``; when one side is written as a decimal and the
other is not a whole number, both are first rounded to 6 decimal places (``0.333333 == 1/3``). A
percentage on one side only may match its value or its bare number (``25% == 0.25 == 25``, and
also ``12.5% == 12.50``, which math-verify misses). Anything else (LaTeX, expressions, intervals,
equations) goes to Hugging Face's ``math-verify`` (``parse`` then ``verify``), imported only then,
with its time limits on and the input bounded (see `MAX_SYMBOLIC_CHARS`) so that a hostile answer
such as ``9^{9^{9^9}}`` cannot hang the trainer.

math-verify's time limits use ``signal.alarm``, which only works in the main thread: elsewhere
the symbolic check runs without them, protected only by the input bounds.
"""

from __future__ import annotations

import math
import re
import threading
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from rk_agent.errors import ConfigError
from rk_agent.rewards.builtin._reply import last_reply, no_reply
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["MAX_SCAN_CHARS", "MAX_SYMBOLIC_CHARS", "answers_match", "extract_answer", "math_reward"]

MAX_SCAN_CHARS = 10_000
"""Only the last this many characters of a response are searched for its answer."""

MAX_SYMBOLIC_CHARS = 300
"""Answers longer than this are never handed to sympy; they count as not matching."""

PARTIAL_CREDIT = 0.2
"""The score for a wrong final answer whose working contains the right number (opt-in)."""

PARTIAL_MAX_NUMBERS = 20
"""A response with more distinct numbers than this gets no partial credit (number spraying)."""

_WARM_UP_S = 120  # the first comparison's, which loads sympy's parts (see _warm_up)
_TIMEOUT_S = 2  # math-verify's per-parse and per-comparison limits (whole seconds: signal.alarm)
_MAX_NUMBER_CHARS = 200  # longer digit strings are not "plain numbers" (and int() caps at 4300)
_MAX_EXPONENT = 10_000  # bound on the product of all exponents in a symbolic answer

# Full-width digits and the Unicode minus sign read as their ASCII forms.
_ASCII = str.maketrans({**{chr(0xFF10 + i): str(i) for i in range(10)}, "\u2212": "-"})

# --------------------------------------------------------------------------------------------
# Finding the answer

_NUM = r"(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_SIGN = r"(?:(?<![A-Za-z0-9_.)\]}])[-+])?"
_PCT = r"(?:\s*(?:\\?%|percent\b))?"
# The last match of this in the text is the answer when there is no \boxed{} or ####. At one
# position the alternatives are tried in order: "$18" is money before it can open "$...$".
_TOKEN = re.compile(
    rf"(?P<money>{_SIGN}(?<![A-Za-z0-9_])\\?[$€£¥₹]\s?-?{_NUM}(?![0-9]){_PCT})"
    r"|\$\$(?P<display>[^$]+?)\$\$"
    r"|\\\[(?P<bracket>.+?)\\\]"
    r"|\\\((?P<paren>.+?)\\\)"
    r"|(?<!\\)\$(?P<inline>[^$\n]+?)(?<!\\)\$"
    r"|(?P<frac>-?\\[dt]?frac\{[^{}]*\}\{[^{}]*\})"
    rf"|(?P<num>{_SIGN}(?<![A-Za-z0-9_.]){_NUM}(?:\s*/\s*[0-9]+(?![0-9.]))?{_PCT})",
    re.DOTALL,
)
_NUMERIC_TOKENS = frozenset({"money", "num", "frac"})
_PROSE = re.compile(r"(?<![A-Za-z\\])[A-Za-z]{2,}")
_RELATION = re.compile(r"<|>|\\[lg]eq?\b|\\neq?\b|≤|≥")


class _Extraction(NamedTuple):
    """Where a response's final answer came from (see `extract_answer`).

    Attributes:
        answer: the answer text, or ``None`` when the response has none.
        source: ``"boxed"``, ``"####"``, ``"last number"``, or why nothing was found.
        marked: whether the answer was given with an explicit marker (``\\boxed{}`` or ``####``).
    """

    answer: str | None
    source: str
    marked: bool


def _visible(text: str) -> str | None:
    """The part of a response that can hold the answer, or ``None`` if it is all thinking."""
    if not text.isascii():
        text = text.translate(_ASCII)
    end = text.rfind("</think>")
    if end >= 0:
        text = text[end + len("</think>") :]
    elif "<think>" in text:
        return None
    return text[-MAX_SCAN_CHARS:]


_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])\s*")


def _boxed(text: str) -> tuple[int, str] | None:
    """The position and content of the last closed ``\\boxed{...}`` (or ``\\fbox``)."""
    for match in reversed(list(_BOX.finditer(text))):
        after = match.end()
        if text.startswith("{", after):
            content = _balanced(text, after)
            if content is not None:
                return match.start(), content.strip()
        elif match.group()[-1].isspace() and after < len(text):  # "\boxed 5"
            return match.start(), text[after:].split(None, 1)[0].rstrip(".,;$")
    return None


def _balanced(text: str, open_at: int, pair: str = "{}") -> str | None:
    """The text inside the group opening at ``open_at``, or ``None`` if it never closes."""
    opening, closing = pair[0], pair[1]
    depth = 0
    for i in range(open_at, len(text)):
        char = text[i]
        if char == opening and text[i - 1] != "\\":
            depth += 1
        elif char == closing and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return None


def _last_token(text: str) -> str | None:
    match = None
    for match in _TOKEN.finditer(text):  # noqa: B007 - the loop leaves the last match
        pass
    if match is None:
        return None
    kind = match.lastgroup
    value = match.group(kind or 0)
    if kind in ("display", "bracket", "paren", "inline"):
        value = value.strip()
        if "=" in value and not _RELATION.search(value):
            value = value.rsplit("=", 1)[1].strip()  # "$x = 5$" answers 5
    return value or None


def _extract(text: str) -> _Extraction:
    visible = _visible(text)
    if visible is None:
        return _Extraction(None, "an unfinished <think> block", False)
    boxed = _boxed(visible) if "\\boxed" in visible or "\\fbox" in visible else None
    hashes = visible.rfind("####")
    if hashes >= 0 and (boxed is None or hashes > boxed[0]):
        line = visible[hashes + 4 :].split("\n", 1)[0].strip().rstrip(".")
        if _number(line) is None and _PROSE.search(line):  # "#### The total is 72 apples"
            line = _last_token(line) or line
        return _Extraction(line or None, "####" if line else "an empty '####'", True)
    if boxed is not None:
        return _Extraction(boxed[1] or None, "boxed" if boxed[1] else "an empty \\boxed{}", True)
    token = _last_token(visible)
    return _Extraction(token, "last number" if token else "no number in the response", False)


def extract_answer(text: str) -> str | None:
    """The final answer of a response, as text, or ``None`` when it gives none.

    The rules are in the module docstring: the last ``\\boxed{}`` or ``####`` answer, else the
    last number-like token. The text is returned as written (``"$18"``, ``"\\frac{1}{2}"``).

    Example:
        >>> extract_answer("48 / 2 = 24 clips in May, so 48 + 24 = 72.\\n#### 72")
        '72'
        >>> extract_answer("So $x = \\\\boxed{\\\\frac{1}{2}}$.")
        '\\\\frac{1}{2}'
        >>> extract_answer("The answer is 42, no wait 24."), extract_answer("I don't know.")
        ('24', None)
    """
    return _extract(text).answer


# --------------------------------------------------------------------------------------------
# Plain numbers: the fast path

Kind = Literal["int", "dec", "frac"]


class _Number(NamedTuple):
    value: Fraction
    kind: Kind  # how it is written: whole number, decimal, or fraction
    percent: bool


_NUMBER = re.compile(
    r"(?P<sign>[-+])?\s*[$€£¥₹]?\s*(?P<sign2>-)?\s*"
    r"(?:(?P<num>[0-9]+)\s*/\s*(?P<den>[0-9]+)"
    r"|\\[dt]?frac\{\s*(?P<fsign>-)?\s*(?P<fnum>[0-9]+)\s*\}\{\s*(?P<fden>[0-9]+)\s*\}"
    r"|(?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)?(?P<dec>\.[0-9]+)?)"
    r"\s*(?P<pct>%|percent\b)?"
    r"(?:\s+[A-Za-z]{2,}(?:\s+[A-Za-z]+){0,2})?\s*\.?"  # up to three unit words: "18 dollars"
)
_LATEX_NOISE = re.compile(r"\\[,!;: ]|~")  # thin spaces: 1\,234
_LATEX_UNIT = re.compile(r"\s*\\(?:text|textrm|mbox|mathrm)\{\s*[A-Za-z ]*\}\s*\.?$")


@lru_cache(maxsize=8192)
def _number(text: str) -> _Number | None:
    """``text`` as a plain number, or ``None`` when it is anything else."""
    text = text.strip()
    if len(text) > _MAX_NUMBER_CHARS or not text:
        return None
    if "\\" in text or "{" in text or "$" in text:
        text = _strip_latex(text)
    match = _NUMBER.fullmatch(text)
    if match is None or (match["sign"] and match["sign2"]):
        return None
    negative = "-" in (match["sign"] or "", match["sign2"] or "", match["fsign"] or "")
    try:
        if match["den"] or match["fden"]:
            value = Fraction(int(match["num"] or match["fnum"]), int(match["den"] or match["fden"]))
            kind: Kind = "int" if value.denominator == 1 else "frac"
        elif match["int"] or match["dec"]:
            value = Fraction((match["int"] or "0").replace(",", "") + (match["dec"] or ""))
            kind = "dec" if match["dec"] else "int"
        else:
            return None
    except (ZeroDivisionError, ValueError):
        return None
    return _Number(-value if negative else value, kind, bool(match["pct"]))


def _strip_latex(text: str) -> str:
    if text.startswith("$") and text.endswith("$") and len(text) > 2 and "$" not in text[1:-1]:
        text = text[1:-1].strip()  # inline math: $42$
    text = text.replace("\\$", "$").replace("\\%", "%").replace("{,}", ",")
    text = _LATEX_UNIT.sub("", _LATEX_NOISE.sub("", text))
    return text.strip()


def _close(a: Fraction, a_kind: Kind, b: Fraction, b_kind: Kind) -> bool:
    # As math-verify: a decimal against a decimal or a non-whole number is rounded to 6 places
    # (0.333333 == 1/3); against a whole number it must be exact (41.9999999 != 42).
    if (a_kind == "dec" and b_kind != "int") or (b_kind == "dec" and a_kind != "int"):
        return round(a, 6) == round(b, 6)
    return a == b


def _same_number(p: _Number, g: _Number) -> bool:
    if p.percent == g.percent:
        return _close(p.value, p.kind, g.value, g.kind)
    pct, other = (p, g) if p.percent else (g, p)
    ratio = pct.value / 100
    ratio_kind: Kind = "int" if ratio.denominator == 1 else "frac"
    return _close(ratio, ratio_kind, other.value, other.kind) or _close(
        pct.value, pct.kind, other.value, other.kind
    )


# --------------------------------------------------------------------------------------------
# Everything else: math-verify


_COMBINATORIAL = re.compile(r"!|binom|choose|\\sum|\\prod")
_DIGITS = re.compile(r"[0-9]+")


def _too_risky(answer: str) -> str | None:
    """Why sympy must not see ``answer`` (it could run for ever), or ``None`` when it is safe.

    Big-integer arithmetic runs in C, where math-verify's time limit cannot interrupt it, so
    powers, factorials and binomials that would build astronomically large numbers are refused.
    """
    if len(answer) > MAX_SYMBOLIC_CHARS:
        return f"longer than {MAX_SYMBOLIC_CHARS} characters"
    text = answer.replace("**", "^").replace("\\!", "")
    literals = _DIGITS.findall(text)
    if any(len(literal) > 50 for literal in literals):
        return "a number with more than 50 digits"
    if _COMBINATORIAL.search(text) and ("^" in text or any(len(n) > 3 for n in literals)):
        return "a factorial, binomial, sum or product of large numbers"
    bound = 1
    for match in re.finditer(r"\^\s*", text):
        at = match.end()
        if text.startswith(("{", "("), at):
            group = _balanced(text, at, "{}" if text[at] == "{" else "()") or text[at:]
            if "^" in group:
                return "a nested power"
        else:
            digits = _DIGITS.match(text, at)
            group = digits[0] if digits else ""
        for literal in _DIGITS.findall(group):
            bound *= max(int(literal), 2)
        if bound > _MAX_EXPONENT:
            return "a power too large to evaluate"
    return None


def _timeout() -> int | None:
    # signal.alarm (math-verify's time limit) only works in the main thread.
    return _TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@lru_cache(maxsize=1024)
def _symbolic(answer: str) -> tuple[Any, ...]:
    """``answer`` parsed by math-verify (sympy objects and its string fallback), or ``()``."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = _configs(LatexExtractionConfig, ExprExtractionConfig)
    return tuple(parse(f"\\boxed{{{answer}}}", configs, parsing_timeout=_timeout()))


@lru_cache(maxsize=1)
def _warm_up() -> None:
    """Parse and compare one formula without a time limit, once per process. The first
    symbolic comparison loads sympy's lazily imported parts and fills its caches: over a
    second on an idle machine, past the limit on a busy one, which would score a right answer
    wrong at the start of every process."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    limit = _WARM_UP_S if _timeout() else None  # a limit still, where one can be set
    configs = _configs(LatexExtractionConfig, ExprExtractionConfig)
    gold = parse("\\boxed{(x+1)^2}", configs, parsing_timeout=limit)
    verify(gold, parse("\\boxed{x^2+2x+1}", configs, parsing_timeout=limit), timeout_seconds=limit)


@lru_cache(maxsize=1)
def _configs(latex: Any, expr: Any) -> tuple[Any, ...]:
    return (latex(), expr())  # one instance each, so math-verify's regex caches hit


_SPACE = re.compile(r"\s+|\\[,!;: ]|\\(?:left|right)(?![A-Za-z])")


def _squash(text: str) -> str:
    return _SPACE.sub("", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


class _Verdict(NamedTuple):
    match: bool
    method: str  # "exact", "identical" or "math-verify"
    note: str = ""


def _compare(answer: str, gold: str) -> _Verdict:
    p, g = _number(answer), _number(gold)
    if p is not None and g is not None:
        return _Verdict(_same_number(p, g), "exact")
    if _squash(answer) == _squash(gold):  # the same formula, written the same way
        return _Verdict(True, "identical")
    for text, side in ((answer, "answer"), (gold, "reference")):
        risk = _too_risky(text)
        if risk is not None:
            return _Verdict(False, "math-verify", f"the {side} was not checked: {risk}")
    from math_verify import verify

    _warm_up()
    gold_parsed, answer_parsed = _symbolic(gold), _symbolic(answer)
    if not gold_parsed:
        return _Verdict(False, "math-verify", "math-verify could not parse the reference")
    ok = bool(verify(list(gold_parsed), list(answer_parsed), timeout_seconds=_timeout()))
    return _Verdict(ok, "math-verify")


# --------------------------------------------------------------------------------------------
# The reference answer


@lru_cache(maxsize=4096)
def _gold_from_text(text: str) -> str:
    """The answer part of a reference: after the last ``####``, in the last ``\\boxed{}``."""
    text = text.strip().translate(_ASCII)
    hashes = text.rfind("####")
    if hashes >= 0:
        return text[hashes + 4 :].strip().split("\n", 1)[0].strip()
    if "\\boxed" in text or "\\fbox" in text:
        boxed = _boxed(text)
        if boxed is not None:
            return boxed[1]
    return text


def _gold_text(ground_truth: object) -> str:
    """The reference answer as text; raises `ConfigError` when it is missing or unusable."""
    if ground_truth is None:
        raise ConfigError(
            "ground_truth is required: the math reward compares the response's final answer "
            "with it. Pass ground_truth='42' (a number, a LaTeX answer, or a GSM8K solution "
            "ending in '#### 42')."
        )
    if isinstance(ground_truth, bool) or not isinstance(
        ground_truth, (str, int, float, Fraction, Decimal)
    ):
        raise ConfigError(
            f"ground_truth must be a string or a number, got {type(ground_truth).__name__} "
            f"{ground_truth!r:.60}"
        )
    if isinstance(ground_truth, float):
        if not math.isfinite(ground_truth):
            raise ConfigError(f"ground_truth must be a finite number, got {ground_truth}")
        text = format(Decimal(repr(ground_truth)), "f")
    elif isinstance(ground_truth, (int, Decimal)):
        text = format(ground_truth, "f") if isinstance(ground_truth, Decimal) else str(ground_truth)
    elif isinstance(ground_truth, Fraction):
        text = f"{ground_truth.numerator}/{ground_truth.denominator}"
    else:
        text = _gold_from_text(ground_truth)
    if not text:
        raise ConfigError(f"ground_truth has no answer in it: {ground_truth!r:.80}")
    return text


def answers_match(predicted: str, gold: str | float | Fraction | Decimal) -> bool:
    """Whether the answer ``predicted`` equals the reference ``gold``.

    ``predicted`` is an answer as `extract_answer` returns it (not a whole response). ``gold`` may
    be a number, an answer, or a solution ending in ``#### 72`` or containing ``\\boxed{}``, whose
    answer part is used. Plain numbers are compared exactly, everything else with math-verify
    (rules in the module docstring).

    Raises:
        ConfigError: ``gold`` is missing, empty, or not a string or number.

    Example:
        >>> answers_match("0.75", "3/4"), answers_match("$1,234", "#### 1234")
        (True, True)
        >>> answers_match("\\\\frac{\\\\sqrt{2}}{2}", "\\\\sqrt{2}/2"), answers_match("24", 42)
        (True, False)
    """
    return _compare(predicted, _gold_text(gold)).match


# --------------------------------------------------------------------------------------------
# The reward


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _partial(text: str, gold: str) -> bool:
    """Whether the gold number occurs in the response's working (and it is no number list)."""
    g = _number(gold)
    visible = _visible(text)
    if g is None or visible is None:
        return False
    numbers = {
        n
        for m in _TOKEN.finditer(visible)
        if m.lastgroup in _NUMERIC_TOKENS and (n := _number(m.group())) is not None
    }
    return len(numbers) <= PARTIAL_MAX_NUMBERS and any(_same_number(n, g) for n in numbers)


@reward_function(
    name="math",
    description="1.0 when the final answer (\\boxed{}, ####, or last number) equals ground_truth",
    requirements=["math-verify"],
)
def math_reward(
    messages: list[Message],
    ground_truth: str | float | Fraction | Decimal | None = None,
    *,
    partial_credit: bool = False,
    **kwargs: Any,
) -> EvaluateResult:
    """Score 1.0 when the last assistant message's final answer equals ``ground_truth``.

    The answer is found and compared as the module docstring says. Metrics: ``answer_found``,
    ``correct``, ``format`` (1.0 when the answer was marked with ``\\boxed{}`` or ``####``;
    informational, it does not change the score) and, with ``partial_credit``, ``partial``.

    Args:
        messages: the conversation; its last assistant message is scored.
        ground_truth: the reference: a number, an answer (``"3/4"``, ``"\\frac{1}{2}"``) or a
            solution whose answer follows ``####`` or sits in ``\\boxed{}``. Required: without it
            the result is invalid (``is_score_valid=False``).
        partial_credit: when the final answer is wrong but the right number appears in the
            response, score `PARTIAL_CREDIT` (0.2) instead of 0.0, unless the response holds
            more than `PARTIAL_MAX_NUMBERS` distinct numbers (a list of guesses gets nothing).
        **kwargs: other dataset fields, ignored.

    Example:
        >>> r = math_reward(messages=[{"role": "user", "content": "2+2?"},
        ...                           {"role": "assistant", "content": "2+2=4\\n#### 4"}],
        ...                 ground_truth="4")
        >>> r.score, r.metrics["format"].score
        (1.0, 1.0)
    """
    if not isinstance(partial_credit, bool):
        raise ConfigError(
            f"math reward: partial_credit must be True or False, got {partial_credit!r}"
        )
    try:
        gold = _gold_text(ground_truth)
    except ConfigError as exc:
        return EvaluateResult.invalid(f"ConfigError: {exc}")
    reply = last_reply(messages)
    if reply is None:
        return no_reply("math")
    text = reply.text
    found = _extract(text)
    if found.answer is None:
        reason = f"no final answer ({found.source}); expected {_short(gold)}"
        return _result(0.0, reason, found, partial=partial_credit)
    verdict = _compare(found.answer, gold)
    how = f"{found.source}, {verdict.method}" + (f"; {verdict.note}" if verdict.note else "")
    if verdict.match:
        reason = f"answer {_short(found.answer)} ({how}) equals expected {_short(gold)}"
        return _result(1.0, reason, found, correct=True, partial=partial_credit)
    score = PARTIAL_CREDIT if partial_credit and _partial(text, gold) else 0.0
    reason = f"answer {_short(found.answer)} ({how}) differs from expected {_short(gold)}"
    if score:
        reason += "; the expected number appears in the working"
    return _result(score, reason, found, partial=partial_credit)


def _result(
    score: float, reason: str, found: _Extraction, *, correct: bool = False, partial: bool = False
) -> EvaluateResult:
    found_answer = found.answer is not None
    metrics = {
        "answer_found": MetricResult(
            score=float(found_answer), success=found_answer, reason=f"source: {found.source}"
        ),
        "correct": MetricResult(score=float(correct), success=correct, reason=reason),
        "format": MetricResult(
            score=float(found.marked),
            success=found.marked,
            reason="answer marked with \\boxed{} or ####" if found.marked else "no answer marker",
        ),
    }
    if partial:
        awarded = not correct and score > 0
        metrics["partial"] = MetricResult(
            score=score if awarded else 0.0,
            success=awarded,
            reason="expected number in the working" if awarded else "no partial credit",
        )
    return EvaluateResult(score=score, reason=reason, metrics=metrics)
