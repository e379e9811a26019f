"""A taskset whose task setup writes into the agent's box: it needs a runtime."""

import verifiers.v1 as vf


class BoxTask(vf.Task[vf.TaskData]):
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        await runtime.write("/task.txt", b"data")

    @vf.reward
    async def done(self, trace: vf.Trace) -> float:
        return 1.0


class BoxTaskset(vf.Taskset[BoxTask]):
    def load(self) -> list[BoxTask]:
        return [BoxTask(vf.TaskData(prompt="Read /task.txt."), self.config.task)]


__all__ = ["BoxTaskset"]
