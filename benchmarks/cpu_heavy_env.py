"""The `tools` environment with a CPU-heavy step, for `bench_ray_workers.py --step-cpu-ms`.

Each tool call and each final answer first spends ``step_cpu_ms`` of CPU in Python (holding the
GIL, as parsing, scoring or simulating in Python does), standing in for the heavy environments
that one process cannot keep up with: code checks, simulators, large observations.
"""

from __future__ import annotations

import time
from typing import Any

from rk_agent.envs.base import EpisodeState
from rk_agent.envs.tool import ToolResult
from rk_agent.envs.tools_env import ToolsEnv
from rk_agent.types import Message, ToolCall


def burn(cpu_ms: float) -> None:
    """Spend ``cpu_ms`` milliseconds of this thread's CPU."""
    end = time.thread_time() + cpu_ms / 1000
    while time.thread_time() < end:
        pass


class CpuHeavyToolsEnv(ToolsEnv):
    """`ToolsEnv`, each turn ``step_cpu_ms`` of CPU dearer."""

    def __init__(self, *, step_cpu_ms: float = 2.0, **kwargs: Any) -> None:
        self.step_cpu_ms = step_cpu_ms
        super().__init__(**kwargs)

    def call_tool(self, call: ToolCall, state: EpisodeState) -> ToolResult:
        burn(self.step_cpu_ms)
        return super().call_tool(call, state)

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        burn(self.step_cpu_ms)
        return super().respond(action, state)
