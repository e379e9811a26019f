"""Rendering runs for people: the summary table and trajectories turn by turn (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rk_agent.cli.console import shown_text
from rk_agent.runs.summary import RunSummary
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.watch import WatchSignals
from rk_agent.terminal_text import terminal_text

__all__ = ["render_alarms", "render_summary", "render_trajectory"]


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_summary(summary: RunSummary, console: Console, title: str = "Summary") -> None:
    """Print the run summary as a table, under its title (a line of its own, never wrapped:
    it often holds a run's path, longer than the table is wide)."""
    console.print(shown_text(title, style="bold"), soft_wrap=True)
    table = Table(show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    er = summary.episode_reward
    rows = [
        ("episodes", f"{summary.episodes} ({summary.tasks} tasks x {summary.group_size})"),
        ("failed", str(summary.failed)),
        ("episode reward", f"mean {_fmt(er.mean)}  std {_fmt(er.std)}  (invalid {er.invalid})"),
        ("success rate", _fmt(summary.success_rate)),
        ("pass@k", ", ".join(f"{k}={v:.3f}" for k, v in summary.pass_at_k.items()) or "-"),
        (
            "step reward",
            f"mean {_fmt(summary.step_reward.mean)}  std {_fmt(summary.step_reward.std)}",
        ),
        ("turns per episode", _fmt(summary.turns_mean, 2)),
        ("tool calls", f"{summary.tool_calls} (success {_fmt(summary.tool_call_success_rate)})"),
        ("parse-error rate", _fmt(summary.parse_error_rate)),
        ("stop reasons", ", ".join(f"{k}={v}" for k, v in summary.stop_reasons.items())),
        ("failures", ", ".join(f"{k}={v}" for k, v in summary.failures.items()) or "none"),
        *(
            [("workers lost", ", ".join(f"{k}={v}" for k, v in summary.worker_failures.items()))]
            if summary.worker_failures
            else []
        ),
        *(
            ("reward error" if i == 0 else "", f"{count} x {error}")
            for i, (error, count) in enumerate(
                sorted(summary.reward_errors.items(), key=lambda kv: -kv[1])
            )
        ),
        ("tokens", f"prompt {summary.prompt_tokens}, completion {summary.completion_tokens}"),
        (
            "model latency",
            f"p50 {_fmt(summary.model_latency.p50)} s  p90 {_fmt(summary.model_latency.p90)} s  "
            f"p99 {_fmt(summary.model_latency.p99)} s",
        ),
        ("episode wall time", f"p50 {_fmt(summary.episode_wall_time.p50, 2)} s"),
    ]
    rows.extend((f"  {name}", _fmt(mean)) for name, mean in summary.metric_means.items())
    if summary.watch is not None and summary.watch.groups:
        rows.extend(_watch_rows(summary.watch, summary.group_size))
    for name, text in rows:  # plain text: reward names and errors come from users
        table.add_row(shown_text(name), shown_text(text))
    console.print(table)
    render_alarms(summary, console)


def render_alarms(summary: RunSummary, console: Console) -> None:
    """Print the alarms the run's signals raised, one warning line each (none: nothing)."""
    for alarm in summary.alarms:
        console.print(shown_text(f"warning: {alarm.message}", style="yellow"))


def _watch_rows(w: WatchSignals, group_size: int) -> list[tuple[str, str]]:
    """The watch's signals (what GRPO would learn from these groups), as summary rows."""
    shares = ", ".join(f"{name} {share:.2f}" for name, share in w.component_shares.items())
    spread = (
        f"{_fmt(w.zero_spread)} (all fail {_fmt(w.zero_spread_all_fail)}, "
        f"all pass {_fmt(w.zero_spread_all_pass)})"
        if group_size >= 2
        else "- (one episode per task; --group-size 2 or more shows the spread)"
    )
    return [
        ("zero-spread groups", spread),
        ("reward spread in groups", _fmt(w.reward_group_std)),
        ("reward shares", shares or "-"),
        (
            "distinct answers per group",
            f"{_fmt(w.distinct_answers, 2)} (one answer: {_fmt(w.single_answer_groups)})",
        ),
        (
            "completion tokens",
            f"{_fmt(w.completion_tokens_mean, 1)} per episode (truncated {_fmt(w.truncated)})",
        ),
        ("tool calls per episode", _fmt(w.tool_calls_mean, 2)),
        ("invalid rewards", f"{w.invalid_rewards} (NaN or infinite {w.nan_rewards})"),
    ]


_ROLE_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "yellow"}


def render_trajectory(trajectory: Trajectory, console: Console) -> None:
    """Print one episode turn by turn: messages, tool calls, rewards and how it ended."""
    parts: list[Text | Table] = []
    for message in trajectory.opening_messages:
        parts.append(_message_text(message.role, message.text))
    for turn in trajectory.turns:
        header = shown_text(f"turn {turn.index}  reward {turn.reward:+.3f}", style="bold")
        if turn.parse_error:
            header.append(terminal_text(f"  parse error: {turn.parse_error}"), style="red")
        parts.append(header)
        text = turn.assistant.text
        for call in turn.assistant.tool_calls or []:
            text += f"\n-> {call.function.name}({call.function.arguments})"
        parts.append(_message_text("assistant", text))
        for message in turn.environment:
            parts.append(_message_text(message.role, message.text))
    ending = f"stop: {trajectory.stop_reason.value}"
    if trajectory.episode is not None:
        ending += f"   episode reward {trajectory.episode.score:.3f}"
        if trajectory.episode.reason:
            ending += f" ({trajectory.episode.reason})"
    if trajectory.failure is not None:
        ending += f"   failure: {trajectory.failure.kind.value}: {trajectory.failure.message}"
    parts.append(shown_text(ending, style="bold magenta"))
    title = f"episode {trajectory.id}  task {trajectory.task.id}  seed {trajectory.seed}"
    console.print(Panel(Group(*parts), title=title, title_align="left"))


def _message_text(role: str, content: str) -> Text:
    text = shown_text(f"[{role}] ", style=_ROLE_STYLE.get(role, ""))
    text.append(terminal_text(content))
    return text
