"""Where a `@tool` runs: on a thread of its own, unless it declares it never blocks (inline)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from rk_agent.envs import tool
from rk_agent.envs.tool import Tool


def threads_of(runs: int, inline: bool = False) -> list[bool]:
    """For each of ``runs`` calls of a fresh tool: whether it ran in the caller's thread."""
    seen: list[int] = []

    def where() -> str:
        """Say where it ran."""
        seen.append(threading.get_ident())
        return "here"

    made = tool(inline=inline)(where)
    for _ in range(runs):
        assert made.run({}).content == "here"
    return [ident == threading.get_ident() for ident in seen]


def test_a_tool_runs_on_a_thread_unless_declared_inline_however_quick_it_is() -> None:
    assert threads_of(12) == [False] * 12  # the default: the safe choice, whatever its times


def test_inline_false_always_runs_on_a_thread_so_the_timeout_holds() -> None:
    assert threads_of(12, inline=False) == [False] * 12

    @tool(timeout_s=0.05, inline=False)
    def hang() -> str:
        """Never answers in time."""
        time.sleep(0.3)
        return "late"

    result = hang.run({})
    assert (result.ok, result.error_kind) == (False, "timeout")


def test_a_tool_that_hangs_past_its_timeout_does_not_keep_the_process_from_exiting() -> None:
    script = (
        "import threading\n"
        "from rk_agent.envs import tool\n"
        "@tool(timeout_s=0.2, inline=False)\n"
        "def hang() -> str:\n"
        '    """Never returns."""\n'
        "    threading.Event().wait()\n"
        "    return 'never'\n"
        "print(hang.run({}).error_kind, flush=True)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (finished.returncode, finished.stdout) == (0, "timeout\n"), finished.stderr


def test_inline_true_runs_in_the_callers_thread_from_the_start() -> None:
    assert threads_of(3, inline=True) == [True] * 3


def test_a_tool_that_waits_stays_on_its_thread() -> None:
    seen: list[bool] = []

    @tool
    def wait() -> str:
        """Wait on something outside."""
        seen.append(threading.current_thread() is threading.main_thread())
        time.sleep(0.03)  # wall time over the 20 ms bound, almost no CPU
        return "done"

    for _ in range(10):
        wait.run({})
    assert seen == [False] * 10


def test_async_tools_never_run_inline() -> None:
    @tool(inline=True)
    async def ping() -> str:
        """Answer."""
        return "pong"

    assert ping.run({}).content == "pong"
    assert not ping.inline


@pytest.mark.parametrize("inline", [True, False])
def test_errors_read_the_same_wherever_it_runs(inline: bool) -> None:
    @tool(inline=inline)
    def explode() -> str:
        """Fail."""
        raise RuntimeError("boom")

    results = [explode.run({}) for _ in range(10)]
    assert {(r.ok, r.error_kind, r.content) for r in results} == {
        (False, "exception", "Error: tool 'explode' failed: RuntimeError: boom")
    }


def test_the_built_in_tools_declare_they_never_block() -> None:
    from rk_agent.envs import toolbox

    tools = [v for v in vars(toolbox).values() if isinstance(v, Tool)]
    assert tools and all(t.inline for t in tools)
