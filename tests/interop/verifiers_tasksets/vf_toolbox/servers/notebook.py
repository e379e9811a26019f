"""Per-rollout tools over the task's facts; every lookup is kept in the rollout's state."""

import verifiers.v1 as vf
from pydantic import Field


class NotebookState(vf.State):
    lookups: list[str] = Field(default_factory=list)


class Notebook(vf.Toolset[vf.ToolsetConfig, NotebookState]):
    TOOL_PREFIX = "notebook"

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.facts: dict[str, str] = {}

    async def setup_task(self, task) -> None:
        self.facts = dict(task.facts)

    @vf.tool
    def lookup(self, key: str) -> str:
        """Look a fact up by its key."""
        self.state.lookups.append(key)
        return self.facts.get(key, f"no fact {key!r}")


if __name__ == "__main__":
    Notebook.run()
