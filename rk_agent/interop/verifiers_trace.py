"""A verifiers v1 `Trace` from an rk-agent conversation, and its score as an `EvaluateResult`.

verifiers scores a rollout from its `Trace` (``verifiers.v1.trace``): the message graph
(`MessageNode`s, each linked to its predecessor; the model's replies marked ``sampled``), the
tools offered, the task's data and the rollout's shared state. An rk-agent episode is one
branch of that graph: `build_trace` writes the conversation into it, `score_trace` runs the
task's own ``Task.score`` on it and reads back what it recorded:

- the score is ``trace.reward``, the sum of each reward's score times its weight (what
  verifiers trains on);
- every reward and metric is a component metric of the result, and each reward's weight is in
  ``weights`` (metrics have none: they are recorded, not summed);
- a reward that raises, or records a number that is not finite, makes the score invalid with
  the reason, never a 0; so does a reward that needs a ``runtime`` (the box a verifiers harness
  runs the agent in), which rk-agent's episodes do not have: verifiers itself skips such
  rewards when it scores without one, which would quietly leave them out. A metric that needs
  one is an invalid metric, and the score stays valid.

Opening messages go the other way: `opening_messages` is the conversation a task's data opens
(its ``system_prompt``, then its ``prompt``, a text or messages).

Everything here imports verifiers lazily (``import verifiers.v1`` takes seconds), when called.

Main names: `opening_messages`, `build_trace`, `score_trace`, `requires_runtime`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from rk_agent.types import EvaluateResult, Message, MetricResult, ScoreFault

__all__ = ["build_trace", "opening_messages", "requires_runtime", "score_trace"]


def requires_runtime(fn: Callable[..., Any]) -> bool:
    """Whether a verifiers hook needs a ``runtime``: it takes one without a default (the rule
    ``Task.score`` applies to skip such signals when it has none)."""
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


def opening_messages(data: Any) -> list[Message] | None:
    """The conversation a task's data opens: its system prompt, then its prompt (a text, or
    messages in verifiers' types); ``None`` when it has no prompt (the user opens the
    conversation: a user-simulating ``Env`` plays that part)."""
    if data.prompt is None:
        return None
    out: list[Message] = []
    if data.system_prompt is not None:
        out.append(Message(role="system", content=data.system_prompt))
    if isinstance(data.prompt, str):
        out.append(Message(role="user", content=data.prompt))
        return out
    for message in data.prompt:
        out.append(_from_verifiers(message))
    return out


def _from_verifiers(message: Any) -> Message:
    dumped = message.model_dump(mode="json", exclude_none=True)
    dumped.pop("provider_state", None)
    calls = dumped.pop("tool_calls", None)
    if calls:
        dumped["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
    return Message.model_validate(dumped)


def _to_verifiers(message: Message) -> Any:
    from verifiers.v1 import types as vf_types

    content: Any = message.content if message.content is not None else ""
    if isinstance(content, list):
        content = vf_types.content_to_parts(content)
    if message.role == "system":
        return vf_types.SystemMessage(content=content)
    if message.role == "user":
        return vf_types.UserMessage(content=content)
    if message.role == "tool":
        return vf_types.ToolMessage(
            tool_call_id=message.tool_call_id or "", content=content, name=message.name
        )
    calls = [
        vf_types.ToolCall(
            id=call.id or f"call_{i}",
            name=call.function.name,
            arguments=call.function.arguments,
        )
        for i, call in enumerate(message.tool_calls or [])
    ]
    return vf_types.AssistantMessage(
        content=message.text if message.content is not None else None,
        reasoning_content=message.reasoning_content,
        tool_calls=calls or None,
    )


def _tools(schemas: Sequence[dict[str, Any]]) -> list[Any]:
    from verifiers.v1 import types as vf_types

    out = []
    for schema in schemas:
        function = schema.get("function", schema)
        out.append(
            vf_types.Tool(
                name=function["name"],
                description=function.get("description") or "",
                parameters=function.get("parameters") or {},
            )
        )
    return out


def new_trace(task: Any) -> Any:
    """An empty trace of one rollout of ``task`` (a verifiers ``Task``): its data, identity
    and fresh state of the task's state type; what ``Task.setup`` is handed."""
    from verifiers.v1.configs.agent import AgentConfig
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    return Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=AgentConfig(), name="rk-agent"),
        state=state_cls(type(task))(),
    )


