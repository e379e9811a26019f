"""A taskset whose scoring can fail: a reward that raises, rewards plugged by the config."""

import math
from typing import Literal

import verifiers.v1 as vf


class FailingConfig(vf.TaskConfig):
    mode: Literal["fine", "raises"] = "fine"


class FailingTask(vf.Task[vf.TaskData, vf.State, FailingConfig]):
    @vf.reward(weight=0.5)
    async def replied(self, trace: vf.Trace) -> float:
        return float(bool(trace.last_reply))

    @vf.reward(weight=0.5)
    async def parsed(self, trace: vf.Trace) -> float:
        if self.config.mode == "raises":
            raise ValueError(f"cannot parse {trace.last_reply!r}")
        return 1.0


async def needs_runtime(trace: vf.Trace, runtime: vf.Runtime) -> float:
    """A reward that reads the agent's box (plugged: config task.rewards)."""
    result = await runtime.run(["cat", "/answer.txt"], {})
    return float(result.stdout.strip() == trace.last_reply)


async def not_a_number(trace: vf.Trace) -> float:
    return math.nan


class FailingTasksetConfig(vf.TasksetConfig):
    task: FailingConfig = FailingConfig()


class FailingTaskset(vf.Taskset[FailingTask, FailingTasksetConfig]):
    def load(self) -> list[FailingTask]:
        return [FailingTask(vf.TaskData(prompt=f"Say {i}."), self.config.task) for i in range(3)]


__all__ = ["FailingTaskset"]
