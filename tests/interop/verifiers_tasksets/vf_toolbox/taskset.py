"""Find a fact with the notebook's lookup tool; some tasks also get a calculator."""

import verifiers.v1 as vf

from vf_toolbox.servers.broken import Broken
from vf_toolbox.servers.calculator import Calculator
from vf_toolbox.servers.notebook import Notebook, NotebookState
from vf_toolbox.servers.shouter import Shouter


class ToolboxData(vf.TaskData):
    facts: dict[str, str]
    key: str
    answer: str


class ToolboxTaskConfig(vf.TaskConfig):
    notebook: vf.ToolsetConfig = vf.ToolsetConfig()
    calculator: vf.ToolsetConfig | None = None
    broken: vf.ToolsetConfig | None = None


class ToolboxTask(vf.Task[ToolboxData, NotebookState, ToolboxTaskConfig]):
    @classmethod
    def toolsets(cls, config: ToolboxTaskConfig) -> list[vf.Toolset]:
        servers: list[vf.Toolset] = [Notebook(config.notebook)]
        if config.calculator is not None:
            servers.append(Calculator(config.calculator))
        if config.broken is not None:
            servers.append(Broken(config.broken))
        return servers

    @vf.reward
    async def found(self, trace: vf.Trace) -> float:
        return float(trace.last_reply == self.data.answer)

    @vf.metric
    async def lookups(self, trace: vf.Trace[ToolboxData, NotebookState]) -> float:
        return float(len(trace.state.lookups))

    @vf.metric
    async def tool_results(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))


class ToolboxConfig(vf.TasksetConfig):
    task: ToolboxTaskConfig = ToolboxTaskConfig()
    shouter: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class ToolboxTaskset(vf.Taskset[ToolboxTask, ToolboxConfig]):
    @classmethod
    def toolsets(cls, config: ToolboxConfig) -> list[vf.Toolset]:
        return [Shouter(config.shouter)]

    def load(self) -> list[ToolboxTask]:
        colours = ["red", "green", "blue"]
        tasks = []
        for i, colour in enumerate(colours):
            facts = {"colour": colour, "number": str(i * 7)}
            config = self.config.task
            if i % 2:  # odd tasks also get the calculator
                config = config.model_copy(update={"calculator": vf.ToolsetConfig()})
            data = ToolboxData(
                prompt=f"Task {i}: look up the fact 'colour' and answer with it alone.",
                facts=facts,
                key="colour",
                answer=colour,
            )
            tasks.append(ToolboxTask(data, config))
        return tasks
