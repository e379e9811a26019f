"""`@reward_function`: turn a plain Python function into a reward.

Main names:
    reward_function: the decorator (bare or with arguments).
    RewardFn / AsyncRewardFn: what it returns (the function, still callable as before).
    standardize_result: the output rules, usable on their own.
    is_reward_function: whether a callable is already decorated.

What the decorator adds around the user's function, in order:

1. **Call shapes.** A function taking ``messages`` gets the conversation (dicts become `Message`
   where it annotates ``Message``; ``original_messages`` defaults to ``messages[:-1]``). A function
   taking ``response`` (and optionally ``prompt``, ``answer``, other fields) instead gets the last
   assistant text as ``response`` and the last user text as ``prompt``, as in TRL-style scripts.
   Keyword arguments the function does not accept are dropped unless it has ``**kwargs``.
2. **Output rules** (`standardize_result`): an `EvaluateResult`, a number or bool, a
   ``(score, {name: float | MetricResult | dict})`` tuple or a dict with ``score`` all become an
   `EvaluateResult`.
3. **Failures are data.** An exception inside the function, or an output that fits no rule,
   gives ``EvaluateResult(is_score_valid=False, error="ValueError: ...")`` and is logged; never a
   silent valid 0.0. Misuse is not data: calling the reward with arguments that do not fit its
   signature, or a `ConfigError` / `RewardInputError` the function raises about its options
   (``strictness="fuzzy"``), propagates at once, since every sample would fail the same way.

Everything that can be worked out from the signature is worked out once, at decoration time, so
the per-call overhead stays in the low microseconds (see ``benchmarks/bench_decorator.py``).
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import threading
import types
import typing
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

from pydantic import ValidationError

from rk_agent.errors import ConfigError, RewardInputError, did_you_mean
from rk_agent.rewards.deploy_targets import get_deploy_target
from rk_agent.types import EvaluateResult, Message, MetricResult, ScoreFault

__all__ = [
    "AsyncRewardFn",
    "RewardFn",
    "RewardSpec",
    "check_options",
    "is_reward_function",
    "reward_function",
    "standardize_result",
]

logger = logging.getLogger("rk_agent.rewards")

_MESSAGE_PARAMS = ("messages", "original_messages", "ground_truth")
_SIMPLE_PARAMS = ("response", "completion")
_ANSWER_PARAMS = ("answer", "expected_response", "solution")


@dataclass(frozen=True)
class RewardSpec:
    """What rk-agent knows about a decorated reward.

    Attributes:
        name: the reward's name (used in logs, TRL metric names, the registry).
        description: the first line of the docstring.
        requirements: pip requirements needed to run it elsewhere (e.g. on Fireworks).
        is_async: whether calling it returns an awaitable.
    """

    name: str
    description: str = ""
    requirements: tuple[str, ...] = ()
    is_async: bool = False


class RewardFn(Protocol):
    """A decorated synchronous reward: call it, get an `EvaluateResult`."""

    __name__: str
    __wrapped__: Callable[..., Any]
    reward_spec: RewardSpec

    def __call__(self, *args: Any, **kwargs: Any) -> EvaluateResult: ...

    def deploy(
        self,
        name: str | None = None,
        description: str | None = None,
        force: bool = False,
        *,
        target: str = "fireworks",
        **options: Any,
    ) -> Any: ...


class AsyncRewardFn(Protocol):
    """A decorated ``async def`` reward: await the call, get an `EvaluateResult`."""

    __name__: str
    __wrapped__: Callable[..., Any]
    reward_spec: RewardSpec

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[EvaluateResult]: ...

    def deploy(
        self,
        name: str | None = None,
        description: str | None = None,
        force: bool = False,
        *,
        target: str = "fireworks",
        **options: Any,
    ) -> Any: ...


AnyRewardFn = RewardFn | AsyncRewardFn
"""Either kind of decorated reward."""


class _Decorator(Protocol):
    @overload
    def __call__(self, func: Callable[..., Awaitable[Any]], /) -> AsyncRewardFn: ...
    @overload
    def __call__(self, func: Callable[..., Any], /) -> RewardFn: ...


@overload
def reward_function(func: Callable[..., Awaitable[Any]], /) -> AsyncRewardFn: ...
@overload
def reward_function(func: Callable[..., Any], /) -> RewardFn: ...
@overload
def reward_function(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requirements: Sequence[str] = (),
) -> _Decorator: ...


def reward_function(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requirements: Sequence[str] = (),
) -> Any:
    """Make a plain function a reward that returns an `EvaluateResult`.

    Works bare (``@reward_function``) and with arguments
    (``@reward_function(name="math", requirements=["sympy"])``). The result is still a function:
    positional calls work as before, ``__wrapped__`` is the original, and ``inspect`` sees the
    original signature.

    Args:
        func: the function (when used bare).
        name: the reward's name; defaults to the function's ``__name__``.
        description: one line for listings; defaults to the docstring's first line.
        requirements: pip requirements for running it elsewhere (Fireworks evaluators).

    Example:
        >>> @reward_function
        ... def exact(response: str, answer: str) -> float:
        ...     return float(response.strip() == answer)
        >>> exact(messages=[{"role": "user", "content": "2+2?"},
        ...                 {"role": "assistant", "content": "4"}], answer="4").score
        1.0
    """

    def decorate(f: Callable[..., Any]) -> Any:
        return _wrap(f, name=name, description=description, requirements=tuple(requirements))

    if func is None:
        return decorate
    if not callable(func):
        raise RewardInputError(
            f"@reward_function expects a function, got {type(func).__name__}. "
            "Use it as @reward_function or @reward_function(name=...)."
        )
    return decorate(func)


def is_reward_function(obj: object) -> bool:
    """Whether ``obj`` was made by `reward_function` (and so returns an `EvaluateResult`)."""
    return isinstance(getattr(obj, "reward_spec", None), RewardSpec)


# --------------------------------------------------------------------------------------------
# Working out the call shape once


@dataclass(frozen=True)
class _CallPlan:
    """How to turn the caller's arguments into the function's, computed at decoration time."""

    name: str
    accepted: frozenset[str]  # keyword names the function takes
    var_keyword: bool  # has **kwargs
    positions: Mapping[str, int]  # parameter name -> positional index
    coerce: Mapping[str, str]  # parameter -> "message" | "messages" | "dicts"
    simple: bool  # takes `response` instead of `messages`
    response_param: str | None
    wants_original: bool
    answer_param: str | None  # takes `answer`-like input but not `ground_truth`


def _wrap(
    func: Callable[..., Any], *, name: str | None, description: str | None, requirements: tuple
) -> Any:
    if is_reward_function(func):
        return func
    plan = _known_plan(func, name or str(getattr(func, "__name__", type(func).__name__)))
    is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - async callable objects count too
    )
    doc = inspect.getdoc(func) or ""
    spec = RewardSpec(
        name=plan.name,
        description=description if description is not None else (doc.splitlines() or [""])[0],
        requirements=requirements,
        is_async=is_async,
    )

    if is_async:

        async def async_wrapper(*args: Any, **kwargs: Any) -> EvaluateResult:
            call_args, call_kwargs = _prepare(plan, args, kwargs)
            try:
                out = await func(*call_args, **call_kwargs)
            except Exception as exc:
                return _failed(plan, exc)
            return standardize_result(out, name=plan.name)

        wrapper: Any = async_wrapper
    else:

        def sync_wrapper(*args: Any, **kwargs: Any) -> EvaluateResult:
            call_args, call_kwargs = _prepare(plan, args, kwargs)
            try:
                out = func(*call_args, **call_kwargs)
            except Exception as exc:
                return _failed(plan, exc)
            return standardize_result(out, name=plan.name)

        wrapper = sync_wrapper

    functools.update_wrapper(wrapper, func)
    wrapper.__name__ = plan.name
    wrapper.reward_spec = spec
    wrapper.name = plan.name
    wrapper.requirements = list(requirements)
    wrapper.deploy = functools.partial(_deploy, wrapper)
    return wrapper


def check_options(reward: Any, options: Mapping[str, Any]) -> None:
    """Refuse options bound to a reward (``RewardFunction("format", tags=...)``, a config's
    ``kwargs:``) that it does not take.

    An option the reward has no parameter for is refused when the reward takes no
    ``**kwargs``, and also when it does but the name is close to one it has (``tagz`` next to
    ``tags``): a misspelt option must not be silently swallowed.

    Raises:
        ConfigError: the option, the closest one, and what the reward takes.
    """
    func = getattr(reward, "__wrapped__", reward)
    name = getattr(getattr(reward, "reward_spec", None), "name", getattr(func, "__name__", "?"))
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return  # nothing to check against
    var_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for option in options:
        if option in named:
            continue
        hint = did_you_mean(option, named)
        if var_keyword and not hint:
            continue
        raise ConfigError(
            f"reward {name!r} has no option {option!r}.{hint} It takes: {', '.join(named)}."
        )


_plans: dict[tuple[Any, ...], _CallPlan] = {}


def _known_plan(func: Callable[..., Any], name: str) -> _CallPlan:
    """`_plan`, worked out once per function definition: closures made by one ``def`` (every
    environment builds its combined rewards with `combine`, whose wrapper is such a closure)
    share their signature and, when their annotations are strings (postponed evaluation, read
    in the module's globals), their type hints. Reading both took 0.2 ms an environment."""
    code = getattr(func, "__code__", None)
    annotations = getattr(func, "__annotations__", None)
    if (
        not inspect.isfunction(func)
        or code is None
        or not isinstance(annotations, dict)
        or not all(isinstance(hint, str) for hint in annotations.values())
        or hasattr(func, "__wrapped__")  # inspect.signature would follow it
        or hasattr(func, "__signature__")
    ):
        return _plan(func, name)
    key = (code, func.__module__, name, tuple(annotations.items()))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _plan(func, name)
    return plan


def _plan(func: Callable[..., Any], name: str) -> _CallPlan:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise RewardInputError(f"cannot read the signature of reward {name!r}: {exc}") from exc
    params = list(signature.parameters.values())
    var_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    accepted = frozenset(p.name for p in named if p.kind is not p.POSITIONAL_ONLY)
    positions = {
        p.name: i
        for i, p in enumerate(params)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    hints = _type_hints(func)
    coerce = {
        param: kind
        for param in _MESSAGE_PARAMS
        if param in positions or param in accepted
        if (kind := _coercion_kind(hints.get(param))) is not None
    }
    names = {p.name for p in named}
    response_param = next((p for p in _SIMPLE_PARAMS if p in names), None)
    simple = response_param is not None and "messages" not in names
    return _CallPlan(
        name=name,
        accepted=accepted,
        var_keyword=var_keyword,
        positions=positions,
        coerce=coerce,
        simple=simple,
        response_param=response_param,
        wants_original="original_messages" in names,
        answer_param=next((p for p in _ANSWER_PARAMS if p in names), None)
        if "ground_truth" not in names
        else None,
    )


def _type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    target = func if inspect.isfunction(func) or inspect.ismethod(func) else func.__call__  # type: ignore[operator]
    try:
        return typing.get_type_hints(target)
    except Exception:  # unresolvable forward references: no coercion, the call still works
        return getattr(target, "__annotations__", {}) or {}


def _coercion_kind(annotation: Any) -> str | None:
    """``"message"`` / ``"messages"`` when the annotation names `Message`, ``"dicts"`` for dicts."""
    if annotation is None:
        return None
    if annotation is Message:
        return "message"
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [_coercion_kind(arg) for arg in typing.get_args(annotation)]
        return next((k for k in kinds if k is not None), None)
    if origin in (list, tuple, Sequence):
        args = typing.get_args(annotation)
        if args and args[0] is Message:
            return "messages"
        if args and (args[0] is dict or typing.get_origin(args[0]) is dict):
            return "dicts"
    return None


# --------------------------------------------------------------------------------------------
# Per call: keep this path short


def _prepare(
    plan: _CallPlan, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if plan.simple:
        args, kwargs = _simple_call(plan, args, kwargs)
    elif plan.wants_original and _argument(plan, args, kwargs, "original_messages") is None:
        messages = _argument(plan, args, kwargs, "messages")
        if isinstance(messages, (list, tuple)):
            position = plan.positions.get("original_messages")
            if position is not None and position < len(args):
                args = (*args[:position], list(messages[:-1]), *args[position + 1 :])
            else:
                kwargs = {**kwargs, "original_messages": list(messages[:-1])}
    answer = plan.answer_param
    if answer and answer not in kwargs and "ground_truth" in kwargs:
        position = plan.positions.get(answer)
        if position is None or position >= len(args):
            kwargs = {**kwargs, answer: kwargs["ground_truth"]}
    if not plan.var_keyword and not kwargs.keys() <= plan.accepted:
        kwargs = {k: v for k, v in kwargs.items() if k in plan.accepted}
    if plan.coerce:
        args, kwargs = _coerce(plan, args, kwargs)
    return args, kwargs


def _argument(plan: _CallPlan, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    position = plan.positions.get(name)
    if position is not None and position < len(args):
        return args[position]
    return None


def _simple_call(
    plan: _CallPlan, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Feed a ``response``-style function from ``messages``."""
    assert plan.response_param is not None
    messages = kwargs.get("messages")
    if messages is None and args and _looks_like_messages(args[0]):
        messages, args = args[0], args[1:]
    if messages is None or plan.response_param in kwargs:
        return args, kwargs
    kwargs = dict(kwargs)
    del kwargs["messages"]
    try:
        conversation = Message.coerce_list(messages)
    except Exception as exc:
        raise RewardInputError(f"reward {plan.name!r}: messages are not valid: {exc}") from exc
    kwargs[plan.response_param] = _last_text(conversation, "assistant", plan.name, required=True)
    if "prompt" not in kwargs:
        kwargs["prompt"] = _last_text(conversation, "user", plan.name, required=False)
    return args, kwargs


def _looks_like_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], (dict, Message))


def _last_text(conversation: list[Message], role: str, name: str, *, required: bool) -> str:
    for message in reversed(conversation):
        if message.role == role:
            return message.text
    if required:
        raise RewardInputError(
            f"reward {name!r} scores a `response`, but the messages have no {role} message. "
            f"Pass the conversation including the {role}'s reply, or call it with response=..."
        )
    return ""


def _coerce(
    plan: _CallPlan, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    new_args: list[Any] | None = None
    for param, kind in plan.coerce.items():
        position = plan.positions.get(param)
        if param in kwargs:
            value = kwargs[param]
        elif position is not None and position < len(args):
            value = args[position]
        else:
            continue
        converted = _convert(plan.name, param, kind, value)
        if converted is value:
            continue
        if param in kwargs:
            kwargs = {**kwargs, param: converted}
        else:
            assert position is not None
            new_args = new_args or list(args)
            new_args[position] = converted
    return (tuple(new_args) if new_args is not None else args), kwargs


def _convert(name: str, param: str, kind: str, value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value  # ground_truth is often a plain string; leave it alone
    try:
        if kind == "message":
            return Message.coerce(value)
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list of messages, got {type(value).__name__}")
        if kind == "messages":
            for item in value:  # a loop, not all(): no generator on every call
                if not isinstance(item, Message):
                    return Message.coerce_list(value)
            return value
        # kind == "dicts": the function wants plain dicts
        return [v.to_openai() if isinstance(v, Message) else v for v in value]
    except Exception as exc:
        raise RewardInputError(
            f"reward {name!r}: argument {param!r} is not in the OpenAI message format: {exc}"
        ) from exc


def _failed(plan: _CallPlan, exc: Exception) -> EvaluateResult:
    name = plan.name
    if isinstance(exc, (ConfigError, RewardInputError)):
        raise exc  # misuse of the reward's options: fail fast, every sample would fail alike
    if isinstance(exc, TypeError) and exc.__traceback__ and exc.__traceback__.tb_next is None:
        # Raised by the call itself (missing or unexpected argument), not inside the function:
        # a bug in the caller, which must not pass for a bad sample.
        raise RewardInputError(
            f"reward {name!r} cannot be called with these arguments: {exc}. "
            f"It takes: {', '.join(sorted(plan.accepted)) or '(no named parameters)'}."
        ) from exc
    error = f"{type(exc).__name__}: {exc}"
    _log_raised(name, error, exc)
    return EvaluateResult.invalid(
        error, reason=f"reward {name!r} raised {error}", fault=_non_finite_fault(exc)
    )


def _non_finite_fault(exc: Exception) -> ScoreFault | None:
    """`ScoreFault.NON_FINITE` when ``exc`` is pydantic refusing a NaN or infinite number (the
    function built ``EvaluateResult(score=math.nan)``), by the error's type, not its text."""
    if isinstance(exc, ValidationError) and any(e["type"] == "finite_number" for e in exc.errors()):
        return ScoreFault.NON_FINITE
    return None


_RAISED: Counter[tuple[str, str]] = Counter()
_RAISED_LOCK = threading.Lock()
_RAISED_KEPT = 4096  # distinct errors remembered; past it the tally starts again


def _log_raised(name: str, error: str, exc: Exception) -> None:
    """Log a reward's error once with its traceback, then again (without) at the 10th, 100th,
    1000th ... time: a reward that raises on every sample must not flood the log."""
    with _RAISED_LOCK:
        if len(_RAISED) >= _RAISED_KEPT and (name, error) not in _RAISED:
            _RAISED.clear()
        _RAISED[name, error] += 1
        count = _RAISED[name, error]
    if count == 1:
        logger.warning("reward %r raised %s", name, error, exc_info=exc)
    elif math.log10(count).is_integer():
        logger.warning("reward %r raised %s (%d times so far)", name, error, count)


def standardize_result(out: Any, *, name: str = "reward") -> EvaluateResult:
    """Turn what a reward function returned into an `EvaluateResult`.

    Accepted: an `EvaluateResult`; a number or bool; a ``(score, metrics)`` tuple whose metrics
    map names to floats, bools, `MetricResult` or dicts; a dict with a ``score`` key. Anything
    else, or a non-finite score, gives an invalid result whose ``error`` says what came back.
    """
    if isinstance(out, EvaluateResult):
        return out
    if isinstance(out, bool):
        return EvaluateResult(score=float(out))
    if isinstance(out, (int, float)) or _is_numpy_number(out):
        score = float(out)
        if math.isfinite(score):
            return EvaluateResult(score=score)
        return _bad_output(name, f"a non-finite score ({score})", ScoreFault.NON_FINITE)
    try:
        if isinstance(out, tuple) and len(out) == 2:
            score, metrics = out
            if not isinstance(metrics, Mapping):
                return _bad_output(name, f"a tuple whose second item is {type(metrics).__name__}")
            return EvaluateResult(score=float(score), metrics=dict(metrics))
        if isinstance(out, Mapping) and "score" in out:
            return EvaluateResult.model_validate(dict(out))
        if isinstance(out, MetricResult):
            return EvaluateResult(score=out.score, reason=out.reason, metrics={name: out})
    except Exception as exc:
        what = f"{_short(out)}, which does not validate: {exc}"
        return _bad_output(name, what, _non_finite_fault(exc))
    return _bad_output(name, _short(out))


def _is_numpy_number(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.ndim == 0


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


def _bad_output(name: str, what: str, fault: ScoreFault | None = None) -> EvaluateResult:
    template = (
        "RewardOutputError: reward %r returned %s; expected an EvaluateResult, a number, a "
        "(score, {name: score}) tuple or a dict with 'score'"
    )
    # What the reward returned may hold a model's text: an argument, never the template.
    logger.warning(template, name, what)
    return EvaluateResult.invalid(template % (name, what), fault=fault)


def _deploy(
    reward: Any,
    name: str | None = None,
    description: str | None = None,
    force: bool = False,
    *,
    target: str = "fireworks",
    **options: Any,
) -> Any:
    """``reward.deploy(...)``: create or update where the reward runs (a Fireworks evaluator).

    ``name`` is the evaluator id (default: the reward's name); ``force`` replaces an evaluator
    of that id whose code differs. ``target`` names the deploy target
    (`rk_agent.rewards.deploy_targets`); ``"fireworks"`` is
    `rk_agent.fireworks.evaluators.deploy_reward`, which takes ``client``, ``wait``,
    ``requirements``, ... as other keyword arguments, and Reward Kit's ``account_id``,
    ``auth_token`` and ``providers`` (accepted, ignored with a warning: evaluators have no such
    field). Returns what the target returns (Fireworks: a `Deployment`, whose ``str()`` is the
    evaluator id Reward Kit's ``deploy`` returns).
    """
    # Looked up by name: the reward API does not import the packages that deploy it.
    deploy = get_deploy_target(target)
    return deploy(reward, evaluator_id=name, description=description, force=force, **options)