def build_trace(
    trace: Any,
    messages: Sequence[Message],
    opening: int,
    tools: Sequence[dict[str, Any]],
) -> Any:
    """Write the conversation into ``trace`` (from `new_trace`) as one branch, replacing what
    an earlier call wrote; its messages after the first ``opening`` that the assistant wrote
    are the sampled ones. It stops as ``agent_completed`` when the last message is an answer
    (an assistant message without tool calls), else as ``max_turns``."""
    from verifiers.v1.graph import MessageNode

    nodes = []
    for index, message in enumerate(messages):
        nodes.append(
            MessageNode(
                parent=index - 1 if index else None,
                message=_to_verifiers(message),
                sampled=index >= opening and message.role == "assistant",
                tools=_tools(tools) if index == 0 else [],
            )
        )
    trace.nodes = nodes
    trace.tools = _tools(tools)
    trace.rewards = {}
    trace.metrics = {}
    last = messages[-1] if messages else None
    answered = last is not None and last.role == "assistant" and not last.tool_calls
    trace.stop_condition = None
    trace.stop("agent_completed" if answered else "max_turns")
    return trace


async def score_trace(task: Any, trace: Any) -> EvaluateResult:
    """Score ``trace`` with ``task``'s own ``Task.score`` (no runtime), as described in the
    module docstring."""
    rewards = {fn.__name__: fn for fn in task.hooks("reward")}
    metrics = {fn.__name__: fn for fn in task.hooks("metric")}
    judges = task.plugged_judges()
    boxed = [name for name, fn in rewards.items() if requires_runtime(fn)]
    boxed += [judge.reward_name for judge in judges if requires_runtime(judge.score)]
    try:
        await task.score(trace, None)
    except Exception as exc:  # the task's scoring failed: not a score, not a 0
        return EvaluateResult.invalid(f"{exc}" if str(exc) else type(exc).__name__)
    out: dict[str, MetricResult] = {}
    weights: dict[str, float] = {}
    problems: list[str] = []
    fault: ScoreFault | None = None
    for name, reward in trace.rewards.items():
        if reward is None:
            problems.append(f"reward {name!r} recorded nothing")
            continue
        if not math.isfinite(reward.score) or not math.isfinite(reward.weight):
            problems.append(f"reward {name!r} recorded {reward.score!r} (weight {reward.weight!r})")
            fault = ScoreFault.NON_FINITE
            continue
        weights[name] = reward.weight
        out[name] = MetricResult(score=reward.score, reason=f"reward, weight {reward.weight:g}")
    for name, value in trace.metrics.items():
        key = name if name not in out else f"{name}.metric"
        if value is None or not math.isfinite(value):
            out[key] = MetricResult(
                score=0.0, is_score_valid=False, reason=f"metric recorded {value!r}"
            )
        else:
            out[key] = MetricResult(score=float(value), reason="metric, not in the score")
    for name, fn in metrics.items():
        if requires_runtime(fn):
            out[name] = MetricResult(
                score=0.0,
                is_score_valid=False,
                reason="needs a runtime (the box a verifiers harness runs the agent in), "
                "which rk-agent's episodes do not have",
            )
    if boxed:
        problems.insert(
            0,
            f"reward {', '.join(repr(n) for n in boxed)} needs a runtime (the box a verifiers "
            "harness runs the agent in), which rk-agent's episodes do not have; verifiers "
            "would leave it out of the score",
        )
    if problems:
        error = "; ".join(problems)
        return EvaluateResult(
            score=0.0, is_score_valid=False, error=error, reason=error, metrics=out, fault=fault
        )
    score = trace.reward
    if not math.isfinite(score):
        return EvaluateResult.invalid(f"the rewards sum to {score!r}", fault=ScoreFault.NON_FINITE)
    parts = ", ".join(f"{n} {out[n].score:g} x {w:g}" for n, w in weights.items())
    return EvaluateResult(
        score=float(score),
        reason=f"{score:g} = {parts}" if parts else "the task has no rewards",
        metrics=out,
        weights=weights,
    )
