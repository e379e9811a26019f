"""A taskset whose package exports its own Harness: the harness runs the agent's program."""

import verifiers.v1 as vf


class HarnessedTask(vf.Task[vf.TaskData]):
    @vf.reward
    async def done(self, trace: vf.Trace) -> float:
        return 1.0


class HarnessedTaskset(vf.Taskset[HarnessedTask]):
    def load(self) -> list[HarnessedTask]:
        return [HarnessedTask(vf.TaskData(prompt="Go."), self.config.task)]


class HarnessedHarness(vf.Harness[vf.HarnessConfig]):
    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data):
        raise NotImplementedError


__all__ = ["HarnessedHarness", "HarnessedTaskset"]
