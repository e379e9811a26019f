"""A taskset whose package exports an Env: the env owns the loop (a game engine plays the user)."""

import verifiers.v1 as vf


class LoopData(vf.TaskData):
    pass


class LoopTask(vf.Task[LoopData]):
    @vf.reward
    async def done(self, trace: vf.Trace) -> float:
        return 1.0


class LoopTaskset(vf.Taskset[LoopTask]):
    def load(self) -> list[LoopTask]:
        return [LoopTask(LoopData(prompt="Play."), self.config.task)]


class LoopEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class LoopEnv(vf.Env[LoopEnvConfig]):
    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        raise NotImplementedError


__all__ = ["LoopEnv", "LoopTaskset"]
